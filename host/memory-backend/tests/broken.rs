//! Tests of the conformance kit itself: the example backend broken in the
//! ways real backends go wrong, each of which the kit must catch. A kit
//! that passed any of these would pass a backend that loses, leaks or
//! invents data.
//!
//! Each flaw is a wrapper around the working backend, so what breaks is the
//! one promise named, and the kit must name that check among its failures,
//! for the reason the flaw gives it. Two wrappers are not broken (writers
//! that validate what they read, writers that take turns however short the
//! lock wait): the kit must pass them, so a check cannot catch flaws by
//! refusing every backend of their kind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use leasehold_host::storage::{
    Backend, Entry, Mode, Pending, StorageError, Txn, Write, take_within,
};
use leasehold_host::testkit::{self, Failure};
use leasehold_memory_backend::MemoryBackend;

type Answer<T> = Result<T, StorageError>;

/// A poisoned lock only means a panic elsewhere; the data under it is whole.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps the shipped component, compiled with the default limits the
/// scenario suite runs it with, alive for the whole test process, as
/// `leasehold_tests::keep_compiled` does for the integration suite (which
/// this crate cannot depend on). The host's compile cache holds no
/// component once its engines are gone, and the scenario suite keeps one
/// only while it runs: without this, every test that runs the whole kit
/// compiled the component again. The keeper is an engine on the example
/// backend that never makes a call.
fn keep_compiled() {
    static KEEPER: std::sync::OnceLock<leasehold_host::Engine> = std::sync::OnceLock::new();
    KEEPER.get_or_init(|| {
        leasehold_host::Engine::builder()
            .backend(MemoryBackend::new())
            .expect("the keeper opens")
    });
}

/// Runs `check` of the kit on the flawed backend and answers its failure.
fn caught<B: Backend>(check: &'static str, make: &dyn Fn() -> B) -> Result<(), Failure> {
    keep_compiled();
    let (_, run) = testkit::kv::checks::<B>()
        .into_iter()
        .find(|(name, _)| *name == check)
        .expect("the kit has the check");
    testkit::run_one(check, run, make)
}

// ---- one flaw at a time --------------------------------------------------------------

/// What a transaction of a flawed backend knows of itself.
struct Ctx {
    backend: MemoryBackend,
    tenant: String,
    mode: Mode,
}

/// One way to break the working backend: every hook answers as the working
/// backend does unless the flaw overrides it.
trait Flaw: Default + Send + Sync + 'static {
    /// The tenant the working backend is asked for.
    fn tenant(&self, name: &str) -> String {
        name.to_owned()
    }
    fn get(&self, txn: &mut dyn Txn, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        txn.get(key)
    }
    fn get_many(&self, txn: &mut dyn Txn, keys: &[Vec<u8>]) -> Answer<Vec<Option<Vec<u8>>>> {
        txn.get_many(keys)
    }
    #[allow(clippy::too_many_arguments)]
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        txn.scan(start, end, limit, reverse, max_bytes)
    }
    fn commit(&self, ctx: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        let _ = ctx;
        txn.commit(batch)
    }
    fn tenants(&self, backend: &MemoryBackend) -> Answer<Option<Vec<String>>> {
        backend.tenants()
    }
}

/// The working backend with the flaw `F`.
struct Flawed<F> {
    inner: MemoryBackend,
    flaw: Arc<F>,
}

impl<F: Flaw> Flawed<F> {
    fn new() -> Self {
        Flawed {
            inner: MemoryBackend::new(),
            flaw: Arc::new(F::default()),
        }
    }
}

struct FlawedTxn<F> {
    inner: Box<dyn Txn>,
    flaw: Arc<F>,
    ctx: Ctx,
}

impl<F: Flaw> Backend for Flawed<F> {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Answer<Box<dyn Txn>> {
        let tenant = self.flaw.tenant(t);
        Ok(Box::new(FlawedTxn {
            inner: self.inner.begin(&tenant, m, w)?,
            flaw: self.flaw.clone(),
            ctx: Ctx {
                backend: self.inner.clone(),
                tenant,
                mode: m,
            },
        }))
    }
    fn concurrent_writers(&self) -> bool {
        false
    }
    fn tenants(&self) -> Answer<Option<Vec<String>>> {
        self.flaw.tenants(&self.inner)
    }
}

impl<F: Flaw> Txn for FlawedTxn<F> {
    fn get(&mut self, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        self.flaw.get(self.inner.as_mut(), key)
    }
    fn get_many(&mut self, keys: &[Vec<u8>]) -> Answer<Vec<Option<Vec<u8>>>> {
        self.flaw.get_many(self.inner.as_mut(), keys)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        self.flaw
            .scan(self.inner.as_mut(), start, end, limit, reverse, max_bytes)
    }
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Answer<Pending> {
        let FlawedTxn { inner, flaw, ctx } = *self;
        flaw.commit(&ctx, inner, batch)
    }
}

// ---- scans ---------------------------------------------------------------------------

/// A scan that ignores its limit.
#[derive(Default)]
struct IgnoresLimit;

impl Flaw for IgnoresLimit {
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        _limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        txn.scan(start, end, u32::MAX, reverse, max_bytes)
    }
}

/// Reads a forward scan in pages of 64 entries, as a server cursor would,
/// and resumes each page after the last key read by raising that key's
/// last byte: the keys that extend the last key (it with a zero byte
/// added, and so on) are skipped.
#[derive(Default)]
struct SkipsAfterAPage;

impl Flaw for SkipsAfterAPage {
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        const PAGE: u32 = 64;
        if reverse {
            return txn.scan(start, end, limit, reverse, max_bytes);
        }
        let mut out: Vec<Entry> = Vec::new();
        let mut from = start.to_vec();
        while out.len() < limit as usize {
            let want = PAGE.min(limit - out.len() as u32);
            let (page, _) = txn.scan(&from, end, want, false, usize::MAX)?;
            let full = page.len() == want as usize;
            if let Some((last, _)) = page.last() {
                from = last.clone();
                match from.last_mut() {
                    Some(b) if *b < 0xff => *b += 1,
                    _ => from.push(0),
                }
            }
            out.extend(page);
            if !full {
                break;
            }
        }
        take_within(out.into_iter().map(Ok::<_, StorageError>), max_bytes)
    }
}

/// A byte cap that counts keys but not values.
#[derive(Default)]
struct CapCountsKeysOnly;

impl Flaw for CapCountsKeysOnly {
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        let (entries, _) = txn.scan(start, end, limit, reverse, usize::MAX)?;
        let mut bytes = 0usize;
        let mut out = Vec::new();
        for (k, v) in entries {
            bytes += k.len();
            if bytes > max_bytes {
                return Ok((out, true));
            }
            out.push((k, v));
        }
        Ok((out, false))
    }
}

