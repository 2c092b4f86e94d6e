//! Reading the change record: a task's history, the feed from a position,
//! and trimming both.
//!
//! The feed is kept per writer slot (see [`crate::schema`]): within a slot,
//! a higher sequence number always committed later, so a reader's position
//! is one sequence number per slot, and everything at or below it is read.
//! Across slots nothing is ordered but the changes of one task or timer:
//! each entry names its predecessor, and a read gives an entry only once
//! that predecessor lies at or behind the reader's position. The change
//! committed first among those not yet read always qualifies (its
//! predecessor committed before it), so every read that has something to
//! give gives something. A position whose entries were trimmed, or that
//! names entries this feed never had, is answered `gone`: a reader never
//! passes a gap. This module only reads and trims the record; the writes
//! that append to it live in `store`, and it must never change a task or a
//! timer.

#[allow(unused_imports)]
use crate::prelude::*;
use alloc::collections::VecDeque;

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{
    Change, FeedEntry, FeedPage, FeedPlace, FeedRead, HistoryEntry, StoreError, Timestamp,
    TrimOutcome,
};
use crate::schema::{self, MAX_SHARDS, Shards};
use crate::store::{self, FeedRow, Position, decode_seq};
use crate::validate;

/// Entries asked for per scan of the record: small enough that a scan of
/// the largest entries the input rules allow stays far inside a host's
/// per-scan byte cap.
const RECORD_CHUNK: u32 = 64;

/// Bytes of entries a read takes in before it stops short of its limit
/// (always after at least one entry), so that a page of large entries
/// stays far inside a host's per-call read budget.
const READ_BUDGET: usize = 8 << 20;

/// Most history entries one `trim` call removes along with the feed
/// entries it removes: a task with a long history loses it over several
/// calls rather than past a host's write budget in one.
const HISTORY_BUDGET: u64 = 4 * validate::MAX_LIMIT as u64;

/// A reader's position: the last sequence number read in each slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor([u64; MAX_SHARDS as usize]);

impl Cursor {
    pub const START: Cursor = Cursor([0; MAX_SHARDS as usize]);

    pub fn get(&self, slot: u8) -> u64 {
        self.0[usize::from(slot)]
    }

    /// The sequence number of every slot, in slot order: a fixed-size form
    /// for hosts that seal positions.
    pub fn seqs(&self) -> [u64; MAX_SHARDS as usize] {
        self.0
    }

    /// The position [`seqs`](Self::seqs) gave, if every slot's number is
    /// one a position may hold.
    pub fn from_seqs(seqs: [u64; MAX_SHARDS as usize]) -> Option<Cursor> {
        seqs.iter()
            .all(|&s| s <= schema::FEED_END)
            .then_some(Cursor(seqs))
    }

    fn set(&mut self, slot: u8, seq: u64) {
        self.0[usize::from(slot)] = seq;
    }

    /// `f`, then `slot.seq` for every slot read into, `_` between them:
    /// short where few slots are in use, and nothing a URL or an HTTP
    /// header must escape.
    pub fn encode(&self) -> String {
        let mut out = String::from("f");
        let mut first = true;
        for (slot, &seq) in self.0.iter().enumerate() {
            if seq == 0 {
                continue;
            }
            if !first {
                out.push('_');
            }
            first = false;
            out.push_str(&format!("{slot}.{seq}"));
        }
        out
    }

    /// Parses a position as [`encode`](Self::encode) spells it, and only
    /// so: each slot once, in order, every number without a sign or a
    /// leading zero.
    pub fn parse(text: &str) -> Result<Cursor, StoreError> {
        let bad = || {
            validate::invalid(format!(
                "after is not a position of the feed: {:?}",
                text.chars().take(40).collect::<String>()
            ))
        };
        let body = text.strip_prefix('f').ok_or_else(bad)?;
        let mut cursor = Cursor::START;
        if body.is_empty() {
            return Ok(cursor);
        }
        let mut last: Option<u8> = None;
        for part in body.split('_') {
            let (slot, seq) = part.split_once('.').ok_or_else(bad)?;
            let slot: u8 = canonical(slot).ok_or_else(bad)?;
            let seq: u64 = canonical(seq).ok_or_else(bad)?;
            if slot >= MAX_SHARDS || seq == 0 || last.is_some_and(|l| l >= slot) {
                return Err(bad());
            }
            last = Some(slot);
            cursor.set(slot, seq);
        }
        Ok(cursor)
    }
}

