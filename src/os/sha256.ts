import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';

/**
 * SHA-256 of a string's UTF-8 bytes, as hex — for the paths every command takes (the config cache,
 * the state dir's name). Not node:crypto: loading it costs a command ~240 page faults and 5–15 ms
 * on this kind of machine, for one hash of a few KB (noble's pure-JS SHA-256 gives the same digest).
 */
export const sha256Hex = (text: string): string => bytesToHex(sha256(utf8ToBytes(text)));
