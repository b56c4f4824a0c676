/**
 * A session's files carried between hosts (issue 17): what the engine keeps a process-runner
 * session's conversation in, saved to the shared store after every turn and restored by the host
 * that runs the session's next turn. Only a shared store (PostgreSQL) has one: on one host the
 * files stay where the engine wrote them.
 */
export interface SessionFileMeta {
  /** The path relative to the engine's config directory (`projects/<cwd>/<session id>.jsonl`). */
  name: string;
  /** sha256 of the body, hex. */
  digest: string;
  bytes: number;
  /** The turn after which it was saved, and the host that ran it. */
  turnId: number;
  hostId: string;
  savedAt: string;
}

export interface SessionFile extends SessionFileMeta {
  body: Buffer;
}

export interface SessionFileStore {
  /**
   * Save (replace) a file of a session after its turn `turnId`, fenced like the turn's own writes:
   * only the host that ran the turn, while it still holds the session's work item at the epoch the
   * turn was begun under. Returns false when fenced (nothing written).
   */
  save(sessionId: string, file: Omit<SessionFile, 'hostId' | 'savedAt'>): Promise<boolean>;
  /** The files saved for a session, without their bodies. */
  list(sessionId: string): Promise<SessionFileMeta[]>;
  /** One file with its body, if saved. */
  load(sessionId: string, name: string): Promise<SessionFile | undefined>;
}