/// A decimal number as [`Cursor::encode`] writes one.
fn canonical<T: core::str::FromStr>(digits: &str) -> Option<T> {
    let plain = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    plain.then(|| digits.parse().ok()).flatten()
}

/// The heads and floors of every slot of the keyspace, read in one batch
/// with the layout mark; `None` for a keyspace not laid out yet.
pub(crate) struct Slots {
    pub(crate) shards: Shards,
    pub(crate) head: Cursor,
    pub(crate) floor: Cursor,
}

pub(crate) fn read_slots<K: Kv + ?Sized>(kv: &mut K) -> Result<Option<Slots>, StoreError> {
    let expected = store::expected_shards(kv);
    let mut keys = vec![schema::layout().into_bytes()];
    keys.extend((0..expected.count()).map(|s| schema::feed_head(expected, s).into_bytes()));
    keys.extend((0..expected.count()).map(|s| schema::feed_floor(s).into_bytes()));
    let values = kv.get_many(&keys)?;
    if values.len() != keys.len() {
        return Err(StoreError::Storage(
            "get-many answered another number of values than keys".to_owned(),
        ));
    }
    let Some(shards) = store::known_layout(values[0].as_deref())? else {
        return Ok(None);
    };
    let n = usize::from(expected.count());
    let mut heads: Vec<Option<Vec<u8>>> = values[1..=n].to_vec();
    let mut floors: Vec<Option<Vec<u8>>> = values[n + 1..].to_vec();
    // A keyspace laid out otherwise than its host would lay one out: its
    // heads are spelt as its mark says, and it may have more slots.
    let from = if shards.beside() == expected.beside() {
        expected.count().min(shards.count())
    } else {
        heads.clear();
        floors.clear();
        0
    };
    if shards.count() > from {
        let rest: Vec<Vec<u8>> = (from..shards.count())
            .flat_map(|s| {
                [
                    schema::feed_head(shards, s).into_bytes(),
                    schema::feed_floor(s).into_bytes(),
                ]
            })
            .collect();
        let more = kv.get_many(&rest)?;
        if more.len() != rest.len() {
            return Err(StoreError::Storage(
                "get-many answered another number of values than keys".to_owned(),
            ));
        }
        for pair in more.chunks(2) {
            heads.push(pair[0].clone());
            floors.push(pair[1].clone());
        }
    }
    let mut slots = Slots {
        shards,
        head: Cursor::START,
        floor: Cursor::START,
    };
    for s in 0..shards.count() {
        let i = usize::from(s);
        let head = decode_seq(&format!("the feed head of slot {s}"), heads[i].as_deref())?;
        let floor = decode_seq(&format!("the feed floor of slot {s}"), floors[i].as_deref())?;
        if floor > head {
            return Err(StoreError::Corrupt(format!(
                "slot {s} of the feed is trimmed to {floor}, past its head {head}"
            )));
        }
        slots.head.set(s, head);
        slots.floor.set(s, floor);
    }
    Ok(Some(slots))
}

/// One slot's entries, read a chunk at a time from just after `next`.
struct Stream {
    slot: u8,
    /// The last sequence number read from storage.
    read: u64,
    head: u64,
    buffered: VecDeque<(u64, FeedRow)>,
}

impl Stream {
    fn more(&self) -> bool {
        self.read < self.head
    }

