//! Where everything lives in the tenant's keyspace.
//!
//! Every key is a tuple (see [`crate::keys`]) whose first element names the
//! structure. Rows hold postcard (see [`crate::store::encode_row`]); index entries hold nothing (the key is the
//! entry); counter shards hold a big-endian `i64`. Only this module spells a key, so
//! the layout can be read in one place:
//!
//! | key | value |
//! | --- | --- |
//! | `("meta", "layout")` | the layout mark, ASCII: the version, then `/` and the keyspace's shard count, then for a keyspace moved from layout 3 to 6 `/from-` and that layout (see [`layout_mark_from`]) |
//! | `("task", id)` | task row |
//! | `("queue-role", role, rank, created-at, id)` | queued task offered to `role` |
//! | `("queue-any", rank, created-at, id)` | queued task offered to anyone |
//! | `("overdue", due-at, id)` | task awaiting expiry |
//! | `("lease", lease-until, id)` | task claimed under a lease, at its end |
//! | `("case", case, created-at, id)` | every task of a case |
//! | `("count", name, shard)` | one shard of a counter: `shard` is an integer below the keyspace's [`Shards`] |
//! | `("timer", run, effect)` | timer row; its range per run is the run's index |
//! | `("due", claimable-at, run, effect)` | when a timer can next be claimed |
//! | `("sealed", run)` | the run is sealed |
//! | `("task", id, "log")` | where the task's history stands: its last and first kept entries, and the feed position of its last change |
//! | `("task", id, "history", seq)` | one entry of a task's history, with the feed position it was recorded at: from layout 9 on, only every 64th entry of a task, its last entry once its change has left the feed, and entries an earlier layout wrote; the rest of a history is its changes in the feed |
//! | `("history-start", id)` | what a task written before history was kept held when its history began: its `before-history` entry (only in layouts that spell the record apart) |
//! | `("timer-log", run, effect)` | the feed position of the timer's last change (kept after the timer is retired) |
//! | `("feed", slot, MAX)` | the last sequence number written in a slot of the feed, a big-endian `u64`; `MAX` is `i64::MAX`, after every entry |
//! | `("feed-floor", slot)` | the last sequence number trimmed from a slot of the feed, a big-endian `u64` |
//! | `("feed", slot, seq)` | one entry of the feed, with the position of the previous entry of the same task or timer |
//! | `("wake", at, id)` | a pending task with a reminder or chain step still to fire, at that step's instant (layout 10) |
//! | `("held", actor, lease-end, id)` | a claimed task, under its holder at its lease end (`i64::MAX` when unleased): what `held` lists (layout 10) |
//! | `("kind", kind)` | a kind's definition: its allowed outcomes, which need a reason, their output schemas, its revision (layout 10) |
//! | `("by-state", state, created-at, id)`, `("by-kind", kind, state, created-at, id)`, `("assigned", actor, created-at, id)`, `("by-due", due-at, created-at, id)`, `("by-run", run, created-at, id)`, `("by-priority", rank, created-at, id)` | every task, as search finds it (layout 10; in a keyspace laid out earlier, a task not changed since may lack them until `build-search-index` reaches it) |
//! | `("search-count", state, shard)` | one shard of the count of tasks in that state, a big-endian `i64` (layout 10) |
//! | `("meta", "search")` | how far the search entries of a keyspace laid out before them are built: absent (nothing), the last task id built, or `built` |
//! | `("view", name)` | a saved view: its filter, sort, revision and who changed it (layout 10) |
//! | `("job", id)` | a bulk job: its filter (frozen at its start), action, counts, last failures and skips, state, and where its count and its run stand (layout 10) |
//! | `("job-item", id, seq)` | one chunk of the task ids a job's count found, in creation order; taken (and deleted) in order as the job runs (layout 10) |
//! | `("job-run", id)` | a job with work left (counting, running, or cancelled with chunks still to drop): what `runnable-jobs` lists (layout 10) |
//!
//! A task's log and history sit beside its row, and a slot's head beside its
//! newest entries, because a store that copies every page a commit touches
//! (redb's B-tree) pays per page: a call then dirties the pages of its row
//! and of its slot's tail, and nothing else for its record. From layout 9 a
//! change writes no history key at all: every insert in a writer's turn
//! costs, and the feed entry already holds the whole change, so a task's
//! history is read by following its changes back through the feed from its
//! log (each feed entry names the task's previous change). Layout 6 spelled
//! the record apart, and this component reads and writes a layout-6
//! keyspace in that spelling: `("task-log", id)`, `("history", id, seq)` and
//! `("feed-head", slot)` for the three keys above ([`Shards::beside`] says
//! which a keyspace uses). The record's keys under `("task", id)` never
//! decode as a row: a row's key has one element after `"task"`.
//!
//! A counter is split into shards so that concurrent writers touch different
//! keys: under a serializable store, two calls that read-modify-write one
//! shared key conflict however unrelated their rows. In layout 5 a call moves
//! the shard its host's writer slot names (`kv.writer-slot`, see
//! [`Shards::writer`]), so calls the host runs side by side never share a
//! shard; a shard may then go below zero, and only the sum of a counter's
//! shards, which a reader takes, must not. Layouts 3 and 4 spread by row
//! instead: a task always counts in the shard [`Shards::task`] names, a
//! timer in [`Shards::timer`]'s, and no shard goes below zero; writers of
//! different rows then share a shard one time in as many as there are shards.
//! How many shards a keyspace has is chosen once, when it is laid out, from
//! what its host says of it (`kv.concurrent-writers`): many where several
//! processes write it at once, one where the host is its only writer and
//! extra shards would only make every count read more keys. The mark records
//! the choice, and every later call follows the mark, whatever its host says.
//!
//! | layout | written by | what changed |
//! | --- | --- | --- |
//! | 1 | Leasehold 0.1 | rows as JSON |
//! | 2 | early Leasehold 0.2 builds | rows as postcard; each counter one key `("count", name)` |
//! | 3 | earlier builds of this component | each counter 64 shard keys `("count", name, shard)`; the mark is `3` |
//! | 4 | earlier builds of this component | as 3, with the shard count (1 to 64) in the mark: `4/1`, `4/64` |
//! | 5 | earlier builds of this component | as 4, with contributions spread by writer slot, and shards signed: `5/1`, `5/64` |
//! | 6 | earlier builds of this component | as 5, with every change recorded in the history and the feed from the first: `6/1`, `6/64` |
//! | 7 | earlier builds of this component | as 6, with the record's keys beside the rows and entries they follow: `7/1`, `7/64` |
//! | 8 | earlier builds of this component | as 7, under the version rule below: `8/1`, `8/64`; a keyspace moved from layout 3 to 6 keeps its shape and says so: `8/64/from-5` |
//! | 9 | earlier builds of this component | as 8, with each task's history kept in the feed: no history key per change, only every 64th and a task's last entry once its change is trimmed from the feed: `9/1`, `9/64`, `9/64/from-5` |
//! | 10 | this component | as 9, with rows and entries extended (a task's revision, decision and outcomes, and in the extension's tail its reminders, chain and steps fired; a history or feed entry's revision, changed fields, decision, note, job, run and kind, and in the tail the step it fired), a `held` entry per claimed task, kind definitions, search entries and per-state counts for every task, and saved views: `10/1`, `10/64`, `10/64/from-5`; a task row no layout-10 build has changed yet (revision 0) may lack its `held` entry until its next change |
//!
//! This component lays out fresh keyspaces in layout 10, and reads and writes
//! layouts 3 to 9 in their spelling (3 and 4 spreading by row, 3 to 6 with
//! the record apart). The version rule: the first change it records in a
//! keyspace of an earlier layout moves the mark to layout 10 in the same
//! call ([`layout_mark_from`] keeps the shape in the mark), and a mark of a
//! later version is refused as `newer-layout`, so a build never writes a
//! keyspace a newer one has written. It records history and feed entries in
//! every layout; a component that predates them reads layouts up to 5 and
//! refuses the rest by name, so a keyspace marked 6 to 9 (not `from-3` to
//! `from-5`) has had every change recorded, while one of an earlier layout
//! may hold tasks whose history starts later than they did: their history
//! opens with a `before-history` entry, numbered 0, kept at
//! [`history_start`] when this component first changes them.
//!
//! The feed is kept per writer slot, folded to the keyspace's shard count
//! (one slot where one writer runs at a time): each writing call reads its
//! slot's head and writes the next sequence numbers, so calls in different
//! slots never touch one key, and within a slot a higher number always
//! commits later (a call reads the head the last call of its slot wrote).
//! Layout 3 is layout 4 with 64 shards, so this component reads and writes it
//! as such, and its first change marks it `10/64/from-3`. The entries a
//! layout-8 build (or an earlier one) wrote under history keys stay there,
//! and a task's history reads them below its changes in the feed.

