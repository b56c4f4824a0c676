import { createConnection } from 'node:net';

/** Is a process listening on this Unix socket? (A socket file left by a dead process refuses.) */
export function socketAlive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ path });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
