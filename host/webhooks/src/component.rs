//! [`ComponentStore`]: subscriptions kept where a deployment keeps them,
//! as rows of each tenant's own keyspace through the component's
//! `subscriptions` interface ([`leasehold_host::Tenant`]'s methods). So
//! backup, restore, copy and export carry them, several servers on one
//! PostgreSQL database share them, and `trim` keeps what they are owed.
//! This module only translates between the engine's view of a
//! subscription and the component's; every rule is the component's.

use leasehold_guest::subscriptions as rows;
use leasehold_host::{Engine, Error, StoreError as EngineStoreError, Tenant};

use crate::filter::Filter;
use crate::sender::Outcome;
use crate::signing::Secret;
use crate::store::{
    AttemptRecord, SigningKey, StoreError, SubState, Subscription, SubscriptionStore, Update,
};

/// Subscriptions as rows of each tenant's keyspace. Cheap to clone.
#[derive(Clone)]
pub struct ComponentStore {
    engine: Engine,
}

impl std::fmt::Debug for ComponentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentStore").finish_non_exhaustive()
    }
}

impl ComponentStore {
    /// The subscriptions of `engine`'s tenants.
    pub fn new(engine: Engine) -> ComponentStore {
        ComponentStore { engine }
    }

    fn tenant(&self, tenant: &str) -> Result<Tenant, StoreError> {
        Ok(self.engine.tenant(tenant)?)
    }

    /// What an update answered, as the engine reads it: a stale revision
    /// reads the row again to hand it over; a missing row is `Missing`.
    fn update(
        &self,
        t: &Tenant,
        id: &str,
        answer: Result<rows::Subscription, Error>,
    ) -> Result<Update, StoreError> {
        match answer {
            Ok(sub) => Ok(Update::Done(from_row(sub)?)),
            Err(Error::Store(EngineStoreError::NotFound(_))) => Ok(Update::Missing),
            Err(Error::Store(EngineStoreError::Stale(_))) => match t.get_subscription(id)? {
                Some(sub) => Ok(Update::Stale(from_row(sub)?)),
                None => Ok(Update::Missing),
            },
            Err(e) => Err(e.into()),
        }
    }
}

/// The component's state, as the engine names it.
pub fn state_from_row(s: rows::SubState) -> SubState {
    match s {
        rows::SubState::Active => SubState::Active,
        rows::SubState::Paused => SubState::Paused,
        rows::SubState::Failing => SubState::Failing,
        rows::SubState::Gone => SubState::Gone,
    }
}

/// The engine's state, as the component names it.
pub fn state_to_row(s: SubState) -> rows::SubState {
    match s {
        SubState::Active => rows::SubState::Active,
        SubState::Paused => rows::SubState::Paused,
        SubState::Failing => rows::SubState::Failing,
        SubState::Gone => rows::SubState::Gone,
    }
}

/// A filter as the component keeps it.
pub fn filter_to_row(f: &Filter) -> rows::SubFilter {
    rows::SubFilter {
        tasks: f.tasks,
        timers: f.timers,
        verbs: f.verbs.clone(),
        kinds: f.kinds.clone(),
        runs: f.runs.clone(),
        settling_only: f.settling_only,
    }
}

/// A filter as the engine matches it.
pub fn filter_from_row(f: rows::SubFilter) -> Filter {
    Filter {
        tasks: f.tasks,
        timers: f.timers,
        verbs: f.verbs,
        kinds: f.kinds,
        runs: f.runs,
        settling_only: f.settling_only,
    }
}

/// An attempt's outcome in one short word or phrase, as the component
/// keeps it: `200`, `timeout`, `refused: …`, `failed: …`.
pub fn outcome_text(o: &Outcome) -> String {
    let text = match o {
        Outcome::Status(s) => s.to_string(),
        Outcome::Timeout => "timeout".to_owned(),
        Outcome::Refused(why) => format!("refused: {why}"),
        Outcome::Failed(why) => format!("failed: {why}"),
    };
    // The component keeps at most 1,024 characters.
    text.chars().take(1024).collect()
}