    /// Reads up to `chunk` more entries; answers the bytes read.
    fn fill<K: Kv + ?Sized>(&mut self, kv: &mut K, chunk: u32) -> Result<usize, StoreError> {
        let want = chunk.min(u32::try_from(self.head - self.read).unwrap_or(u32::MAX));
        let start = schema::feed_entry(self.slot, self.read + 1);
        // Up to the head, never past it: with the record beside, the head's
        // own key follows the slot's entries.
        let end = schema::feed_entry(self.slot, self.head + 1).into_bytes();
        let prefix = schema::feed_slot(self.slot);
        let entries = kv.scan(start.as_bytes(), Some(&end), want, false)?;
        let mut bytes = 0;
        for (k, v) in entries {
            bytes += k.len() + v.len();
            let seq = match store::suffix(&k, &prefix)?.as_slice() {
                [Elem::Int(q)] if *q > 0 => *q as u64,
                _ => return Err(store::bad_entry("feed")),
            };
            if seq != self.read + 1 {
                return Err(StoreError::Corrupt(format!(
                    "slot {} of the feed has no entry {} below its head {}",
                    self.slot,
                    self.read + 1,
                    self.head
                )));
            }
            let row = store::decode_feed_row(&v)
                .map_err(|e| StoreError::Corrupt(format!("feed entry {}.{seq}: {e}", self.slot)))?;
            self.read = seq;
            self.buffered.push_back((seq, row));
        }
        if self.buffered.is_empty() && self.more() {
            return Err(StoreError::Corrupt(format!(
                "slot {} of the feed has no entry {} below its head {}",
                self.slot,
                self.read + 1,
                self.head
            )));
        }
        Ok(bytes)
    }
}

/// The streams of every slot with entries after `from`.
fn streams(slots: &Slots, from: &Cursor) -> Vec<Stream> {
    (0..slots.shards.count())
        .filter(|&s| slots.head.get(s) > from.get(s))
        .map(|s| Stream {
            slot: s,
            read: from.get(s),
            head: slots.head.get(s),
            buffered: VecDeque::new(),
        })
        .collect()
}

/// How many entries to read per slot at first, for a read of `limit`
/// entries over `active` slots.
fn first_chunk(limit: u32, active: usize) -> u32 {
    let per = limit / u32::try_from(active.max(1)).unwrap_or(u32::MAX) + 1;
    per.clamp(1, RECORD_CHUNK)
}

/// `history`: a task's entries after `after`, oldest first.
pub fn history<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    after: Option<u64>,
    limit: u32,
) -> Result<Vec<HistoryEntry>, StoreError> {
    validate::name("id", id)?;
    validate::limit("limit", limit)?;
    let expected = store::expected_shards(kv);
    kv.prefetch(&[
        schema::layout().into_bytes(),
        schema::task(id).into_bytes(),
        schema::history_start(id).into_bytes(),
        schema::task_log(expected, id).into_bytes(),
    ])?;
    store::check_layout(kv, false)?;
    let Some(row) = store::load_task(kv, id)? else {
        return Err(StoreError::NotFound(id.to_owned()));
    };
    let sh = store::shards(kv)?;
    let mut out: Vec<HistoryEntry> = Vec::new();
    if after.is_none()
        && let Some(first) = before_history(kv, sh, &row)?
    {
        out.push(first);
    }
    let mark = kv.get(schema::layout().as_bytes())?;
    let from = after.map_or(1, |a| a.saturating_add(1));
    if !store::history_in_feed(mark.as_deref()) {
        let (keyed, _) = keyed_history(kv, sh, id, from, None, limit, out.len())?;
        out.extend(keyed);
        return Ok(out);
    }
    let Some(log) = store::load_task_log(kv, sh, id)? else {
        return Ok(out);
    };
    let from = from.max(log.first);
    // Followed back from the newest change, keeping only the oldest that
    // fit: memory holds one page, however long the history.
    let room = (limit as usize).saturating_sub(out.len());
    // From the nearest kept entry at or past the page's end: a page costs
    // its length and a few steps, wherever it lies in a long history.
    let upto = from.saturating_add(room as u64).saturating_sub(1);
    let start = store::walk_start(kv, sh, id, &log, upto)?;
    let mut newest_first: VecDeque<HistoryEntry> = VecDeque::new();
    let lowest = store::walk_chain(kv, id, &start, from, |row| {
        newest_first.push_back(row.entry);
        if newest_first.len() > room {
            newest_first.pop_front();
        }
        true
    })?;
    // What lies below the changes the feed still holds: entries kept under
    // their own keys (a last entry trimmed from the feed, or written by an
    // earlier layout).
    let (keyed, bytes) = keyed_history(kv, sh, id, from, Some(lowest), limit, out.len())?;
    out.extend(keyed);
    let mut bytes = bytes;
    for entry in newest_first.into_iter().rev() {
        if out.len() >= limit as usize || (!out.is_empty() && bytes >= READ_BUDGET) {
            break;
        }
        bytes += entry_bytes(&entry);
        out.push(entry);
    }
    Ok(out)
}

