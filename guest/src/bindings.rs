//! The wit-bindgen adapter: WIT types in, domain calls, WIT types out.
//! Nothing here decides anything; the rules live in the domain modules.

#![allow(unsafe_code)] // the generated glue is unsafe by nature

wit_bindgen::generate!({
    world: "engine",
    path: "../wit",
});

use exports::leasehold::engine::admin as admin_api;
use exports::leasehold::engine::changes as changes_api;
use exports::leasehold::engine::jobs as jobs_api;
use exports::leasehold::engine::kinds as kinds_api;
use exports::leasehold::engine::runs as runs_api;
use exports::leasehold::engine::schedules as schedules_api;
use exports::leasehold::engine::search as search_api;
use exports::leasehold::engine::subscriptions as subscriptions_api;
use exports::leasehold::engine::tasks as tasks_api;
use exports::leasehold::engine::timers as timers_api;
use leasehold::engine::kv as host_kv;
use leasehold::engine::types as wit;

use core::sync::atomic::{AtomicU8, Ordering};

use crate::kv::{self, Entry, KvError, ScanRequest, Snapshot, Write};
use crate::model;
#[allow(unused_imports)]
use crate::prelude::*;

// The component links no std, so it brings its allocator and says what a
// panic does: it traps, and the host fails the call with nothing committed.
#[global_allocator]
static ALLOCATOR: BumpFirst = BumpFirst {
    next: core::cell::Cell::new(0),
    call_ended: core::cell::Cell::new(false),
    talc: talc::cell::TalcSyncCell::new_wasm(ArenaThenGrow {
        arena_claimed: false,
    }),
};

/// Nothing a call allocates outlives the call, so most allocations need no
/// bookkeeping at all: they are cut from the front of one region, and only
/// the most recent one gives its room back when freed (a `Vec` growing in
/// place). The region starts empty again with every call (see
/// [`BumpFirst::begin_call`]), so an instance kept for many calls (by the
/// JavaScript and Python hosts, and by the Rust host when asked to reuse
/// instances) cuts each call's blocks from the same front. What does not fit
/// goes to talc, which frees properly, for calls that allocate a lot.
struct BumpFirst {
    /// Offset of the first free byte of `BUMP`.
    next: core::cell::Cell<usize>,
    /// Set when a call's rules have answered: the next call's first
    /// allocation by the host (its arguments) or its entry starts the region
    /// afresh.
    call_ended: core::cell::Cell<bool>,
    talc: talc::cell::TalcSyncCell<ArenaThenGrow, talc::wasm::WasmBinning>,
}

// SAFETY: a component instance runs on one thread.
unsafe impl Sync for BumpFirst {}

const BUMP_BYTES: usize = 256 << 10;

static mut BUMP: [core::mem::MaybeUninit<u8>; BUMP_BYTES] =
    [core::mem::MaybeUninit::uninit(); BUMP_BYTES];

impl BumpFirst {
    fn base() -> usize {
        (&raw mut BUMP) as usize
    }

    fn owns(ptr: *mut u8) -> bool {
        (Self::base()..Self::base() + BUMP_BYTES).contains(&(ptr as usize))
    }

    /// Whether the block at `ptr` of `size` bytes is the last one cut.
    fn is_last(&self, ptr: *mut u8, size: usize) -> bool {
        ptr as usize + size == Self::base() + self.next.get()
    }

    /// Called where a new call may begin: by `cabi_realloc` (the host
    /// lowering the arguments comes first in a call) and on entry to the
    /// rules. After the last call ended, and once the host has lifted its
    /// answer and run its post-return, nothing in the region is live, so it
    /// empties. Within a call the flag is clear, so the host lowering the
    /// answers of `kv` imports into the region never empties it.
    ///
    /// An export's glue moves its arguments into the rules and allocates
    /// nothing of its own before [`call`] enters; an export whose arguments
    /// hold no list or string has nothing in the region when it enters.
    fn begin_call(&self) {
        if self.call_ended.replace(false) {
            self.next.set(0);
        }
    }

    /// The rules have answered; the glue may still allocate the answer's
    /// lists in the region, which stay until the next call begins.
    fn end_call(&self) {
        self.call_ended.set(true);
    }
}

