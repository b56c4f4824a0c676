import { compact, type Handler, has, parseOptions, plainFlag, type Run, value } from './context.js';
import type { ActDetail } from './types.js';

/**
 * Publishing to a registry: npm and friends, cargo, PyPI (twine, poetry, uv, flit, hatch, pdm), gems,
 * NuGet, Maven, Gradle, container images, Helm charts, editor extensions, JSR, and release tools that
 * publish (lerna, changesets, semantic-release, np, release-it, goreleaser). A dry run is no act; a
 * dry-run flag counts only when written in plain ASCII (see `plainFlag`).
 */

const NPM_VALUED = new Set([
  '--registry',
  '-w',
  '--workspace',
  '--prefix',
  '--userconfig',
  '--globalconfig',
  '--cache',
  '--otp',
  '--tag',
  '--access',
  '--loglevel',
  '--scope',
  '--auth-type',
  '-C',
  '--dir',
  '--filter',
  '-F',
  '--cwd',
  '-p',
  '--package',
  '-c',
  '--call',
]);

const dry = (o: ReturnType<typeof parseOptions>) => plainFlag(o, '--dry-run');

function publishAct(run: Run, manager: string, detail: ActDetail = {}): void {
  run.emit('package-publish', compact({ manager, ...detail }));
}

/** npm, pnpm, yarn, bun: `publish`, `yarn npm publish`, `unpublish`, `dist-tag add`, and their exec wrappers. */
function nodeManager(manager: 'npm' | 'pnpm' | 'yarn' | 'bun'): Handler {
  return (run) => {
    const o = parseOptions(run.args, NPM_VALUED);
    const words = o.positionals.map((a) => a.f);
    const sub = words[0];
    if (sub === 'exec' || sub === 'x' || sub === 'dlx') {
      wrapped(run, sub);
      return;
    }
    if (manager === 'bun' && has(o, '-e', '--eval')) return;
    const detail: ActDetail = compact({
      registry: value(o, '--registry'),
      tag: value(o, '--tag'),
      packages:
        value(o, '-w', '--workspace', '--filter', '-F') === undefined
          ? undefined
          : [value(o, '-w', '--workspace', '--filter', '-F') as string],
    });
    const npmPublish = words.some((w, k) => w === 'npm' && words[k + 1] === 'publish');
    const workspacePublish = words[0] === 'workspace' && words[2] === 'publish';
    if (sub === 'publish' || (manager === 'yarn' && (npmPublish || workspacePublish))) {
      if (!dry(o)) publishAct(run, manager, detail);
    } else if (sub === 'unpublish') {
      if (!dry(o)) publishAct(run, manager, { ...detail, action: 'unpublish', packages: words.slice(1) });
    } else if (sub === 'dist-tag' && (words[1] === 'add' || words[1] === 'rm')) {
      publishAct(run, manager, { ...detail, action: 'dist-tag', packages: words.slice(2, 3) });
    } else if (sub === 'deprecate') {
      publishAct(run, manager, { ...detail, action: 'deprecate', packages: words.slice(1, 2) });
    }
  };
}

/** `npm exec -- cmd`, `pnpm dlx cmd`, `yarn dlx cmd`, `bun x cmd`: the rest is a command. */
function wrapped(run: Run, sub: string): void {
  const at = run.args.findIndex((a) => a.f === sub);
  const after = run.args.slice(at + 1);
  const o = parseOptions(after, NPM_VALUED, true);
  for (const script of o.values.get('-c') ?? []) run.script(script, 'sh-c');
  for (const script of o.values.get('--call') ?? []) run.script(script, 'sh-c');
  run.argv(after.slice(o.rest), 'wrapper');
}

/** npx, pnpx, bunx: options, then a command. */
export const classifyNpx: Handler = (run) => {
  const o = parseOptions(run.args, NPM_VALUED, true);
  for (const script of [...(o.values.get('-c') ?? []), ...(o.values.get('--call') ?? [])])
    run.script(script, 'sh-c');
  run.argv(run.args.slice(o.rest), 'wrapper');
};