/// A reverse scan that seeks to the first key at or after its end and
/// steps back from there: with no key at or after the end, it finds
/// nothing to step back from and answers nothing.
#[derive(Default)]
struct ReverseLosesAnEndPastTheLastKey;

impl Flaw for ReverseLosesAnEndPastTheLastKey {
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        if let (true, Some(e)) = (reverse, end) {
            let (after, _) = txn.scan(e, None, 1, false, usize::MAX)?;
            if after.is_empty() {
                return Ok((Vec::new(), false));
            }
        }
        txn.scan(start, end, limit, reverse, max_bytes)
    }
}

// ---- point reads ---------------------------------------------------------------------

/// A `get` of an absent key that answers the value of the next key sharing
/// all but its last byte (a lookup that lands on the neighbour's slot).
#[derive(Default)]
struct GetAnswersANeighbour;

impl Flaw for GetAnswersANeighbour {
    fn get(&self, txn: &mut dyn Txn, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        if let Some(v) = txn.get(key)? {
            return Ok(Some(v));
        }
        let Some((_, stem)) = key.split_last() else {
            return Ok(None);
        };
        let (next, _) = txn.scan(key, None, 1, false, usize::MAX)?;
        Ok(next
            .into_iter()
            .next()
            .filter(|(k, _)| k.len() == key.len() && k.starts_with(stem))
            .map(|(_, v)| v))
    }
}

/// A `get_many` that seeks to each key and answers the entry it lands on
/// when that entry's key starts with the one asked: an absent key that is
/// a prefix of a present one answers the present one's value.
#[derive(Default)]
struct GetManyMatchesPrefixes;

impl Flaw for GetManyMatchesPrefixes {
    fn get_many(&self, txn: &mut dyn Txn, keys: &[Vec<u8>]) -> Answer<Vec<Option<Vec<u8>>>> {
        keys.iter()
            .map(|key| {
                let (next, _) = txn.scan(key, None, 1, false, usize::MAX)?;
                Ok(next
                    .into_iter()
                    .next()
                    .filter(|(k, _)| k.starts_with(key))
                    .map(|(_, v)| v))
            })
            .collect()
    }
}

/// A `get_many` that reads each distinct key once and hands the answers
/// back by position: after a repeated key, every answer is in the wrong
/// place.
#[derive(Default)]
struct GetManyLosesRepeats;

impl Flaw for GetManyLosesRepeats {
    fn get_many(&self, txn: &mut dyn Txn, keys: &[Vec<u8>]) -> Answer<Vec<Option<Vec<u8>>>> {
        let mut distinct: Vec<Vec<u8>> = Vec::new();
        for k in keys {
            if !distinct.contains(k) {
                distinct.push(k.clone());
            }
        }
        let answers = txn.get_many(&distinct)?;
        Ok((0..keys.len())
            .map(|i| answers.get(i).cloned().flatten())
            .collect())
    }
}

/// A `get_many` that sends its keys in one request the store caps at 100
/// and answers the rest as absent (a batch read that drops what the store
/// left unprocessed).
#[derive(Default)]
struct GetManyReadsAHundred;

impl Flaw for GetManyReadsAHundred {
    fn get_many(&self, txn: &mut dyn Txn, keys: &[Vec<u8>]) -> Answer<Vec<Option<Vec<u8>>>> {
        let mut out = txn.get_many(&keys[..keys.len().min(100)])?;
        out.resize(keys.len(), None);
        Ok(out)
    }
}

// ---- deletes -------------------------------------------------------------------------

/// What a delete leaves behind in a store that keeps tombstones.
const TOMBSTONE: &[u8] = b"\xff tombstone";

fn is_live(entry: &Entry) -> bool {
    entry.1 != TOMBSTONE
}

/// A delete writes a tombstone, which `get` and scans skip, but the batched
/// read (another code path) answers as the value.
#[derive(Default)]
struct GetManySeesTombstones;

impl Flaw for GetManySeesTombstones {
    fn get(&self, txn: &mut dyn Txn, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        Ok(txn.get(key)?.filter(|v| v != TOMBSTONE))
    }
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        let (all, _) = txn.scan(start, end, u32::MAX, reverse, usize::MAX)?;
        let live = all.into_iter().filter(is_live).take(limit as usize);
        take_within(live.map(Ok::<_, StorageError>), max_bytes)
    }
    fn commit(&self, _: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        txn.commit(with_tombstones(batch))
    }
}

/// A delete writes a tombstone, which every read skips, but a scan takes
/// its `limit` entries before skipping them: among deleted keys it answers
/// fewer than its limit though the range holds more.
#[derive(Default)]
struct TombstonesUseUpTheLimit;

impl Flaw for TombstonesUseUpTheLimit {
    fn get(&self, txn: &mut dyn Txn, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        Ok(txn.get(key)?.filter(|v| v != TOMBSTONE))
    }
    fn get_many(&self, txn: &mut dyn Txn, keys: &[Vec<u8>]) -> Answer<Vec<Option<Vec<u8>>>> {
        Ok(txn
            .get_many(keys)?
            .into_iter()
            .map(|v| v.filter(|v| v != TOMBSTONE))
            .collect())
    }
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        let (taken, _) = txn.scan(start, end, limit, reverse, usize::MAX)?;
        take_within(
            taken.into_iter().filter(is_live).map(Ok::<_, StorageError>),
            max_bytes,
        )
    }
    fn commit(&self, _: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        txn.commit(with_tombstones(batch))
    }
}

fn with_tombstones(batch: Vec<Write>) -> Vec<Write> {
    batch
        .into_iter()
        .map(|w| match w {
            Write::Delete(k) => Write::Put(k, TOMBSTONE.to_vec()),
            put => put,
        })
        .collect()
}

// ---- commits -------------------------------------------------------------------------

/// Commits every other write of a batch.
#[derive(Default)]
struct DropsHalfOfEachBatch;

impl Flaw for DropsHalfOfEachBatch {
    fn commit(&self, _: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        txn.commit(batch.into_iter().step_by(2).collect())
    }
}

/// A read transaction's batch is written through a write transaction of its
/// own instead of refused.
#[derive(Default)]
struct ReadsCommitBatches;

impl Flaw for ReadsCommitBatches {
    fn commit(&self, ctx: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        if ctx.mode == Mode::Write || batch.is_empty() {
            return txn.commit(batch);
        }
        drop(txn);
        ctx.backend
            .begin(&ctx.tenant, Mode::Write, Duration::from_secs(5))?
            .commit(batch)
    }
}

