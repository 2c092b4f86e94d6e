//! Webhook subscriptions: the verbs of the `subscriptions` interface over
//! the rows `row` keeps, and what `trim` must keep for them ([`owed`]).
//!
//! The component keeps the record of where a tenant's changes are pushed
//! and how far deliveries have come; it never sends anything. Its rules:
//! a position only moves on and never past the feed's head, one lease per
//! subscription, and a revision that every change but a delivery's moves,
//! so a worker that started at another revision is told `stale` and stops
//! rather than overwriting an operator's change. No verb here records a
//! change in the feed: subscriptions are configuration, not work.

pub mod row;
mod wire;

#[allow(unused_imports)]
use crate::prelude::*;

use crate::changes::cursor::Cursor;
use crate::changes::slots::read_slots;
use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::StoreError;
use crate::schema;
use crate::store;
use crate::time::Timestamp;
use crate::validate::{self, invalid};

pub use row::{Attempt, SigningKey, SubFilter, SubState, Subscription};

/// One page of subscriptions, and the cursor of the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionPage {
    pub subscriptions: Vec<Subscription>,
    pub next: Option<String>,
}

/// The feed's head and floor, `None` for a keyspace with no feed yet.
fn feed_bounds<K: Kv + ?Sized>(kv: &mut K) -> Result<Option<(Cursor, Cursor)>, StoreError> {
    Ok(read_slots(kv)?.map(|s| (s.head, s.floor)))
}

/// A position given by a caller, read and held inside the feed: not past
/// its head, and (unless `trimmed_ok`) not before entries were trimmed.
fn position_in_feed(
    field: &str,
    text: &str,
    bounds: Option<&(Cursor, Cursor)>,
) -> Result<Cursor, StoreError> {
    let c = Cursor::parse(text)
        .map_err(|_| invalid(format!("{field} is not a position of the feed: {text:?}")))?;
    let (head, floor) = match bounds {
        Some((h, f)) => (*h, *f),
        None => (Cursor::START, Cursor::START),
    };
    for s in 0..schema::MAX_SHARDS {
        if c.get(s) > head.get(s) {
            return Err(invalid(format!(
                "{field} is past the feed's head ({text} against {})",
                head.encode()
            )));
        }
        if c.get(s) < floor.get(s) {
            return Err(invalid(format!(
                "{field} is before entries the feed no longer holds (trimmed to {})",
                floor.encode()
            )));
        }
    }
    Ok(c)
}

fn spelt(c: Cursor) -> Option<String> {
    (c != Cursor::START).then(|| c.encode())
}

fn existing<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Subscription, StoreError> {
    row::load(kv, id)?.ok_or_else(|| StoreError::NotFound(id.to_owned()))
}

fn expect(sub: &Subscription, expected: Option<u64>) -> Result<(), StoreError> {
    match expected {
        Some(r) if r != sub.revision => Err(StoreError::Stale(sub.revision)),
        _ => Ok(()),
    }
}

/// `add-subscription`.
pub fn add<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    url: &str,
    filter: &SubFilter,
    key: &[u8],
    from: Option<&str>,
    now: Timestamp,
) -> Result<Subscription, StoreError> {
    validate::name("id", id)?;
    row::check_url(url)?;
    let filter = row::check_filter(filter)?;
    row::check_key(key)?;
    validate::timestamp("now", now)?;
    store::check_layout(kv, true)?;
    if row::load(kv, id)?.is_some() {
        return Err(invalid(format!(
            "id {id:?} is in use by another subscription"
        )));
    }
    let prefix = schema::subscriptions();
    let present = kv.scan(
        prefix.as_bytes(),
        Some(&prefix.prefix_end()),
        row::MAX_SUBSCRIPTIONS as u32,
        false,
    )?;
    if present.len() >= row::MAX_SUBSCRIPTIONS {
        return Err(invalid(format!(
            "subscriptions: a tenant has at most {}",
            row::MAX_SUBSCRIPTIONS
        )));
    }
    let bounds = feed_bounds(kv)?;
    let position = match from {
        Some(p) => position_in_feed("from", p, bounds.as_ref())?,
        None => bounds.map_or(Cursor::START, |(head, _)| head),
    };
    store::claim_layout(kv)?;
    let sub = Subscription {
        id: id.to_owned(),
        url: url.to_owned(),
        filter,
        state: SubState::Active,
        note: None,
        position: spelt(position),
        keys: vec![SigningKey {
            key: key.to_vec(),
            until: None,
        }],
        created_at: now,
        revision: 1,
        attempts: Vec::new(),
        lease_holder: None,
        lease_until: None,
    };
    row::save(kv, &sub)?;
    Ok(sub)
}

