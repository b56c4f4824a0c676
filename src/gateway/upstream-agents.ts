import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';

/**
 * A handler's keep-alive connection pools to its upstream (a TLS handshake per request would cost
 * more than the whole proxy), one per protocol, each made on its first request. Made lazily so that
 * creating the gateway loads no TLS: `node:https` (with `tls` and `crypto`'s TLS parts) is loaded by
 * the first https request, not by every command that builds the app (the CLI bundle loads built-ins
 * on first use). Idle pooled sockets are unref'd by Node and closed after `timeout`, so nothing is
 * held open.
 */
export interface UpstreamAgents {
  /** The pool for `http:` or `https:`; undefined for any other protocol. */
  get(protocol: string): HttpAgent | undefined;
  /** Drop the pooled connections (of the pools made so far). */
  destroy(): void;
}

const POOL = { keepAlive: true, timeout: 60_000 } as const;

export function upstreamAgents(): UpstreamAgents {
  let http: HttpAgent | undefined;
  let https: HttpsAgent | undefined;
  return {
    get: (protocol) => {
      if (protocol === 'http:') {
        http ??= new HttpAgent(POOL);
        return http;
      }
      if (protocol === 'https:') {
        https ??= new HttpsAgent(POOL);
        return https;
      }
      return undefined;
    },
    destroy: () => {
      http?.destroy();
      https?.destroy();
    },
  };
}
