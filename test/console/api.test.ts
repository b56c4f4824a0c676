/**
 * /api on a real listener: reads and their query checks, the bodies of changes (JSON objects of at
 * most 16 KiB: malformed 400, oversized 413, another type 415), what a refusal of the daemon
 * (LoopError) becomes, and an unexpected failure answered without its details.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { LoopError } from '../../src/core/errors.js';
import { http, type Rig, recordingDeps, SESSION, startRig, TOKEN } from './server-rig.js';

let rig: Rig;
afterEach(async () => {
  await rig?.close();
});

const bearer = { authorization: `Bearer ${TOKEN}` };
const post = (path: string, body?: string, type = 'application/json') =>
  http(rig, path, {
    method: 'POST',
    headers: { ...bearer, ...(body !== undefined ? { 'content-type': type } : {}) },
    ...(body !== undefined ? { body } : {}),
  });

describe('reads', () => {
  it('sessions, one session, usage and acts; unknown ids 404', async () => {
    rig = await startRig();
    const get = (path: string) => http(rig, path, { headers: bearer });
    expect((await get(`/api/sessions/${SESSION}`)).status).toBe(200);
    expect((await get('/api/sessions/2b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d')).status).toBe(404);
    expect((await get('/api/sessions/not-an-id')).status).toBe(404);
    expect((await get('/api/sessions/%E0%A4%A')).status).toBe(404);
    const usage = JSON.parse((await get('/api/usage?by=model&since=30d')).body) as {
      by: string;
      since: string;
    };
    expect(usage.by).toBe('model');
    expect(Date.now() - Date.parse(usage.since)).toBeGreaterThan(29 * 86_400_000);
    for (const q of ['by=colour', 'since=yesterday', 'since=1d&until=2d']) {
      const bad = await get(`/api/usage?${q}`);
      expect(bad.status, q).toBe(400);
      expect(JSON.parse(bad.body).error).toBeTruthy();
    }
    expect((await get('/api/acts?breaches=1&workItem=github:o/r%231')).status).toBe(200);
    expect((await get('/api/nothing')).status).toBe(404);
    expect((await http(rig, '/api/sessions', { method: 'DELETE', headers: bearer })).status).toBe(405);
  });
});

describe('changes', () => {
  it('resume passes raise on, wakes the dispatcher; an empty body is {}', async () => {
    rig = await startRig();
    expect((await post(`/api/sessions/${SESSION}/resume`, JSON.stringify({ raise: '5' }))).status).toBe(200);
    expect((await post(`/api/sessions/${SESSION}/resume`)).status).toBe(200);
    expect(rig.calls.resume).toEqual([
      { id: SESSION, raise: '5' },
      { id: SESSION, raise: undefined },
    ]);
    expect(rig.calls.notified).toBe(2);
    expect((await post(`/api/sessions/${SESSION}/resume`, JSON.stringify({ raise: 5 }))).status).toBe(400);
    expect((await post(`/api/sessions/${SESSION}/pause`)).status).toBe(404);
  });

  it('refuses malformed, non-object, oversized and non-JSON bodies', async () => {
    rig = await startRig();
    const path = `/api/sessions/${SESSION}/resume`;
    expect((await post(path, '{"raise":')).status).toBe(400);
    expect((await post(path, '[1,2]')).status).toBe(400);
    expect((await post(path, 'null')).status).toBe(400);
    expect((await post(path, 'raise=5', 'application/x-www-form-urlencoded')).status).toBe(415);
    expect((await post(path, 'x', 'text/plain')).status).toBe(415);
    expect((await post(path, JSON.stringify({ raise: 'x'.repeat(20_000) }))).status).toBe(413);
    expect(rig.calls.resume).toEqual([]);
  });

  it("the daemon's refusals are 400/404/409 with their hint; anything else is 500 without details", async () => {
    const calls = { resume: [], takeOver: [], handBack: [], notified: 0, attached: [], setTakeover: [] };
    const deps = recordingDeps(calls);
    deps.resume = async () => {
      throw new LoopError('usage', 'github:o/r#1 is over budget: 2 of 2 turns', { hint: 'Raise it.' });
    };
    deps.handBack = async () => {
      throw new Error('disk on fire at /secret/path');
    };
    rig = await startRig({ deps });
    const held = await post(`/api/sessions/${SESSION}/resume`);
    expect(held.status).toBe(400);
    expect(JSON.parse(held.body)).toEqual({
      error: 'github:o/r#1 is over budget: 2 of 2 turns',
      hint: 'Raise it.',
    });
    const missing = await post('/api/sessions/2b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d/takeover');
    expect(missing.status).toBe(404);
    const broken = await post(`/api/sessions/${SESSION}/handback`);
    expect(broken.status).toBe(500);
    expect(broken.body).not.toContain('/secret/path');
    expect(rig.logLines.join('\n')).toContain('disk on fire');
  });
});