/// Says a commit is still becoming durable (`Pending::waiting`), answers
/// its wait at once, and writes the batch only with the tenant's next
/// commit: a write-behind whose acknowledgement comes before the write.
#[derive(Default)]
struct AcknowledgesBeforeItWrites {
    behind: Mutex<HashMap<String, Vec<Write>>>,
}

impl Flaw for AcknowledgesBeforeItWrites {
    fn commit(&self, ctx: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        if batch.is_empty() {
            return txn.commit(batch);
        }
        let earlier = lock(&self.behind)
            .insert(ctx.tenant.clone(), batch)
            .unwrap_or_default();
        txn.commit(earlier)?.wait()?;
        Ok(Pending::waiting(|| Ok(())))
    }
}

/// Keeps the first 4096 writes of a batch, as a store whose batch request
/// holds at most that many and drops the rest unreported.
#[derive(Default)]
struct KeepsTheFirst4096Writes;

impl Flaw for KeepsTheFirst4096Writes {
    fn commit(&self, _: &Ctx, txn: Box<dyn Txn>, mut batch: Vec<Write>) -> Answer<Pending> {
        batch.truncate(4096);
        txn.commit(batch)
    }
}

/// Commits a batch in pieces of at most 128 writes or 4 MiB, each a
/// transaction of its own, as a client of a key-value service with a
/// per-transaction cap does: every write lands, but not at once.
#[derive(Default)]
struct CommitsInPieces;

impl Flaw for CommitsInPieces {
    fn commit(&self, ctx: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        let mut pieces: Vec<Vec<Write>> = vec![Vec::new()];
        let mut bytes = 0usize;
        for w in batch {
            let size = match &w {
                Write::Put(k, v) => k.len() + v.len(),
                Write::Delete(k) => k.len(),
            };
            let full = pieces
                .last()
                .is_some_and(|p| p.len() == 128 || (!p.is_empty() && bytes + size > 4 << 20));
            if full {
                pieces.push(Vec::new());
                bytes = 0;
            }
            bytes += size;
            if let Some(p) = pieces.last_mut() {
                p.push(w);
            }
        }
        let mut pieces = pieces.into_iter();
        txn.commit(pieces.next().unwrap_or_default())?.wait()?;
        for piece in pieces {
            ctx.backend
                .begin(&ctx.tenant, Mode::Write, Duration::from_secs(5))?
                .commit(piece)?
                .wait()?;
        }
        Ok(Pending::done())
    }
}

/// Refuses a transaction that writes more than ten million bytes, as a
/// store with a transaction size limit does: a call within the engine's
/// budget fails every time.
#[derive(Default)]
struct RefusesTransactionsOver10MB;

impl Flaw for RefusesTransactionsOver10MB {
    fn commit(&self, _: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        let bytes: usize = batch
            .iter()
            .map(|w| match w {
                Write::Put(k, v) => k.len() + v.len(),
                Write::Delete(k) => k.len(),
            })
            .sum();
        if bytes > 10_000_000 {
            return Err(StorageError::Other(
                format!("transaction of {bytes} bytes exceeds the limit").into(),
            ));
        }
        txn.commit(batch)
    }
}

/// A delete also removes every key that extends the deleted one, as a
/// store that deletes by key prefix (a range delete from the key to its
/// prefix's end) does.
#[derive(Default)]
struct DeleteTakesLongerKeys;

impl Flaw for DeleteTakesLongerKeys {
    fn commit(&self, _: &Ctx, mut txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        let mut out = Vec::new();
        for w in batch {
            if let Write::Delete(k) = &w {
                let (after, _) = txn.scan(k, None, u32::MAX, false, usize::MAX)?;
                for (longer, _) in after {
                    if longer.starts_with(k) && longer != *k {
                        out.push(Write::Delete(longer));
                    }
                }
            }
            out.push(w);
        }
        txn.commit(out)
    }
}

/// A put of an empty value stores nothing, as a store whose empty value is
/// its null (or that refuses empty attributes and drops them) does.
#[derive(Default)]
struct EmptyValuesAreAbsent;

impl Flaw for EmptyValuesAreAbsent {
    fn commit(&self, _: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        txn.commit(
            batch
                .into_iter()
                .map(|w| match w {
                    Write::Put(k, v) if v.is_empty() => Write::Delete(k),
                    w => w,
                })
                .collect(),
        )
    }
}

// ---- how keys compare ----------------------------------------------------------------

/// How a store keeps a key: the key it is stored and looked up under.
trait KeyForm: Default + Send + Sync + 'static {
    fn stored(key: &[u8]) -> Vec<u8>;
}

/// Keys kept as `M` says, on every read and write.
#[derive(Default)]
struct StoresKeysAs<M>(std::marker::PhantomData<M>);

impl<M: KeyForm> Flaw for StoresKeysAs<M> {
    fn get(&self, txn: &mut dyn Txn, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        txn.get(&M::stored(key))
    }
    fn get_many(&self, txn: &mut dyn Txn, keys: &[Vec<u8>]) -> Answer<Vec<Option<Vec<u8>>>> {
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| M::stored(k)).collect();
        txn.get_many(&keys)
    }
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        let end = end.map(M::stored);
        txn.scan(&M::stored(start), end.as_deref(), limit, reverse, max_bytes)
    }
    fn commit(&self, _: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        txn.commit(
            batch
                .into_iter()
                .map(|w| match w {
                    Write::Put(k, v) => Write::Put(M::stored(&k), v),
                    Write::Delete(k) => Write::Delete(M::stored(&k)),
                })
                .collect(),
        )
    }
}

/// Trailing zero bytes trimmed, as a C string or a padded `CHAR` column
/// keeps a key.
#[derive(Default)]
struct TrailingZerosTrimmed;

impl KeyForm for TrailingZerosTrimmed {
    fn stored(key: &[u8]) -> Vec<u8> {
        let len = key.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        key[..len].to_vec()
    }
}

/// Trailing spaces ignored, as a pad-space collation compares keys (SQL's
/// `CHAR`, and `VARCHAR` under many databases' default collations): `k`
/// and `k ` are one key.
#[derive(Default)]
struct TrailingSpacesIgnored;

impl KeyForm for TrailingSpacesIgnored {
    fn stored(key: &[u8]) -> Vec<u8> {
        let len = key.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
        key[..len].to_vec()
    }
}

/// Cut at the first zero byte, as a store that passes keys on as C
/// strings keeps them: `k\0x` is `k`.
#[derive(Default)]
struct CutAtAZeroByte;