use crate::keys::Key;
use crate::model::Timestamp;
#[allow(unused_imports)]
use crate::prelude::*;

/// The layout this component writes (see the table above). A keyspace with
/// a newer version is refused as `newer-layout`, and one with a version it
/// does not otherwise read as corrupt, rather than misread.
#[cfg(not(feature = "next-layout"))]
pub const LAYOUT_VERSION: u32 = 10;

/// The build the rolling-upgrade test runs as "the next release": the same
/// rules, one layout later, so that it moves a keyspace out of this build's
/// reach as any later release will.
#[cfg(feature = "next-layout")]
pub const LAYOUT_VERSION: u32 = 11;

/// The most shards a counter has: per-shard tallies fit in arrays this long.
pub const MAX_SHARDS: u8 = 64;

/// How many shards each counter of one keyspace has, and how contributions
/// are spread over them, fixed when the keyspace is laid out: the shard a
/// contribution goes to depends on both, so neither can change afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shards {
    count: u8,
    /// Layout 5: by the writer's slot, shards signed. Layouts 3 and 4: by
    /// row, shards never below zero.
    by_writer: bool,
    /// Layout 7: the change record's keys beside the rows and entries they
    /// follow. Layouts 3 to 6: apart.
    beside: bool,
}

impl Shards {
    /// For a keyspace that several processes write at once: writers the
    /// host runs side by side never share a shard.
    pub const SHARED: Shards = Shards {
        count: MAX_SHARDS,
        by_writer: true,
        beside: true,
    };
    /// For a keyspace with one writing host: a count reads one key.
    pub const SOLE: Shards = Shards {
        count: 1,
        by_writer: true,
        beside: true,
    };

