//! A webhook subscription's stored row under `("sub", id)`, and the input
//! rules of what it holds: its URL, filter, keys, notes and attempts. Owns
//! the row's shape and what a row must hold to be sound; what changes a
//! row is the verbs' (`super`).

#[allow(unused_imports)]
use crate::prelude::*;

use serde::{Deserialize, Serialize};

use crate::changes::cursor::Cursor;
use crate::kv::Kv;
use crate::model::StoreError;
use crate::schema;
use crate::store;
use crate::time::Timestamp;
use crate::validate::{self, invalid};

/// Most subscriptions in one tenant.
pub const MAX_SUBSCRIPTIONS: usize = 100;
/// Most bytes in a URL.
pub const MAX_URL_BYTES: usize = 2048;
/// A signing key's length bounds, in bytes.
pub const KEY_MIN_BYTES: usize = 24;
pub const KEY_MAX_BYTES: usize = 64;
/// Most keys a subscription signs with at once (after rotations).
pub const MAX_KEYS: usize = 4;
/// Most attempts a row keeps, and one call records.
pub const MAX_ATTEMPTS: usize = 20;
/// Most items in each of a filter's lists.
pub const MAX_FILTER_ITEMS: usize = 64;
/// Most characters in a note or an attempt's outcome.
pub const MAX_NOTE_CHARS: usize = 1024;
/// The longest an old key may keep signing after a rotation.
pub const MAX_OVERLAP_MS: i64 = 7 * 24 * 3600 * 1000;
/// The longest lease.
pub const MAX_LEASE_MS: u32 = 3_600_000;

/// What a subscription is sent. Empty lists place no condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubFilter {
    pub tasks: bool,
    pub timers: bool,
    pub verbs: Vec<String>,
    pub kinds: Vec<String>,
    pub runs: Vec<String>,
    pub settling_only: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubState {
    Active,
    Paused,
    Failing,
    Gone,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKey {
    pub key: Vec<u8>,
    pub until: Option<Timestamp>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub message_id: String,
    pub at: Timestamp,
    pub attempt: u32,
    pub outcome: String,
    pub latency_ms: u64,
}

/// A subscription as stored, and as the verbs answer it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    pub id: String,
    pub url: String,
    pub filter: SubFilter,
    pub state: SubState,
    pub note: Option<String>,
    /// The position as [`Cursor::encode`] spells it; `None` for the start.
    pub position: Option<String>,
    pub keys: Vec<SigningKey>,
    pub created_at: Timestamp,
    pub revision: u64,
    pub attempts: Vec<Attempt>,
    pub lease_holder: Option<String>,
    pub lease_until: Option<Timestamp>,
}

impl Subscription {
    /// The position read, the start when none.
    pub fn cursor(&self) -> Result<Cursor, StoreError> {
        match &self.position {
            None => Ok(Cursor::START),
            Some(p) => Cursor::parse(p).map_err(|_| {
                StoreError::Corrupt(format!(
                    "subscription {}: the stored position {p:?} is not one",
                    self.id
                ))
            }),
        }
    }

    /// Whether `trim` keeps what it is owed: every state but `gone`, since
    /// a paused or failing subscription re-sends from its position when
    /// resumed.
    pub fn live(&self) -> bool {
        self.state != SubState::Gone
    }
}

/// A URL: `http://` or `https://`, a host, at most [`MAX_URL_BYTES`], no
/// spaces or control characters. Which addresses may be reached is the
/// sender's rule, checked when it connects.
pub fn check_url(url: &str) -> Result<(), StoreError> {
    if url.len() > MAX_URL_BYTES {
        return Err(invalid(format!(
            "url is {} bytes, more than {MAX_URL_BYTES}",
            url.len()
        )));
    }
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| invalid("url must start with https:// or http://"))?;
    if let Some(c) = url.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(invalid(format!(
            "url contains the character U+{:04X}",
            u32::from(c)
        )));
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    if host.is_empty() || host.starts_with(':') {
        return Err(invalid("url has no host"));
    }
    Ok(())
}

/// A filter: tasks, timers or both; lists of names, deduplicated.
pub fn check_filter(filter: &SubFilter) -> Result<SubFilter, StoreError> {
    if !filter.tasks && !filter.timers {
        return Err(invalid(
            "filter takes neither tasks nor timers: it would match nothing",
        ));
    }
    let list = |field: &str, items: &[String]| -> Result<Vec<String>, StoreError> {
        if items.len() > MAX_FILTER_ITEMS {
            return Err(invalid(format!(
                "{field} has {} items, more than {MAX_FILTER_ITEMS}",
                items.len()
            )));
        }
        validate::names(field, items)
    };
    Ok(SubFilter {
        tasks: filter.tasks,
        timers: filter.timers,
        verbs: list("filter.verbs", &filter.verbs)?,
        kinds: list("filter.kinds", &filter.kinds)?,
        runs: list("filter.runs", &filter.runs)?,
        settling_only: filter.settling_only,
    })
}

