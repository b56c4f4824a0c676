/** The commented starter file `the-loop config init` writes. */
export const STARTER_CONFIG = `# yaml-language-server: $schema=./config.schema.json
# the-loop configuration. Every key is optional; see \`the-loop config schema\` for all of them.
# Values written as env:NAME are read from the environment (keep secrets out of this file).

# Where state lives (SQLite registry, logs). Relative paths are relative to this file.
# dataDir: .

log:
  level: info            # debug | info | warn | error

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
  #     ANTHROPIC_API_KEY: env:MY_ANTHROPIC_KEY   # credentials travel only in the engine's environment
  # my-engine:
  #   binary: my-agent
  #   protocol: text        # plain output: turns end on exit and are recorded as unmetered
  #   sessionId: none
  #   headless:
  #     args: ["--print"]
`;
