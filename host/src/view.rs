//! What one call's guest sees of storage: the `kv` import over the call's one
//! transaction, with every size the guest controls checked before it is used.
//! It owns those checks; it must never pass the backend a size it has not
//! checked, and never apply a write itself.
//!
//! Reads go to the transaction; the guest's batch of writes is only staged
//! here, and the engine applies it after the export has answered `ok` and the
//! answer has passed its checks. A cap or budget overrun, or a storage
//! failure, is recorded and traps the call, so no guest can swallow one and
//! commit: the recorded error is the call's outcome.

use crate::bindings::kv;
use crate::config::Limits;
use crate::error::{Error, SandboxError};
use crate::storage::backend::{Mode, ScanRange, Txn, Write, entries_bytes};
use crate::storage::error::StorageError;

/// One call's view of storage.
pub(crate) struct KvView {
    txn: Option<Box<dyn Txn>>,
    mode: Mode,
    limits: Limits,
    /// Bytes of keys and values handed to the guest so far.
    read_bytes: usize,
    staged: Option<Vec<Write>>,
    /// The first host-side failure of this call; it decides the outcome.
    violation: Option<Error>,
    /// What the backend says of its writers (`kv.concurrent-writers`).
    concurrent_writers: bool,
    /// The instant the host runs the call at (`kv.call-time`).
    call_time: i64,
}

/// What a call left behind once its guest has finished.
pub(crate) struct Outcome {
    pub(crate) txn: Option<Box<dyn Txn>>,
    pub(crate) batch: Vec<Write>,
    pub(crate) violation: Option<Error>,
}

impl KvView {
    pub(crate) fn new(
        txn: Box<dyn Txn>,
        mode: Mode,
        limits: Limits,
        concurrent_writers: bool,
        call_time: i64,
    ) -> Self {
        KvView {
            txn: Some(txn),
            mode,
            limits,
            read_bytes: 0,
            staged: None,
            violation: None,
            concurrent_writers,
            call_time,
        }
    }

    /// Records a failure the host saw first (the memory cap, say).
    pub(crate) fn fail(&mut self, e: Error) {
        self.violation.get_or_insert(e);
    }

    /// Moves the transaction, the staged batch and the outcome out.
    pub(crate) fn take(&mut self) -> Outcome {
        Outcome {
            txn: self.txn.take(),
            batch: self.staged.take().unwrap_or_default(),
            violation: self.violation.take(),
        }
    }

    /// Records `e` as the call's outcome and answers the trap that ends it.
    fn trap(&mut self, e: Error) -> wasmtime::Error {
        let text = e.to_string();
        self.fail(e);
        wasmtime::Error::msg(text)
    }

    fn check_key(&mut self, key: &[u8]) -> wasmtime::Result<()> {
        if key.len() > self.limits.key_bytes {
            return Err(self.trap(Error::Sandbox(SandboxError::KeySize {
                size: key.len(),
                cap: self.limits.key_bytes,
            })));
        }
        Ok(())
    }

    /// Counts bytes handed to the guest against the call's read budget.
    fn count_read(&mut self, bytes: usize) -> wasmtime::Result<()> {
        self.read_bytes = self.read_bytes.saturating_add(bytes);
        if self.read_bytes > self.limits.call_read_bytes {
            return Err(self.trap(Error::Sandbox(SandboxError::ReadBytes {
                cap: self.limits.call_read_bytes,
            })));
        }
        Ok(())
    }

    fn txn(&mut self) -> wasmtime::Result<&mut Box<dyn Txn>> {
        match self.txn {
            Some(ref mut t) => Ok(t),
            None => Err(wasmtime::Error::msg("storage used after the call ended")),
        }
    }

    fn stored<T>(&mut self, r: Result<T, StorageError>) -> wasmtime::Result<T> {
        r.map_err(|e| self.trap(Error::from(e)))
    }
}

fn value_bytes(v: &Option<Vec<u8>>) -> usize {
    v.as_ref().map_or(0, Vec::len)
}

impl kv::Host for KvView {
    fn concurrent_writers(&mut self) -> wasmtime::Result<bool> {
        Ok(self.concurrent_writers)
    }

    fn writer_slot(&mut self) -> wasmtime::Result<u32> {
        Ok(self.txn()?.writer_slot())
    }

    fn call_time(&mut self) -> wasmtime::Result<i64> {
        Ok(self.call_time)
    }

    fn get(&mut self, key: Vec<u8>) -> wasmtime::Result<Option<Vec<u8>>> {
        self.check_key(&key)?;
        let found = self.txn()?.get(&key);
        let found = self.stored(found)?;
        self.count_read(value_bytes(&found))?;
        Ok(found)
    }