// SAFETY: blocks cut from `BUMP` never overlap (each starts at or past the
// end of the one before, and only the last may be given back); every other
// block is talc's, and goes back to talc.
unsafe impl core::alloc::GlobalAlloc for BumpFirst {
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        let base = Self::base();
        let start = (base + self.next.get()).next_multiple_of(layout.align());
        match start.checked_add(layout.size()) {
            Some(end) if end <= base + BUMP_BYTES => {
                self.next.set(end - base);
                start as *mut u8
            }
            // SAFETY: as the caller's promise for this call.
            _ => unsafe { self.talc.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: core::alloc::Layout) {
        if Self::owns(ptr) {
            if self.is_last(ptr, layout.size()) {
                self.next.set(ptr as usize - Self::base());
            }
            return;
        }
        // SAFETY: a block outside `BUMP` came from talc.
        unsafe { self.talc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(
        &self,
        ptr: *mut u8,
        layout: core::alloc::Layout,
        new_size: usize,
    ) -> *mut u8 {
        if !Self::owns(ptr) {
            // SAFETY: a block outside `BUMP` came from talc.
            return unsafe { self.talc.realloc(ptr, layout, new_size) };
        }
        let base = Self::base();
        if self.is_last(ptr, layout.size()) && ptr as usize + new_size <= base + BUMP_BYTES {
            self.next.set(ptr as usize + new_size - base);
            return ptr;
        }
        if new_size <= layout.size() {
            // A block that shrinks keeps its place; its tail is lost until
            // the call ends, as a freed block's would be.
            return ptr;
        }
        // SAFETY: `new_size` is non-zero and, rounded up to the alignment,
        // does not overflow (the caller's promise); the old block is valid
        // for `layout.size()` bytes and the new one for `new_size`.
        unsafe {
            let moved = self.alloc(core::alloc::Layout::from_size_align_unchecked(
                new_size,
                layout.align(),
            ));
            if !moved.is_null() {
                core::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            moved
        }
    }
}

/// Most calls allocate from here: it lies inside the memory the component
/// starts with, so they never grow the memory. A call that grows it makes the
/// host change the slot's protection twice (grow, then reset), which costs
/// far more than the call itself.
const ARENA_BYTES: usize = 512 << 10;

static mut ARENA: [core::mem::MaybeUninit<u8>; ARENA_BYTES] =
    [core::mem::MaybeUninit::uninit(); ARENA_BYTES];

const WASM_PAGE: usize = 64 << 10;

/// The arena first, then pages grown on demand for what does not fit.
#[derive(Debug)]
struct ArenaThenGrow {
    arena_claimed: bool,
}

// SAFETY: `acquire` allocates nothing and hands the allocator only memory
// nothing else uses: the arena, once, and freshly grown pages.
unsafe impl talc::source::Source for ArenaThenGrow {
    fn acquire<B: talc::base::binning::Binning>(
        talc: &mut talc::base::Talc<Self, B>,
        layout: core::alloc::Layout,
    ) -> Result<(), ()> {
        if !talc.source.arena_claimed {
            talc.source.arena_claimed = true;
            // SAFETY: the arena is this allocator's alone, claimed once.
            if unsafe { talc.claim((&raw mut ARENA).cast::<u8>(), ARENA_BYTES) }.is_some() {
                return Ok(());
            }
        }
        // Room for the allocation with its alignment and the heap's own
        // bookkeeping.
        let want = layout
            .size()
            .saturating_add(layout.align())
            .saturating_add(256);
        let pages = want / WASM_PAGE + 1;
        let previous = core::arch::wasm32::memory_grow(0, pages);
        if previous == usize::MAX {
            return Err(());
        }
        // SAFETY: the pages were just grown and nothing else knows them.
        let claimed = unsafe { talc.claim((previous * WASM_PAGE) as *mut u8, pages * WASM_PAGE) };
        claimed.map(drop).ok_or(())
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}

/// The canonical ABI's allocator entry point. On `wasm32-wasip2` Rust's std
/// defines it; without std the component must, over the global allocator.
///
/// # Safety
///
/// Called only by the component model's lifting and lowering, with the
/// arguments the canonical ABI guarantees.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cabi_realloc(
    old_ptr: *mut u8,
    old_len: usize,
    align: usize,
    new_len: usize,
) -> *mut u8 {
    use alloc::alloc::{Layout, alloc as allocate, realloc};
    ALLOCATOR.begin_call();
    if new_len == 0 {
        return align as *mut u8;
    }
    // SAFETY: the canonical ABI passes a power-of-two `align` and, with a
    // non-zero `old_len`, a pointer this allocator handed out with that size.
    let ptr = unsafe {
        if old_len == 0 {
            allocate(Layout::from_size_align_unchecked(new_len, align))
        } else {
            realloc(
                old_ptr,
                Layout::from_size_align_unchecked(old_len, align),
                new_len,
            )
        }
    };
    if ptr.is_null() {
        core::arch::wasm32::unreachable();
    }
    ptr
}

// `memcpy` and its kin come from the C library the target ships; those
// routines touch nothing of WASI, so no WASI import comes with them.
// `memcmp` and `bcmp` are the crate's own (`mem.rs`).
#[link(name = "c")]
unsafe extern "C" {}

/// The host's `kv` import as the snapshot under the call's buffer. Reads
/// cannot fail here: a host that cannot answer traps the call.
struct HostKv;

/// The host's answer to `kv.concurrent-writers`, kept for the life of the
/// instance (the WIT lets a component ask once): 0 not asked yet, 1 false,
/// 2 true. A host that reuses an instance for many calls is asked once,
/// where each call would otherwise pay a crossing for a fact that does not
/// change. It is the one value kept on purpose from call to call, and it
/// only picks which keys to read ahead and how a fresh keyspace is laid out.
static CONCURRENT_WRITERS: AtomicU8 = AtomicU8::new(0);

impl Snapshot for HostKv {
    fn concurrent_writers(&mut self) -> bool {
        match CONCURRENT_WRITERS.load(Ordering::Relaxed) {
            1 => false,
            2 => true,
            _ => {
                let answer = host_kv::concurrent_writers();
                CONCURRENT_WRITERS.store(1 + u8::from(answer), Ordering::Relaxed);
                answer
            }
        }
    }

    // Asked afresh by every call (the buffer keeps it for the call): a host
    // that reuses an instance may give each call another slot.
    fn writer_slot(&mut self) -> u32 {
        host_kv::writer_slot()
    }

    // Asked by a call that records a change, once (the buffer keeps it).
    fn call_time(&mut self) -> i64 {
        host_kv::call_time()
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        Ok(host_kv::get(key))
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        Ok(host_kv::get_many(keys))
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError> {
        let range = host_kv::KeyRange {
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
        };
        Ok(host_kv::scan(&range, limit, reverse)
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect())
    }

    fn scan_many(&mut self, requests: &[ScanRequest]) -> Result<Vec<Vec<Entry>>, KvError> {
        let asked: Vec<host_kv::ScanRequest> = requests
            .iter()
            .map(|r| host_kv::ScanRequest {
                range: host_kv::KeyRange {
                    start: r.start.clone(),
                    end: r.end.clone(),
                },
                limit: r.limit,
                reverse: r.reverse,
            })
            .collect();
        let answers = host_kv::scan_many(&asked);
        // A host that answers another number of scans than it was asked is
        // broken; the call fails rather than read one range as another.
        if answers.len() != requests.len() {
            return Err(KvError::Storage(format!(
                "the host answered {} scans where {} were asked",
                answers.len(),
                requests.len()
            )));
        }
        Ok(answers
            .into_iter()
            .map(|entries| entries.into_iter().map(|e| (e.key, e.value)).collect())
            .collect())
    }
}

struct Component;

export!(Component);

crate::wit_conversions!(wit);
crate::schedule_conversions!(schedules_api);
crate::subscription_conversions!(subscriptions_api);
crate::search_conversions!(search_api);
crate::job_conversions!(jobs_api);

/// Runs a domain call over the host's snapshot and the call's buffer, hands
/// the host the batch when the call succeeded, and converts both sides.
fn call<T, E, U: From<T>, F: From<E>>(
    f: impl FnOnce(&mut kv::Buffered<HostKv>) -> Result<T, E>,
) -> Result<U, F> {
    ALLOCATOR.begin_call();
    let (answer, batch) = kv::buffered(HostKv, f);
    if !batch.is_empty() {
        let batch: Vec<host_kv::Write> = batch
            .into_iter()
            .map(|w| match w {
                Write::Put(key, value) => host_kv::Write::Put(host_kv::Entry { key, value }),
                Write::Delete(key) => host_kv::Write::Delete(key),
            })
            .collect();
        host_kv::stage(&batch);
    }
    ALLOCATOR.end_call();
    answer.map(U::from).map_err(F::from)
}

fn queue_query(q: tasks_api::QueueQuery) -> model::QueueQuery {
    model::QueueQuery {
        roles: q.roles,
        actor: q.actor,
        limit: q.limit,
        after: q.after,
    }
}

fn settle_answer(a: model::SettleAnswer) -> tasks_api::SettleAnswer {
    match a {
        model::SettleAnswer::Settled => tasks_api::SettleAnswer::Settled,
        model::SettleAnswer::Already(s) => tasks_api::SettleAnswer::Already(s.into()),
        model::SettleAnswer::NotHeld(h) => tasks_api::SettleAnswer::NotHeld(h),
        model::SettleAnswer::NotFound => tasks_api::SettleAnswer::NotFound,
        model::SettleAnswer::Refused(m) => tasks_api::SettleAnswer::Refused(m),
    }
}

impl tasks_api::Guest for Component {
    fn open(task: wit::Task) -> Result<wit::Task, wit::StoreError> {
        call(|kv| crate::tasks::open(kv, &task.into()))
    }

    fn get(id: String) -> Result<Option<wit::Task>, wit::StoreError> {
        call(|kv| crate::tasks::get(kv, &id)).map(|t: Option<model::Task>| t.map(Into::into))
    }

    fn claim(
        id: String,
        actor: String,
        roles: Vec<String>,
        lease: Option<wit::Lease>,
        guard: Option<wit::Guard>,
    ) -> Result<wit::Task, wit::ClaimError> {
        let lease = lease.map(model::Lease::from);
        let guard = guard.map(model::Guard::from);
        call(|kv| crate::tasks::claim(kv, &id, &actor, &roles, lease.as_ref(), guard.as_ref()))
    }

    fn release(
        id: String,
        actor: String,
        guard: Option<wit::Guard>,
    ) -> Result<(), wit::ClaimError> {
        let guard = guard.map(model::Guard::from);
        call(|kv| crate::tasks::release(kv, &id, &actor, guard.as_ref()))
    }

    fn take_over(
        id: String,
        from: String,
        actor: String,
        roles: Vec<String>,
        lease: Option<wit::Lease>,
        guard: Option<wit::Guard>,
    ) -> Result<wit::Task, wit::ClaimError> {
        let lease = lease.map(model::Lease::from);
        let guard = guard.map(model::Guard::from);
        call(|kv| {
            crate::tasks::take_over(
                kv,
                &id,
                &from,
                &actor,
                &roles,
                lease.as_ref(),
                guard.as_ref(),
            )
        })
    }

    fn renew(
        id: String,
        actor: String,
        now: i64,
        lease_ms: u32,
        guard: Option<wit::Guard>,
    ) -> Result<wit::Task, wit::ClaimError> {
        let guard = guard.map(model::Guard::from);
        call(|kv| crate::tasks::renew(kv, &id, &actor, now, lease_ms, guard.as_ref()))
    }

    fn reclaim_lapsed(now: i64, limit: u32) -> Result<Vec<wit::Task>, wit::StoreError> {
        call(|kv| crate::tasks::reclaim_lapsed(kv, now, limit))
            .map(|ts: Vec<model::Task>| ts.into_iter().map(Into::into).collect())
    }

    fn expire_overdue(now: i64, limit: u32) -> Result<Vec<wit::Task>, wit::StoreError> {
        call(|kv| crate::tasks::expire_overdue(kv, now, limit))
            .map(|ts: Vec<model::Task>| ts.into_iter().map(Into::into).collect())
    }

    fn claim_next(
        q: tasks_api::QueueQuery,
        lease: Option<wit::Lease>,
    ) -> Result<Option<wit::Task>, wit::StoreError> {
        let query = queue_query(q);
        let lease = lease.map(model::Lease::from);
        call(|kv| crate::tasks::claim_next(kv, &query, lease.as_ref()))
            .map(|t: Option<model::Task>| t.map(Into::into))
    }

    fn claim_batch(
        q: tasks_api::QueueQuery,
        lease: Option<wit::Lease>,
        count: u32,
    ) -> Result<Vec<wit::Task>, wit::StoreError> {
        let query = queue_query(q);
        let lease = lease.map(model::Lease::from);
        call(|kv| crate::tasks::claim_batch(kv, &query, lease.as_ref(), count))
            .map(|ts: Vec<model::Task>| ts.into_iter().map(Into::into).collect())
    }

    fn settle_and_claim(
        done: Vec<tasks_api::Finished>,
        q: tasks_api::QueueQuery,
        lease: Option<wit::Lease>,
        count: u32,
    ) -> Result<tasks_api::SettledAndClaimed, wit::StoreError> {
        let done: Vec<model::Finished> = done
            .into_iter()
            .map(|f| model::Finished {
                id: f.id,
                settlement: f.settlement.into(),
                decision: f.decision.map(model::Decision::from),
            })
            .collect();
        let query = queue_query(q);
        let lease = lease.map(model::Lease::from);
        call(|kv| crate::tasks::settle_and_claim(kv, &done, &query, lease.as_ref(), count)).map(
            |r: model::SettledAndClaimed| tasks_api::SettledAndClaimed {
                settled: r.settled.into_iter().map(settle_answer).collect(),
                claimed: r.claimed.into_iter().map(Into::into).collect(),
            },
        )
    }

    fn settle(
        id: String,
        settlement: wit::Settlement,
        holder: Option<String>,
        decision: Option<wit::Decision>,
        guard: Option<wit::Guard>,
    ) -> Result<bool, wit::ClaimError> {
        let decision = decision.map(model::Decision::from);
        let guard = guard.map(model::Guard::from);
        call(|kv| {
            crate::tasks::settle(
                kv,
                &id,
                settlement.into(),
                holder.as_deref(),
                decision.as_ref(),
                guard.as_ref(),
            )
        })
    }

    fn withdraw_run(run: String, awaited: Vec<String>) -> Result<u32, wit::StoreError> {
        call(|kv| crate::tasks::withdraw_run(kv, &run, &awaited))
    }

    fn escalate(id: String, guard: Option<wit::Guard>) -> Result<wit::Task, wit::ClaimError> {
        let guard = guard.map(model::Guard::from);
        call(|kv| crate::tasks::escalate(kv, &id, guard.as_ref()))
    }

    fn queue(q: tasks_api::QueueQuery) -> Result<wit::Page, wit::StoreError> {
        let query = queue_query(q);
        call(|kv| crate::tasks::queue(kv, &query))
    }

    fn for_case(
        case: String,
        limit: u32,
        after: Option<String>,
    ) -> Result<wit::Page, wit::StoreError> {
        call(|kv| crate::tasks::for_case(kv, &case, limit, after.as_deref()))
    }

    fn open_count() -> Result<u64, wit::StoreError> {
        call(crate::tasks::open_count)
    }

    fn leased_count() -> Result<u64, wit::StoreError> {
        call(crate::tasks::leased_count)
    }

    fn next_lease_end() -> Result<Option<i64>, wit::StoreError> {
        call(crate::tasks::next_lease_end)
    }

    fn next_wake() -> Result<Option<i64>, wit::StoreError> {
        call(crate::tasks::next_wake)
    }

    fn overdue(now: i64, limit: u32) -> Result<Vec<wit::Task>, wit::StoreError> {
        call(|kv| crate::tasks::overdue(kv, now, limit))
            .map(|ts: Vec<model::Task>| ts.into_iter().map(Into::into).collect())
    }

    fn held(
        actor: String,
        limit: u32,
        after: Option<String>,
    ) -> Result<wit::Page, wit::StoreError> {
        call(|kv| crate::tasks::held(kv, &actor, limit, after.as_deref()))
    }

    fn update(
        id: String,
        by: Option<String>,
        changes: wit::TaskChanges,
        guard: Option<wit::Guard>,
    ) -> Result<wit::Task, wit::ClaimError> {
        let changes = model::TaskChanges::from(changes);
        let guard = guard.map(model::Guard::from);
        call(|kv| crate::tasks::update(kv, &id, by.as_deref(), &changes, guard.as_ref()))
    }

    fn assign(
        id: String,
        to: String,
        roles: Vec<String>,
        lease: Option<wit::Lease>,
        override_roles: bool,
        by: Option<String>,
        guard: Option<wit::Guard>,
    ) -> Result<wit::Task, wit::ClaimError> {
        let lease = lease.map(model::Lease::from);
        let guard = guard.map(model::Guard::from);
        call(|kv| {
            crate::tasks::assign(
                kv,
                &id,
                &to,
                &roles,
                lease.as_ref(),
                override_roles,
                by.as_deref(),
                guard.as_ref(),
            )
        })
    }

    fn unassign(
        id: String,
        by: Option<String>,
        guard: Option<wit::Guard>,
    ) -> Result<wit::Task, wit::ClaimError> {
        let guard = guard.map(model::Guard::from);
        call(|kv| crate::tasks::unassign(kv, &id, by.as_deref(), guard.as_ref()))
    }

    fn delegate(
        id: String,
        from: String,
        to: String,
        roles: Vec<String>,
        lease: Option<wit::Lease>,
        guard: Option<wit::Guard>,
    ) -> Result<wit::Task, wit::ClaimError> {
        let lease = lease.map(model::Lease::from);
        let guard = guard.map(model::Guard::from);
        call(|kv| {
            crate::tasks::delegate(kv, &id, &from, &to, &roles, lease.as_ref(), guard.as_ref())
        })
    }

    fn note(
        id: String,
        actor: String,
        text: String,
        guard: Option<wit::Guard>,
    ) -> Result<wit::Task, wit::ClaimError> {
        let guard = guard.map(model::Guard::from);
        call(|kv| crate::tasks::note(kv, &id, &actor, &text, guard.as_ref()))
    }
}

fn kind_definition(d: kinds_api::KindDefinition) -> model::KindDefinition {
    model::KindDefinition {
        kind: d.kind,
        outcomes: d.outcomes.into_iter().map(Into::into).collect(),
        revision: d.revision,
    }
}

fn wit_kind_definition(d: model::KindDefinition) -> kinds_api::KindDefinition {
    kinds_api::KindDefinition {
        kind: d.kind,
        outcomes: d.outcomes.into_iter().map(Into::into).collect(),
        revision: d.revision,
    }
}

impl search_api::Guest for Component {
    fn search(query: search_api::SearchQuery) -> Result<search_api::SearchPage, wit::StoreError> {
        let query: crate::search::SearchQuery = query.into();
        call(|kv| crate::search::search(kv, &query)).map(|p: crate::search::SearchPage| p.into())
    }

    fn count(
        filter: search_api::TaskFilter,
        viewer: Option<search_api::Viewer>,
        after: Option<String>,
    ) -> Result<search_api::CountAnswer, wit::StoreError> {
        let filter: crate::search::TaskFilter = filter.into();
        let viewer: Option<crate::search::Viewer> = viewer.map(Into::into);
        call(|kv| crate::search::count(kv, &filter, viewer.as_ref(), after.as_deref()))
            .map(|c: crate::search::CountAnswer| c.into())
    }

    fn build_search_index(limit: u32) -> Result<search_api::IndexProgress, wit::StoreError> {
        call(|kv| crate::search::build_index(kv, limit))
            .map(|p: crate::search::IndexProgress| p.into())
    }

    fn put_view(
        view: search_api::SavedView,
        expected: Option<u64>,
    ) -> Result<search_api::SavedView, wit::StoreError> {
        let view: crate::search::SavedView = view.into();
        call(|kv| crate::search::views::put(kv, &view, expected))
            .map(|v: crate::search::SavedView| v.into())
    }

    fn get_view(name: String) -> Result<Option<search_api::SavedView>, wit::StoreError> {
        call(|kv| crate::search::views::get(kv, &name))
            .map(|v: Option<crate::search::SavedView>| v.map(Into::into))
    }

    fn list_views(
        limit: u32,
        after: Option<String>,
    ) -> Result<Vec<search_api::SavedView>, wit::StoreError> {
        call(|kv| crate::search::views::list(kv, limit, after.as_deref()))
            .map(|vs: Vec<crate::search::SavedView>| vs.into_iter().map(Into::into).collect())
    }

    fn delete_view(name: String, expected: Option<u64>) -> Result<bool, wit::StoreError> {
        call(|kv| crate::search::views::delete(kv, &name, expected))
    }
}

impl jobs_api::Guest for Component {
    fn start_job(
        id: String,
        filter: search_api::TaskFilter,
        action: jobs_api::JobAction,
        by: Option<String>,
        now: wit::Timestamp,
    ) -> Result<jobs_api::Job, wit::StoreError> {
        let filter: crate::search::TaskFilter = filter.into();
        let action: crate::jobs::JobAction = action.into();
        call(|kv| crate::jobs::start(kv, &id, &filter, &action, by.as_deref(), now))
            .map(|j: crate::jobs::Job| j.into())
    }

    fn step_job(id: String) -> Result<jobs_api::Job, wit::StoreError> {
        call(|kv| crate::jobs::step(kv, &id)).map(|j: crate::jobs::Job| j.into())
    }

    fn cancel_job(id: String) -> Result<jobs_api::Job, wit::StoreError> {
        call(|kv| crate::jobs::cancel(kv, &id)).map(|j: crate::jobs::Job| j.into())
    }

    fn get_job(id: String) -> Result<Option<jobs_api::Job>, wit::StoreError> {
        call(|kv| crate::jobs::get(kv, &id)).map(|j: Option<crate::jobs::Job>| j.map(Into::into))
    }

    fn list_jobs(limit: u32, after: Option<String>) -> Result<Vec<jobs_api::Job>, wit::StoreError> {
        call(|kv| crate::jobs::list(kv, limit, after.as_deref()))
            .map(|js: Vec<crate::jobs::Job>| js.into_iter().map(Into::into).collect())
    }

    fn runnable_jobs(limit: u32) -> Result<Vec<String>, wit::StoreError> {
        call(|kv| crate::jobs::runnable(kv, limit))
    }
}

impl kinds_api::Guest for Component {
    fn define_kind(
        definition: kinds_api::KindDefinition,
        expected: Option<u64>,
    ) -> Result<kinds_api::KindDefinition, wit::StoreError> {
        let def = kind_definition(definition);
        call(|kv| crate::kinds::define(kv, &def, expected)).map(wit_kind_definition)
    }

    fn get_kind(kind: String) -> Result<Option<kinds_api::KindDefinition>, wit::StoreError> {
        call(|kv| crate::kinds::get(kv, &kind))
            .map(|d: Option<model::KindDefinition>| d.map(wit_kind_definition))
    }

    fn list_kinds(
        limit: u32,
        after: Option<String>,
    ) -> Result<Vec<kinds_api::KindDefinition>, wit::StoreError> {
        call(|kv| crate::kinds::list(kv, limit, after.as_deref()))
            .map(|ds: Vec<model::KindDefinition>| ds.into_iter().map(wit_kind_definition).collect())
    }

    fn remove_kind(kind: String) -> Result<bool, wit::StoreError> {
        call(|kv| crate::kinds::remove(kv, &kind))
    }
}

impl timers_api::Guest for Component {
    fn arm(timer: wit::Timer) -> Result<wit::ArmOutcome, wit::StoreError> {
        call(|kv| crate::timers::arm(kv, &timer.into()))
    }

    fn claim_due(now: i64, limit: u32, lease_ms: u32) -> Result<Vec<wit::Timer>, wit::StoreError> {
        call(|kv| crate::timers::claim_due(kv, now, limit, lease_ms))
            .map(|ts: Vec<model::Timer>| ts.into_iter().map(Into::into).collect())
    }

    fn disarm(run: String, effect: String) -> Result<bool, wit::StoreError> {
        call(|kv| crate::timers::disarm(kv, &run, &effect))
    }

    fn disarm_run(run: String) -> Result<u32, wit::StoreError> {
        call(|kv| crate::timers::disarm_run(kv, &run))
    }

    fn pending_count() -> Result<u64, wit::StoreError> {
        call(crate::timers::pending_count)
    }

    fn next_due() -> Result<Option<i64>, wit::StoreError> {
        call(crate::timers::next_due)
    }

    fn reschedule(
        run: String,
        effect: String,
        fire_at: i64,
        take_back: bool,
    ) -> Result<wit::TimerInfo, wit::TimerError> {
        call(|kv| crate::timers::reschedule(kv, &run, &effect, fire_at, take_back))
    }

    fn timers_of(
        run: String,
        limit: u32,
        after: Option<String>,
    ) -> Result<wit::TimerPage, wit::StoreError> {
        call(|kv| crate::timers::timers_of(kv, &run, limit, after.as_deref()))
    }

    fn due_between(
        from: i64,
        to: i64,
        limit: u32,
        after: Option<String>,
    ) -> Result<wit::TimerPage, wit::StoreError> {
        call(|kv| crate::timers::due_between(kv, from, to, limit, after.as_deref()))
    }
}

impl runs_api::Guest for Component {
    fn seal(run: String, awaited: Vec<String>) -> Result<wit::SealOutcome, wit::StoreError> {
        call(|kv| crate::runs::seal(kv, &run, &awaited))
    }

    fn is_sealed(run: String) -> Result<bool, wit::StoreError> {
        call(|kv| crate::runs::is_sealed(kv, &run))
    }
}

impl admin_api::Guest for Component {
    fn check() -> Result<Vec<wit::Discrepancy>, wit::StoreError> {
        call(crate::check::check)
            .map(|ds: Vec<model::Discrepancy>| ds.into_iter().map(Into::into).collect())
    }
}

impl changes_api::Guest for Component {
    fn history(
        id: String,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<wit::HistoryEntry>, wit::StoreError> {
        call(|kv| crate::changes::history(kv, &id, after, limit))
            .map(|es: Vec<model::HistoryEntry>| es.into_iter().map(Into::into).collect())
    }

    fn entry_place(id: String, seq: u64) -> Result<Option<wit::FeedPlace>, wit::StoreError> {
        call(|kv| crate::changes::entry_place(kv, &id, seq))
            .map(|p: Option<model::FeedPlace>| p.map(Into::into))
    }

    fn feed(after: Option<String>, limit: u32) -> Result<wit::FeedRead, wit::StoreError> {
        call(|kv| crate::changes::feed(kv, after.as_deref(), limit))
    }

    fn trim(
        before: Option<i64>,
        keep: Option<u64>,
        limit: u32,
    ) -> Result<wit::TrimOutcome, wit::StoreError> {
        call(|kv| crate::changes::trim(kv, before, keep, limit))
    }
}

impl schedules_api::Guest for Component {
    fn add_schedule(
        spec: schedules_api::ScheduleSpec,
        now: i64,
    ) -> Result<schedules_api::Schedule, wit::StoreError> {
        let def: crate::schedules::ScheduleDef = spec.into();
        call(|kv| crate::schedules::add(kv, &def, now))
    }

    fn remove_schedule(id: String) -> Result<bool, wit::StoreError> {
        call(|kv| crate::schedules::remove(kv, &id))
    }

    fn pause_schedule(
        id: String,
        note: String,
    ) -> Result<schedules_api::Schedule, wit::StoreError> {
        call(|kv| crate::schedules::pause(kv, &id, &note))
    }

    fn resume_schedule(id: String, now: i64) -> Result<schedules_api::Schedule, wit::StoreError> {
        call(|kv| crate::schedules::resume(kv, &id, now))
    }

    fn trigger_schedule(id: String, now: i64) -> Result<wit::Timer, wit::StoreError> {
        call(|kv| crate::schedules::trigger(kv, &id, now))
    }

    fn next_occurrences(id: String, after: i64, n: u32) -> Result<Vec<i64>, wit::StoreError> {
        call(|kv| crate::schedules::next_occurrences(kv, &id, after, n))
    }

    fn get_schedule(id: String) -> Result<Option<schedules_api::Schedule>, wit::StoreError> {
        call(|kv| crate::schedules::get(kv, &id).map(|r| r.map(schedules_api::Schedule::from)))
    }

    fn list_schedules(
        limit: u32,
        after: Option<String>,
    ) -> Result<schedules_api::SchedulePage, wit::StoreError> {
        call(|kv| {
            crate::schedules::list(kv, limit, after.as_deref()).map(|p| {
                schedules_api::SchedulePage {
                    schedules: p
                        .schedules
                        .into_iter()
                        .map(schedules_api::Schedule::from)
                        .collect(),
                    next: p.next,
                }
            })
        })
    }

    fn tz_version() -> String {
        crate::schedules::tz_version().into()
    }
}

impl subscriptions_api::Guest for Component {
    fn add_subscription(
        id: String,
        url: String,
        filter: subscriptions_api::SubFilter,
        key: Vec<u8>,
        from: Option<String>,
        now: i64,
    ) -> Result<subscriptions_api::Subscription, wit::StoreError> {
        let filter = filter.into();
        call(|kv| crate::subscriptions::add(kv, &id, &url, &filter, &key, from.as_deref(), now))
    }

    fn get_subscription(
        id: String,
    ) -> Result<Option<subscriptions_api::Subscription>, wit::StoreError> {
        call(|kv| crate::subscriptions::get(kv, &id).map(|s| s.map(Into::into)))
    }

    fn list_subscriptions(
        limit: u32,
        after: Option<String>,
    ) -> Result<subscriptions_api::SubscriptionPage, wit::StoreError> {
        call(|kv| {
            crate::subscriptions::list(kv, limit, after.as_deref()).map(|p| {
                subscriptions_api::SubscriptionPage {
                    subscriptions: p.subscriptions.into_iter().map(Into::into).collect(),
                    next: p.next,
                }
            })
        })
    }

    fn change_subscription(
        id: String,
        url: Option<String>,
        filter: Option<subscriptions_api::SubFilter>,
        expected: Option<u64>,
    ) -> Result<subscriptions_api::Subscription, wit::StoreError> {
        let filter: Option<crate::subscriptions::SubFilter> = filter.map(Into::into);
        call(|kv| crate::subscriptions::change(kv, &id, url.as_deref(), filter.as_ref(), expected))
    }

    fn set_subscription_state(
        id: String,
        state: subscriptions_api::SubState,
        note: Option<String>,
        expected: Option<u64>,
    ) -> Result<subscriptions_api::Subscription, wit::StoreError> {
        call(|kv| crate::subscriptions::set_state(kv, &id, state.into(), note.as_deref(), expected))
    }

    fn rotate_subscription_key(
        id: String,
        key: Vec<u8>,
        old_until: i64,
        now: i64,
    ) -> Result<subscriptions_api::Subscription, wit::StoreError> {
        call(|kv| crate::subscriptions::rotate(kv, &id, &key, old_until, now))
    }

    fn remove_subscription(id: String) -> Result<bool, wit::StoreError> {
        call(|kv| crate::subscriptions::remove(kv, &id))
    }

    fn advance_subscription(
        id: String,
        revision: u64,
        position: String,
    ) -> Result<subscriptions_api::Subscription, wit::StoreError> {
        call(|kv| crate::subscriptions::advance(kv, &id, revision, &position))
    }

    fn rewind_subscription(
        id: String,
        position: Option<String>,
    ) -> Result<subscriptions_api::Subscription, wit::StoreError> {
        call(|kv| crate::subscriptions::rewind(kv, &id, position.as_deref()))
    }

    fn lease_subscription(
        id: String,
        holder: String,
        now: i64,
        lease_ms: u32,
    ) -> Result<bool, wit::StoreError> {
        call(|kv| crate::subscriptions::lease(kv, &id, &holder, now, lease_ms))
    }

    fn release_subscription(id: String, holder: String) -> Result<(), wit::StoreError> {
        call(|kv| crate::subscriptions::release(kv, &id, &holder))
    }

    fn record_subscription_attempts(
        id: String,
        attempts: Vec<subscriptions_api::Attempt>,
    ) -> Result<(), wit::StoreError> {
        let attempts: Vec<crate::subscriptions::Attempt> =
            attempts.into_iter().map(Into::into).collect();
        call(|kv| crate::subscriptions::record_attempts(kv, &id, &attempts))
    }
}