    /// What a keyspace is laid out with, given what its host says of it.
    pub fn for_host(concurrent_writers: bool) -> Shards {
        if concurrent_writers {
            Shards::SHARED
        } else {
            Shards::SOLE
        }
    }

    /// `n` shards spread by writer, the record beside its rows (layout 7),
    /// if `n` is a count a layout may hold (1 to [`MAX_SHARDS`]).
    pub fn new(n: u8) -> Option<Shards> {
        (1..=MAX_SHARDS).contains(&n).then_some(Shards {
            count: n,
            by_writer: true,
            beside: true,
        })
    }

    /// `n` shards spread by writer, the record apart (layouts 5 and 6).
    pub fn record_apart(n: u8) -> Option<Shards> {
        Shards::new(n).map(|s| Shards { beside: false, ..s })
    }

    /// `n` shards spread by row, as layouts 3 and 4 are.
    pub fn by_row(n: u8) -> Option<Shards> {
        Shards::record_apart(n).map(|s| Shards {
            by_writer: false,
            ..s
        })
    }

    pub fn count(self) -> u8 {
        self.count
    }

    /// Whether contributions go to the writer's shard (and shards are
    /// signed), rather than to their row's.
    pub fn by_writer(self) -> bool {
        self.by_writer
    }

    /// Whether the change record's keys sit beside the rows and entries they
    /// follow (layout 7), rather than apart (see the table above).
    pub fn beside(self) -> bool {
        self.beside
    }

