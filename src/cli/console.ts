import { spawn } from 'node:child_process';
import { hostname, userInfo } from 'node:os';
import type { LoadedConfig } from '../config/load.js';
import { mintLoginCode, readToken } from '../console/auth.js';
import { readConsoleFile } from '../console/console-file.js';
import { LoopError } from '../core/errors.js';
import { whichBinary } from '../engines/which.js';
import { pidAlive } from '../os/proc.js';
import { toJson } from './format.js';
import { EXIT, type Io } from './io.js';

export interface ConsoleOptions {
  as?: string | undefined;
  open?: boolean | undefined;
  json?: boolean | undefined;
}

/** Opens a URL in the person's browser: argv only, detached, nothing read back. */
export type Launch = (binary: string, url: string) => Promise<void>;

/**
 * `the-loop console`: a single-use login link to the running daemon's console, valid one minute,
 * signed with the console token (readable only by the daemon's user). Printed — the only place the
 * link ever appears — or opened with xdg-open when asked and present.
 */
export async function consoleCommand(
  io: Io,
  loaded: LoadedConfig,
  options: ConsoleOptions,
  launch: Launch = launchDetached,
): Promise<number> {
  if (!loaded.config.console.enabled) {
    throw new LoopError('usage', 'the console is disabled (console.enabled: false)', {
      hint: 'Set console.enabled: true in the config and restart `the-loop serve`.',
    });
  }
  const running = readConsoleFile(loaded.dataDir);
  if (!running || !pidAlive(running.pid)) {
    throw new LoopError('internal', `no daemon running for ${loaded.dataDir}`, {
      hint: 'Start it with `the-loop serve` (same config and data dir), then run `the-loop console` again.',
    });
  }
  const who = whoOf(io, options.as);
  const { code, expiresAt } = mintLoginCode(readToken(loaded.dataDir), who);
  const url = `${running.url}/login/${code}`;
  if (options.open) {
    const opener = whichBinary('xdg-open', io.env.PATH, io.cwd);
    if (opener) {
      await launch(opener, url);
      if (options.json) io.out(`${toJson({ opened: true, expiresAt })}\n`);
      else
        io.out(`Opened the console in your browser as ${who} (the link works once, until ${expiresAt}).\n`);
      return EXIT.ok;
    }
    io.err('the-loop: xdg-open not found: open the link below yourself.\n');
  }
  if (options.json) io.out(`${toJson({ url, expiresAt })}\n`);
  else io.out(`${url}\n  → open it within a minute; it logs in once, as ${who}.\n`);
  return EXIT.ok;
}

/** `--as`, else `$USER@host`: who the console shows as taking a session over. */
function whoOf(io: Io, given: string | undefined): string {
  if (given !== undefined) {
    const name = given.trim();
    if (!/^[\p{L}\p{N} ._@+-]{1,100}$/u.test(name)) {
      throw new LoopError(
        'usage',
        '--as takes a name of letters, digits, spaces and . _ @ + - (at most 100)',
      );
    }
    return name;
  }
  let user = io.env.USER ?? io.env.LOGNAME;
  if (!user) {
    try {
      user = userInfo().username;
    } catch {
      user = 'someone';
    }
  }
  return `${user}@${hostname()}`;
}

/** xdg-open returns at once (the browser outlives it): wait for it to start or fail to. */
function launchDetached(binary: string, url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, [url], { detached: true, stdio: 'ignore' });
    child.once('error', (error) =>
      reject(
        new LoopError('internal', `cannot run ${binary}`, { cause: error, hint: 'Run without --open.' }),
      ),
    );
    child.once('spawn', () => {
      child.unref();
      resolve();
    });
  });
}
