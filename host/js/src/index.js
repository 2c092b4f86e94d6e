// Leasehold for Node.js: the Leasehold component (transpiled by jco) over a
// store this package supplies, one transaction per call, one tenant per
// handle.
//
//   import { open, SqliteStore } from '@leasehold/host';
//   const acme = open({ store: new SqliteStore('worklist.db') }).tenant('acme');
//   const task = acme.claim('invoice-42', 'alice', ['approver']);
export { open, Engine, COMPONENT_SHA256, PACKAGE_VERSION } from './engine.js';
export { Tenant } from './tenant.js';
export { TaskWorker } from './task-worker.js';
export { MemoryStore } from './memory-store.js';
export { SqliteStore } from './sqlite-store.js';
export { DEFAULT_LIMITS } from './limits.js';
export {
  LeaseholdError, ClaimRefusal, StoreError, InvalidArgument, SandboxError, StorageFailure, LockTimeout, TenantError,
  LIMIT_KINDS,
} from './errors.js';
