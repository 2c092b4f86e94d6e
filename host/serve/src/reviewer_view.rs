//! The reviewer's view: a reviewer's own feed positions, made only of what
//! it may see.
//!
//! The feed's positions count every change of the tenant, one number per
//! writer slot; shown to a reviewer, even sealed, they would differ with
//! every change it may not see. A view instead says, per slot, where the
//! reviewer's reading stands in terms it already knows: the last change it
//! was given from that slot (a task and that task's history number), or,
//! where it was given none yet, the slot's number where its reading began
//! (fixed from then on). So a view moves only when the reviewer is given a
//! change, and two readings that gave it the same changes end at the same
//! view, whatever others did meanwhile. A view is turned back into a
//! position of the feed through `entry-place`, and sealed under a nonce
//! drawn from its own bytes, so that the same view always reads the same.
//!
//! Two views carry more. One begun at the feed's head (a stream without a
//! position, or after `gone`) holds a random salt, so that two such starts
//! never compare equal whether or not anything happened between them. And
//! a read that stopped at its budget before reaching the feed's end holds
//! how far it read: reading on must not begin again behind it.
//!
//! It owns the marks, their spelling, and turning a view back into a
//! position (`crate::caller_positions` seals them, `crate::feed_pager`
//! moves them); it must never put into a view a count or a time of changes
//! its reviewer may not see, nor give a reviewer the feed's own positions.

use std::collections::BTreeMap;
use std::time::Instant;

use leasehold_guest::changes::Cursor;
use leasehold_guest::schema::MAX_SHARDS;
use leasehold_host::{self as host, Verb};

use crate::problem::ApiError;
use crate::state::AppState;

/// Where a view stands in one slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Nothing given from this slot yet: reading began after this number.
    From(u64),
    /// The last change given from this slot: entry `seq` of task `task`.
    Seen { task: String, seq: u64 },
}

/// A reviewer's position. See the module's documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    salt: u64,
    marks: BTreeMap<u8, Mark>,
    progress: Option<Cursor>,
    ahead: bool,
    /// Its marks grew past [`MAX_MARKS`]: from then on it keeps only how
    /// far its reading went.
    overflow: bool,
}

/// The most bytes a view's marks may spell; past it, a view holds how far
/// the reading went instead (a slot per task name at the longest a name
/// may be would otherwise make a position no client could send back).
pub const MAX_MARKS: usize = 12 << 10;

/// The first byte of every spelt view.
const FORM: u8 = 1;

/// The fewest bytes a view spells: its form, flags and salt, no progress
/// and no marks (see [`View::to_bytes`]).
pub const MIN_VIEW_BYTES: usize = 2 + 8 + 1 + 1;

/// The most bytes a view spells: its form, flags and salt, how far it read
/// in every slot, and marks of at most [`MAX_MARKS`] (which
/// [`View::seen`] keeps them to, counting exactly what they spell).
pub const MAX_VIEW_BYTES: usize = 2 + 8 + (2 + 9 * MAX_SHARDS as usize) + 1 + MAX_MARKS;

