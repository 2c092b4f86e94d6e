//! Saved views: a tenant's named, shared searches, one row `("view", name)`
//! each, with a revision every change moves. This module owns their rows and
//! rules; it never runs a search.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::StoreError;
use crate::schema;
use crate::store;
use crate::validate::{self, invalid};

use super::input;
use super::model::SavedView;

/// The most views a tenant keeps.
pub const MAX_VIEWS: usize = 500;
/// The longest view name, in characters.
pub const MAX_VIEW_NAME: usize = 128;

fn name_rule(name: &str) -> Result<(), StoreError> {
    validate::name("name", name)?;
    let chars = name.chars().count();
    if chars > MAX_VIEW_NAME {
        return Err(invalid(format!(
            "name is {chars} characters, more than {MAX_VIEW_NAME}"
        )));
    }
    Ok(())
}

fn decode(name: &str, bytes: &[u8]) -> Result<SavedView, StoreError> {
    let view: SavedView = match postcard::take_from_bytes(bytes) {
        Ok((v, [])) => v,
        Ok((_, left)) => {
            return Err(StoreError::Corrupt(format!(
                "view {name}: {} bytes left over after the view",
                left.len()
            )));
        }
        Err(e) => return Err(StoreError::Corrupt(format!("view {name}: {e}"))),
    };
    if view.name != name {
        return Err(StoreError::Corrupt(format!(
            "view {name}: the view is stored under another name ({})",
            view.name
        )));
    }
    Ok(view)
}

fn load<K: Kv + ?Sized>(kv: &mut K, name: &str) -> Result<Option<SavedView>, StoreError> {
    kv.get(schema::view(name).as_bytes())?
        .map(|b| decode(name, &b))
        .transpose()
}

/// `put-view`: makes a view (`expected` none) or changes one at `expected`.
pub fn put<K: Kv + ?Sized>(
    kv: &mut K,
    view: &SavedView,
    expected: Option<u64>,
) -> Result<SavedView, StoreError> {
    name_rule(&view.name)?;
    let filter = input::filter(&view.filter)?;
    if let Some(by) = &view.by {
        validate::name("by", by)?;
    }
    store::check_layout(kv, true)?;
    let current = load(kv, &view.name)?;
    let revision = match (expected, &current) {
        (None, Some(_)) => {
            return Err(invalid(format!(
                "name: a view named {:?} exists; change it at its revision",
                view.name
            )));
        }
        (None, None) => {
            let held = kv.scan(
                schema::views().as_bytes(),
                Some(&schema::views().prefix_end()),
                MAX_VIEWS as u32,
                false,
            )?;
            if held.len() >= MAX_VIEWS {
                return Err(invalid(format!(
                    "name: the tenant keeps {MAX_VIEWS} views, the most it may; remove one first"
                )));
            }
            0
        }
        (Some(_), None) => return Err(StoreError::NotFound(view.name.clone())),
        (Some(e), Some(c)) if e != c.revision => return Err(StoreError::Stale(c.revision)),
        (Some(_), Some(c)) => c.revision,
    };
    let next = SavedView {
        name: view.name.clone(),
        filter,
        sort: view.sort,
        revision: revision.saturating_add(1),
        by: view.by.clone(),
        at: kv.call_time(),
    };
    // A row only a layout-10 build reads: the mark moves with it.
    store::claim_layout(kv)?;
    kv.set(
        schema::view(&view.name).as_bytes(),
        &store::encode_row(&next)?,
    )?;
    Ok(next)
}

pub fn get<K: Kv + ?Sized>(kv: &mut K, name: &str) -> Result<Option<SavedView>, StoreError> {
    name_rule(name)?;
    store::check_layout(kv, false)?;
    load(kv, name)
}

pub fn list<K: Kv + ?Sized>(
    kv: &mut K,
    limit: u32,
    after: Option<&str>,
) -> Result<Vec<SavedView>, StoreError> {
    validate::limit("limit", limit)?;
    if let Some(a) = after {
        validate::name("after", a)?;
    }
    store::check_layout(kv, false)?;
    let prefix = schema::views();
    let start = match after {
        Some(a) => schema::view(a).successor(),
        None => prefix.as_bytes().to_vec(),
    };
    let mut out = Vec::new();
    for (k, v) in kv.scan(&start, Some(&prefix.prefix_end()), limit, false)? {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Str(name)] => out.push(decode(name, &v)?),
            _ => return Err(store::bad_entry("view")),
        }
    }
    Ok(out)
}

pub fn delete<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    expected: Option<u64>,
) -> Result<bool, StoreError> {
    name_rule(name)?;
    store::check_layout(kv, true)?;
    let Some(current) = load(kv, name)? else {
        return Ok(false);
    };
    if let Some(e) = expected
        && e != current.revision
    {
        return Err(StoreError::Stale(current.revision));
    }
    kv.delete(schema::view(name).as_bytes())?;
    Ok(true)
}
