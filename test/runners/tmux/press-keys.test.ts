import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Tmux } from '../../../src/runners/tmux/tmux.js';
import { pressKeys } from '../../../src/runners/tmux/tmux-terminal.js';
import { stopTmuxServer } from '../../helpers/tmux.js';

/** `sessions keys` into a tmux session: words typed with their spaces, even ones that look like flags. */

const tmux = new Tmux({ socket: `tl-keys-${randomUUID().slice(0, 8)}` });

beforeAll(async () => {
  await tmux.must(['new-session', '-d', '-s', 'loop-keys', '-x', '80', '-y', '10', 'cat'], 'new-session');
});

afterAll(async () => {
  await stopTmuxServer(tmux);
});

describe('pressKeys', () => {
  it('types words in a row with their spaces, text that starts with - as text, and presses named keys', async () => {
    const sent = await pressKeys(tmux, 'loop-keys', [
      '-Rx',
      'typed',
      'text',
      'here',
      'Enter',
      '--',
      'hi',
      'Enter',
    ]);
    expect(sent).toEqual([
      { key: '-Rx typed text here', literal: true },
      { key: 'Enter', literal: false },
      { key: '-- hi', literal: true },
      { key: 'Enter', literal: false },
    ]);
    let screen = '';
    for (let i = 0; i < 50 && !screen.includes('-- hi\n-- hi'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      screen = (await tmux.run(['capture-pane', '-p', '-t', '=loop-keys:'])).stdout;
    }
    // cat echoes each line back: typed once by the terminal's echo, once by cat.
    expect(screen).toContain('-Rx typed text here\n-Rx typed text here');
    expect(screen).toContain('-- hi\n-- hi');
  });
});