impl KeyForm for CutAtAZeroByte {
    fn stored(key: &[u8]) -> Vec<u8> {
        let len = key.iter().position(|&b| b == 0).unwrap_or(key.len());
        key[..len].to_vec()
    }
}

/// Keys kept as text: bytes that are not UTF-8 become U+FFFD, as a `text`
/// column or a string-keyed map keeps them.
#[derive(Default)]
struct AsText;

impl KeyForm for AsText {
    fn stored(key: &[u8]) -> Vec<u8> {
        String::from_utf8_lossy(key).into_owned().into_bytes()
    }
}

/// Letter case folded, as a table with a case-insensitive collation
/// compares keys.
#[derive(Default)]
struct CaseFolded;

impl KeyForm for CaseFolded {
    fn stored(key: &[u8]) -> Vec<u8> {
        key.to_ascii_lowercase()
    }
}

/// Scans in the order of a locale's collation (letter case ignored, ties
/// broken bytewise), as `ORDER BY` on a column with a locale collation
/// sorts: the bounds still compare bytewise.
#[derive(Default)]
struct ScansInLocaleOrder;

impl Flaw for ScansInLocaleOrder {
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        let (mut all, _) = txn.scan(start, end, u32::MAX, false, usize::MAX)?;
        all.sort_by(|(a, _), (b, _)| (a.to_ascii_lowercase(), a).cmp(&(b.to_ascii_lowercase(), b)));
        if reverse {
            all.reverse();
        }
        take_within(
            all.into_iter()
                .take(limit as usize)
                .map(Ok::<_, StorageError>),
            max_bytes,
        )
    }
}

/// Scans in a pad-space collation's order: the shorter of two keys
/// compared as if padded with spaces (so `k\t` sorts before `k`, and `k`
/// ties with `k `, the tie broken bytewise), as `ORDER BY` on such a column
/// sorts: the bounds still compare bytewise.
#[derive(Default)]
struct ScansInPadSpaceOrder;

fn pad_space_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let at = |k: &[u8], i: usize| k.get(i).copied().unwrap_or(b' ');
    (0..a.len().max(b.len()))
        .map(|i| at(a, i).cmp(&at(b, i)))
        .find(|o| o.is_ne())
        .unwrap_or_else(|| a.cmp(b))
}

impl Flaw for ScansInPadSpaceOrder {
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        let (mut all, _) = txn.scan(start, end, u32::MAX, false, usize::MAX)?;
        all.sort_by(|(a, _), (b, _)| pad_space_order(a, b));
        if reverse {
            all.reverse();
        }
        take_within(
            all.into_iter()
                .take(limit as usize)
                .map(Ok::<_, StorageError>),
            max_bytes,
        )
    }
}

// ---- what a scan says of itself ------------------------------------------------------

/// Says a scan stopped early whenever more entries lie past its answer,
/// the limit's stop included, as a store's "more results" flag does: the
/// engine traps every call whose scan is limited.
#[derive(Default)]
struct SaysMoreWhenTheLimitStops;

impl Flaw for SaysMoreWhenTheLimitStops {
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        let (entries, over) = txn.scan(start, end, limit, reverse, max_bytes)?;
        if over || entries.len() < limit as usize {
            return Ok((entries, over));
        }
        let (beyond, _) = txn.scan(start, end, limit.saturating_add(1), reverse, usize::MAX)?;
        let more = beyond.len() > entries.len();
        Ok((entries, more))
    }
}

/// Weighs the byte cap against the whole range, not the entries the limit
/// keeps: a limited scan of a range larger than the cap says it stopped
/// early (a running total taken before the `LIMIT`).
#[derive(Default)]
struct CapWeighsTheWholeRange;

impl Flaw for CapWeighsTheWholeRange {
    fn scan(
        &self,
        txn: &mut dyn Txn,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        let (all, over) = txn.scan(start, end, u32::MAX, reverse, max_bytes)?;
        Ok((all.into_iter().take(limit as usize).collect(), over))
    }
}

// ---- tenants -------------------------------------------------------------------------

/// Folds tenant names to lower case: `Acme` and `acme` share keys.
#[derive(Default)]
struct FoldsCase;

impl Flaw for FoldsCase {
    fn tenant(&self, name: &str) -> String {
        name.to_ascii_lowercase()
    }
}

/// Drops a tenant name's trailing dots, as a DNS-style name would.
#[derive(Default)]
struct DropsTrailingDots;

impl Flaw for DropsTrailingDots {
    fn tenant(&self, name: &str) -> String {
        name.trim_end_matches('.').to_owned()
    }
}

/// Keeps 48 bytes of a tenant name, as a fixed-width column would.
#[derive(Default)]
struct CutsNamesShort;

impl Flaw for CutsNamesShort {
    fn tenant(&self, name: &str) -> String {
        name[..name.len().min(48)].to_owned()
    }
}

/// Keeps every tenant in one tenant of the store underneath, each key the
/// tenant's name and `SEP` joined to the key (`'\0'`: no separator), a scan
/// to the tenant's end stopping where the joined prefix ends: with no
/// separator, tenant `a`'s key `b1` is tenant `ab`'s key `1`, and a scan of
/// `a` to its end runs on into `ab`; with a dot, tenant `j`'s key `x.k` is
/// tenant `j.x`'s key `k`.
struct JoinedNames<const SEP: char>(MemoryBackend);

impl<const SEP: char> JoinedNames<SEP> {
    fn new() -> Self {
        JoinedNames(MemoryBackend::new())
    }
}

struct JoinedNamesTxn {
    inner: Box<dyn Txn>,
    prefix: Vec<u8>,
}

impl JoinedNamesTxn {
    fn key(&self, key: &[u8]) -> Vec<u8> {
        [self.prefix.as_slice(), key].concat()
    }
}

impl<const SEP: char> Backend for JoinedNames<SEP> {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Answer<Box<dyn Txn>> {
        let prefix = if SEP == '\0' {
            t.to_owned()
        } else {
            format!("{t}{SEP}")
        };
        Ok(Box::new(JoinedNamesTxn {
            inner: self.0.begin("all", m, w)?,
            prefix: prefix.into_bytes(),
        }))
    }
    fn concurrent_writers(&self) -> bool {
        false
    }
}