/// About how many bytes an entry takes, for the read budget.
fn entry_bytes(e: &HistoryEntry) -> usize {
    64 + e.verb.len()
        + e.actor.as_ref().map_or(0, String::len)
        + e.assignee.as_ref().map_or(0, String::len)
        + e.candidate_roles.iter().map(String::len).sum::<usize>()
        + e.excluded_actors.iter().map(String::len).sum::<usize>()
}

/// The entries of task `id`'s history kept under their own keys, numbered
/// `from` up to `below` (no bound without it), oldest first, as many as fit
/// beside `out` in `limit` and the read budget; answers them and the bytes
/// read.
fn keyed_history<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    id: &str,
    from: u64,
    below: Option<u64>,
    limit: u32,
    already: usize,
) -> Result<(Vec<HistoryEntry>, usize), StoreError> {
    let prefix = schema::history(sh, id);
    let clamp = |n: u64| i64::try_from(n).map_or(i64::MAX as u64, |_| n);
    let mut start = schema::history_entry(sh, id, clamp(from.max(1))).into_bytes();
    let end = match below {
        Some(b) => schema::history_entry(sh, id, clamp(b)).into_bytes(),
        None => prefix.prefix_end(),
    };
    let mut found: Vec<HistoryEntry> = Vec::new();
    let mut bytes = 0usize;
    let taken = |found: &Vec<HistoryEntry>| already + found.len();
    while taken(&found) < limit as usize && (taken(&found) == 0 || bytes < READ_BUDGET) {
        if start >= end {
            break;
        }
        let want = (limit - taken(&found) as u32).min(RECORD_CHUNK);
        let entries = kv.scan(&start, Some(&end), want, false)?;
        let done = entries.len() < want as usize;
        for (k, v) in entries {
            bytes += k.len() + v.len();
            let seq = match store::suffix(&k, &prefix)?.as_slice() {
                [Elem::Int(q)] if *q > 0 => *q as u64,
                _ => return Err(store::bad_entry("history")),
            };
            let row = store::decode_history(&v)
                .map_err(|e| StoreError::Corrupt(format!("history {id}/{seq}: {e}")))?;
            if row.entry.seq != seq {
                return Err(StoreError::Corrupt(format!(
                    "history {id}/{seq}: the entry says it is {}",
                    row.entry.seq
                )));
            }
            start = k;
            start.push(0);
            found.push(row.entry);
        }
        if done {
            break;
        }
    }
    Ok((found, bytes))
}

/// `entry-place`: where entry `seq` of task `id`'s history sits in the
/// feed, as its history row recorded it; none when the entry is not kept.
pub fn entry_place<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    seq: u64,
) -> Result<Option<FeedPlace>, StoreError> {
    validate::name("id", id)?;
    // Sequence numbers start at 1, and a key holds at most `i64::MAX`.
    let kept = seq != 0 && seq <= i64::MAX as u64;
    let expected = store::expected_shards(kv);
    let mut first = vec![
        schema::layout().into_bytes(),
        schema::task(id).into_bytes(),
        schema::task_log(expected, id).into_bytes(),
    ];
    if kept {
        first.push(schema::history_entry(expected, id, seq).into_bytes());
    }
    kv.prefetch(&first)?;
    store::check_layout(kv, false)?;
    if kv.get(schema::task(id).as_bytes())?.is_none() {
        return Err(StoreError::NotFound(id.to_owned()));
    }
    if !kept {
        return Ok(None);
    }
    let sh = store::shards(kv)?;
    let Some(log) = store::load_task_log(kv, sh, id)? else {
        return Ok(None);
    };
    let mark = kv.get(schema::layout().as_bytes())?;
    let in_feed = store::history_in_feed(mark.as_deref());
    Ok(
        store::load_history_entry(kv, sh, id, &log, seq, in_feed)?.map(|row| FeedPlace {
            slot: u32::from(row.position.slot),
            seq: row.position.seq,
        }),
    )
}