/// `get-subscription`.
pub fn get<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<Subscription>, StoreError> {
    validate::name("id", id)?;
    store::check_layout(kv, false)?;
    row::load(kv, id)
}

/// `list-subscriptions`: by id, after the cursor (the last id of the page
/// before).
pub fn list<K: Kv + ?Sized>(
    kv: &mut K,
    limit: u32,
    after: Option<&str>,
) -> Result<SubscriptionPage, StoreError> {
    validate::limit("limit", limit)?;
    if let Some(a) = after {
        validate::name("after", a)?;
    }
    store::check_layout(kv, false)?;
    let prefix = schema::subscriptions();
    let start = match after {
        Some(a) => schema::subscription(a).successor(),
        None => prefix.as_bytes().to_vec(),
    };
    // One entry past the page says whether another page follows.
    let entries = kv.scan(&start, Some(&prefix.prefix_end()), limit + 1, false)?;
    let more = entries.len() > limit as usize;
    let mut out = Vec::with_capacity(entries.len().min(limit as usize));
    for (k, v) in entries.into_iter().take(limit as usize) {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Str(id)] => out.push(row::decode_listed(id, &v)?),
            _ => return Err(store::bad_entry("subscription")),
        }
    }
    let next = if more {
        out.last().map(|s: &Subscription| s.id.clone())
    } else {
        None
    };
    Ok(SubscriptionPage {
        subscriptions: out,
        next,
    })
}

/// `change-subscription`.
pub fn change<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    url: Option<&str>,
    filter: Option<&SubFilter>,
    expected: Option<u64>,
) -> Result<Subscription, StoreError> {
    validate::name("id", id)?;
    if let Some(u) = url {
        row::check_url(u)?;
    }
    let filter = filter.map(row::check_filter).transpose()?;
    store::check_layout(kv, true)?;
    let mut sub = existing(kv, id)?;
    expect(&sub, expected)?;
    let before = sub.clone();
    if let Some(u) = url {
        u.clone_into(&mut sub.url);
    }
    if let Some(f) = filter {
        sub.filter = f;
    }
    if sub == before {
        return Ok(sub);
    }
    sub.revision += 1;
    store::claim_layout(kv)?;
    row::save(kv, &sub)?;
    Ok(sub)
}

/// `set-subscription-state`.
pub fn set_state<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    state: SubState,
    note: Option<&str>,
    expected: Option<u64>,
) -> Result<Subscription, StoreError> {
    validate::name("id", id)?;
    if let Some(n) = note {
        row::check_text("note", n)?;
    }
    store::check_layout(kv, true)?;
    let mut sub = existing(kv, id)?;
    expect(&sub, expected)?;
    if state == SubState::Active && sub.state == SubState::Gone {
        // Its entries are no longer in the feed: only a replay from a
        // position the feed holds can make it live again.
        let bounds = feed_bounds(kv)?;
        let c = sub.cursor()?;
        if let Some((_, floor)) = bounds
            && (0..schema::MAX_SHARDS).any(|s| c.get(s) < floor.get(s))
        {
            return Err(invalid(
                "state: a gone subscription's entries were trimmed; rewind it to a position the feed holds",
            ));
        }
    }
    if sub.state == state && sub.note.as_deref() == note {
        return Ok(sub);
    }
    sub.state = state;
    sub.note = note.map(ToOwned::to_owned);
    sub.revision += 1;
    store::claim_layout(kv)?;
    row::save(kv, &sub)?;
    Ok(sub)
}

