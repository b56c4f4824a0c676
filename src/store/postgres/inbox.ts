import type { Inbox } from '../../core/ports/inbox.js';
import { notBuilt } from './not-built.js';

export const PgInbox = notBuilt<Inbox>('inbox');
