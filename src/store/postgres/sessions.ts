import type { SessionStore } from '../../core/ports/sessions.js';
import { notBuilt } from './not-built.js';

export const PgSessionStore = notBuilt<SessionStore>('sessions');