impl View {
    /// A view of a reading that begins at `at`, the feed's position: salted
    /// when `at` is the feed's head as a connection found it.
    pub fn starting(at: &Cursor, salted: bool) -> View {
        let mut salt = 0;
        if salted {
            let mut b = [0u8; 8];
            // Without the system's randomness the salt is the time: two
            // starts still differ.
            salt = match getrandom::fill(&mut b) {
                Ok(()) => u64::from_be_bytes(b),
                Err(_) => std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64),
            };
        }
        let marks = (0..MAX_SHARDS)
            .filter(|&s| at.get(s) > 0)
            .map(|s| (s, Mark::From(at.get(s))))
            .collect();
        View {
            salt,
            marks,
            progress: None,
            ahead: false,
            overflow: false,
        }
    }

    /// This view after the reviewer was given entry `seq` of `task`, read
    /// from `slot`, the feed's position after it being `at`. How far an
    /// earlier reading went no longer matters: the marks now stand at or
    /// behind nothing the reviewer may see.
    pub fn seen(&mut self, slot: u8, task: &str, seq: u64, at: Cursor) {
        self.ahead = false;
        if self.overflow {
            self.progress = Some(at);
            return;
        }
        self.marks.insert(
            slot,
            Mark::Seen {
                task: task.to_owned(),
                seq,
            },
        );
        self.progress = None;
        if self.spelt_marks() > MAX_MARKS {
            // Reading on from the feed's position is exact; only the
            // sameness of views is given up, and only for such a reviewer.
            self.marks.clear();
            self.overflow = true;
            self.progress = Some(at);
        }
    }

    /// This view, holding that a reading went as far as `at` and found
    /// nothing more for it.
    pub fn reached(&self, at: Cursor) -> View {
        View {
            progress: Some(at),
            ..self.clone()
        }
    }

    /// This view, marked as not at the feed's end: the `head` of a page
    /// that did not read to it. Read on from it as from the view itself.
    pub fn ahead(&self) -> View {
        View {
            ahead: true,
            ..self.clone()
        }
    }

    fn spelt_marks(&self) -> usize {
        self.marks
            .values()
            .map(|m| match m {
                Mark::From(_) => 10,
                Mark::Seen { task, .. } => 12 + task.len(),
            })
            .sum()
    }

    /// The view as bytes, to be sealed.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![FORM, u8::from(self.ahead) | u8::from(self.overflow) << 1];
        out.extend_from_slice(&self.salt.to_be_bytes());
        match &self.progress {
            None => out.push(0),
            Some(c) => {
                out.push(1);
                let seqs = c.seqs();
                let used: Vec<u8> = (0..MAX_SHARDS).filter(|&s| seqs[s as usize] > 0).collect();
                out.push(used.len() as u8);
                for s in used {
                    out.push(s);
                    out.extend_from_slice(&seqs[s as usize].to_be_bytes());
                }
            }
        }
        out.push(self.marks.len() as u8);
        for (slot, mark) in &self.marks {
            out.push(*slot);
            match mark {
                Mark::From(n) => {
                    out.push(0);
                    out.extend_from_slice(&n.to_be_bytes());
                }
                Mark::Seen { task, seq } => {
                    out.push(1);
                    out.extend_from_slice(&seq.to_be_bytes());
                    out.extend_from_slice(&(task.len() as u16).to_be_bytes());
                    out.extend_from_slice(task.as_bytes());
                }
            }
        }
        out
    }

    /// The view `bytes` spell, if they spell one exactly.
    pub fn from_bytes(bytes: &[u8]) -> Option<View> {
        let mut r = Reader(bytes);
        if r.u8()? != FORM {
            return None;
        }
        let flags = r.u8()?;
        if flags > 3 {
            return None;
        }
        let (ahead, overflow) = (flags & 1 == 1, flags & 2 == 2);
        let salt = r.u64()?;
        let progress = match r.u8()? {
            0 => None,
            1 => {
                let mut seqs = [0u64; MAX_SHARDS as usize];
                for _ in 0..r.u8()? {
                    let s = r.slot()?;
                    let n = r.u64()?;
                    if n == 0 || seqs[s as usize] != 0 {
                        return None;
                    }
                    seqs[s as usize] = n;
                }
                Some(Cursor::from_seqs(seqs)?)
            }
            _ => return None,
        };
        let mut marks = BTreeMap::new();
        for _ in 0..r.u8()? {
            let slot = r.slot()?;
            let mark = match r.u8()? {
                0 => Mark::From(r.u64()?),
                1 => {
                    let seq = r.u64()?;
                    let len = usize::from(r.u16()?);
                    let task = std::str::from_utf8(r.take(len)?).ok()?.to_owned();
                    Mark::Seen { task, seq }
                }
                _ => return None,
            };
            if marks.insert(slot, mark).is_some() {
                return None;
            }
        }
        if overflow && (progress.is_none() || !marks.is_empty()) {
            return None;
        }
        r.0.is_empty().then_some(View {
            salt,
            marks,
            progress,
            ahead,
            overflow,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn slot(&mut self) -> Option<u8> {
        self.u8().filter(|&s| s < MAX_SHARDS)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// The slot an entry came from: the one where the position after it
/// differs from the position before it.
pub fn slot_between(before: &Cursor, after: &Cursor) -> Option<u8> {
    let mut moved = (0..MAX_SHARDS).filter(|&s| before.get(s) != after.get(s));
    let slot = moved.next()?;
    moved.next().is_none().then_some(slot)
}

/// A feed position as the engine spelt it.
pub fn parse(pos: &str) -> Result<Cursor, ApiError> {
    Cursor::parse(pos).map_err(|_| {
        ApiError::Internal(format!("the feed gave a position of no known shape: {pos:?}").into())
    })
}

/// The position of the feed a view stands for, or `None` when the changes
/// after it are no longer kept (a mark's entry was trimmed).
pub async fn resolve(
    state: &AppState,
    tenant: &host::Tenant,
    view: &View,
) -> Result<Option<Cursor>, ApiError> {
    if let Some(at) = view.progress {
        return Ok(Some(at));
    }
    let mut seqs = [0u64; MAX_SHARDS as usize];
    for (slot, mark) in &view.marks {
        seqs[usize::from(*slot)] = match mark {
            Mark::From(n) => *n,
            Mark::Seen { task, seq } => {
                let (id, seq) = (task.clone(), *seq);
                let deadline = Instant::now() + state.options.request_timeout;
                let place = state
                    .call(Verb::FeedPlace, tenant.clone(), deadline, move |x| {
                        x.entry_place(&id, seq)
                    })
                    .await;
                match place {
                    Ok(Some(p)) if p.slot == u32::from(*slot) => p.seq,
                    Ok(_) | Err(ApiError::NotFound(_)) => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
        };
    }
    Ok(Cursor::from_seqs(seqs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor(text: &str) -> Cursor {
        Cursor::parse(text).expect("a position")
    }

    #[test]
    fn a_view_spells_and_reads_back_exactly() {
        let mut v = View::starting(&cursor("f0.4_3.9"), false);
        v.seen(3, "fin-1", 2, cursor("f0.4_3.10"));
        let w = v.reached(cursor("f0.7_3.12")).ahead();
        for view in [
            View::default(),
            v.clone(),
            w.clone(),
            View::starting(&cursor("f"), true),
        ] {
            assert_eq!(View::from_bytes(&view.to_bytes()), Some(view.clone()));
        }
        let bytes = w.to_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(View::from_bytes(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(View::from_bytes(&longer), None);
    }

    #[test]
    fn a_view_moves_only_with_what_its_reviewer_is_given() {
        let start = View::starting(&cursor("f0.4"), false);
        assert_eq!(start, View::starting(&cursor("f0.4"), false));
        // Salted starts never compare equal, whatever the head.
        assert_ne!(
            View::starting(&cursor("f0.4"), true),
            View::starting(&cursor("f0.4"), true)
        );
        let mut a = start.clone();
        a.seen(0, "fin-1", 1, cursor("f0.5"));
        let mut b = start.reached(cursor("f0.90"));
        b.seen(0, "fin-1", 1, cursor("f0.91"));
        assert_eq!(a, b, "how far a reading went is forgotten once it gives");
        assert_eq!(
            a.marks[&0],
            Mark::Seen {
                task: "fin-1".into(),
                seq: 1
            }
        );
    }

    #[test]
    fn the_slot_of_an_entry_is_the_one_that_moved() {
        assert_eq!(slot_between(&cursor("f0.4"), &cursor("f0.5")), Some(0));
        assert_eq!(slot_between(&cursor("f0.4"), &cursor("f0.4_7.1")), Some(7));
        assert_eq!(slot_between(&cursor("f0.4"), &cursor("f0.4")), None);
        assert_eq!(slot_between(&cursor("f0.4"), &cursor("f0.5_1.1")), None);
    }

    #[test]
    fn a_view_too_long_to_send_back_keeps_only_how_far_it_read() {
        let mut v = View::starting(&cursor("f"), false);
        let long = "x".repeat(1000);
        let mut seqs = [0u64; MAX_SHARDS as usize];
        for s in 0..MAX_SHARDS {
            seqs[usize::from(s)] = 3;
            let at = Cursor::from_seqs(seqs).expect("a position");
            v.seen(s, &format!("{long}{s}"), 1, at);
            assert!(v.to_bytes().len() < MAX_MARKS + 64 * 9 + 64);
            assert_eq!(View::from_bytes(&v.to_bytes()), Some(v.clone()));
        }
        assert!(v.marks.is_empty(), "only how far it read");
        assert_eq!(v.progress, Cursor::from_seqs(seqs));
    }
}