    fn of(self, hash: u64) -> u8 {
        // The remainder is below a u8.
        (hash % u64::from(self.count)) as u8
    }

    /// The shard a call moves in a layout spread by writer, given the host's
    /// writer slot.
    pub fn writer(self, slot: u32) -> u8 {
        self.of(u64::from(slot))
    }

    /// The counter shard every contribution of task `id` goes to, in a
    /// layout spread by row.
    pub fn task(self, id: &str) -> u8 {
        self.of(fnv1a64(&[id.as_bytes()]))
    }

    /// The counter shard every contribution of timer `(run, effect)` goes to,
    /// in a layout spread by row.
    /// The `0x00` keeps `("ab", "c")` and `("a", "bc")` apart.
    pub fn timer(self, run: &str, effect: &str) -> u8 {
        self.of(fnv1a64(&[run.as_bytes(), &[0], effect.as_bytes()]))
    }

    /// Every shard key of the counter `name`, in shard order.
    pub fn keys(self, name: &str) -> Vec<Vec<u8>> {
        (0..self.count)
            .map(|s| counter_shard(name, s).into_bytes())
            .collect()
    }
}

/// The mark [`layout`] holds in a keyspace this component lays out.
pub fn layout_mark(shards: Shards) -> String {
    layout_mark_from(shards, None)
}

/// The mark of a keyspace this component writes: its version and shard
/// count and, for a keyspace laid out in an earlier layout whose spelling it
/// keeps (3 to 6), `/from-` and that layout: `10/64/from-5`.
pub fn layout_mark_from(shards: Shards, origin: Option<u32>) -> String {
    match origin {
        None => format!("{LAYOUT_VERSION}/{}", shards.count()),
        Some(o) => format!("{LAYOUT_VERSION}/{}/from-{o}", shards.count()),
    }
}

/// The counters, each sharded as [`counter_shard`] spells.
pub const COUNTERS: [&str; 3] = [OPEN_TASKS, LEASED_CLAIMS, ARMED_TIMERS];

pub const OPEN_TASKS: &str = "open-tasks";
pub const ARMED_TIMERS: &str = "armed-timers";
pub const LEASED_CLAIMS: &str = "leased-claims";

pub fn layout() -> Key {
    Key::new().str("meta").str("layout")
}

/// Every key of every counter.
pub fn counters() -> Key {
    Key::new().str("count")
}

/// One shard of the counter `name`; `shard` is below the keyspace's
/// [`Shards`].
pub fn counter_shard(name: &str, shard: u8) -> Key {
    counters().str(name).int(i64::from(shard))
}

/// 64-bit FNV-1a over the concatenation of `parts`.
///
/// Part of the stored layout: the shard a task or timer counts in is derived
/// from it, so it must never change (nor be swapped for a library hash whose
/// output could change between versions). Changing it means a new layout.
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET_BASIS;
    for &b in parts.iter().flat_map(|p| p.iter()) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(PRIME);
    }
    hash
}

pub fn tasks() -> Key {
    Key::new().str("task")
}

pub fn task(id: &str) -> Key {
    tasks().str(id)
}

/// A position in queue order, shared by every queue index and the cursor.
pub fn queue_position(rank: i64, created_at: Timestamp, id: &str) -> Key {
    Key::new().int(rank).int(created_at).str(id)
}

pub fn queue_role(role: &str) -> Key {
    Key::new().str("queue-role").str(role)
}

pub fn queue_roles() -> Key {
    Key::new().str("queue-role")
}

pub fn queue_any() -> Key {
    Key::new().str("queue-any")
}

pub fn overdue() -> Key {
    Key::new().str("overdue")
}

pub fn overdue_entry(due_at: Timestamp, id: &str) -> Key {
    overdue().int(due_at).str(id)
}