/// [`outcome_text`] read back.
pub fn outcome_from_text(text: &str) -> Outcome {
    if let Ok(status) = text.parse::<u16>() {
        return Outcome::Status(status);
    }
    if text == "timeout" {
        return Outcome::Timeout;
    }
    if let Some(why) = text.strip_prefix("refused: ") {
        return Outcome::Refused(why.to_owned());
    }
    Outcome::Failed(text.strip_prefix("failed: ").unwrap_or(text).to_owned())
}

/// A subscription as the component answered it, as the engine delivers it.
pub fn from_row(sub: rows::Subscription) -> Result<Subscription, StoreError> {
    let secrets = sub
        .keys
        .into_iter()
        .map(|k| {
            Ok(SigningKey {
                secret: Secret::from_bytes(k.key).map_err(StoreError::new)?,
                until: k.until,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Subscription {
        id: sub.id,
        url: sub.url,
        filter: filter_from_row(sub.filter),
        state: state_from_row(sub.state),
        position: sub.position,
        secrets,
        note: sub.note,
        created_at: sub.created_at,
        revision: sub.revision,
        attempts: sub
            .attempts
            .into_iter()
            .map(|a| AttemptRecord {
                message_id: a.message_id,
                at: a.at,
                attempt: a.attempt,
                outcome: outcome_from_text(&a.outcome),
                latency_ms: a.latency_ms,
            })
            .collect(),
    })
}

impl SubscriptionStore for ComponentStore {
    fn list(&self, tenant: &str) -> Result<Vec<Subscription>, StoreError> {
        let t = self.tenant(tenant)?;
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = t.list_subscriptions(100, after.as_deref())?;
            for sub in page.subscriptions {
                out.push(from_row(sub)?);
            }
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }

    fn get(&self, tenant: &str, id: &str) -> Result<Option<Subscription>, StoreError> {
        self.tenant(tenant)?
            .get_subscription(id)?
            .map(from_row)
            .transpose()
    }

    fn lease(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        now: i64,
        lease_ms: u32,
    ) -> Result<bool, StoreError> {
        Ok(self
            .tenant(tenant)?
            .lease_subscription(id, holder, now, lease_ms)?)
    }

    fn release(&self, tenant: &str, id: &str, holder: &str) -> Result<(), StoreError> {
        Ok(self.tenant(tenant)?.release_subscription(id, holder)?)
    }

    fn advance(
        &self,
        tenant: &str,
        id: &str,
        revision: u64,
        position: &str,
    ) -> Result<Update, StoreError> {
        let t = self.tenant(tenant)?;
        let answer = t.advance_subscription(id, revision, position);
        self.update(&t, id, answer)
    }

    fn set_state(
        &self,
        tenant: &str,
        id: &str,
        revision: u64,
        state: SubState,
        note: Option<String>,
    ) -> Result<Update, StoreError> {
        let t = self.tenant(tenant)?;
        // The component keeps at most 1,024 characters of a note.
        let note: Option<String> = note.map(|n| n.chars().take(1024).collect());
        let answer = t.set_subscription_state(
            id,
            state_to_row(state),
            note.as_deref().filter(|n| !n.is_empty()),
            Some(revision),
        );
        self.update(&t, id, answer)
    }

    fn record_attempts(
        &self,
        tenant: &str,
        id: &str,
        attempts: &[AttemptRecord],
    ) -> Result<(), StoreError> {
        let t = self.tenant(tenant)?;
        let rows: Vec<rows::Attempt> = attempts
            .iter()
            .map(|a| rows::Attempt {
                message_id: a.message_id.clone(),
                at: a.at,
                attempt: a.attempt,
                outcome: outcome_text(&a.outcome),
                latency_ms: a.latency_ms,
            })
            .collect();
        // The component takes at most 20 a call, and keeps the last 20.
        let start = rows.len().saturating_sub(rows::row::MAX_ATTEMPTS);
        match t.record_subscription_attempts(id, &rows[start..]) {
            Ok(()) | Err(Error::Store(EngineStoreError::NotFound(_))) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn rewind(&self, tenant: &str, id: &str, position: Option<&str>) -> Result<Update, StoreError> {
        let t = self.tenant(tenant)?;
        let answer = t.rewind_subscription(id, position);
        self.update(&t, id, answer)
    }
}