/** A tool whose subcommand `sub` (or one of `subs`) publishes, with `--dry-run` as a way out. */
function subcommand(manager: string, subs: string[], valued: string[] = [], files = true): Handler {
  const valuedSet = new Set(valued);
  return (run) => {
    const o = parseOptions(run.args, valuedSet);
    const words = o.positionals.map((a) => a.f);
    const k = words.findIndex((w) => subs.includes(w));
    if (k !== 0) return;
    if (dry(o)) return;
    publishAct(
      run,
      manager,
      compact({
        action: words[k] === 'yank' || words[k] === 'delete' ? words[k] : undefined,
        registry: value(
          o,
          '-r',
          '--repository',
          '--registry',
          '--repository-url',
          '--index',
          '--publish-url',
          '-s',
          '--source',
        ),
        packages: (() => {
          const p = value(o, '-p', '--package');
          if (p !== undefined) return [p];
          const operands = o.positionals.slice(k + 1).map((a) => a.text);
          return files && operands.length > 0 ? operands : undefined;
        })(),
      }),
    );
  };
}

const cargo: Handler = (run) => {
  const args = run.args[0]?.text.startsWith('+') ? run.args.slice(1) : run.args; // cargo +nightly publish
  const inner = run.with(args);
  const o = parseOptions(
    args,
    new Set([
      '--config',
      '-Z',
      '-C',
      '--color',
      '-p',
      '--package',
      '--registry',
      '--index',
      '--token',
      '--manifest-path',
      '--version',
      '--vers',
      '--target',
      '-j',
      '--jobs',
      '-F',
      '--features',
    ]),
  );
  const sub = o.positionals[0]?.f;
  if (sub === 'publish') {
    if (!dry(o))
      publishAct(
        inner,
        'cargo',
        compact({
          packages:
            value(o, '-p', '--package') === undefined ? undefined : [value(o, '-p', '--package') as string],
          registry: value(o, '--registry', '--index'),
        }),
      );
  } else if (sub === 'yank' && !has(o, '--undo')) {
    publishAct(inner, 'cargo', { action: 'yank', packages: o.positionals.slice(1, 2).map((a) => a.text) });
  }
};

/** Maven goals that publish. */
const maven: Handler = (run) => {
  const o = parseOptions(
    run.args,
    new Set([
      '-f',
      '--file',
      '-s',
      '--settings',
      '-P',
      '--activate-profiles',
      '-pl',
      '--projects',
      '-D',
      '-T',
      '--threads',
      '-rf',
      '-gs',
    ]),
  );
  const goals = o.positionals
    .map((a) => a.f)
    .filter((g) => /^(deploy|deploy:deploy|release:perform|release:prepare)$/.test(g) || /:deploy$/.test(g));
  if (goals.length > 0) publishAct(run, 'maven', { action: goals.join(' ') });
};

/** Gradle tasks named publish… (not publishToMavenLocal). */
const gradle: Handler = (run) => {
  const o = parseOptions(
    run.args,
    new Set([
      '-p',
      '--project-dir',
      '-x',
      '--exclude-task',
      '-D',
      '-P',
      '-b',
      '--build-file',
      '-c',
      '--settings-file',
      '-g',
      '--gradle-user-home',
      '-I',
      '--init-script',
    ]),
  );
  const tasks = o.positionals
    .map((a) => a.f)
    .filter(
      (t) =>
        /(^|:)(publish|uploadArchives|publishPlugins)/.test(t) && !/publishToMavenLocal|MavenLocal$/.test(t),
    );
  if (tasks.length > 0) publishAct(run, 'gradle', { action: tasks.join(' ') });
};

/** docker/podman push, buildx build --push, manifest push. */
const container: Handler = (run) => {
  const o = parseOptions(
    run.args,
    new Set([
      '-t',
      '--tag',
      '-f',
      '--file',
      '--platform',
      '--build-arg',
      '--target',
      '-o',
      '--output',
      '-H',
      '--host',
      '--context',
      '--config',
      '--cache-from',
      '--cache-to',
      '--secret',
      '--label',
      '--builder',
    ]),
  );
  const words = o.positionals.map((a) => a.f);
  const pushAt = words.indexOf('push');
  const manager = run.name;
  if (pushAt === 0 || (pushAt === 1 && (words[0] === 'image' || words[0] === 'manifest'))) {
    publishAct(run, manager, {
      action: 'push',
      packages: o.positionals.slice(pushAt + 1, pushAt + 2).map((a) => a.text),
    });
  } else if ((words[0] === 'build' || (words[0] === 'buildx' && words[1] === 'build')) && has(o, '--push')) {
    const tag = value(o, '-t', '--tag');
    publishAct(run, manager, compact({ action: 'push', packages: tag === undefined ? undefined : [tag] }));
  }
};