    fn get_many(&mut self, keys: Vec<Vec<u8>>) -> wasmtime::Result<Vec<Option<Vec<u8>>>> {
        if keys.len() > self.limits.scan_entries as usize {
            return Err(self.trap(Error::Sandbox(SandboxError::GetManyLength {
                asked: keys.len(),
                cap: self.limits.scan_entries,
            })));
        }
        for k in &keys {
            self.check_key(k)?;
        }
        let found = self.txn()?.get_many(&keys);
        let found = self.stored(found)?;
        self.count_read(found.iter().map(value_bytes).sum())?;
        Ok(found)
    }

    fn scan(
        &mut self,
        range: kv::KeyRange,
        limit: u32,
        reverse: bool,
    ) -> wasmtime::Result<Vec<kv::Entry>> {
        if limit > self.limits.scan_entries {
            return Err(self.trap(Error::Sandbox(SandboxError::ScanLength {
                asked: limit,
                cap: self.limits.scan_entries,
            })));
        }
        self.check_key(&range.start)?;
        if let Some(end) = &range.end {
            self.check_key(end)?;
        }
        let cap = self.limits.scan_bytes;
        let found = self
            .txn()?
            .scan(&range.start, range.end.as_deref(), limit, reverse, cap);
        let (entries, over) = self.stored(found)?;
        if over {
            return Err(self.trap(Error::Sandbox(SandboxError::ScanBytes { cap })));
        }
        self.count_read(entries_bytes(&entries))?;
        Ok(entries
            .into_iter()
            .map(|(key, value)| kv::Entry { key, value })
            .collect())
    }

    /// Held to one scan's limits as a whole: each range counts its limit
    /// (at least one) against the entries' cap, and the answers together
    /// against the bytes' cap.
    fn scan_many(
        &mut self,
        requests: Vec<kv::ScanRequest>,
    ) -> wasmtime::Result<Vec<Vec<kv::Entry>>> {
        let asked = requests
            .iter()
            .fold(0u32, |n, r| n.saturating_add(r.limit.max(1)));
        if asked > self.limits.scan_entries {
            return Err(self.trap(Error::Sandbox(SandboxError::ScanLength {
                asked,
                cap: self.limits.scan_entries,
            })));
        }
        for r in &requests {
            self.check_key(&r.range.start)?;
            if let Some(end) = &r.range.end {
                self.check_key(end)?;
            }
        }
        let ranges: Vec<ScanRange<'_>> = requests
            .iter()
            .map(|r| ScanRange {
                start: &r.range.start,
                end: r.range.end.as_deref(),
                limit: r.limit,
                reverse: r.reverse,
            })
            .collect();
        let cap = self.limits.scan_bytes;
        let found = self.txn()?.scan_many(&ranges, cap);
        let (answers, over) = self.stored(found)?;
        if over {
            return Err(self.trap(Error::Sandbox(SandboxError::ScanBytes { cap })));
        }
        if answers.len() != requests.len() {
            return Err(self.trap(Error::from(StorageError::other(
                "the storage answered another number of ranges than asked",
            ))));
        }
        self.count_read(answers.iter().map(|a| entries_bytes(a)).sum())?;
        Ok(answers
            .into_iter()
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|(key, value)| kv::Entry { key, value })
                    .collect()
            })
            .collect())
    }

    fn stage(&mut self, batch: Vec<kv::Write>) -> wasmtime::Result<()> {
        if self.staged.is_some() {
            return Err(self.trap(Error::Sandbox(SandboxError::SecondBatch)));
        }
        if self.mode == Mode::Read && !batch.is_empty() {
            return Err(self.trap(Error::Sandbox(SandboxError::WriteInReadCall)));
        }
        let mut size = 0usize;
        let mut out = Vec::with_capacity(batch.len());
        for w in batch {
            match w {
                kv::Write::Put(kv::Entry { key, value }) => {
                    self.check_key(&key)?;
                    if value.len() > self.limits.value_bytes {
                        return Err(self.trap(Error::Sandbox(SandboxError::ValueSize {
                            size: value.len(),
                            cap: self.limits.value_bytes,
                        })));
                    }
                    size = size.saturating_add(key.len() + value.len());
                    out.push(Write::Put(key, value));
                }
                kv::Write::Delete(key) => {
                    self.check_key(&key)?;
                    size = size.saturating_add(key.len());
                    out.push(Write::Delete(key));
                }
            }
        }
        if size > self.limits.call_write_bytes {
            return Err(self.trap(Error::Sandbox(SandboxError::WriteBytes {
                size,
                cap: self.limits.call_write_bytes,
            })));
        }
        self.staged = Some(out);
        Ok(())
    }
}
