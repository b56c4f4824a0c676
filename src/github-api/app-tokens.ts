import { GitHubCallError } from '../core/ports/github.js';
import type { Logger } from '../log/logger.js';
import { toCallError } from './call-error.js';

/**
 * The App's credentials: its JWT (for /app endpoints) and one installation token per installation,
 * kept here keyed by installation id against the injected clock (auth-app's own cache reads
 * Date.now, which a test cannot move). Which installation covers a repository: the payload's, else
 * one noted from an earlier payload, else the configured one, else asked of GitHub (and kept).
 */

/** A token this close to its `expires_at` is minted again (GitHub's are valid one hour). */
export const REFRESH_BEFORE_MS = 5 * 60 * 1000;

export interface AppAuthCalls {
  /** A fresh App JWT. */
  jwt(): Promise<string>;
  /** A new installation token (never auth-app's cached one), or a RequestError. */
  mint(installationId: number): Promise<{ token: string; expiresAt: string }>;
  /** `GET /repos/{owner}/{repo}/installation` with the JWT: the installation's id, or a RequestError. */
  installationOf(owner: string, repo: string): Promise<number>;
}

interface Held {
  token: string;
  expiresAtMs: number;
}

export class AppTokens {
  readonly #calls: AppAuthCalls;
  readonly #now: () => number;
  readonly #logger: Logger;
  readonly #configured: number | undefined;
  readonly #tokens = new Map<number, Held>();
  readonly #minting = new Map<number, Promise<string>>();
  /** `owner/repo` (lower case) → installation: noted from payloads or asked of GitHub. */
  readonly #noted = new Map<string, number>();
  readonly #asked = new Map<string, number>();

  constructor(options: {
    calls: AppAuthCalls;
    now: () => number;
    logger: Logger;
    installationId?: number | undefined;
  }) {
    this.#calls = options.calls;
    this.#now = options.now;
    this.#logger = options.logger;
    this.#configured = options.installationId;
  }

  noteInstallation(repoFullName: string, installationId: number): void {
    if (!Number.isSafeInteger(installationId) || installationId <= 0) return;
    this.#noted.set(repoFullName.toLowerCase(), installationId);
  }

  /** The installation that covers `owner/repo`: given, noted, configured, or asked (and kept). */
  async installationFor(owner: string, repo: string, given?: number): Promise<number> {
    if (given !== undefined) return given;
    const key = `${owner}/${repo}`.toLowerCase();
    const known = this.#noted.get(key) ?? this.#configured ?? this.#asked.get(key);
    if (known !== undefined) return known;
    try {
      const id = await this.#calls.installationOf(owner, repo);
      this.#asked.set(key, id);
      return id;
    } catch (error) {
      const failure = toCallError(error, { method: 'GET', path: `/repos/${owner}/${repo}/installation` });
      if (failure.status === 404) {
        throw new GitHubCallError(
          `the GitHub App is not installed on ${owner}/${repo} (${failure.message})`,
          404,
        );
      }
      throw failure;
    }
  }

  /** The installation's token: the kept one while it has more than five minutes left, else a new one. */
  async token(installationId: number): Promise<string> {
    const held = this.#tokens.get(installationId);
    if (held && this.#now() < held.expiresAtMs - REFRESH_BEFORE_MS) return held.token;
    const pending = this.#minting.get(installationId);
    if (pending) return pending;
    const minting = this.#mint(installationId).finally(() => this.#minting.delete(installationId));
    this.#minting.set(installationId, minting);
    return minting;
  }

  /** The token of the installation known to cover `owner/repo` is refused: forget it; which one, if any. */
  dropFor(repoFullName: string): number | undefined {
    const key = repoFullName.toLowerCase();
    const id = this.#noted.get(key) ?? this.#configured ?? this.#asked.get(key);
    if (id !== undefined) this.drop(id);
    return id;
  }

  /** GitHub refused the token (401): forget it, so the next `token` mints another. */
  drop(installationId: number): void {
    this.#tokens.delete(installationId);
  }

  jwt(): Promise<string> {
    return this.#calls.jwt().catch((error: unknown) => {
      throw toCallError(error, { method: 'POST', path: '(the App JWT)' });
    });
  }

  async #mint(installationId: number): Promise<string> {
    const path = `/app/installations/${installationId}/access_tokens`;
    try {
      const minted = await this.#calls.mint(installationId);
      const expiresAtMs = Date.parse(minted.expiresAt);
      // An unreadable expiry: keep the token for the shortest sensible time rather than forever.
      const at = Number.isFinite(expiresAtMs) ? expiresAtMs : this.#now() + REFRESH_BEFORE_MS + 60_000;
      this.#tokens.set(installationId, { token: minted.token, expiresAtMs: at });
      this.#logger.debug('GitHub App installation token minted', { installationId });
      return minted.token;
    } catch (error) {
      const failure = toCallError(error, { method: 'POST', path });
      if (failure.status === 404) {
        this.#forget(installationId);
        throw new GitHubCallError(
          `the GitHub App's installation ${installationId} is gone (uninstalled, or the id is wrong): ${failure.message}`,
          404,
        );
      }
      throw failure;
    }
  }

  /** An installation that no longer exists: no token, and no repository pointing at it. */
  #forget(installationId: number): void {
    this.#tokens.delete(installationId);
    for (const map of [this.#noted, this.#asked]) {
      for (const [repo, id] of map) if (id === installationId) map.delete(repo);
    }
  }
}
