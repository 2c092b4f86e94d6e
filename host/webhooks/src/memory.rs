//! [`MemoryStore`]: subscriptions in an in-process map, for tests and
//! examples. It keeps the [`SubscriptionStore`] contract exactly (leases,
//! revisions, positions that never go back) so the engine's tests exercise
//! the real rules, but holds nothing across a process's restart and is
//! shared by no other server: a deployment keeps subscriptions in the
//! tenant's keyspace. It must never be what a server runs on.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use leasehold_guest::changes::Cursor;

use crate::signing::Secret;
use crate::store::{
    AttemptRecord, SigningKey, StoreError, SubState, Subscription, SubscriptionStore, Update,
};

/// How many attempts a subscription keeps.
pub const ATTEMPTS_KEPT: usize = 32;

struct Row {
    sub: Subscription,
    lease: Option<(String, i64)>,
}

/// Subscriptions in memory. See the module doc.
#[derive(Default)]
pub struct MemoryStore {
    rows: Mutex<BTreeMap<(String, String), Row>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

/// The later of two positions, slot by slot.
fn later(a: &str, b: &str) -> Result<String, StoreError> {
    let parse = |p: &str| Cursor::parse(p).map_err(|e| StoreError::new(e.to_string()));
    let (a, b) = (parse(a)?, parse(b)?);
    let mut seqs = a.seqs();
    for (seq, other) in seqs.iter_mut().zip(b.seqs()) {
        *seq = (*seq).max(other);
    }
    Cursor::from_seqs(seqs)
        .map(|c| c.encode())
        .ok_or_else(|| StoreError::new("a position out of range"))
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<(String, String), Row>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `sub` to `tenant` (replacing one of the same id).
    pub fn insert(&self, tenant: &str, sub: Subscription) {
        self.lock().insert(
            (tenant.to_owned(), sub.id.clone()),
            Row { sub, lease: None },
        );
    }

    /// Deletes a subscription; whether there was one.
    pub fn remove(&self, tenant: &str, id: &str) -> bool {
        self.lock()
            .remove(&(tenant.to_owned(), id.to_owned()))
            .is_some()
    }

    /// Changes a subscription as an operator would (URL, filter, state…):
    /// `change` edits it, and the revision goes up by one.
    pub fn change(
        &self,
        tenant: &str,
        id: &str,
        change: impl FnOnce(&mut Subscription),
    ) -> Option<Subscription> {
        let mut rows = self.lock();
        let row = rows.get_mut(&(tenant.to_owned(), id.to_owned()))?;
        change(&mut row.sub);
        row.sub.revision += 1;
        Some(row.sub.clone())
    }

    /// Rotates the signing key: `new` signs from now on, and the current
    /// keys keep signing beside it until `old_until` (ms).
    pub fn rotate(
        &self,
        tenant: &str,
        id: &str,
        new: Secret,
        old_until: i64,
    ) -> Option<Subscription> {
        self.change(tenant, id, |s| {
            for k in &mut s.secrets {
                k.until = Some(k.until.map_or(old_until, |u| u.min(old_until)));
            }
            s.secrets.push(SigningKey {
                secret: new,
                until: None,
            });
        })
    }

    /// Who holds a subscription's lease, and until when.
    pub fn lease_of(&self, tenant: &str, id: &str) -> Option<(String, i64)> {
        self.lock()
            .get(&(tenant.to_owned(), id.to_owned()))
            .and_then(|r| r.lease.clone())
    }
}

impl SubscriptionStore for MemoryStore {
    fn list(&self, tenant: &str) -> Result<Vec<Subscription>, StoreError> {
        Ok(self
            .lock()
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|(_, r)| r.sub.clone())
            .collect())
    }

    fn get(&self, tenant: &str, id: &str) -> Result<Option<Subscription>, StoreError> {
        Ok(self
            .lock()
            .get(&(tenant.to_owned(), id.to_owned()))
            .map(|r| r.sub.clone()))
    }

    fn lease(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        now: i64,
        lease_ms: u32,
    ) -> Result<bool, StoreError> {
        let mut rows = self.lock();
        let Some(row) = rows.get_mut(&(tenant.to_owned(), id.to_owned())) else {
            return Ok(false);
        };
        let free = match &row.lease {
            None => true,
            Some((h, until)) => h == holder || *until <= now,
        };
        if free {
            row.lease = Some((holder.to_owned(), now.saturating_add(i64::from(lease_ms))));
        }
        Ok(free)
    }

    fn release(&self, tenant: &str, id: &str, holder: &str) -> Result<(), StoreError> {
        let mut rows = self.lock();
        if let Some(row) = rows.get_mut(&(tenant.to_owned(), id.to_owned()))
            && row.lease.as_ref().is_some_and(|(h, _)| h == holder)
        {
            row.lease = None;
        }
        Ok(())
    }

    fn advance(
        &self,
        tenant: &str,
        id: &str,
        revision: u64,
        position: &str,
    ) -> Result<Update, StoreError> {
        let mut rows = self.lock();
        let Some(row) = rows.get_mut(&(tenant.to_owned(), id.to_owned())) else {
            return Ok(Update::Missing);
        };
        if row.sub.revision != revision {
            return Ok(Update::Stale(row.sub.clone()));
        }
        let current = row.sub.position.as_deref().unwrap_or("f");
        row.sub.position = Some(later(current, position)?);
        Ok(Update::Done(row.sub.clone()))
    }

