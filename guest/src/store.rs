//! Rows, counters and the layout mark: reading and writing them so that a row
//! and everything derived from it change together, in the caller's call.
//!
//! A row that does not decode is `corrupt`, never a default. Index entries are
//! derived from the parsed row by one function per row kind and written as the
//! difference between the old and new derivations, so no verb can forget one.

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::keys::{self, Elem, Key};
use crate::kv::Kv;
use crate::model::{OnExpiry, Phase, Priority, StoreError, Task, TaskState, Timer, Timestamp};
use crate::schema;

/// How many entries a verb asks for per scan while it walks a range.
pub const SCAN_CHUNK: u32 = 256;

/// A stored task: the task plus what the contract needs but the caller never
/// sets. Stored as one JSON object: the task's fields, then these (see
/// [`TaskRowJson`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRow {
    pub task: Task,
    /// Escalation has fired once: the task never returns to the overdue scan,
    /// and a release puts it back as `escalated`, audience still widened.
    pub ever_escalated: bool,
}

impl TaskRow {
    /// Still owed to the expiry sweep.
    pub fn awaits_expiry(&self) -> bool {
        matches!(self.task.state, TaskState::Open | TaskState::Claimed) && !self.ever_escalated
    }

    /// Every index key this row implies.
    pub fn index_keys(&self) -> Vec<Vec<u8>> {
        let t = &self.task;
        let mut out = Vec::new();
        if t.state.is_queued() {
            let pos = schema::queue_position(t.priority.rank(), t.created_at, &t.id);
            if t.candidate_roles.is_empty() {
                out.push(schema::queue_any().raw(pos.as_bytes()).into_bytes());
            }
            for role in &t.candidate_roles {
                out.push(schema::queue_role(role).raw(pos.as_bytes()).into_bytes());
            }
        }
        if let Some(due) = t.due_at.filter(|_| self.awaits_expiry()) {
            out.push(schema::overdue_entry(due, &t.id).into_bytes());
        }
        if let Some(case) = &t.case {
            out.push(
                schema::case(case)
                    .raw(schema::case_position(t.created_at, &t.id).as_bytes())
                    .into_bytes(),
            );
        }
        out
    }
}

/// A stored timer and its lease. Stored as one JSON object: the timer's
/// fields, then `lease_until` (see [`TimerRowJson`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerRow {
    pub timer: Timer,
    /// Held by a sweeper until this instant.
    pub lease_until: Option<Timestamp>,
}

impl TimerRow {
    /// The instant from which a sweep may claim this timer.
    pub fn claimable_at(&self) -> Timestamp {
        self.lease_until.unwrap_or(self.timer.fire_at)
    }

    pub fn due_key(&self) -> Key {
        schema::due_entry(self.claimable_at(), &self.timer.run, &self.timer.effect)
    }
}

// The stored JSON of a row is its domain value's fields and the row's own,
// side by side in one object. The row types spell that shape out instead of
// deriving it with `#[serde(flatten)]`, which buffers every field of every
// row through an intermediate map on the way in: that made decoding a row
// about twice as slow, most of all inside the component, where every verb
// pays it. The bytes are the same (the tests below hold the flattened shape
// as the oracle). A field added to `Task` or `Timer` fails to compile here
// until it is added to the row shape too, serde attributes included.

/// The JSON object of a [`TaskRow`].
#[derive(Serialize, Deserialize)]
#[serde(rename = "TaskRow")]
struct TaskRowJson<S, L> {
    id: S,
    run: S,
    case: Option<S>,
    kind: S,
    justification: S,
    candidate_roles: L,
    assignee: Option<S>,
    priority: Priority,
    state: TaskState,
    on_expiry: OnExpiry,
    escalate_to: L,
    excluded_actors: L,
    created_at: Timestamp,
    due_at: Option<Timestamp>,
    ever_escalated: bool,
}

impl Serialize for TaskRow {
    fn serialize<Z: Serializer>(&self, z: Z) -> Result<Z::Ok, Z::Error> {
        let Task {
            id,
            run,
            case,
            kind,
            justification,
            candidate_roles,
            assignee,
            priority,
            state,
            on_expiry,
            escalate_to,
            excluded_actors,
            created_at,
            due_at,
        } = &self.task;
        TaskRowJson::<&str, &[String]> {
            id,
            run,
            case: case.as_deref(),
            kind,
            justification,
            candidate_roles,
            assignee: assignee.as_deref(),
            priority: *priority,
            state: *state,
            on_expiry: *on_expiry,
            escalate_to,
            excluded_actors,
            created_at: *created_at,
            due_at: *due_at,
            ever_escalated: self.ever_escalated,
        }
        .serialize(z)
    }
}