/// `rotate-subscription-key`.
pub fn rotate<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    key: &[u8],
    old_until: Timestamp,
    now: Timestamp,
) -> Result<Subscription, StoreError> {
    validate::name("id", id)?;
    row::check_key(key)?;
    validate::timestamp("now", now)?;
    validate::timestamp("old-until", old_until)?;
    if old_until > now.saturating_add(row::MAX_OVERLAP_MS) {
        return Err(invalid(
            "old-until is more than 7 days after now: an old key signs for at most a week",
        ));
    }
    store::check_layout(kv, true)?;
    let mut sub = existing(kv, id)?;
    if sub.keys.iter().any(|k| k.key == key) {
        return Err(invalid("key is one the subscription already has"));
    }
    for k in sub.keys.iter_mut() {
        k.until = Some(k.until.map_or(old_until, |u| u.min(old_until)));
    }
    sub.keys.retain(|k| k.until.is_none_or(|u| u > now));
    // The newest old keys are the ones worth keeping.
    while sub.keys.len() >= row::MAX_KEYS {
        sub.keys.remove(0);
    }
    sub.keys.push(SigningKey {
        key: key.to_vec(),
        until: None,
    });
    sub.revision += 1;
    store::claim_layout(kv)?;
    row::save(kv, &sub)?;
    Ok(sub)
}

/// `remove-subscription`.
pub fn remove<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<bool, StoreError> {
    validate::name("id", id)?;
    store::check_layout(kv, true)?;
    if row::load(kv, id)?.is_none() {
        return Ok(false);
    }
    kv.delete(schema::subscription(id).as_bytes())?;
    Ok(true)
}

/// `advance-subscription`: per slot the later of the stored and the given
/// number; the revision stays.
pub fn advance<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    revision: u64,
    position: &str,
) -> Result<Subscription, StoreError> {
    validate::name("id", id)?;
    let given = Cursor::parse(position).map_err(|_| {
        invalid(format!(
            "position is not a position of the feed: {position:?}"
        ))
    })?;
    store::check_layout(kv, true)?;
    let mut sub = existing(kv, id)?;
    expect(&sub, Some(revision))?;
    let head = feed_bounds(kv)?.map_or(Cursor::START, |(h, _)| h);
    let mut seqs = sub.cursor()?.seqs();
    for s in 0..schema::MAX_SHARDS {
        if given.get(s) > head.get(s) {
            return Err(invalid(format!(
                "position is past the feed's head ({position} against {})",
                head.encode()
            )));
        }
        let i = usize::from(s);
        seqs[i] = seqs[i].max(given.get(s));
    }
    let moved = Cursor::from_seqs(seqs).ok_or_else(|| invalid("position is out of range"))?;
    let spelling = spelt(moved);
    if spelling == sub.position {
        return Ok(sub);
    }
    sub.position = spelling;
    row::save(kv, &sub)?;
    Ok(sub)
}

/// `rewind-subscription`: a replay from `position`.
pub fn rewind<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    position: Option<&str>,
) -> Result<Subscription, StoreError> {
    validate::name("id", id)?;
    store::check_layout(kv, true)?;
    let mut sub = existing(kv, id)?;
    let bounds = feed_bounds(kv)?;
    let c = match position {
        Some(p) => position_in_feed("position", p, bounds.as_ref())?,
        None => {
            if let Some((_, floor)) = &bounds
                && *floor != Cursor::START
            {
                return Err(invalid(format!(
                    "position: the feed's start was trimmed (to {}); give a position it holds",
                    floor.encode()
                )));
            }
            Cursor::START
        }
    };
    sub.position = spelt(c);
    sub.state = SubState::Active;
    sub.note = None;
    sub.revision += 1;
    store::claim_layout(kv)?;
    row::save(kv, &sub)?;
    Ok(sub)
}