pub fn leases() -> Key {
    Key::new().str("lease")
}

pub fn lease_entry(until: Timestamp, id: &str) -> Key {
    leases().int(until).str(id)
}

/// A position in case order: the cursor of `for-case`.
pub fn case_position(created_at: Timestamp, id: &str) -> Key {
    Key::new().int(created_at).str(id)
}

pub fn cases() -> Key {
    Key::new().str("case")
}

pub fn case(case: &str) -> Key {
    cases().str(case)
}

pub fn timers() -> Key {
    Key::new().str("timer")
}

pub fn timers_of(run: &str) -> Key {
    timers().str(run)
}

pub fn timer(run: &str, effect: &str) -> Key {
    timers_of(run).str(effect)
}

pub fn due() -> Key {
    Key::new().str("due")
}

pub fn due_entry(at: Timestamp, run: &str, effect: &str) -> Key {
    due().int(at).str(run).str(effect)
}

pub fn sealed(run: &str) -> Key {
    Key::new().str("sealed").str(run)
}

/// Every task log, in a layout with the record apart; in one with it beside,
/// each log is under its task's row.
pub fn task_logs() -> Key {
    Key::new().str("task-log")
}

pub fn task_log(sh: Shards, id: &str) -> Key {
    if sh.beside {
        task(id).str("log")
    } else {
        task_logs().str(id)
    }
}

/// Every history, in a layout with the record apart; in one with it beside,
/// each history is under its task's row.
pub fn histories() -> Key {
    Key::new().str("history")
}

pub fn history(sh: Shards, id: &str) -> Key {
    if sh.beside {
        task(id).str("history")
    } else {
        histories().str(id)
    }
}

pub fn history_entry(sh: Shards, id: &str, seq: u64) -> Key {
    history(sh, id).int(seq_int(seq))
}

/// What a task held before its history began: written with the first change
/// this component records of a task an earlier component wrote, which only a
/// keyspace of layouts 3 to 5 (spelling the record apart) holds.
pub fn history_start(id: &str) -> Key {
    history_starts().str(id)
}

/// Every task's [`history_start`], for the check's walk of them.
pub fn history_starts() -> Key {
    Key::new().str("history-start")
}

pub fn timer_logs() -> Key {
    Key::new().str("timer-log")
}

pub fn timer_log(run: &str, effect: &str) -> Key {
    timer_logs().str(run).str(effect)
}

/// The heads of a layout with the record apart.
pub fn feed_heads() -> Key {
    Key::new().str("feed-head")
}

/// The last sequence number written in `slot`: with the record beside, the
/// key after every entry of the slot, so the head shares its newest
/// entries' page.
pub fn feed_head(sh: Shards, slot: u8) -> Key {
    if sh.beside {
        feed_slot(slot).int(FEED_HEAD_SEQ)
    } else {
        feed_heads().int(i64::from(slot))
    }
}

/// Where a slot's head sits among its entries when the record is beside:
/// no entry reaches it (see [`FEED_END`]).
pub const FEED_HEAD_SEQ: i64 = i64::MAX;

/// One past the last sequence number a feed entry may have.
pub const FEED_END: u64 = i64::MAX as u64;

pub fn feed_floors() -> Key {
    Key::new().str("feed-floor")
}

pub fn feed_floor(slot: u8) -> Key {
    feed_floors().int(i64::from(slot))
}

pub fn feed() -> Key {
    Key::new().str("feed")
}

pub fn feed_slot(slot: u8) -> Key {
    feed().int(i64::from(slot))
}

pub fn feed_entry(slot: u8, seq: u64) -> Key {
    feed_slot(slot).int(seq_int(seq))
}

/// Every `wake` entry: pending tasks at their next reminder or chain step.
pub fn wakes() -> Key {
    Key::new().str("wake")
}

/// Where a pending task waits for its next reminder or chain step.
pub fn wake_entry(at: Timestamp, id: &str) -> Key {
    wakes().int(at).str(id)
}