pub fn check_key(key: &[u8]) -> Result<(), StoreError> {
    if !(KEY_MIN_BYTES..=KEY_MAX_BYTES).contains(&key.len()) {
        return Err(invalid(format!(
            "key is {} bytes; it must be {KEY_MIN_BYTES}-{KEY_MAX_BYTES}",
            key.len()
        )));
    }
    Ok(())
}

/// A note or an outcome: 1–1024 characters of text.
pub fn check_text(field: &str, value: &str) -> Result<(), StoreError> {
    let chars = value.chars().count();
    if chars == 0 || chars > MAX_NOTE_CHARS {
        return Err(invalid(format!(
            "{field} is {chars} characters; it must be 1-{MAX_NOTE_CHARS}"
        )));
    }
    validate::text(field, value)
}

pub fn check_attempt(a: &Attempt) -> Result<(), StoreError> {
    validate::name("attempts.message-id", &a.message_id)?;
    validate::timestamp("attempts.at", a.at)?;
    check_text("attempts.outcome", &a.outcome)
}

fn decode(id: &str, bytes: &[u8]) -> Result<Subscription, StoreError> {
    let row: Subscription = match postcard::take_from_bytes(bytes) {
        Ok((row, [])) => row,
        Ok((_, left)) => {
            return Err(StoreError::Corrupt(format!(
                "subscription {id}: {} bytes left over after the row",
                left.len()
            )));
        }
        Err(e) => return Err(StoreError::Corrupt(format!("subscription {id}: {e}"))),
    };
    if row.id != id {
        return Err(StoreError::Corrupt(format!(
            "subscription {id}: the row is stored under another id ({})",
            row.id
        )));
    }
    Ok(row)
}

pub fn load<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<Subscription>, StoreError> {
    kv.get(schema::subscription(id).as_bytes())?
        .map(|b| decode(id, &b))
        .transpose()
}

/// A row read by a scan of the subscriptions' range.
pub fn decode_listed(id: &str, bytes: &[u8]) -> Result<Subscription, StoreError> {
    decode(id, bytes)
}

pub fn save<K: Kv + ?Sized>(kv: &mut K, row: &Subscription) -> Result<(), StoreError> {
    kv.set(
        schema::subscription(&row.id).as_bytes(),
        &store::encode_row(row)?,
    )?;
    Ok(())
}

/// What a stored row must hold beyond decoding under its id: the rules it
/// was written under, and a position inside the feed (`head`, `floor`:
/// the feed's, `None` for a keyspace with no feed yet). Each finding is a
/// sentence.
pub fn findings(row: &Subscription, feed: Option<(&Cursor, &Cursor)>) -> Vec<String> {
    let mut out = Vec::new();
    if let Err(StoreError::Invalid(why)) = check_url(&row.url) {
        out.push(format!("its url breaks the rules: {why}"));
    }
    match check_filter(&row.filter) {
        Err(StoreError::Invalid(why)) => out.push(format!("its filter breaks the rules: {why}")),
        Ok(f) if f != row.filter => out.push("its filter holds a name twice".to_owned()),
        _ => {}
    }
    if row.keys.is_empty() || row.keys.len() > MAX_KEYS {
        out.push(format!(
            "it has {} signing keys; it must have 1-{MAX_KEYS}",
            row.keys.len()
        ));
    }
    if row.keys.iter().any(|k| check_key(&k.key).is_err()) {
        out.push("a signing key has the wrong length".to_owned());
    }
    if row.keys.last().is_some_and(|k| k.until.is_some()) {
        out.push("its current key has an end".to_owned());
    }
    if row.attempts.len() > MAX_ATTEMPTS {
        out.push(format!(
            "it keeps {} attempts, more than {MAX_ATTEMPTS}",
            row.attempts.len()
        ));
    }
    if row.revision == 0 {
        out.push("its revision is 0".to_owned());
    }
    if row.lease_holder.is_some() != row.lease_until.is_some() {
        out.push("its lease has a holder or an end but not both".to_owned());
    }
    match (row.cursor(), feed) {
        (Err(StoreError::Corrupt(why)), _) => out.push(why),
        (Ok(c), Some((head, floor))) => {
            for s in 0..schema::MAX_SHARDS {
                if c.get(s) > head.get(s) {
                    out.push(format!(
                        "its position is past the feed's head in slot {s} ({} > {})",
                        c.get(s),
                        head.get(s)
                    ));
                } else if row.live() && c.get(s) < floor.get(s) {
                    out.push(format!(
                        "it is {:?} but the feed was trimmed past its position in slot {s} ({} < {})",
                        row.state,
                        c.get(s),
                        floor.get(s)
                    ));
                }
            }
        }
        (Ok(c), None) if c != Cursor::START => {
            out.push("it has a position in a keyspace with no feed".to_owned())
        }
        _ => {}
    }
    out
}