impl Txn for JoinedNamesTxn {
    fn get(&mut self, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        let k = self.key(key);
        self.inner.get(&k)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        let start = self.key(start);
        // Names are ASCII: the prefix's last byte can always be raised.
        let end = end.map(|e| self.key(e)).unwrap_or_else(|| {
            let mut end = self.prefix.clone();
            if let Some(last) = end.last_mut() {
                *last += 1;
            }
            end
        });
        let (entries, over) = self
            .inner
            .scan(&start, Some(&end), limit, reverse, max_bytes)?;
        let strip = self.prefix.len();
        let entries = entries
            .into_iter()
            .filter(|(k, _)| k.len() >= strip)
            .map(|(k, v)| (k[strip..].to_vec(), v))
            .collect();
        Ok((entries, over))
    }
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Answer<Pending> {
        let batch = batch
            .into_iter()
            .map(|w| match w {
                Write::Put(k, v) => Write::Put(self.key(&k), v),
                Write::Delete(k) => Write::Delete(self.key(&k)),
            })
            .collect();
        self.inner.commit(batch)
    }
}

/// Its tenant listing walks from tenant to tenant skipping every key that
/// starts with the name just found, as a store that joins names to keys
/// must: a name that extends the one before it (`acme-eu` after `acme`) is
/// skipped with it, and never swept after a restart.
#[derive(Default)]
struct ListingSkipsNamesThatExtendAnother;

impl Flaw for ListingSkipsNamesThatExtendAnother {
    fn tenants(&self, backend: &MemoryBackend) -> Answer<Option<Vec<String>>> {
        let mut kept: Vec<String> = Vec::new();
        for name in backend.tenants()?.unwrap_or_default() {
            if kept
                .last()
                .is_some_and(|last| name.starts_with(last.as_str()))
            {
                continue;
            }
            kept.push(name);
        }
        Ok(Some(kept))
    }
}

/// Lists tenant names as a case-insensitive collation does: one of names
/// that differ only in case, in that collation's order.
#[derive(Default)]
struct ListingFoldsCase;

impl Flaw for ListingFoldsCase {
    fn tenants(&self, backend: &MemoryBackend) -> Answer<Option<Vec<String>>> {
        let mut names = backend.tenants()?.unwrap_or_default();
        names.sort_by_key(|n| n.to_ascii_lowercase());
        names.dedup_by_key(|n| n.to_ascii_lowercase());
        Ok(Some(names))
    }
}

/// Lists a tenant once for each batch written to it, as a listing read
/// from a log of commits without `DISTINCT` does.
#[derive(Default)]
struct ListingRepeatsTenants {
    commits: Mutex<Vec<String>>,
}

impl Flaw for ListingRepeatsTenants {
    fn commit(&self, ctx: &Ctx, txn: Box<dyn Txn>, batch: Vec<Write>) -> Answer<Pending> {
        if !batch.is_empty() {
            lock(&self.commits).push(ctx.tenant.clone());
        }
        txn.commit(batch)
    }
    fn tenants(&self, _: &MemoryBackend) -> Answer<Option<Vec<String>>> {
        let mut names = lock(&self.commits).clone();
        names.sort();
        Ok(Some(names))
    }
}

// ---- snapshots -----------------------------------------------------------------------

/// Its read transactions read whatever is committed at each read, not the
/// snapshot they began on: from the reader's side, a batch that was not
/// committed when it began shows up part way through.
struct NoSnapshot(MemoryBackend);

struct NoSnapshotTxn {
    backend: MemoryBackend,
    tenant: String,
}

impl NoSnapshotTxn {
    fn now(&self) -> Answer<Box<dyn Txn>> {
        self.backend
            .begin(&self.tenant, Mode::Read, Duration::from_secs(1))
    }
}

impl Backend for NoSnapshot {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Answer<Box<dyn Txn>> {
        match m {
            Mode::Write => self.0.begin(t, m, w),
            Mode::Read => Ok(Box::new(NoSnapshotTxn {
                backend: self.0.clone(),
                tenant: t.to_owned(),
            })),
        }
    }
    fn concurrent_writers(&self) -> bool {
        false
    }
}

impl Txn for NoSnapshotTxn {
    fn get(&mut self, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        self.now()?.get(key)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        self.now()?.scan(start, end, limit, reverse, max_bytes)
    }
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Answer<Pending> {
        self.now()?.commit(batch)
    }
}

/// Read transactions begun through `begin` keep their snapshot; those begun
/// through the entry points the engine calls read whatever is committed at
/// each read: a backend that overrode `begin_with_deadline` (to bound its
/// waits) and took no snapshot there.
struct SnapshotOnlyThroughBegin(MemoryBackend);

impl Backend for SnapshotOnlyThroughBegin {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Answer<Box<dyn Txn>> {
        self.0.begin(t, m, w)
    }
    fn begin_with_deadline(
        &self,
        t: &str,
        m: Mode,
        w: Duration,
        _: Duration,
    ) -> Answer<Box<dyn Txn>> {
        NoSnapshot(self.0.clone()).begin(t, m, w)
    }
    fn concurrent_writers(&self) -> bool {
        false
    }
}

/// Its read transactions keep their snapshot for every read but a reverse
/// scan, which reads whatever is committed: a reverse cursor opened on the
/// store rather than on the transaction.
struct ReverseScansReadTheLatest(MemoryBackend);

struct ReverseLatestTxn {
    snapshot: Box<dyn Txn>,
    now: NoSnapshotTxn,
}

impl Backend for ReverseScansReadTheLatest {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Answer<Box<dyn Txn>> {
        let snapshot = self.0.begin(t, m, w)?;
        if m == Mode::Write {
            return Ok(snapshot);
        }
        Ok(Box::new(ReverseLatestTxn {
            snapshot,
            now: NoSnapshotTxn {
                backend: self.0.clone(),
                tenant: t.to_owned(),
            },
        }))
    }
    fn concurrent_writers(&self) -> bool {
        false
    }
}

impl Txn for ReverseLatestTxn {
    fn get(&mut self, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        self.snapshot.get(key)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        if reverse {
            self.now.scan(start, end, limit, reverse, max_bytes)
        } else {
            self.snapshot.scan(start, end, limit, reverse, max_bytes)
        }
    }
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Answer<Pending> {
        self.snapshot.commit(batch)
    }
}

// ---- writers side by side ------------------------------------------------------------

/// What an optimistic backend checks at commit against the writes committed
/// since the transaction's snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Validates {
    /// Nothing: every batch lands, the last writer's over the others.
    Nothing,
    /// Only keys both wrote (first committer wins): snapshot isolation.
    Writes,
    /// Keys it wrote or read by `get`, but not the ranges it scanned.
    PointReads,
    /// Keys it wrote or read, and every range it scanned: serializable.
    Everything,
    /// As `Everything`, but the log of what a commit wrote holds its puts
    /// alone: a delete is nobody's write.
    EverythingButDeletes,
    /// As `Everything`, but keys read by `get_many` are not tracked (the
    /// batched read is another code path).
    EverythingButGetMany,
    /// As `Everything`, but only forward scans record their range.
    EverythingButReverseScans,
}

