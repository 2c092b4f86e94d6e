//! The queue's page: the k-way merge of the caller's per-role indexes and the
//! index of tasks open to anyone, and the cursors that resume a page where
//! the last one stopped.
//!
//! Every queue index is ordered by the same position (rank, created-at, id),
//! so the merge reads each only as far as the page needs, and a cursor is
//! nothing but a position in one verb's order, checked on the way in. This
//! module only reads: the verbs that answer or claim from a page live in
//! [`crate::tasks`], and it must never write a row or decide a claim itself.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{self, Elem, Key};
use crate::kv::{Entry, Kv, ScanRequest};
use crate::model::{Page, QueueQuery, StoreError, Task};
use crate::schema;
use crate::store::{self, TaskRow, bad_entry};
use crate::validate;

/// A cursor is a position in one verb's order: a letter naming the verb, then
/// the hex of the encoded position tuple.
pub(crate) fn cursor(verb: char, position: &Key) -> String {
    format!("{verb}{}", keys::to_hex(position.as_bytes()))
}

/// Decodes a cursor of `verb`, checking it has the shape `expected` accepts.
pub(crate) fn parse_cursor(
    verb: char,
    text: &str,
    well_formed: impl Fn(&[Elem]) -> bool,
) -> Result<Vec<u8>, StoreError> {
    let bad = || {
        validate::invalid(format!(
            "after is not a cursor returned by this verb: {:?}",
            text.chars().take(40).collect::<String>()
        ))
    };
    let bytes = text
        .strip_prefix(verb)
        .and_then(keys::from_hex)
        .ok_or_else(bad)?;
    let elems = keys::decode(&bytes).map_err(|_| bad())?;
    if !well_formed(&elems) {
        return Err(bad());
    }
    Ok(bytes)
}

pub(crate) fn is_position(rank: Option<i64>, created: i64, id: &str) -> bool {
    rank.is_none_or(|r| (0..=3).contains(&r))
        && validate::timestamp("", created).is_ok()
        && validate::name("", id).is_ok()
}

/// One queue index read in order from a position on, a chunk at a time.
struct Stream {
    prefix: Key,
    /// Position suffixes still to hand out, in order (reversed for `pop`).
    buffered: Vec<Vec<u8>>,
    /// Where the next chunk starts, or `None` once the index is exhausted.
    next_start: Option<Vec<u8>>,
}

impl Stream {
    fn new(prefix: Key, after: Option<&[u8]>) -> Self {
        let start = match after {
            Some(pos) => prefix.clone().raw(pos).successor(),
            None => prefix.as_bytes().to_vec(),
        };
        Stream {
            prefix,
            buffered: Vec::new(),
            next_start: Some(start),
        }
    }

    /// The scan that refills this stream, if it has nothing buffered and
    /// its index is not exhausted.
    fn wants(&self, chunk: u32) -> Option<ScanRequest> {
        match (&self.next_start, self.buffered.is_empty()) {
            (Some(start), true) => Some(ScanRequest {
                start: start.clone(),
                end: Some(self.prefix.prefix_end()),
                limit: chunk,
                reverse: false,
            }),
            _ => None,
        }
    }

    /// Takes the answer to [`Stream::wants`]'s scan.
    fn fill(&mut self, entries: Vec<Entry>, chunk: u32) -> Result<(), StoreError> {
        self.next_start = None;
        if entries.len() == chunk as usize
            && let Some((last, _)) = entries.last()
        {
            let mut next = last.clone();
            next.push(0);
            self.next_start = Some(next);
        }
        for (k, _) in entries.into_iter().rev() {
            let pos = k
                .strip_prefix(self.prefix.as_bytes())
                .ok_or_else(|| bad_entry("queue"))?;
            self.buffered.push(pos.to_vec());
        }
        Ok(())
    }

    fn head(&self) -> Option<&[u8]> {
        self.buffered.last().map(Vec::as_slice)
    }
}

/// The checked roles (deduplicated) and cursor of a queue query.
pub(crate) fn queue_input(
    query: &QueueQuery,
) -> Result<(Vec<String>, Option<Vec<u8>>), StoreError> {
    let roles = validate::names("roles", &query.roles)?;
    if let Some(actor) = &query.actor {
        validate::name("actor", actor)?;
    }
    validate::limit("limit", query.limit)?;
    let after = match &query.after {
        Some(text) => Some(parse_cursor(
            'q',
            text,
            |e| matches!(e, [Elem::Int(r), Elem::Int(c), Elem::Str(id)] if is_position(Some(*r), *c, id)),
        )?),
        None => None,
    };
    Ok((roles, after))
}

/// Queued rows with their positions in queue order.
pub(crate) type Positioned = Vec<(Vec<u8>, TaskRow)>;

