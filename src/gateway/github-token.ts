import type { GatewayPorts, GatewaySession } from './types.js';

/**
 * The credential a session's request carries to GitHub: the ports' answer for its repository (the
 * App installation's token, or the configured token). A port that throws despite its contract is
 * logged and treated as no credential: the upstream then refuses, and the agent is told the gateway
 * holds none, instead of a bare 502 with no reason.
 */
/** The upstream refused the credential the gateway sent (401): the ports forget it, if they keep one. */
export function githubTokenRefused(ports: GatewayPorts, session: GatewaySession): void {
  try {
    ports.github.tokenRefused?.(session);
  } catch (error) {
    ports.logger.warn('could not drop a refused GitHub credential', {
      session: session.id,
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

export async function githubToken(ports: GatewayPorts, session: GatewaySession): Promise<string | undefined> {
  try {
    return await ports.github.tokenFor(session);
  } catch (error) {
    ports.logger.warn('no GitHub credential for the session: its request goes upstream without one', {
      session: session.id,
      error: error instanceof Error ? error.message : String(error),
    });
    return undefined;
  }
}
