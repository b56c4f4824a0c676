/**
 * The shape of the gateway's capability tokens: `tlg1_` and 43 base64url characters (32 random
 * bytes). Known to every part that must recognise one without the gateway: the scrubber masks any
 * match, and first-run answers approve one (never a real key) in a TUI's API-key dialog.
 */
export const TOKEN_PREFIX = 'tlg1_';
/** Any capability token, wherever it appears. */
export const TOKEN_PATTERN = /tlg1_[A-Za-z0-9_-]{43}/g;
const TOKEN_SHAPE = /^tlg1_[A-Za-z0-9_-]{43}$/;

export const isTokenShaped = (text: string): boolean => TOKEN_SHAPE.test(text);