/// The tasks of a queue page after `after` that `actor` may take, with their
/// positions: the first `limit`, and possibly one more (read with an actor,
/// whose tasks are only known once their rows are), and whether at least one
/// more than `limit` follows. With `leased_shards`, the rows' leased-claims
/// shards are read with them, for a caller about to claim one.
///
/// A caller about to claim (`leased_shards`) takes at most `limit` tasks and
/// has no page to continue, so its first run reads the position past them
/// from its index but not its row, with an actor too: every row a claim
/// reads is one more that a claim of it elsewhere conflicts with, and its
/// log and shard come with it. Once a task of the run excludes the actor,
/// the walk reads on as a page does, so a head of excluded tasks costs no
/// more batches than a page. `more` may then say only that a position
/// follows, which may be a task the actor is excluded from.
///
/// The walk checks the layout itself, so that a page costs its scans and its
/// batches of rows and nothing more: the mark rides in the first batch, and
/// is read alone only when there is no row to read. Anything met before it
/// that does not decode is reported as the layout's fault when the layout is
/// wrong, since that is the likelier cause.
pub(crate) fn walk_queue<K: Kv + ?Sized>(
    kv: &mut K,
    roles: &[String],
    actor: Option<&str>,
    after: Option<&[u8]>,
    limit: usize,
    leased_shards: bool,
) -> Result<(Positioned, bool), StoreError> {
    let mut layout_read = false;
    let walked = merge_queue(
        kv,
        roles,
        actor,
        after,
        limit,
        leased_shards,
        &mut layout_read,
    );
    if let Err(StoreError::Corrupt(_)) = &walked
        && !layout_read
    {
        store::check_layout(kv, false)?;
    }
    walked
}

/// The body of [`walk_queue`]; `layout_read` says whether the layout mark
/// has been read and found good.
fn merge_queue<K: Kv + ?Sized>(
    kv: &mut K,
    roles: &[String],
    actor: Option<&str>,
    after: Option<&[u8]>,
    limit: usize,
    leased_shards: bool,
    layout_read: &mut bool,
) -> Result<(Positioned, bool), StoreError> {
    // As many entries per scan as a page of `limit` needs: one more than it
    // shows, so a page that is exactly full knows whether more follow.
    let chunk = limit as u32 + 1;
    let mut streams: Vec<Stream> = roles
        .iter()
        .map(|r| schema::queue_role(r))
        .chain([schema::queue_any()])
        .map(|p| Stream::new(p, after))
        .collect();
    let want = limit + 1;
    let mut found: Positioned = Vec::new();
    let mut exhausted = false;
    // The position past a claim's tasks, kept for the next run when a task
    // before it was dropped.
    let mut carried: Option<Vec<u8>> = None;
    // Positions are taken from the merge in runs and their rows read in one
    // batch per run. Without an actor nothing is dropped, so the position
    // past the page only says that more follow and its row is not read; with
    // one, tasks that exclude the actor are dropped and the merge reads on
    // (a claim's first run, too, reads no row past the tasks it may take).
    let mut spare_unread = actor.is_none() || leased_shards;
    while found.len() < want && !exhausted {
        let mut positions: Vec<Vec<u8>> = carried.take().into_iter().collect();
        while positions.len() < want - found.len() {
            match next_position(kv, &mut streams, chunk)? {
                Some(pos) => positions.push(pos),
                None => {
                    exhausted = true;
                    break;
                }
            }
        }
        let spare = if spare_unread && found.len() + positions.len() > limit {
            positions.pop()
        } else {
            None
        };
        let mut ids = Vec::with_capacity(positions.len());
        for pos in &positions {
            ids.push(
                match keys::decode(pos)
                    .map_err(|_| bad_entry("queue"))?
                    .as_slice()
                {
                    [Elem::Int(_), Elem::Int(_), Elem::Str(id)] => id.clone(),
                    _ => return Err(bad_entry("queue")),
                },
            );
        }
        let along = store::Along {
            layout: !*layout_read,
            leased_shards,
        };
        let rows = store::indexed_rows(kv, &ids, "the queue index", along)?;
        *layout_read = true;
        for (pos, row) in positions.into_iter().zip(rows) {
            if actor.is_some_and(|a| row.task.excluded_actors.iter().any(|x| x == a)) {
                spare_unread = actor.is_none();
                continue;
            }
            found.push((pos, row));
        }
        if let Some(spare) = spare {
            if found.len() >= limit {
                return Ok((found, true));
            }
            carried = Some(spare);
        }
    }
    let more = found.len() > limit;
    Ok((found, more))
}

/// The next position of the k-way merge, taken from every stream it heads:
/// a task offered to several of the caller's roles sits at the same position
/// in each of their indexes, and is taken once.
fn next_position<K: Kv + ?Sized>(
    kv: &mut K,
    streams: &mut [Stream],
    chunk: u32,
) -> Result<Option<Vec<u8>>, StoreError> {
    // Every stream that has run dry is refilled in one crossing: the merge
    // needs each one's head before it knows which is smallest, and most
    // often one of them (the index of tasks open to anyone) is empty.
    let (refill, requests): (Vec<usize>, Vec<ScanRequest>) = streams
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.wants(chunk).map(|r| (i, r)))
        .unzip();
    let answers = store::scan_all(kv, &requests)?;
    for (i, entries) in refill.into_iter().zip(answers) {
        streams[i].fill(entries, chunk)?;
    }
    let mut smallest: Option<Vec<u8>> = None;
    for s in streams.iter() {
        if let Some(h) = s.head()
            && smallest.as_deref().is_none_or(|m| h < m)
        {
            smallest = Some(h.to_vec());
        }
    }
    if let Some(pos) = &smallest {
        for s in streams.iter_mut() {
            if s.buffered.last() == Some(pos) {
                s.buffered.pop();
            }
        }
    }
    Ok(smallest)
}

/// A page of `found` (positions and tasks, in order); `more` says whether at
/// least one more task follows the last one.
pub(crate) fn page(found: Vec<(Vec<u8>, Task)>, more: bool, verb: char) -> Page {
    let next = if more {
        found
            .last()
            .map(|(pos, _)| cursor(verb, &Key::new().raw(pos)))
    } else {
        None
    };
    Page {
        tasks: found.into_iter().map(|(_, t)| t).collect(),
        next,
    }
}
