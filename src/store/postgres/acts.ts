import type { ActStore } from '../../core/ports/acts.js';
import { notBuilt } from './not-built.js';

export const PgActStore = notBuilt<ActStore>('acts');
