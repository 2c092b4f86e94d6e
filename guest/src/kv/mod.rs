//! The storage the rules run over: an ordered map of byte keys, read from a
//! snapshot the host supplies, with this call's own writes kept in a buffer.
//!
//! The domain modules see only [`Kv`]. A host serves [`Snapshot`] (point
//! reads, batched point reads, ordered scans) and, once a call has answered
//! `ok`, applies the one batch of writes [`buffered`] hands back. The
//! [`Buffered`] layer answers the call's reads of its own writes, so no host
//! needs read-your-writes, an undo log or savepoints. Compiled natively the
//! same code runs against [`MemKv`] in unit tests.
//!
//! The files below: what a store is to the rules and to a host
//! (`contract`), the call's write buffer over a host's snapshot (`buffer`),
//! and the in-memory reference store (`memory`). This file only names them
//! and re-exports, so their paths stay `kv::…`; the files import from one
//! another, never from here.

mod buffer;
mod contract;
mod memory;

pub use buffer::{Buffered, buffered};
pub use contract::{Entry, Kv, KvError, ScanRequest, Snapshot, Write};
pub use memory::{Calls, MemKv};
