/**
 * The ScanCursorStore contract: a cursor per transcript path (the last save wins), saved together,
 * seen by another handle and kept across a restart.
 */
import { describe, expect, it } from 'vitest';
import { type StoreFactory, useStore } from './factory.js';

export function cursorsContract(factory: StoreFactory): void {
  describe(`ScanCursorStore contract (${factory.name})`, () => {
    const { store, restart } = useStore(factory);

    it('saves a cursor per path (the last save wins) and keeps them across a restart', async () => {
      expect(await store().cursors.all()).toEqual(new Map());
      await store().cursors.save([], 'never');
      expect(await store().cursors.all()).toEqual(new Map());
      await store().cursors.save(
        [
          { path: '/a.jsonl', inode: 1, size: 10, offset: 10 },
          { path: '/b.jsonl', inode: 2, size: 20, offset: 15 },
        ],
        'then',
      );
      await store().cursors.save([{ path: '/a.jsonl', inode: 3, size: 30, offset: 30 }], 'now');
      const expected = new Map([
        ['/a.jsonl', { path: '/a.jsonl', inode: 3, size: 30, offset: 30 }],
        ['/b.jsonl', { path: '/b.jsonl', inode: 2, size: 20, offset: 15 }],
      ]);
      expect(await (await store().second()).cursors.all()).toEqual(expected);
      expect(await (await restart()).cursors.all()).toEqual(expected);
    });
  });
}
