//! A reader's position in the feed: the last sequence number read in each
//! writer slot, and its one spelling (`f0.12_3.4`). It only spells and
//! parses; whether a position is one of this feed is for the reads to say.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::model::StoreError;
use crate::schema::{self, MAX_SHARDS};
use crate::validate;

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

    pub(super) fn set(&mut self, slot: u8, seq: u64) {
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