    fn set_state(
        &self,
        tenant: &str,
        id: &str,
        revision: u64,
        state: SubState,
        note: Option<String>,
    ) -> Result<Update, StoreError> {
        let mut rows = self.lock();
        let Some(row) = rows.get_mut(&(tenant.to_owned(), id.to_owned())) else {
            return Ok(Update::Missing);
        };
        if row.sub.revision != revision {
            return Ok(Update::Stale(row.sub.clone()));
        }
        row.sub.state = state;
        row.sub.note = note;
        row.sub.revision += 1;
        Ok(Update::Done(row.sub.clone()))
    }

    fn record_attempts(
        &self,
        tenant: &str,
        id: &str,
        attempts: &[AttemptRecord],
    ) -> Result<(), StoreError> {
        let mut rows = self.lock();
        if let Some(row) = rows.get_mut(&(tenant.to_owned(), id.to_owned())) {
            let mut kept: VecDeque<AttemptRecord> = std::mem::take(&mut row.sub.attempts).into();
            kept.extend(attempts.iter().cloned());
            while kept.len() > ATTEMPTS_KEPT {
                kept.pop_front();
            }
            row.sub.attempts = kept.into();
        }
        Ok(())
    }

    fn rewind(&self, tenant: &str, id: &str, position: Option<&str>) -> Result<Update, StoreError> {
        if let Some(p) = position {
            Cursor::parse(p).map_err(|e| StoreError::new(e.to_string()))?;
        }
        let mut rows = self.lock();
        let Some(row) = rows.get_mut(&(tenant.to_owned(), id.to_owned())) else {
            return Ok(Update::Missing);
        };
        row.sub.position = position.map(str::to_owned);
        row.sub.state = SubState::Active;
        row.sub.note = None;
        row.sub.revision += 1;
        Ok(Update::Done(row.sub.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Filter;

    fn sub(id: &str) -> Subscription {
        Subscription {
            id: id.into(),
            url: "https://example.com/".into(),
            filter: Filter::default(),
            state: SubState::Active,
            position: None,
            secrets: vec![],
            note: None,
            created_at: 0,
            revision: 1,
            attempts: vec![],
        }
    }

    #[test]
    fn one_holder_at_a_time_until_its_lease_lapses() {
        let s = MemoryStore::new();
        s.insert("t", sub("a"));
        assert!(s.lease("t", "a", "one", 1000, 100).expect("lease"));
        assert!(!s.lease("t", "a", "two", 1050, 100).expect("lease"));
        assert!(s.lease("t", "a", "one", 1050, 100).expect("renew"));
        assert!(!s.lease("t", "a", "two", 1149, 100).expect("lease"));
        assert!(s.lease("t", "a", "two", 1150, 100).expect("lapsed"));
        s.release("t", "a", "one").expect("release");
        assert_eq!(s.lease_of("t", "a"), Some(("two".into(), 1250)));
        s.release("t", "a", "two").expect("release");
        assert!(s.lease("t", "a", "one", 1151, 100).expect("free"));
        assert!(!s.lease("t", "nope", "one", 0, 100).expect("missing"));
        assert!(!s.lease("u", "a", "one", 0, 100).expect("another tenant's"));
    }

    #[test]
    fn a_position_only_moves_on_and_only_at_its_revision() {
        let s = MemoryStore::new();
        s.insert("t", sub("a"));
        let moved = |u: Update| match u {
            Update::Done(s) => s.position,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            moved(s.advance("t", "a", 1, "f0.5").expect("advance")),
            Some("f0.5".into())
        );
        assert_eq!(
            moved(s.advance("t", "a", 1, "f0.3_2.7").expect("advance")),
            Some("f0.5_2.7".into())
        );
        assert!(matches!(
            s.advance("t", "a", 0, "f0.9").expect("advance"),
            Update::Stale(_)
        ));
        assert!(s.advance("t", "a", 1, "nonsense").is_err());
        assert_eq!(
            s.advance("t", "b", 1, "f0.1").expect("advance"),
            Update::Missing
        );
        // A replay goes back, and moves the revision on.
        let Update::Done(r) = s.rewind("t", "a", Some("f0.1")).expect("rewind") else {
            panic!("rewind")
        };
        assert_eq!((r.position.as_deref(), r.revision), (Some("f0.1"), 2));
        assert!(matches!(
            s.advance("t", "a", 1, "f0.9").expect("advance"),
            Update::Stale(_)
        ));
    }

    #[test]
    fn a_rotation_keeps_the_old_key_signing_until_its_end() {
        let s = MemoryStore::new();
        let old = Secret::generate().expect("secret");
        let mut a = sub("a");
        a.secrets.push(SigningKey {
            secret: old.clone(),
            until: None,
        });
        s.insert("t", a);
        let new = Secret::generate().expect("secret");
        let r = s.rotate("t", "a", new.clone(), 5000).expect("rotated");
        assert_eq!(r.signing_secrets(4999), vec![&new, &old]);
        assert_eq!(r.signing_secrets(5000), vec![&new]);
    }

    #[test]
    fn attempts_kept_are_bounded() {
        let s = MemoryStore::new();
        s.insert("t", sub("a"));
        let rec = |n| AttemptRecord {
            message_id: format!("m{n}"),
            at: n,
            attempt: 1,
            outcome: crate::sender::Outcome::Timeout,
            latency_ms: 0,
        };
        for n in 0..40 {
            s.record_attempts("t", "a", &[rec(n)]).expect("record");
        }
        let got = s.get("t", "a").expect("get").expect("sub").attempts;
        assert_eq!(got.len(), ATTEMPTS_KEPT);
        assert_eq!(got[0].at, 40 - ATTEMPTS_KEPT as i64);
    }
}
