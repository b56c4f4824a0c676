import type { ProtocolName } from '../preset.js';
import { claudeStreamJson } from './claude-stream-json.js';
import { codexJson } from './codex-json.js';
import { geminiStreamJson } from './gemini-stream-json.js';
import type { Protocol } from './protocol.js';
import { textProtocol } from './text.js';

/** Protocols by the name a preset declares. */
export const PROTOCOL_REGISTRY: Record<ProtocolName, Protocol> = {
  'claude-stream-json': claudeStreamJson,
  'codex-json': codexJson,
  'gemini-stream-json': geminiStreamJson,
  text: textProtocol,
};