/// Every `held` entry.
pub fn helds() -> Key {
    Key::new().str("held")
}

/// The `held` entries of one actor, in lease-end order.
pub fn held_by(actor: &str) -> Key {
    helds().str(actor)
}

/// Where `held` lists a claimed task: under its holder, at its lease end.
pub fn held_entry(actor: &str, lease_end: Timestamp, id: &str) -> Key {
    held_by(actor).raw(held_position(lease_end, id).as_bytes())
}

/// A position in `held` order, shared by the index and its cursor.
pub fn held_position(lease_end: Timestamp, id: &str) -> Key {
    Key::new().int(lease_end).str(id)
}

/// The lease end a claim without a lease is listed at: after every lease.
pub const UNLEASED: Timestamp = i64::MAX;

/// Every schedule, by id.
pub fn schedules() -> Key {
    Key::new().str("schedule")
}

pub fn schedule(id: &str) -> Key {
    schedules().str(id)
}

/// Every webhook subscription, by id.
pub fn subscriptions() -> Key {
    Key::new().str("sub")
}

pub fn subscription(id: &str) -> Key {
    subscriptions().str(id)
}

/// Every kind definition, in name order.
pub fn kinds() -> Key {
    Key::new().str("kind")
}

pub fn kind(name: &str) -> Key {
    kinds().str(name)
}

/// Every task by state: `("by-state", state, created-at, id)`.
pub fn by_states() -> Key {
    Key::new().str("by-state")
}

pub fn by_state(state: &str) -> Key {
    by_states().str(state)
}

/// Every task by kind, then state: `("by-kind", kind, state, created-at, id)`.
pub fn by_kinds() -> Key {
    Key::new().str("by-kind")
}

pub fn by_kind(kind: &str, state: &str) -> Key {
    by_kinds().str(kind).str(state)
}

/// Every task with an assignee (a settled one keeps its last holder):
/// `("assigned", actor, created-at, id)`.
pub fn assigneds() -> Key {
    Key::new().str("assigned")
}

pub fn assigned(actor: &str) -> Key {
    assigneds().str(actor)
}

/// Every task by due time (`i64::MAX` for none), then creation:
/// `("by-due", due-at, created-at, id)`.
pub fn by_due() -> Key {
    Key::new().str("by-due")
}

/// Every task by run: `("by-run", run, created-at, id)`.
pub fn by_runs() -> Key {
    Key::new().str("by-run")
}

pub fn by_run(run: &str) -> Key {
    by_runs().str(run)
}

/// Every task in queue order, whatever its state:
/// `("by-priority", rank, created-at, id)` (rank 0 is urgent).
pub fn by_priority() -> Key {
    Key::new().str("by-priority")
}

/// A position in creation order, the tail of every search entry but two.
pub fn created_position(created_at: Timestamp, id: &str) -> Key {
    Key::new().int(created_at).str(id)
}

/// The due time a task with none is listed at in `by-due`: after every one.
pub const NEVER_DUE: Timestamp = i64::MAX;

/// Every shard of the search counters: `("search-count", state, shard)`, a
/// big-endian `i64` like a counter shard. Kept per state only: a call reads
/// its shards ahead with its row, before it knows the task's kind.
pub fn search_counts() -> Key {
    Key::new().str("search-count")
}

pub fn search_count_state(state: &str) -> Key {
    search_counts().str(state)
}

pub fn search_count(state: &str, shard: u8) -> Key {
    search_count_state(state).int(i64::from(shard))
}

/// How far the search entries of a keyspace laid out before search are
/// built: absent, nothing; `built`, every task; otherwise the last task id
/// given its entries.
pub fn search_built() -> Key {
    Key::new().str("meta").str("search")
}

/// The value of [`search_built`] once every task has its search entries.
pub const SEARCH_BUILT: &[u8] = b"built";

/// Every saved view, in name order.
pub fn views() -> Key {
    Key::new().str("view")
}

