/**
 * The login page (/login/<code>): the daemon rendered the login's key and public id into its meta
 * tags. Keep them in localStorage (per origin: no page of another port reads them), take them out of
 * the page, and leave for /sessions with location.replace: the address bar ends clean and the login
 * page leaves no history entry to come back to.
 */
import { LOGIN_ID_META, LOGIN_KEY_META } from '../../src/console/protocol.js';
import { storeLogin } from './api.js';

const AGAIN = 'Run `the-loop console` again and open the new link.';

function takeMeta(name: string): string {
  const meta = document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`);
  const value = meta?.content ?? '';
  meta?.remove();
  return value;
}

/** Why the login cannot be kept, or undefined once it is. */
function keepLogin(): string | undefined {
  const key = takeMeta(LOGIN_KEY_META);
  const publicId = takeMeta(LOGIN_ID_META);
  if (!key || !publicId) return `This page holds no login. ${AGAIN}`;
  if (!storeLogin({ publicId, key })) {
    return `This browser does not let the console keep its login (site data is blocked for this address). Allow it, then: ${AGAIN}`;
  }
  return undefined;
}

const problem = keepLogin();
if (problem === undefined) location.replace('/sessions');
else {
  const status = document.getElementById('status');
  if (status) {
    status.textContent = problem;
    status.className = 'note note-error';
  }
}