/// The entry numbered 0 that opens the history of a task written before
/// history was kept, in a keyspace laid out before the record (layouts 3 to
/// 5): what the task held when this component first changed it, kept then,
/// or as it stands now, at its creation, if it never has. A task whose first
/// change an earlier component recorded without keeping the rest answers
/// the state that entry records it had, with the assignee, lease and
/// candidates that entry records after it (nothing earlier was kept), at
/// that change's time. None for a task opened with its history, or whose
/// entry 1 was trimmed.
fn before_history<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    row: &store::TaskRow,
) -> Result<Option<HistoryEntry>, StoreError> {
    let id = &row.task.id;
    let mark = kv.get(schema::layout().as_bytes())?;
    if store::records_from_the_start(mark.as_deref()) {
        return Ok(None);
    }
    let Some(log) = store::load_task_log(kv, sh, id)? else {
        return Ok(Some(store::before_history(&row.task, row.task.created_at)));
    };
    if log.first > 1 {
        // Trimmed with the entries after it: the record starts later now.
        return Ok(None);
    }
    if let Some(start) = store::load_history_start(kv, id)? {
        return Ok(Some(start));
    }
    let in_feed = store::history_in_feed(mark.as_deref());
    let Some(first) = store::load_history_entry(kv, sh, id, &log, 1, in_feed)? else {
        return Err(StoreError::Corrupt(format!(
            "the history of task {id} starts at 1, which is missing"
        )));
    };
    let first = first.entry;
    Ok(first.before.map(|state| HistoryEntry {
        seq: 0,
        verb: store::BEFORE_HISTORY.to_owned(),
        actor: None,
        before: None,
        after: state,
        ..first
    }))
}

/// Whether the entry a feed row follows is at or behind `at`.
fn follows_read(row: &FeedRow, at: &Cursor, slots: &Slots) -> Result<bool, StoreError> {
    match row.prev {
        None => Ok(true),
        Some(p) if p.slot >= slots.shards.count() || p.seq > slots.head.get(p.slot) => {
            Err(StoreError::Corrupt(format!(
                "a feed entry follows {}.{}, which the feed has never held",
                p.slot, p.seq
            )))
        }
        Some(p) => Ok(p.seq <= at.get(p.slot)),
    }
}

