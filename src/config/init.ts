import { randomBytes } from 'node:crypto';

export const generateSecret = (): string => randomBytes(32).toString('hex');

/** The commented starter file `the-loop config init` (and a first `serve`) writes. */
export const starterConfig = (secret: string): string => `# yaml-language-server: $schema=./config.schema.json
# the-loop configuration. Every key is optional; see \`the-loop config schema\` for all of them.
# Values written as env:NAME are read from the environment (keep secrets out of this file).

# Where state lives (SQLite registry, log, keys, worktrees). Relative paths are relative to this
# file. Default: beside this file — or, when this file is in a git repository, outside it, in
# $XDG_STATE_HOME/the-loop/<repo>-<digest> (~/.local/state/…): state never belongs in a repository.
# dataDir: /var/lib/the-loop

log:
  level: info            # debug | info | warn | error

server:
  host: 127.0.0.1        # put a reverse proxy or tunnel in front to receive GitHub's webhooks
  port: 7700

webhook:
  # The HMAC secret shared with GitHub (Settings → Webhooks → Secret). Generated for you; this file
  # is written 0600. To keep it out of the file: secret: env:THE_LOOP_WEBHOOK_SECRET
  secret: "${secret}"
  path: /gh-webhook

# Who may trigger work and how (per repository under repos: too).
routing:
  triggers:
    mention: "@the-loop"
    labels: []
    assignees: []
  authorization:
    authorAssociations: [OWNER, MEMBER, COLLABORATOR]
    bots: []             # exact bot logins allowed to trigger work, e.g. "renovate[bot]"

# Repositories the daemon acts on; events from any other repository are rejected.
repos: {}
  # octo/widgets:
  #   path: /home/me/src/widgets
  #   engine: claude
  #   workspace: worktree  # each issue/PR gets its own git worktree and branch loop/<slug>

dispatch:
  concurrency: 2
  closeGraceSeconds: 30

# Finished deliveries keep their payload this many days, then only their row (0: keep forever).
inbox:
  retainDays: 30

# Engines reach git, GitHub and their model API through the gateway, which holds the real
# credentials (they get a per-session capability token) and enforces the policy at the wire.
gateway:
  enabled: true
  port: 7701             # loopback only; keep it fixed if you use the tmux runner
# credentials:
#   github: env:GH_TOKEN         # default: GH_TOKEN or GITHUB_TOKEN of the daemon
#   anthropic: env:ANTHROPIC_API_KEY

# Engines run in a bubblewrap sandbox where it works (apt-get install bubblewrap).
sandbox:
  mode: auto             # auto | bwrap | none
  hide: []               # more paths engines must not see
  writable: []           # more paths engines may write

# What an agent may do (pushes, merges, publishes…); see docs/configuration.md.
# policy:
#   protectedBranches: [main]
#   acts: { pr-merge: deny, git-push: deny-protected }

defaults:
  engine: claude         # claude | codex | gemini | grok | cursor-agent | ollama | one you declare below
  runner: process        # headless child process per turn
  backstopSeconds: 3600  # a turn still running after this long is stopped (endReason "backstop")
  killGraceSeconds: 5    # pause between stdin close, SIGTERM and SIGKILL when stopping an engine

# Engines are data. Override any field of a built-in preset, or declare a new engine.
engines: {}
  # claude:
  #   binary: /usr/local/bin/claude
  #   extraArgs: ["--model", "sonnet"]
  #   env:
  #     ANTHROPIC_BASE_URL: https://proxy.example/anthropic   # where the gateway forwards
  # my-engine:
  #   binary: my-agent
  #   protocol: text        # plain output: turns end on exit and are recorded as unmetered
  #   sessionId: none
  #   headless:
  #     args: ["--print"]
`;
