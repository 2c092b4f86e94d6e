//! The timer listings: a run's timers by effect, from the run's own range
//! of rows, and the timers falling due in a window, from the due index in
//! `claim-due`'s order. Each page reads O(limit) entries; neither writes.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{Elem, Key};
use crate::kv::Kv;
use crate::model::{StoreError, TimerPage, Timestamp};
use crate::queue::{cursor, parse_cursor};
use crate::schema;
use crate::store::{self, bad_entry};
use crate::validate;

use super::due_index::{due_entry, indexed_row};
use super::moves::info;

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
        let row = store::timer_from(run, &effect, &v)?;
        last = Some(Key::new().str(&effect));
        timers.push(info(row));
    }
    Ok(TimerPage {
        timers,
        next: match last {
            Some(pos) if more => Some(cursor('e', &pos)),
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
        listed.push(due_entry(&k, &prefix)?);
        positions.push(
            k.strip_prefix(prefix.as_bytes())
                .ok_or_else(|| bad_entry("due"))?
                .to_vec(),
        );
    }
    let rows = store::load_timers(kv, listed.iter().map(|(_, r, e)| (r.as_str(), e.as_str())))?;
    let mut timers = Vec::with_capacity(rows.len());
    for ((at, run, effect), row) in listed.iter().zip(rows) {
        timers.push(info(indexed_row(row, *at, run, effect)?));
    }
    Ok(TimerPage {
        timers,
        next: match positions.last() {
            Some(pos) if more => Some(cursor('d', &Key::new().raw(pos))),
            _ => None,
        },
    })
}
