//! The timer listings: a run's timers by effect, from the run's own range
//! of rows, and the timers falling due in a window, from the due index in
//! `claim-due`'s order. Each page reads O(limit) entries; neither writes.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{self, Elem, Key};
use crate::kv::Kv;
use crate::model::{StoreError, TimerPage, Timestamp};
use crate::queue::parse_cursor;
use crate::schema;
use crate::store::{self, bad_entry};
use crate::validate;

use super::moves::info;

/// A cursor of `verb`: its letter, then the hex of the position after which
/// the next page starts.
fn cursor(verb: char, position: &[u8]) -> String {
    format!("{verb}{}", keys::to_hex(position))
}

/// `timers-of`: the timers armed for `run`, by effect. The run's range of
/// timer rows is its own index, so a page is one scan and no other read.
pub fn timers_of<K: Kv + ?Sized>(
    kv: &mut K,
    run: &str,
    limit: u32,
    after: Option<&str>,
) -> Result<TimerPage, StoreError> {
    validate::name("run", run)?;
    validate::limit("limit", limit)?;
    let after = after
        .map(|text| {
            parse_cursor(
                'e',
                text,
                |e| matches!(e, [Elem::Str(effect)] if validate::name("", effect).is_ok()),
            )
        })
        .transpose()?;
    store::check_layout(kv, false)?;
    let prefix = schema::timers_of(run);
    let start = match &after {
        Some(pos) => prefix.clone().raw(pos).successor(),
        None => prefix.as_bytes().to_vec(),
    };
    let entries = kv.scan(&start, Some(&prefix.prefix_end()), limit + 1, false)?;
    let more = entries.len() > limit as usize;
    let mut timers = Vec::with_capacity(entries.len().min(limit as usize));
    let mut last = None;
    for (k, v) in entries.into_iter().take(limit as usize) {
        let effect = match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Str(effect)] => effect.clone(),
            _ => return Err(bad_entry("timer")),
        };
        let row = store::decode_timer(&v)
            .map_err(|e| StoreError::Corrupt(format!("timer {run}/{effect}: {e}")))?;
        if row.timer.run != run || row.timer.effect != effect {
            return Err(StoreError::Corrupt(format!(
                "timer {run}/{effect}: the row is stored under another identity"
            )));
        }
        last = Some(Key::new().str(&effect));
        timers.push(info(row));
    }
    Ok(TimerPage {
        timers,
        next: match last {
            Some(pos) if more => Some(cursor('e', pos.as_bytes())),
            _ => None,
        },
    })
}

/// `due-between`: the timers claimable in `[from, to)`, in the due index's
/// order (instant, run, effect), with one batched read of their rows.
pub fn due_between<K: Kv + ?Sized>(
    kv: &mut K,
    from: Timestamp,
    to: Timestamp,
    limit: u32,
    after: Option<&str>,
) -> Result<TimerPage, StoreError> {
    validate::timestamp("from", from)?;
    validate::timestamp("to", to)?;
    if to < from {
        return Err(validate::invalid(format!(
            "to ({to}) is before from ({from})"
        )));
    }
    validate::limit("limit", limit)?;
    let after = after
        .map(|text| {
            parse_cursor('d', text, |e| {
                matches!(e, [Elem::Int(_), Elem::Str(run), Elem::Str(effect)]
                    if validate::name("", run).is_ok() && validate::name("", effect).is_ok())
            })
        })
        .transpose()?;
    store::check_layout(kv, false)?;
    let prefix = schema::due();
    let window = prefix.clone().int(from).into_bytes();
    // A cursor from before the window starts at the window.
    let start = match &after {
        Some(pos) => prefix.clone().raw(pos).successor().max(window),
        None => window,
    };
    let end = prefix.clone().int(to).into_bytes();
    if start >= end {
        return Ok(TimerPage {
            timers: Vec::new(),
            next: None,
        });
    }
    let entries = kv.scan(&start, Some(&end), limit + 1, false)?;
    let more = entries.len() > limit as usize;
    let mut listed = Vec::with_capacity(entries.len().min(limit as usize));
    let mut positions = Vec::with_capacity(listed.capacity());
    for (k, _) in entries.into_iter().take(limit as usize) {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Int(at), Elem::Str(run), Elem::Str(effect)] => {
                listed.push((*at, run.clone(), effect.clone()));
            }
            _ => return Err(bad_entry("due")),
        }
        positions.push(
            k.strip_prefix(prefix.as_bytes())
                .ok_or_else(|| bad_entry("due"))?
                .to_vec(),
        );
    }
    let rows = store::load_timers(kv, listed.iter().map(|(_, r, e)| (r.as_str(), e.as_str())))?;
    let mut timers = Vec::with_capacity(rows.len());
    for ((at, run, effect), row) in listed.iter().zip(rows) {
        let row = row.ok_or_else(|| {
            StoreError::Corrupt(format!(
                "the due index lists timer {run}/{effect}, which has no row"
            ))
        })?;
        if row.claimable_at() != *at {
            return Err(StoreError::Corrupt(format!(
                "the due index lists timer {run}/{effect} at {at}, its row at {}",
                row.claimable_at()
            )));
        }
        timers.push(info(row));
    }
    Ok(TimerPage {
        timers,
        next: match positions.last() {
            Some(pos) if more => Some(cursor('d', pos)),
            _ => None,
        },
    })
}