impl<'de> Deserialize<'de> for TaskRow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let TaskRowJson::<String, Vec<String>> {
            id,
            run,
            case,
            kind,
            justification,
            candidate_roles,
            assignee,
            priority,
            state,
            on_expiry,
            escalate_to,
            excluded_actors,
            created_at,
            due_at,
            ever_escalated,
        } = d.deserialize_map(ObjectOnly::new("struct TaskRow"))?;
        Ok(TaskRow {
            task: Task {
                id,
                run,
                case,
                kind,
                justification,
                candidate_roles,
                assignee,
                priority,
                state,
                on_expiry,
                escalate_to,
                excluded_actors,
                created_at,
                due_at,
            },
            ever_escalated,
        })
    }
}

/// The JSON object of a [`TimerRow`].
#[derive(Serialize, Deserialize)]
#[serde(rename = "TimerRow")]
struct TimerRowJson<S> {
    run: S,
    case: Option<S>,
    effect: S,
    step: u32,
    phase: Phase,
    fire_at: Timestamp,
    lease_until: Option<Timestamp>,
}

impl Serialize for TimerRow {
    fn serialize<Z: Serializer>(&self, z: Z) -> Result<Z::Ok, Z::Error> {
        let Timer {
            run,
            case,
            effect,
            step,
            phase,
            fire_at,
        } = &self.timer;
        TimerRowJson::<&str> {
            run,
            case: case.as_deref(),
            effect,
            step: *step,
            phase: *phase,
            fire_at: *fire_at,
            lease_until: self.lease_until,
        }
        .serialize(z)
    }
}

impl<'de> Deserialize<'de> for TimerRow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let TimerRowJson::<String> {
            run,
            case,
            effect,
            step,
            phase,
            fire_at,
            lease_until,
        } = d.deserialize_map(ObjectOnly::new("struct TimerRow"))?;
        Ok(TimerRow {
            timer: Timer {
                run,
                case,
                effect,
                step,
                phase,
                fire_at,
            },
            lease_until,
        })
    }
}

/// Decodes `T` from a JSON object and nothing else: a derived struct would
/// also take an array of its fields in order, which no row ever was (the
/// flattened derive this replaces refused one as corrupt, and so does this).
struct ObjectOnly<T> {
    expecting: &'static str,
    row: std::marker::PhantomData<T>,
}

