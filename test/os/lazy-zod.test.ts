import { describe, expect, it } from 'vitest';
import { manualBodySchema } from '../../src/dispatch/reroute.js';
import { claudeStreamJsonParser } from '../../src/engines/protocols/claude-stream-json.js';
import { payloadSchemas } from '../../src/github/events.js';
import { lazily, lazyFields, lazyZod } from '../../src/os/lazy-zod.js';

describe('lazy zod (schemas built on first use)', () => {
  it('builds a value once, on its first use', () => {
    let built = 0;
    const get = lazily((z) => {
      built++;
      return z.string().min(2);
    });
    expect(built).toBe(0);
    expect(get().safeParse('a').success).toBe(false);
    expect(get().safeParse('ab').success).toBe(true);
    expect(built).toBe(1);
  });

  it('lists its fields before building them, and builds them together on the first read', () => {
    let built = 0;
    const fields = lazyFields(['a', 'b'], (z) => {
      built++;
      return { a: z.number(), b: z.boolean() };
    });
    expect(Object.keys(fields)).toEqual(['a', 'b']);
    expect(Object.hasOwn(fields, 'a')).toBe(true);
    expect(built).toBe(0);
    expect(fields.a.safeParse('1').success).toBe(false);
    expect(fields.b.safeParse(true).success).toBe(true);
    expect(built).toBe(1);
  });

  it('refuses a field left out of its keys (it would read as an unknown type, so tolerated)', () => {
    const fields = lazyFields(['a'] as never[], (z) => ({ a: z.number(), b: z.boolean() }));
    expect(() => (fields as unknown as { a: unknown }).a).toThrow(/b not listed/);
  });

  it('composes with schemas of the zod the rest of the code imports', async () => {
    const { z } = await import('zod');
    const inner = lazyZod().object({ n: lazyZod().number() });
    const outer = z.object({ list: z.array(inner) });
    expect(outer.safeParse({ list: [{ n: 1 }] }).success).toBe(true);
    expect(outer.safeParse({ list: [{ n: 'x' }] }).success).toBe(false);
  });

  it('lazily built schemas still reject bad input', () => {
    expect(payloadSchemas.issues.safeParse({ action: 'opened' }).success).toBe(false);
    expect(() => manualBodySchema().parse({ workItem: 'github:o/r#1' })).toThrow();
    expect(manualBodySchema().parse({ workItem: 'github:o/r#1', prompt: 'hi', extra: 1 })).toEqual({
      workItem: 'github:o/r#1',
      prompt: 'hi',
    });
    // A line the quick check refuses goes to the (lazily built) schema, which words the error.
    const parser = claudeStreamJsonParser();
    expect(parser.push(JSON.stringify({ type: 'assistant', message: { content: [{ type: 1 }] } }))).toEqual([
      {
        type: 'diagnostic',
        message: expect.stringMatching(/^bad "assistant" event: message\.content\.0\.type/),
      },
    ]);
  });
});