/// Writers that run side by side, each reading a snapshot taken when it
/// began, and checking at commit what `validates` says.
struct Optimistic {
    inner: MemoryBackend,
    validates: Validates,
    log: Arc<Mutex<Log>>,
}

/// The commits so far, each with what it wrote.
#[derive(Default)]
struct Log {
    commits: u64,
    written: Vec<(u64, String, Vec<Vec<u8>>)>,
}

impl Optimistic {
    fn new(validates: Validates) -> Self {
        Self::over(MemoryBackend::new(), validates)
    }

    fn over(inner: MemoryBackend, validates: Validates) -> Self {
        Optimistic {
            inner,
            validates,
            log: Arc::default(),
        }
    }
}

struct OptimisticTxn {
    snapshot: Box<dyn Txn>,
    inner: MemoryBackend,
    validates: Validates,
    log: Arc<Mutex<Log>>,
    tenant: String,
    since: u64,
    read: Vec<Vec<u8>>,
    scanned: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Backend for Optimistic {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Answer<Box<dyn Txn>> {
        if m == Mode::Read {
            return self.inner.begin(t, m, w);
        }
        // The snapshot and the commit count it holds are taken together.
        let log = lock(&self.log);
        Ok(Box::new(OptimisticTxn {
            snapshot: self.inner.begin(t, Mode::Read, w)?,
            inner: self.inner.clone(),
            validates: self.validates,
            log: self.log.clone(),
            tenant: t.to_owned(),
            since: log.commits,
            read: Vec::new(),
            scanned: Vec::new(),
        }))
    }
    fn concurrent_writers(&self) -> bool {
        true
    }
}

impl Txn for OptimisticTxn {
    fn get(&mut self, key: &[u8]) -> Answer<Option<Vec<u8>>> {
        self.read.push(key.to_vec());
        self.snapshot.get(key)
    }
    fn get_many(&mut self, keys: &[Vec<u8>]) -> Answer<Vec<Option<Vec<u8>>>> {
        if self.validates != Validates::EverythingButGetMany {
            self.read.extend(keys.iter().cloned());
        }
        self.snapshot.get_many(keys)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Answer<(Vec<Entry>, bool)> {
        if !(reverse && self.validates == Validates::EverythingButReverseScans) {
            self.scanned.push((start.to_vec(), end.map(<[u8]>::to_vec)));
        }
        self.snapshot.scan(start, end, limit, reverse, max_bytes)
    }
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Answer<Pending> {
        if batch.is_empty() {
            return Ok(Pending::done());
        }
        let writes: Vec<Vec<u8>> = batch
            .iter()
            .map(|w| match w {
                Write::Put(k, _) | Write::Delete(k) => k.clone(),
            })
            .collect();
        let logged: Vec<Vec<u8>> = batch
            .iter()
            .filter_map(|w| match w {
                Write::Put(k, _) => Some(k.clone()),
                Write::Delete(k) => {
                    (self.validates != Validates::EverythingButDeletes).then(|| k.clone())
                }
            })
            .collect();
        let mut log = lock(&self.log);
        let since_mine = log
            .written
            .iter()
            .filter(|(seq, tenant, _)| *seq > self.since && *tenant == self.tenant);
        for (_, _, theirs) in since_mine {
            let clash = theirs.iter().any(|k| match self.validates {
                Validates::Nothing => false,
                Validates::Writes => writes.contains(k),
                Validates::PointReads => writes.contains(k) || self.read.contains(k),
                Validates::Everything
                | Validates::EverythingButDeletes
                | Validates::EverythingButGetMany
                | Validates::EverythingButReverseScans => {
                    writes.contains(k)
                        || self.read.contains(k)
                        || self
                            .scanned
                            .iter()
                            .any(|(start, end)| k >= start && end.as_ref().is_none_or(|e| k < e))
                }
            });
            if clash {
                return Err(StorageError::Conflict(
                    "a concurrent commit changed what this transaction read or wrote".into(),
                ));
            }
        }
        self.inner
            .begin(&self.tenant, Mode::Write, Duration::from_secs(5))?
            .commit(batch)?
            .wait()?;
        log.commits += 1;
        let seq = log.commits;
        log.written.push((seq, self.tenant.clone(), logged));
        Ok(Pending::done())
    }
}

/// Writers that take turns, a second `begin` waiting for the first writer
/// however short its `lock_wait`: slow, but not broken.
struct TakesTurnsWhateverTheWait(MemoryBackend);

impl Backend for TakesTurnsWhateverTheWait {
    fn begin(&self, t: &str, m: Mode, _: Duration) -> Answer<Box<dyn Txn>> {
        self.0.begin(t, m, Duration::from_secs(60))
    }
    fn concurrent_writers(&self) -> bool {
        false
    }
}

/// Writers begun through `begin` take turns; writers begun through the
/// entry points the engine calls run side by side and check nothing at
/// commit: a backend that overrode `begin_with_deadline` and
/// `begin_in_line` (to bound waits, to take a line's turn) and lost the
/// writer's turn on the way.
struct TurnsOnlyThroughBegin {
    turns: MemoryBackend,
    side_by_side: Optimistic,
}

impl TurnsOnlyThroughBegin {
    fn new() -> Self {
        let turns = MemoryBackend::new();
        TurnsOnlyThroughBegin {
            side_by_side: Optimistic::over(turns.clone(), Validates::Nothing),
            turns,
        }
    }
}

impl Backend for TurnsOnlyThroughBegin {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Answer<Box<dyn Txn>> {
        self.turns.begin(t, m, w)
    }
    fn begin_with_deadline(
        &self,
        t: &str,
        m: Mode,
        w: Duration,
        _: Duration,
    ) -> Answer<Box<dyn Txn>> {
        self.side_by_side.begin(t, m, w)
    }
    fn begin_in_line(
        &self,
        t: &str,
        m: Mode,
        w: Duration,
        _: Duration,
        _: &'static str,
    ) -> Answer<Box<dyn Txn>> {
        self.side_by_side.begin(t, m, w)
    }
    fn concurrent_writers(&self) -> bool {
        true
    }
}

// ---- the flaws, and the check that must catch each ----------------------------------

type Make = fn() -> Box<dyn Backend>;

/// Each flaw: its test's name, how to make the backend, the check that
/// must catch it, and words its failure must hold (why it failed). Each
/// test runs the check alone, then the whole kit, which must name the
/// check among its failures and report none of them as a panic.
macro_rules! flaws {
    ($($test:ident: $make:expr => $check:literal, $why:literal;)+) => {
        $(
            #[test]
            fn $test() {
                let make: Make = || -> Box<dyn Backend> { Box::new($make) };
                let failure = caught($check, &make).expect_err("the kit passed it");
                assert!(failure.what.contains($why), "{failure}");
                let all = testkit::run_all(&make);
                assert!(all.iter().any(|f| f.check == $check), "{all:?}");
                assert!(all.iter().all(|f| !f.what.contains("panicked")), "{all:?}");
            }
        )+
    };
}

flaws! {
    the_kit_catches_a_scan_that_ignores_its_limit:
        Flawed::<IgnoresLimit>::new() => "scan_limits_and_bounds", "limit";
    the_kit_catches_a_cursor_that_skips_a_key_after_a_page:
        Flawed::<SkipsAfterAPage>::new() => "long_scans_skip_nothing", "a forward scan from";
    the_kit_catches_a_byte_cap_that_counts_keys_but_not_values:
        Flawed::<CapCountsKeysOnly>::new() => "scan_byte_caps", "a scan capped at";
    the_kit_catches_a_reverse_scan_that_loses_an_end_past_the_last_key:
        Flawed::<ReverseLosesAnEndPastTheLastKey>::new() => "bytewise_order_both_ways", "reverse true";
    the_kit_catches_a_point_read_that_answers_a_neighbour:
        Flawed::<GetAnswersANeighbour>::new() => "absent_keys_read_as_absent", "get of absent key";
    the_kit_catches_a_batched_read_that_answers_a_longer_key:
        Flawed::<GetManyMatchesPrefixes>::new() => "absent_keys_read_as_absent", "get-many of absent keys";
    the_kit_catches_a_batched_read_that_answers_repeated_keys_out_of_place:
        Flawed::<GetManyLosesRepeats>::new() => "puts_read_back", "in the order asked";
    the_kit_catches_a_batched_read_that_answers_only_its_first_hundred_keys:
        Flawed::<GetManyReadsAHundred>::new() => "puts_read_back", "a get-many of 4096 keys";
    the_kit_catches_a_delete_that_a_batched_read_still_sees:
        Flawed::<GetManySeesTombstones>::new() => "deleted_keys_are_gone", "get-many of deleted keys";
    the_kit_catches_deleted_keys_that_use_up_a_scans_limit:
        Flawed::<TombstonesUseUpTheLimit>::new() => "deleted_keys_are_gone", "a scan limited to";
    the_kit_catches_a_backend_that_drops_half_of_each_batch:
        Flawed::<DropsHalfOfEachBatch>::new() => "batches_are_all_or_nothing", "of 201 entries";
    the_kit_catches_a_read_transaction_that_commits_a_batch:
        Flawed::<ReadsCommitBatches>::new() => "read_transactions_refuse_batches", "committed a batch";
    the_kit_catches_a_commit_acknowledged_before_it_lands:
        Flawed::<AcknowledgesBeforeItWrites>::new() => "commits_are_seen_once_acknowledged", "was waited for";
    the_kit_catches_a_read_that_sees_a_batch_committed_after_it_began:
        NoSnapshot(MemoryBackend::new()) => "reads_see_one_snapshot", "after it began";
    the_kit_catches_lost_updates:
        Optimistic::new(Validates::Nothing) => "writers_are_serializable", "a lost update";
    the_kit_catches_write_skew:
        Optimistic::new(Validates::Writes) => "writers_are_serializable", "write skew";
    the_kit_catches_phantoms:
        Optimistic::new(Validates::PointReads) => "writers_are_serializable", "a phantom";
    the_kit_catches_a_tenant_prefix_that_leaks:
        JoinedNames::<'\0'>::new() => "tenants_are_apart", "one name a prefix of another";
    the_kit_catches_tenants_joined_to_keys_with_a_dot:
        JoinedNames::<'.'>::new() => "tenants_are_apart", "joined to a key with a separator";
    the_kit_catches_tenants_that_differ_only_by_case:
        Flawed::<FoldsCase>::new() => "tenants_are_apart", "differ only in case";
    the_kit_catches_tenants_that_differ_only_by_a_trailing_dot:
        Flawed::<DropsTrailingDots>::new() => "tenants_are_apart", "trailing or leading dots";
    the_kit_catches_tenant_names_cut_short:
        Flawed::<CutsNamesShort>::new() => "tenants_are_apart", "at the length limit";
    the_kit_catches_writers_that_take_turns_only_through_begin:
        TurnsOnlyThroughBegin::new() => "writers_are_serializable", "begun through begin_with_deadline and begin_with_deadline";
    the_kit_catches_readers_that_keep_a_snapshot_only_through_begin:
        SnapshotOnlyThroughBegin(MemoryBackend::new()) => "reads_see_one_snapshot", "begin_with_deadline: a reader saw";
    the_kit_catches_reverse_scans_that_read_the_latest_commit:
        ReverseScansReadTheLatest(MemoryBackend::new()) => "reads_see_one_snapshot", "reverse true saw writes committed after";
    the_kit_catches_a_batch_cut_to_its_first_4096_writes:
        Flawed::<KeepsTheFirst4096Writes>::new() => "largest_batches_land_whole", "bytes in";
    the_kit_catches_a_batch_committed_in_pieces:
        Flawed::<CommitsInPieces>::new() => "largest_batches_land_whole", "beside the commit saw";
    the_kit_catches_a_store_that_refuses_a_batch_within_the_budget:
        Flawed::<RefusesTransactionsOver10MB>::new() => "largest_batches_land_whole", "committing a batch begun through";
    the_kit_catches_a_delete_that_takes_longer_keys_with_it:
        Flawed::<DeleteTakesLongerKeys>::new() => "deletes_take_no_longer_or_shorter_keys", "after deleting";
    the_kit_catches_optimistic_writers_that_log_only_puts:
        Optimistic::new(Validates::EverythingButDeletes) => "writers_are_serializable", "write skew by deletes";
    the_kit_catches_optimistic_writers_that_do_not_track_batched_reads:
        Optimistic::new(Validates::EverythingButGetMany) => "writers_are_serializable", "write skew";
    the_kit_catches_optimistic_writers_that_do_not_track_reverse_scans:
        Optimistic::new(Validates::EverythingButReverseScans) => "writers_are_serializable", "a phantom in reverse";
    the_kit_catches_an_empty_value_stored_as_nothing:
        Flawed::<EmptyValuesAreAbsent>::new() => "puts_read_back", "get [98] answered None";
    the_kit_catches_keys_with_trailing_zeros_trimmed:
        Flawed::<StoresKeysAs<TrailingZerosTrimmed>>::new() => "absent_keys_read_as_absent", "get of absent key";
    the_kit_catches_keys_kept_as_text:
        Flawed::<StoresKeysAs<AsText>>::new() => "absent_keys_read_as_absent", "get of absent key";
    the_kit_catches_keys_compared_without_case:
        Flawed::<StoresKeysAs<CaseFolded>>::new() => "absent_keys_read_as_absent", "get of absent key";
    the_kit_catches_keys_compared_ignoring_trailing_spaces:
        Flawed::<StoresKeysAs<TrailingSpacesIgnored>>::new() => "keys_differing_only_in_trailing_bytes_are_distinct", "get of";
    the_kit_catches_keys_cut_at_a_zero_byte:
        Flawed::<StoresKeysAs<CutAtAZeroByte>>::new() => "keys_differing_only_in_trailing_bytes_are_distinct", "get of";
    the_kit_catches_scans_in_a_pad_space_order:
        Flawed::<ScansInPadSpaceOrder>::new() => "keys_differing_only_in_trailing_bytes_are_distinct", "a forward scan answered";
    the_kit_catches_scans_in_a_locales_order:
        Flawed::<ScansInLocaleOrder>::new() => "bytewise_order_both_ways", "a forward scan answered";
    the_kit_catches_a_scan_that_says_more_when_its_limit_stops_it:
        Flawed::<SaysMoreWhenTheLimitStops>::new() => "scan_flags_on_every_shape", "stopped early: true, not";
    the_kit_catches_a_byte_cap_weighed_against_the_whole_range:
        Flawed::<CapWeighsTheWholeRange>::new() => "scan_flags_on_every_shape", "stopped early: true, not";
    the_kit_catches_a_tenant_listing_that_skips_names_extending_another:
        Flawed::<ListingSkipsNamesThatExtendAnother>::new() => "tenants_are_listed", "missing";
    the_kit_catches_a_tenant_listing_that_folds_case:
        Flawed::<ListingFoldsCase>::new() => "tenants_are_listed", "tenants()";
    the_kit_catches_a_tenant_listing_that_repeats_tenants:
        Flawed::<ListingRepeatsTenants>::new() => "tenants_are_listed", "listed twice";
}

/// The working backends the kit must pass whole.
fn working() -> Vec<(&'static str, Make)> {
    vec![
        ("the example backend", || -> Box<dyn Backend> {
            Box::new(MemoryBackend::new())
        }),
        (
            "optimistic writers that validate what they read",
            || -> Box<dyn Backend> { Box::new(Optimistic::new(Validates::Everything)) },
        ),
        (
            "writers that take turns whatever the lock wait",
            || -> Box<dyn Backend> { Box::new(TakesTurnsWhateverTheWait(MemoryBackend::new())) },
        ),
    ]
}

/// Writers side by side that check every key and range they read pass the
/// serializable-writers check, and so do writers whose second `begin`
/// waits for its turn however short its `lock_wait` (the check does not
/// hang on them).
#[test]
fn the_kit_passes_writers_that_are_serializable_either_way() {
    for (what, make) in working() {
        caught("writers_are_serializable", &make).unwrap_or_else(|f| panic!("{what}: {f}"));
    }
}

/// On a backend that drops half of each batch, the scenario suite reports
/// the steps that went wrong instead of panicking.
#[test]
fn the_scenario_suite_reports_a_backend_that_drops_half_of_each_batch() {
    keep_compiled();
    let failure = testkit::scenarios::run_scenarios(&Flawed::<DropsHalfOfEachBatch>::new)
        .expect_err("the scenario suite passed it");
    assert_eq!(failure.check, "scenarios");
    assert!(failure.what.contains("steps failed"), "{failure}");
    assert!(!failure.what.contains("panicked"), "{failure}");
}

/// Run whole, the kit passes the working backends.
#[test]
fn the_whole_kit_passes_the_working_backends() {
    keep_compiled();
    for (what, make) in working() {
        let none = testkit::run_all(&make);
        assert!(none.is_empty(), "{what}: {none:?}");
    }
}

/// A step that uses a value an earlier step did not save (its answer was an
/// error, or held nothing at the path) is reported as not run, beside the
/// step that went wrong, instead of panicking: what a backend that loses
/// writes makes a scenario do.
#[test]
fn a_scenario_step_that_uses_a_value_never_saved_is_reported_not_run() {
    keep_compiled();
    let scenario = serde_json::json!({
        "name": "unsaved",
        "steps": [
            {"call": "claim", "args": {"id": "nope", "actor": "bob", "roles": []},
             "ok": {"id": "nope"}, "save": {"claimed": "id"}},
            {"call": "get", "args": {"id": {"$var": "claimed"}}, "ok": null},
            {"call": "get", "args": {"id": "t1"}, "ok": null, "save": {"missing": "tasks.0.id"}},
            {"call": "get", "args": {"id": {"$var": "missing"}}, "ok": null},
            {"call": "get", "args": {"id": {"$var": "never"}}, "ok": null},
        ],
    });
    let failure = testkit::scenarios::run_scenario(MemoryBackend::new(), &scenario)
        .expect_err("the scenario passed");
    let lines: Vec<&str> = failure.what.lines().collect();
    assert_eq!(
        lines,
        [
            "unsaved: 4 steps failed:",
            r#"step 1 (claim): expected {"ok":{"id":"nope"}}, got {"error":{"not-found":"nope"}}"#,
            "step 2 (get): not run: it uses the value saved as claimed, but step 1 answered an error",
            "step 4 (get): not run: it uses the value saved as missing, but step 3's answer held no tasks.0.id",
            "step 5 (get): not run: it uses the value saved as never, but nothing was saved under it",
        ],
        "{failure}"
    );
}

/// A step the runner cannot make (an argument missing) is that step's
/// failure, and the scenario stops there; the runner does not panic.
#[test]
fn a_scenario_step_with_an_argument_missing_is_reported() {
    keep_compiled();
    let scenario = serde_json::json!({
        "name": "malformed",
        "steps": [
            {"call": "get", "args": {}, "ok": null},
            {"call": "get", "args": {"id": "t1"}, "ok": null},
        ],
    });
    let failure = testkit::scenarios::run_scenario(MemoryBackend::new(), &scenario)
        .expect_err("the scenario passed");
    assert_eq!(
        failure.what, "malformed: 1 steps failed:\nstep 1 (get): panicked: argument id is missing",
        "{failure}"
    );
}