impl<T> ObjectOnly<T> {
    fn new(expecting: &'static str) -> Self {
        ObjectOnly {
            expecting,
            row: std::marker::PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

/// Refuses a keyspace written in a layout this component does not know, and
/// marks a fresh one when `writing`.
pub fn check_layout<K: Kv + ?Sized>(kv: &mut K, writing: bool) -> Result<(), StoreError> {
    match kv.get(schema::layout().as_bytes())? {
        Some(v) if v == schema::LAYOUT_VERSION.as_bytes() => Ok(()),
        Some(v) => Err(corrupt(format!(
            "the keyspace has layout {:?}; this component knows layout {}",
            String::from_utf8_lossy(&v),
            schema::LAYOUT_VERSION
        ))),
        None if writing => Ok(kv.set(
            schema::layout().as_bytes(),
            schema::LAYOUT_VERSION.as_bytes(),
        )?),
        None => Ok(()),
    }
}

pub fn read_counter<K: Kv + ?Sized>(kv: &mut K, name: &str) -> Result<u64, StoreError> {
    match kv.get(schema::counter(name).as_bytes())? {
        None => Ok(0),
        Some(v) => {
            let raw: [u8; 8] = v
                .as_slice()
                .try_into()
                .map_err(|_| corrupt(format!("counter {name} holds {} bytes, not 8", v.len())))?;
            Ok(u64::from_be_bytes(raw))
        }
    }
}

pub fn add_to_counter<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    delta: i64,
) -> Result<(), StoreError> {
    if delta == 0 {
        return Ok(());
    }
    let now = read_counter(kv, name)?;
    let next = now.checked_add_signed(delta).ok_or_else(|| {
        corrupt(format!(
            "counter {name} is {now} and cannot move by {delta}"
        ))
    })?;
    Ok(kv.set(schema::counter(name).as_bytes(), &next.to_be_bytes())?)
}

pub fn load_task<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<TaskRow>, StoreError> {
    let Some(bytes) = kv.get(schema::task(id).as_bytes())? else {
        return Ok(None);
    };
    let row = decode_task(&bytes).map_err(|e| corrupt(format!("task {id}: {e}")))?;
    if row.task.id != id {
        return Err(corrupt(format!(
            "task {id}: the row is stored under another id ({})",
            row.task.id
        )));
    }
    Ok(Some(row))
}

pub fn decode_task(bytes: &[u8]) -> Result<TaskRow, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// Loads a task an index entry points at; a missing row is damage.
pub fn indexed_task<K: Kv + ?Sized>(kv: &mut K, id: &str, index: &str) -> Result<Task, StoreError> {
    load_task(kv, id)?
        .map(|r| r.task)
        .ok_or_else(|| corrupt(format!("{index} lists task {id}, which has no row")))
}

fn encode_row(row: &impl Serialize) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(row).map_err(|e| StoreError::Storage(format!("cannot encode a row: {e}")))
}

/// Writes a task row and moves its index entries and the open counter from
/// what `old` implied to what `new` implies.
pub fn write_task<K: Kv + ?Sized>(
    kv: &mut K,
    old: Option<&TaskRow>,
    new: &TaskRow,
) -> Result<(), StoreError> {
    kv.set(schema::task(&new.task.id).as_bytes(), &encode_row(new)?)?;
    let before = old.map(TaskRow::index_keys).unwrap_or_default();
    let after = new.index_keys();
    for k in before.iter().filter(|k| !after.contains(k)) {
        kv.delete(k)?;
    }
    for k in after.iter().filter(|k| !before.contains(k)) {
        kv.set(k, &[])?;
    }
    let was = old.is_some_and(|r| r.task.state.is_pending());
    let is = new.task.state.is_pending();
    add_to_counter(kv, schema::OPEN_TASKS, i64::from(is) - i64::from(was))
}

pub fn load_timer<K: Kv + ?Sized>(
    kv: &mut K,
    run: &str,
    effect: &str,
) -> Result<Option<TimerRow>, StoreError> {
    let Some(bytes) = kv.get(schema::timer(run, effect).as_bytes())? else {
        return Ok(None);
    };
    let row = decode_timer(&bytes).map_err(|e| corrupt(format!("timer {run}/{effect}: {e}")))?;
    if row.timer.run != run || row.timer.effect != effect {
        return Err(corrupt(format!(
            "timer {run}/{effect}: the row is stored under another identity"
        )));
    }
    Ok(Some(row))
}

pub fn decode_timer(bytes: &[u8]) -> Result<TimerRow, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// Writes a timer row, moving its due entry; `old` is what was stored.
pub fn write_timer<K: Kv + ?Sized>(
    kv: &mut K,
    old: Option<&TimerRow>,
    new: &TimerRow,
) -> Result<(), StoreError> {
    let t = &new.timer;
    kv.set(
        schema::timer(&t.run, &t.effect).as_bytes(),
        &encode_row(new)?,
    )?;
    let due = new.due_key();
    match old {
        Some(o) if o.due_key() == due => {}
        Some(o) => {
            kv.delete(o.due_key().as_bytes())?;
            kv.set(due.as_bytes(), &[])?;
        }
        None => {
            kv.set(due.as_bytes(), &[])?;
            add_to_counter(kv, schema::ARMED_TIMERS, 1)?;
        }
    }
    Ok(())
}

/// Removes a timer with its due entry.
pub fn retire_timer<K: Kv + ?Sized>(kv: &mut K, row: &TimerRow) -> Result<(), StoreError> {
    let t = &row.timer;
    kv.delete(schema::timer(&t.run, &t.effect).as_bytes())?;
    kv.delete(row.due_key().as_bytes())?;
    add_to_counter(kv, schema::ARMED_TIMERS, -1)
}

pub fn is_sealed<K: Kv + ?Sized>(kv: &mut K, run: &str) -> Result<bool, StoreError> {
    Ok(kv.get(schema::sealed(run).as_bytes())?.is_some())
}

/// Decodes the tuple that follows `prefix` in `key`.
pub fn suffix(key: &[u8], prefix: &Key) -> Result<Vec<Elem>, StoreError> {
    let rest = key
        .strip_prefix(prefix.as_bytes())
        .ok_or_else(|| corrupt("an index entry lies outside its range"))?;
    keys::decode(rest).map_err(|e| corrupt(format!("an index key does not decode: {e}")))
}

/// Walks every key of `prefix` in order, in chunks, calling `f` with each
/// entry; `f` answers whether to go on.
pub fn walk<K: Kv + ?Sized>(
    kv: &mut K,
    prefix: &Key,
    mut f: impl FnMut(&mut K, Vec<u8>, Vec<u8>) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let end = prefix.prefix_end();
    let mut start = prefix.as_bytes().to_vec();
    loop {
        let chunk = kv.scan(&start, Some(&end), SCAN_CHUNK, false)?;
        let full = chunk.len() == SCAN_CHUNK as usize;
        let Some(last) = chunk.last().map(|(k, _)| k.clone()) else {
            return Ok(());
        };
        for (k, v) in chunk {
            if !f(kv, k, v)? {
                return Ok(());
            }
        }
        if !full {
            return Ok(());
        }
        start = last;
        start.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape rows had when they were derived with `#[serde(flatten)]`:
    /// the oracle for the spelled-out one.
    #[derive(Serialize, Deserialize)]
    struct FlatTaskRow {
        #[serde(flatten)]
        task: Task,
        ever_escalated: bool,
    }

    #[derive(Serialize, Deserialize)]
    struct FlatTimerRow {
        #[serde(flatten)]
        timer: Timer,
        lease_until: Option<Timestamp>,
    }

    fn tasks() -> Vec<Task> {
        let full = Task {
            id: "t-1".into(),
            run: "r".into(),
            case: Some("c \"quoted\" é".into()),
            kind: "approve".into(),
            justification: r#"{"why":["a",1,null]}"#.into(),
            candidate_roles: vec!["reviewer".into(), "lead".into()],
            assignee: Some("alice".into()),
            priority: Priority::Urgent,
            state: TaskState::Claimed,
            on_expiry: OnExpiry::Escalate,
            escalate_to: vec!["manager".into()],
            excluded_actors: vec!["mallory".into()],
            created_at: -5,
            due_at: Some(253_402_300_799_999),
        };
        let bare = Task {
            case: None,
            assignee: None,
            candidate_roles: Vec::new(),
            escalate_to: Vec::new(),
            excluded_actors: Vec::new(),
            due_at: None,
            ..full.clone()
        };
        vec![full, bare]
    }

    #[test]
    fn task_rows_keep_the_bytes_of_the_flattened_shape() {
        for task in tasks() {
            for ever_escalated in [false, true] {
                let row = TaskRow {
                    task: task.clone(),
                    ever_escalated,
                };
                let flat = FlatTaskRow {
                    task: task.clone(),
                    ever_escalated,
                };
                let bytes = serde_json::to_vec(&row).expect("encodes");
                assert_eq!(bytes, serde_json::to_vec(&flat).expect("encodes"));
                assert_eq!(decode_task(&bytes).expect("decodes"), row);
            }
        }
    }

    #[test]
    fn timer_rows_keep_the_bytes_of_the_flattened_shape() {
        for (case, lease_until) in [(Some("c".to_owned()), Some(7)), (None, None)] {
            let timer = Timer {
                run: "r".into(),
                case,
                effect: "e".into(),
                step: 3,
                phase: Phase::Compensating,
                fire_at: 42,
            };
            let row = TimerRow {
                timer: timer.clone(),
                lease_until,
            };
            let flat = FlatTimerRow { timer, lease_until };
            let bytes = serde_json::to_vec(&row).expect("encodes");
            assert_eq!(bytes, serde_json::to_vec(&flat).expect("encodes"));
            assert_eq!(decode_timer(&bytes).expect("decodes"), row);
        }
    }

    #[test]
    fn rows_decode_as_the_flattened_shape_did() {
        // Missing optional fields are absent values; unknown fields are
        // ignored; anything but an object, a missing required field or a
        // repeated one is refused.
        let ok = br#"{"id":"t","run":"r","kind":"k","justification":"{}","candidate_roles":[],"priority":"low","state":"open","on_expiry":"deny","escalate_to":[],"excluded_actors":[],"created_at":1,"ever_escalated":false,"added_later":[1]}"#;
        let row = decode_task(ok).expect("decodes");
        assert_eq!(row.task.case, None);
        assert_eq!(row.task.due_at, None);
        assert!(serde_json::from_slice::<FlatTaskRow>(ok).is_ok());
        let text = std::str::from_utf8(ok).expect("utf-8");
        for bad in [
            text.replace(r#""id":"t","#, ""),
            text.replace(r#","ever_escalated":false"#, ""),
            text.replace(r#""run":"r","#, r#""run":"r","run":"s","#),
            text.replace(r#""created_at":1"#, r#""created_at":1.5"#),
            r#"["t","r",null,"k","{}",[],null,"low","open","deny",[],[],1,null,false]"#.to_owned(),
            "null".to_owned(),
        ] {
            assert!(decode_task(bad.as_bytes()).is_err(), "accepted {bad}");
            assert!(
                serde_json::from_str::<FlatTaskRow>(&bad).is_err(),
                "the oracle accepted {bad}"
            );
        }
        let timer = br#"{"run":"r","effect":"e","step":1,"phase":"forward","fire_at":5,"lease_until":null}"#;
        assert!(decode_timer(timer).is_ok());
        assert!(decode_timer(br#"["r",null,"e",1,"forward",5,null]"#).is_err());
    }
}