pub fn view(name: &str) -> Key {
    views().str(name)
}

/// Every bulk job, by id.
pub fn jobs() -> Key {
    Key::new().str("job")
}

pub fn job(id: &str) -> Key {
    jobs().str(id)
}

/// Every chunk of recorded task ids of every job:
/// `("job-item", id, seq)`, a chunk per counting step.
pub fn job_items_all() -> Key {
    Key::new().str("job-item")
}

/// The chunks of one job, in the order they were counted.
pub fn job_items(id: &str) -> Key {
    job_items_all().str(id)
}

pub fn job_item(id: &str, seq: u64) -> Key {
    job_items(id).int(seq_int(seq))
}

/// Every job with work left: `("job-run", id)`, what a sweeper steps.
pub fn job_runs() -> Key {
    Key::new().str("job-run")
}

pub fn job_run(id: &str) -> Key {
    job_runs().str(id)
}

/// A sequence number as a key element. Sequences count calls, one at a
/// time, so they never come near `i64::MAX`; one that did would be stored
/// as the largest element rather than wrap below the others.
pub fn seq_int(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash and the shards it picks are part of layouts 3 and 4: these
    /// values must never change. The first three are FNV-1a's published
    /// vectors.
    #[test]
    fn the_shard_hash_is_pinned() {
        assert_eq!(fnv1a64(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(&[b"foobar"]), 0x8594_4171_f739_67e8);
        // Parts hash as their concatenation.
        assert_eq!(fnv1a64(&[b"foo", b"", b"bar"]), fnv1a64(&[b"foobar"]));
        assert_eq!(Shards::SHARED.task("a"), 12);
        assert_eq!(Shards::SHARED.task("foobar"), 40);
        assert_eq!(Shards::SHARED.timer("foo", "bar"), 42);
        assert_eq!(Shards::SOLE.task("foobar"), 0);
        assert_eq!(
            Shards::new(7).map(|s| s.task("foobar")),
            Some((0x8594_4171_f739_67e8_u64 % 7) as u8)
        );
    }

    #[test]
    fn a_layout_holds_one_to_64_shards() {
        assert_eq!(Shards::new(0), None);
        assert_eq!(Shards::new(65), None);
        assert_eq!(Shards::new(1), Some(Shards::SOLE));
        assert_eq!(Shards::new(64), Some(Shards::SHARED));
        assert_eq!(Shards::for_host(true), Shards::SHARED);
        assert_eq!(Shards::for_host(false), Shards::SOLE);
        assert_eq!(layout_mark(Shards::SOLE), format!("{LAYOUT_VERSION}/1"));
        assert_eq!(layout_mark(Shards::SHARED), format!("{LAYOUT_VERSION}/64"));
        assert!(Shards::SHARED.beside() && Shards::SOLE.beside());
        assert_eq!(Shards::record_apart(64).map(Shards::beside), Some(false));
        assert_eq!(Shards::by_row(64).map(Shards::beside), Some(false));
        assert_eq!(Shards::by_row(64).map(Shards::by_writer), Some(false));
        assert_eq!(Shards::by_row(65), None);
        assert_eq!(Shards::SHARED.writer(3), 3);
        assert_eq!(Shards::SHARED.writer(67), 3);
        assert_eq!(Shards::SOLE.writer(67), 0);
    }

    #[test]
    fn a_shard_key_is_the_counter_name_then_the_shard_as_an_integer() {
        assert_eq!(
            counter_shard(OPEN_TASKS, 5),
            Key::new().str("count").str("open-tasks").int(5)
        );
        let all = Shards::SHARED.keys(LEASED_CLAIMS);
        assert_eq!(all.len(), 64);
        assert_eq!(Shards::SOLE.keys(LEASED_CLAIMS).len(), 1);
        assert_eq!(all[63], counter_shard(LEASED_CLAIMS, 63).into_bytes());
        assert!(all.windows(2).all(|w| w[0] < w[1]), "in shard order");
    }
}