/// `feed`: up to `limit` entries after `after`, each only once its task's
/// or timer's previous change has been given.
pub fn feed<K: Kv + ?Sized>(
    kv: &mut K,
    after: Option<&str>,
    limit: u32,
) -> Result<FeedRead, StoreError> {
    validate::limit("limit", limit)?;
    let asked = after.map(Cursor::parse).transpose()?;
    let Some(slots) = read_slots(kv)? else {
        // Nothing was ever written: only the start is a position here.
        return Ok(match asked {
            Some(c) if c != Cursor::START => FeedRead::Gone(Cursor::START.encode()),
            _ => FeedRead::Page(FeedPage {
                entries: Vec::new(),
                next: Cursor::START.encode(),
                head: Cursor::START.encode(),
            }),
        });
    };
    let head = slots.head.encode();
    let from = match asked {
        None => slots.floor,
        Some(c) => {
            let gone = (0..MAX_SHARDS).any(|s| {
                let at = c.get(s);
                if s >= slots.shards.count() {
                    at != 0
                } else {
                    at < slots.floor.get(s) || at > slots.head.get(s)
                }
            });
            if gone {
                return Ok(FeedRead::Gone(head));
            }
            c
        }
    };
    let mut at = from;
    let mut streams = streams(&slots, &from);
    let chunk = first_chunk(limit, streams.len());
    let mut bytes = 0usize;
    let mut entries: Vec<FeedEntry> = Vec::new();
    loop {
        if entries.len() >= limit as usize {
            break;
        }
        // Every stream with more to read keeps something buffered, while the
        // read has budget left (or has given nothing yet).
        for s in streams.iter_mut() {
            if s.buffered.is_empty() && s.more() && (entries.is_empty() || bytes < READ_BUDGET) {
                let chunk = if bytes < READ_BUDGET { chunk } else { 1 };
                bytes += s.fill(kv, chunk)?;
            }
        }
        let mut best: Option<(Timestamp, u8, usize)> = None;
        for (i, s) in streams.iter().enumerate() {
            if let Some((_, row)) = s.buffered.front()
                && follows_read(row, &at, &slots)?
                && best.is_none_or(|(t, slot, _)| (row.at(), s.slot) < (t, slot))
            {
                best = Some((row.at(), s.slot, i));
            }
        }
        let Some((_, _, i)) = best else {
            if streams.iter().any(|s| !s.buffered.is_empty()) && !entries.is_empty() {
                // What is buffered waits on entries past this read's budget.
                break;
            }
            if streams.iter().any(|s| !s.buffered.is_empty()) {
                return Err(StoreError::Corrupt(
                    "the feed's entries name predecessors that never come before them".into(),
                ));
            }
            break;
        };
        let s = &mut streams[i];
        let Some((seq, row)) = s.buffered.pop_front() else {
            break;
        };
        at.set(s.slot, seq);
        entries.push(FeedEntry {
            position: at.encode(),
            change: row.change,
        });
    }
    Ok(FeedRead::Page(FeedPage {
        entries,
        next: at.encode(),
        head,
    }))
}

/// What trimming removes: entries recorded before `before`, and the oldest
/// while more than `keep` are kept.
#[derive(Clone, Copy, Debug)]
struct Rule {
    before: Option<Timestamp>,
    keep: Option<u64>,
}

impl Rule {
    /// Whether the oldest remaining entry, recorded at `at`, goes, with
    /// `kept` entries in the feed.
    fn removes(&self, at: Timestamp, kept: u64) -> bool {
        self.before.is_some_and(|b| at < b) || self.keep.is_some_and(|k| kept > k)
    }
}

