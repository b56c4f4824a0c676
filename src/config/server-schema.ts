import { z } from 'zod';

/**
 * `server:` — the daemon's webhook and telemetry listener and its limits (src/web/limits.ts): the
 * connection cap, the budget of request bodies held in memory, and the header and request deadlines.
 */
export const serverSchema = z
  .object({
    host: z.string().min(1).default('127.0.0.1').describe('Address the daemon listens on.'),
    port: z.number().int().min(0).max(65535).default(7700),
    maxBodyBytes: z
      .number()
      .int()
      .min(1024)
      .max(100 * 1024 * 1024)
      .default(25 * 1024 * 1024)
      .describe("Largest webhook body accepted (GitHub's maximum payload is 25 MB)."),
    maxConnections: z
      .number()
      .int()
      .min(16)
      .max(65536)
      .default(1024)
      .describe(
        'Open connections to the webhook and telemetry listener. Past it the connection waiting longest for its headers is closed (503), then the slowest body; new connections are never refused for old ones.',
      ),
    maxBufferedBytes: z
      .number()
      .int()
      .min(1024)
      .max(1024 * 1024 * 1024)
      .default(64 * 1024 * 1024)
      .describe(
        'Bytes of request bodies held in memory at once, across all requests being read. A body that finds no room sheds the slowest bodies older than a second, or is refused with 503 and Retry-After. At least server.maxBodyBytes.',
      ),
    headersTimeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(300)
      .default(10)
      .describe("A request's headers must arrive whole within this (else 408 and the connection closed)."),
    requestTimeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(20)
      .describe(
        'The whole request, body included, within this (else 408 and closed). GitHub waits 10 s for an answer.',
      ),
  })
  .strict()
  .superRefine((s, ctx) => {
    if (s.maxBufferedBytes < s.maxBodyBytes) {
      ctx.addIssue({
        code: 'custom',
        path: ['maxBufferedBytes'],
        message: `must be at least server.maxBodyBytes (${s.maxBodyBytes}): a body of the largest size must fit`,
      });
    }
    if (s.headersTimeoutSeconds > s.requestTimeoutSeconds) {
      ctx.addIssue({
        code: 'custom',
        path: ['headersTimeoutSeconds'],
        message: `must not exceed server.requestTimeoutSeconds (${s.requestTimeoutSeconds})`,
      });
    }
  })
  .prefault({});
