//! A search's input rules and its cursors.
//!
//! Bad input is refused as `invalid`, naming the field, before anything is
//! read. A cursor is a position in one search's order, sealed with a digest
//! of the filter, sort and viewer it was made for, so a cursor handed to
//! another search is refused rather than read as a position in its order.
//! This module never reads storage.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys;
use crate::model::StoreError;
use crate::schema;
use crate::validate::{self, invalid};

use super::model::{AssigneeFilter, TaskFilter, TaskSort, Viewer};

/// The most kinds a filter names.
pub const MAX_KINDS: usize = 32;

/// A filter as checked: its lists without duplicates.
pub fn filter(f: &TaskFilter) -> Result<TaskFilter, StoreError> {
    let mut f = f.clone();
    let mut states = Vec::with_capacity(f.states.len());
    for s in &f.states {
        if !states.contains(s) {
            states.push(*s);
        }
    }
    f.states = states;
    if f.kinds.len() > MAX_KINDS {
        return Err(invalid(format!(
            "filter.kinds has {} entries, more than {MAX_KINDS}",
            f.kinds.len()
        )));
    }
    f.kinds = validate::names("filter.kinds", &f.kinds)?;
    for (field, value) in [
        ("filter.role", &f.role),
        ("filter.case", &f.case),
        ("filter.run", &f.run),
    ] {
        if let Some(v) = value {
            validate::name(field, v)?;
        }
    }
    if let Some(AssigneeFilter::Actor(a)) = &f.assignee {
        validate::name("filter.assignee", a)?;
    }
    for (field, value) in [
        ("filter.due-before", f.due_before),
        ("filter.due-after", f.due_after),
        ("filter.created-before", f.created_before),
        ("filter.created-after", f.created_after),
        ("filter.overdue-at", f.overdue_at),
    ] {
        if let Some(t) = value {
            validate::timestamp(field, t)?;
        }
    }
    for (what, after, before) in [
        ("due", f.due_after, f.due_before),
        ("created", f.created_after, f.created_before),
    ] {
        if let (Some(a), Some(b)) = (after, before)
            && a >= b
        {
            return Err(invalid(format!(
                "filter.{what}-after ({a}) is not before filter.{what}-before ({b}): \
                 the range holds no instant"
            )));
        }
    }
    Ok(f)
}

pub fn viewer(v: Option<&Viewer>) -> Result<Option<Viewer>, StoreError> {
    v.map(|v| {
        validate::name("viewer.actor", &v.actor)?;
        Ok(Viewer {
            actor: v.actor.clone(),
            roles: validate::names("viewer.roles", &v.roles)?,
        })
    })
    .transpose()
}

/// A digest of what a cursor is good for: the checked filter, the sort and
/// the viewer. `what` tells a search's cursor from a count's.
pub fn digest(what: u8, f: &TaskFilter, sort: Option<TaskSort>, v: Option<&Viewer>) -> u64 {
    let mut bytes = vec![what];
    // postcard of plain data never fails.
    bytes.extend(postcard::to_allocvec(f).unwrap_or_default());
    bytes.extend(postcard::to_allocvec(&sort).unwrap_or_default());
    bytes.extend(postcard::to_allocvec(&v).unwrap_or_default());
    schema::fnv1a64(&[&bytes])
}

/// A cursor: `x`, the digest's 16 hex digits, then the position's hex.
pub fn cursor(digest: u64, position: &[u8]) -> String {
    format!("x{digest:016x}{}", keys::to_hex(position))
}

/// The position a cursor names, if it was made for this digest; `shaped`
/// says whether the position has the shape of the order's.
pub fn parse_cursor(
    text: &str,
    digest: u64,
    shaped: impl Fn(&[u8]) -> bool,
) -> Result<Vec<u8>, StoreError> {
    let shown: String = text.chars().take(40).collect();
    let bad = || {
        invalid(format!(
            "after is not a cursor of a search or count: {shown:?}"
        ))
    };
    let rest = text.strip_prefix('x').ok_or_else(bad)?;
    if rest.len() < 16 || !rest.is_char_boundary(16) {
        return Err(bad());
    }
    let (d, pos) = rest.split_at(16);
    let d = u64::from_str_radix(d, 16).map_err(|_| bad())?;
    let pos = keys::from_hex(pos).ok_or_else(bad)?;
    if d != digest {
        return Err(invalid(format!(
            "after is a cursor of another search (another filter, sort or viewer): {shown:?}"
        )));
    }
    if !shaped(&pos) {
        return Err(bad());
    }
    Ok(pos)
}