/// `trim`: removes the oldest feed entries the rule names, and with each
/// task entry the history it covers, up to `limit` feed entries.
pub fn trim<K: Kv + ?Sized>(
    kv: &mut K,
    before: Option<Timestamp>,
    keep: Option<u64>,
    limit: u32,
) -> Result<TrimOutcome, StoreError> {
    if let Some(b) = before {
        validate::timestamp("before", b)?;
    }
    validate::limit("limit", limit)?;
    if before.is_none() && keep.is_none() {
        return Err(validate::invalid(
            "before and keep are both missing: give at least one",
        ));
    }
    let rule = Rule { before, keep };
    let Some(slots) = read_slots(kv)? else {
        return Ok(TrimOutcome::default());
    };
    let mut kept: u64 = (0..slots.shards.count())
        .map(|s| slots.head.get(s) - slots.floor.get(s))
        .sum();
    let mut floor = slots.floor;
    let mut streams = streams(&slots, &slots.floor);
    let chunk = first_chunk(limit, streams.len());
    let mut removed: Vec<(Position, FeedRow)> = Vec::new();
    // Whether the rule would remove one more, once `limit` are taken.
    let mut more = false;
    let mut bytes = 0usize;
    loop {
        // Past the read budget the call stops where it is, and says to call
        // again, rather than read on past a host's per-call budget.
        if bytes >= READ_BUDGET && !removed.is_empty() {
            more = streams.iter().any(|s| match s.buffered.front() {
                Some((_, r)) => rule.removes(r.at(), kept),
                None => s.more(),
            });
            break;
        }
        for s in streams.iter_mut() {
            if s.buffered.is_empty() && s.more() {
                let chunk = if bytes < READ_BUDGET { chunk } else { 1 };
                bytes += s.fill(kv, chunk)?;
            }
        }
        let oldest = streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.buffered.front().map(|(_, r)| (r.at(), s.slot, i)))
            .min();
        let Some((at, _, i)) = oldest else {
            break;
        };
        if !rule.removes(at, kept) {
            break;
        }
        if removed.len() >= limit as usize {
            more = true;
            break;
        }
        let s = &mut streams[i];
        let Some((seq, row)) = s.buffered.pop_front() else {
            break;
        };
        removed.push((Position { slot: s.slot, seq }, row));
        kept -= 1;
    }
    if !removed.is_empty() {
        // A trim is a write: an earlier build must not trim beside it.
        store::claim_layout(kv)?;
    }
    // The logs of what goes, in batches, before any of it is written.
    let mut ahead: Vec<Vec<u8>> = Vec::new();
    for (_, row) in &removed {
        match &row.change {
            Change::Task(t) => ahead.push(schema::task_log(slots.shards, &t.id).into_bytes()),
            Change::Timer(t) => {
                ahead.push(schema::timer_log(&t.run, &t.effect).into_bytes());
                ahead.push(schema::timer(&t.run, &t.effect).into_bytes());
            }
        }
    }
    ahead.sort_unstable();
    ahead.dedup();
    for batch in ahead.chunks(1024) {
        kv.prefetch(batch)?;
    }
    let mut out = TrimOutcome::default();
    let mut history_left = HISTORY_BUDGET;
    for (position, row) in removed {
        if let Change::Task(t) = &row.change {
            let (gone, whole) = trim_history(
                kv,
                slots.shards,
                &t.id,
                &t.entry,
                position,
                &mut history_left,
            )?;
            out.history_removed += gone;
            if !whole {
                // The rest of that history goes in a later call, with this
                // entry.
                more = true;
                break;
            }
        }
        if let Change::Timer(t) = &row.change {
            let log_key = schema::timer_log(&t.run, &t.effect);
            let last = kv
                .get(log_key.as_bytes())?
                .map(|b| store::decode_position(&b))
                .transpose()
                .map_err(|e| {
                    StoreError::Corrupt(format!("the log of timer {}/{}: {e}", t.run, t.effect))
                })?;
            // A retired timer's log is needed only while its last entry is
            // in the feed, for a re-armed timer to follow it.
            if last == Some(position)
                && kv
                    .get(schema::timer(&t.run, &t.effect).as_bytes())?
                    .is_none()
            {
                kv.delete(log_key.as_bytes())?;
            }
        }
        kv.delete(schema::feed_entry(position.slot, position.seq).as_bytes())?;
        floor.set(position.slot, position.seq);
        out.feed_removed += 1;
    }
    for s in 0..slots.shards.count() {
        if floor.get(s) != slots.floor.get(s) {
            kv.set(
                schema::feed_floor(s).as_bytes(),
                &floor.get(s).to_be_bytes(),
            )?;
        }
    }
    out.more = more;
    Ok(out)
}

/// Removes task `id`'s history up to `entry`, recorded at `position`,
/// never its last entry, spending at most `left` removals; answers how many
/// went, and whether everything up to `entry` did. When `entry` is the
/// task's last, it is kept under its own history key, since its feed entry,
/// where the history kept it, is going.
fn trim_history<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    id: &str,
    entry: &HistoryEntry,
    position: Position,
    left: &mut u64,
) -> Result<(u32, bool), StoreError> {
    let Some(mut log) = store::load_task_log(kv, sh, id)? else {
        return Ok((0, true));
    };
    let seq = entry.seq;
    if seq == log.last && log.position == position {
        kv.set(
            schema::history_entry(sh, id, seq).as_bytes(),
            &store::encode_row(&store::HistoryRow {
                entry: entry.clone(),
                position,
            })?,
        )?;
    }
    let target = seq.min(log.last.saturating_sub(1)) + 1;
    if target <= log.first {
        return Ok((0, true));
    }
    let reach = log.first.saturating_add(*left).min(target);
    let mut gone = 0u32;
    for k in log.first..reach {
        kv.delete(schema::history_entry(sh, id, k).as_bytes())?;
        gone += 1;
    }
    *left -= reach - log.first;
    log.first = reach;
    kv.set(
        schema::task_log(sh, id).as_bytes(),
        &store::encode_row(&log)?,
    )?;
    Ok((gone, reach == target))
}