/** Release tools that publish unless told it is a dry run. */
function releaseTool(
  manager: string,
  dryFlags: string[],
  kind: 'package-publish' | 'release-create' = 'package-publish',
  sub?: string,
): Handler {
  return (run) => {
    const o = parseOptions(
      run.args,
      new Set(['-c', '--config', '--ci', '--branches', '-b', '--skip', '--increment', '-i']),
    );
    if (plainFlag(o, ...dryFlags)) return;
    if (sub !== undefined) {
      const first = o.positionals[0]?.f;
      if (first !== undefined && first !== sub) return;
    }
    const skip = value(o, '--skip') ?? '';
    if (manager === 'goreleaser' && (/publish|release/.test(skip) || has(o, '--skip-publish'))) return;
    if (kind === 'release-create') run.emit('release-create', { via: manager });
    else publishAct(run, manager);
  };
}

export const PUBLISH_HANDLERS: Record<string, Handler> = {
  npm: nodeManager('npm'),
  pnpm: nodeManager('pnpm'),
  yarn: nodeManager('yarn'),
  bun: nodeManager('bun'),
  npx: classifyNpx,
  pnpx: classifyNpx,
  bunx: classifyNpx,
  cargo,
  twine: subcommand(
    'twine',
    ['upload'],
    [
      '-r',
      '--repository',
      '--repository-url',
      '-u',
      '--username',
      '-p',
      '--password',
      '-c',
      '--comment',
      '-i',
      '--identity',
      '--config-file',
      '--sign-with',
      '--cert',
      '--client-cert',
    ],
  ),
  poetry: subcommand(
    'poetry',
    ['publish'],
    [
      '-r',
      '--repository',
      '-u',
      '--username',
      '-p',
      '--password',
      '--cert',
      '--client-cert',
      '-C',
      '--directory',
      '-P',
      '--project',
    ],
  ),
  uv: subcommand(
    'uv',
    ['publish'],
    [
      '--publish-url',
      '--index',
      '--token',
      '-u',
      '--username',
      '-p',
      '--password',
      '--directory',
      '--project',
    ],
  ),
  flit: subcommand('flit', ['publish'], ['--repository', '--pypirc']),
  hatch: subcommand('hatch', ['publish'], ['-r', '--repo', '-u', '--user', '-a', '--auth']),
  pdm: subcommand(
    'pdm',
    ['publish'],
    ['-r', '--repository', '-u', '--username', '-P', '--password', '-p', '--project'],
  ),
  gem: subcommand('gem', ['push', 'yank'], ['--host', '-k', '--key', '--otp', '-v', '--version']),
  nuget: subcommand('nuget', ['push', 'delete'], ['-s', '--source', '-k', '--api-key', '-Source', '-ApiKey']),
  dotnet: (run) => {
    if (run.args[0]?.f === 'nuget')
      subcommand(
        'nuget',
        ['push', 'delete'],
        ['-s', '--source', '-k', '--api-key'],
      )(run.with(run.args.slice(1)));
  },
  mvn: maven,
  mvnw: maven,
  gradle,
  gradlew: gradle,
  docker: container,
  podman: container,
  nerdctl: container,
  helm: subcommand('helm', ['push', 'cm-push']),
  vsce: subcommand('vsce', ['publish'], ['-p', '--pat', '--packagePath', '-i']),
  ovsx: subcommand('ovsx', ['publish'], ['-p', '--pat', '-r', '--registryUrl', '-i']),
  deno: subcommand('deno', ['publish'], ['--config', '-c', '--token']),
  jsr: subcommand('jsr', ['publish'], ['--config', '--token']),
  lerna: subcommand('lerna', ['publish'], ['--dist-tag', '--registry', '--preid', '--otp'], false),
  changeset: subcommand('changesets', ['publish'], ['--otp', '--tag'], false),
  changesets: subcommand('changesets', ['publish'], ['--otp', '--tag'], false),
  'semantic-release': releaseTool('semantic-release', ['--dry-run', '-d']),
  np: releaseTool('np', ['--preview']),
  'release-it': releaseTool('release-it', ['--dry-run', '-d']),
  goreleaser: releaseTool('goreleaser', ['--snapshot'], 'release-create', 'release'),
};
