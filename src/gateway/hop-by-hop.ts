/**
 * RFC 9110 §7.6.1 connection-specific fields, and those a proxy must not relay (RFC 9112): never
 * forwarded by the gateway's handlers, either way.
 */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
