import type { DriveAuditStore } from '../../core/ports/drives.js';
import { notBuilt } from './not-built.js';

export const PgDriveAudit = notBuilt<DriveAuditStore>('drives');