/// `lease-subscription`.
pub fn lease<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    holder: &str,
    now: Timestamp,
    lease_ms: u32,
) -> Result<bool, StoreError> {
    validate::name("id", id)?;
    validate::name("holder", holder)?;
    validate::timestamp("now", now)?;
    if lease_ms == 0 || lease_ms > row::MAX_LEASE_MS {
        return Err(invalid(format!(
            "lease-ms is {lease_ms}; it must be 1-{}",
            row::MAX_LEASE_MS
        )));
    }
    store::check_layout(kv, true)?;
    let Some(mut sub) = row::load(kv, id)? else {
        return Ok(false);
    };
    let free = match (&sub.lease_holder, sub.lease_until) {
        (Some(h), Some(until)) => h == holder || until <= now,
        _ => true,
    };
    if !free {
        return Ok(false);
    }
    sub.lease_holder = Some(holder.to_owned());
    sub.lease_until = Some(now.saturating_add(i64::from(lease_ms)));
    row::save(kv, &sub)?;
    Ok(true)
}

/// `release-subscription`.
pub fn release<K: Kv + ?Sized>(kv: &mut K, id: &str, holder: &str) -> Result<(), StoreError> {
    validate::name("id", id)?;
    validate::name("holder", holder)?;
    store::check_layout(kv, true)?;
    let Some(mut sub) = row::load(kv, id)? else {
        return Ok(());
    };
    if sub.lease_holder.as_deref() != Some(holder) {
        return Ok(());
    }
    sub.lease_holder = None;
    sub.lease_until = None;
    row::save(kv, &sub)
}

/// `record-subscription-attempts`.
pub fn record_attempts<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    attempts: &[Attempt],
) -> Result<(), StoreError> {
    validate::name("id", id)?;
    if attempts.len() > row::MAX_ATTEMPTS {
        return Err(invalid(format!(
            "attempts has {} items, more than {}",
            attempts.len(),
            row::MAX_ATTEMPTS
        )));
    }
    for a in attempts {
        row::check_attempt(a)?;
    }
    if attempts.is_empty() {
        return Ok(());
    }
    store::check_layout(kv, true)?;
    let mut sub = existing(kv, id)?;
    sub.attempts.extend(attempts.iter().cloned());
    let over = sub.attempts.len().saturating_sub(row::MAX_ATTEMPTS);
    sub.attempts.drain(..over);
    row::save(kv, &sub)
}

/// Every live subscription (not `gone`) and its position: what `trim`
/// must keep. At most [`row::MAX_SUBSCRIPTIONS`] rows, read in one scan.
pub fn owed<K: Kv + ?Sized>(kv: &mut K) -> Result<Vec<Subscription>, StoreError> {
    let prefix = schema::subscriptions();
    // Past the bound `add` keeps, a row is damage `check` reports; trimming
    // keeps what the first of them are owed.
    let entries = kv.scan(
        prefix.as_bytes(),
        Some(&prefix.prefix_end()),
        row::MAX_SUBSCRIPTIONS as u32 + 1,
        false,
    )?;
    let mut out = Vec::new();
    for (k, v) in entries {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Str(id)] => {
                let sub = row::decode_listed(id, &v)?;
                if sub.live() {
                    out.push(sub);
                }
            }
            _ => return Err(store::bad_entry("subscription")),
        }
    }
    Ok(out)
}

/// Marks `sub` gone because `trim` removed the entry at `slot`/`seq` it
/// was still owed.
pub fn mark_gone<K: Kv + ?Sized>(
    kv: &mut K,
    mut sub: Subscription,
    slot: u8,
    seq: u64,
) -> Result<(), StoreError> {
    sub.note = Some(format!(
        "the feed was trimmed past position {} (entry {slot}.{seq}) before it was delivered; rewind to a position the feed holds",
        sub.position.as_deref().unwrap_or("f")
    ));
    sub.state = SubState::Gone;
    sub.revision += 1;
    row::save(kv, &sub)
}
