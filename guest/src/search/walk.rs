//! Walking a plan: the merge of its ranges in order, a chunk of each at a
//! time (every range that ran dry refilled in one crossing), with the rows of what it takes read in batches, stopping at the
//! page's end or at the scan budget, whichever comes first. This module
//! only reads.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{self, Elem, Key};
use crate::kv::{Entry, Kv, ScanRequest};
use crate::model::{StoreError, Task};
use crate::store::{self, bad_entry};

use super::plan::Plan;

/// How many entries a range is read ahead by at a time.
const CHUNK: u32 = 128;

/// One range of a plan, read in order from a position on.
struct Stream {
    prefix: Key,
    /// Positions still to hand out, next last.
    buffered: Vec<Vec<u8>>,
    /// The bounds still unread, or `None` once the range is exhausted.
    unread: Option<(Vec<u8>, Vec<u8>)>,
    reverse: bool,
}

impl Stream {
    fn new(prefix: Key, plan: &Plan, after: Option<&[u8]>) -> Self {
        let with = |pos: &[u8]| prefix.clone().raw(pos).into_bytes();
        let mut start = plan
            .lo
            .as_deref()
            .map_or_else(|| prefix.as_bytes().to_vec(), with);
        let mut end = plan.hi.as_deref().map_or_else(|| prefix.prefix_end(), with);
        if let Some(pos) = after {
            if plan.reverse {
                end = end.min(with(pos));
            } else {
                start = start.max(prefix.clone().raw(pos).successor());
            }
        }
        let unread = (start < end).then_some((start, end));
        Stream {
            prefix,
            buffered: Vec::new(),
            unread,
            reverse: plan.reverse,
        }
    }

    /// The scan that refills this stream, if it has nothing buffered and
    /// its range is not exhausted.
    fn wants(&self) -> Option<ScanRequest> {
        match (&self.unread, self.buffered.is_empty()) {
            (Some((start, end)), true) => Some(ScanRequest {
                start: start.clone(),
                end: Some(end.clone()),
                limit: CHUNK,
                reverse: self.reverse,
            }),
            _ => None,
        }
    }

    /// Takes the answer to [`Stream::wants`]'s scan.
    fn fill(&mut self, entries: Vec<Entry>) -> Result<(), StoreError> {
        let Some((start, end)) = self.unread.take() else {
            return Ok(());
        };
        if entries.len() == CHUNK as usize
            && let Some((last, _)) = entries.last()
        {
            self.unread = Some(if self.reverse {
                (start, last.clone())
            } else {
                let mut next = last.clone();
                next.push(0);
                (next, end)
            });
        }
        for (k, _) in entries.into_iter().rev() {
            let pos = k
                .strip_prefix(self.prefix.as_bytes())
                .ok_or_else(|| bad_entry("search"))?;
            self.buffered.push(pos.to_vec());
        }
        Ok(())
    }

    fn head(&self) -> Option<&[u8]> {
        self.buffered.last().map(Vec::as_slice)
    }
}

/// What a walk found.
pub struct Walked {
    /// The positions taken and, when rows were asked for, their tasks.
    pub found: Vec<(Vec<u8>, Option<Task>)>,
    /// Where the walk stopped at its budget, when it did.
    pub stopped_at: Option<Vec<u8>>,
}

/// Walks `plan` after `after`, keeping what `keep` accepts (every entry,
/// without reading rows, when `rows` is false), until `want` are kept, the
/// ranges end, or `budget` entries have been examined.
pub fn walk<K: Kv + ?Sized>(
    kv: &mut K,
    plan: &Plan,
    after: Option<&[u8]>,
    keep: &dyn Fn(&Task) -> bool,
    want: usize,
    budget: usize,
    rows: bool,
) -> Result<Walked, StoreError> {
    let mut streams: Vec<Stream> = plan
        .prefixes
        .iter()
        .map(|p| Stream::new(p.clone(), plan, after))
        .collect();
    let mut found = Vec::new();
    let mut examined = 0usize;
    let mut last: Option<Vec<u8>> = None;
    loop {
        let room = (want - found.len())
            .min(budget - examined)
            .min(CHUNK as usize);
        let mut positions = Vec::with_capacity(room);
        while positions.len() < room {
            match next_position(kv, &mut streams, plan.reverse)? {
                Some(p) => positions.push(p),
                None => break,
            }
        }
        let exhausted = positions.len() < room;
        examined += positions.len();
        if let Some(p) = positions.last() {
            last = Some(p.clone());
        }
        if rows {
            let ids = positions
                .iter()
                .map(|p| task_id(p))
                .collect::<Result<Vec<_>, _>>()?;
            let tasks = store::indexed_tasks(kv, &ids, plan.index)?;
            for (pos, task) in positions.into_iter().zip(tasks) {
                if keep(&task) {
                    found.push((pos, Some(task)));
                }
            }
        } else {
            found.extend(positions.into_iter().map(|p| (p, None)));
        }
        if exhausted || found.len() >= want {
            return Ok(Walked {
                found,
                stopped_at: None,
            });
        }
        if examined >= budget {
            // Stopped short: unless nothing is left, the next call goes on
            // from here.
            let more = next_position(kv, &mut streams, plan.reverse)?.is_some();
            return Ok(Walked {
                found,
                stopped_at: last.filter(|_| more),
            });
        }
    }
}

/// The id a position ends in.
fn task_id(pos: &[u8]) -> Result<String, StoreError> {
    match keys::decode(pos).map_err(|_| bad_entry("search"))?.pop() {
        Some(Elem::Str(id)) => Ok(id),
        _ => Err(bad_entry("search")),
    }
}

/// The next position of the merge, in the walk's direction, taken from
/// every stream it heads.
fn next_position<K: Kv + ?Sized>(
    kv: &mut K,
    streams: &mut [Stream],
    reverse: bool,
) -> Result<Option<Vec<u8>>, StoreError> {
    // Every range that has run dry is refilled in one crossing: the merge
    // needs each one's head before it knows which comes first.
    let (refill, requests): (Vec<usize>, Vec<ScanRequest>) = streams
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.wants().map(|r| (i, r)))
        .unzip();
    let answers = store::scan_all(kv, &requests)?;
    for (i, entries) in refill.into_iter().zip(answers) {
        streams[i].fill(entries)?;
    }
    let mut best: Option<Vec<u8>> = None;
    for s in streams.iter() {
        if let Some(h) = s.head()
            && best
                .as_deref()
                .is_none_or(|b| if reverse { h > b } else { h < b })
        {
            best = Some(h.to_vec());
        }
    }
    if let Some(pos) = &best {
        for s in streams.iter_mut() {
            if s.buffered.last() == Some(pos) {
                s.buffered.pop();
            }
        }
    }
    Ok(best)
}
