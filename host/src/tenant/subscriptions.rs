//! The `subscriptions` interface: the tenant's webhook subscriptions, one
//! method per verb. The component keeps them and their rules; sending is
//! `leasehold-webhooks`' (or an embedder's loop). An answer is checked to
//! be the subscription asked about, and a listing to be in id order
//! within its limit; this module never sends anything.

use leasehold_guest::model::Timestamp;
use leasehold_guest::subscriptions::{
    Attempt, SubFilter, SubState, Subscription, SubscriptionPage,
};

use crate::bindings::wit_subscriptions as wit_subs;
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, at_most, malformed, store};

/// A subscription answered for another id than asked is no answer.
fn same(s: wit_subs::Subscription, id: &str, verb: &str) -> Result<Subscription, Error> {
    if s.id != id {
        return Err(malformed(format!(
            "{verb} asked for subscription {id}, answered subscription {}",
            s.id
        )));
    }
    Ok(s.into())
}

impl Tenant {
    /// Adds a subscription, active, signing with `key` (24–64 bytes), its
    /// position `from` (`None`: the feed's head now, so it is sent the
    /// changes from then on). An id in use, a bad URL or filter, or more
    /// than 100 subscriptions is `invalid`, naming the field.
    pub fn add_subscription(
        &self,
        id: &str,
        url: &str,
        filter: &SubFilter,
        key: &[u8],
        from: Option<&str>,
        now: Timestamp,
    ) -> Result<Subscription, Error> {
        let filter: wit_subs::SubFilter = filter.clone().into();
        self.call(
            Verb::AddSubscription,
            |x, s| x.call(s, (id, url, &filter, key, from, now)),
            |a: StoreAnswer<wit_subs::Subscription>| same(store(a)?, id, "add-subscription"),
        )
    }

    /// One subscription, if it exists.
    pub fn get_subscription(&self, id: &str) -> Result<Option<Subscription>, Error> {
        self.call(
            Verb::GetSubscription,
            |x, s| x.call(s, (id,)),
            |a: StoreAnswer<Option<wit_subs::Subscription>>| {
                store(a)?
                    .map(|s| same(s, id, "get-subscription"))
                    .transpose()
            },
        )
    }

    /// Subscriptions by id, `limit` (1–1000) at a time after the cursor
    /// `after` (a page's `next`).
    pub fn list_subscriptions(
        &self,
        limit: u32,
        after: Option<&str>,
    ) -> Result<SubscriptionPage, Error> {
        self.call(
            Verb::ListSubscriptions,
            |x, s| x.call(s, (limit, after)),
            |a: StoreAnswer<wit_subs::SubscriptionPage>| {
                let p = store(a)?;
                let subscriptions: Vec<Subscription> =
                    at_most(p.subscriptions, limit, "list-subscriptions")?
                        .into_iter()
                        .map(Into::into)
                        .collect();
                if subscriptions.windows(2).any(|w| w[0].id >= w[1].id)
                    || after
                        .is_some_and(|a| subscriptions.first().is_some_and(|s| s.id.as_str() <= a))
                {
                    return Err(malformed(
                        "list-subscriptions answered out of order".to_owned(),
                    ));
                }
                Ok(SubscriptionPage {
                    subscriptions,
                    next: p.next,
                })
            },
        )
    }

    /// Changes the URL, the filter or both, if the subscription is at
    /// `expected` (when given; else `stale` with the current revision).
    pub fn change_subscription(
        &self,
        id: &str,
        url: Option<&str>,
        filter: Option<&SubFilter>,
        expected: Option<u64>,
    ) -> Result<Subscription, Error> {
        let filter: Option<wit_subs::SubFilter> = filter.cloned().map(Into::into);
        self.call(
            Verb::ChangeSubscription,
            |x, s| x.call(s, (id, url, filter.as_ref(), expected)),
            |a: StoreAnswer<wit_subs::Subscription>| same(store(a)?, id, "change-subscription"),
        )
    }

    /// Sets the state and its note, if at `expected` (when given).
    pub fn set_subscription_state(
        &self,
        id: &str,
        state: SubState,
        note: Option<&str>,
        expected: Option<u64>,
    ) -> Result<Subscription, Error> {
        let wire: wit_subs::SubState = state.into();
        self.call(
            Verb::SetSubscriptionState,
            |x, s| x.call(s, (id, wire, note, expected)),
            |a: StoreAnswer<wit_subs::Subscription>| {
                let sub = same(store(a)?, id, "set-subscription-state")?;
                if sub.state != state {
                    return Err(malformed(format!(
                        "set-subscription-state answered {id} in another state"
                    )));
                }
                Ok(sub)
            },
        )
    }

    /// Makes `key` the current signing key; the earlier ones still signing
    /// sign until `old_until` (at most 7 days after `now`).
    pub fn rotate_subscription_key(
        &self,
        id: &str,
        key: &[u8],
        old_until: Timestamp,
        now: Timestamp,
    ) -> Result<Subscription, Error> {
        self.call(
            Verb::RotateSubscriptionKey,
            |x, s| x.call(s, (id, key, old_until, now)),
            |a: StoreAnswer<wit_subs::Subscription>| {
                let sub = same(store(a)?, id, "rotate-subscription-key")?;
                if sub.keys.last().map(|k| k.key.as_slice()) != Some(key) {
                    return Err(malformed(format!(
                        "rotate-subscription-key answered {id} without the new key current"
                    )));
                }
                Ok(sub)
            },
        )
    }

    /// Removes a subscription; answers whether there was one.
    pub fn remove_subscription(&self, id: &str) -> Result<bool, Error> {
        self.call(
            Verb::RemoveSubscription,
            |x, s| x.call(s, (id,)),
            |a: StoreAnswer<bool>| store(a),
        )
    }

    /// Moves the delivered position on to `position` (never back, never
    /// past the feed's head), if the subscription is at `revision`.
    pub fn advance_subscription(
        &self,
        id: &str,
        revision: u64,
        position: &str,
    ) -> Result<Subscription, Error> {
        self.call(
            Verb::AdvanceSubscription,
            |x, s| x.call(s, (id, revision, position)),
            |a: StoreAnswer<wit_subs::Subscription>| {
                let sub = same(store(a)?, id, "advance-subscription")?;
                if sub.revision != revision {
                    return Err(malformed(format!(
                        "advance-subscription of {id} at revision {revision} answered revision {}",
                        sub.revision
                    )));
                }
                Ok(sub)
            },
        )
    }

    /// Replays from `position` (`None`: the feed's start): active again,
    /// its note cleared, its revision one more.
    pub fn rewind_subscription(
        &self,
        id: &str,
        position: Option<&str>,
    ) -> Result<Subscription, Error> {
        self.call(
            Verb::RewindSubscription,
            |x, s| x.call(s, (id, position)),
            |a: StoreAnswer<wit_subs::Subscription>| {
                let sub = same(store(a)?, id, "rewind-subscription")?;
                // The feed's start is spelt `f` or not at all.
                let asked = position.filter(|p| *p != "f");
                if sub.state != SubState::Active || sub.position.as_deref() != asked {
                    return Err(malformed(format!(
                        "rewind-subscription answered {id} not active at the position asked"
                    )));
                }
                Ok(sub)
            },
        )
    }

    /// Takes or renews the delivery lease for `holder` until
    /// `now + lease_ms`; `false` when another holds it or there is none.
    pub fn lease_subscription(
        &self,
        id: &str,
        holder: &str,
        now: Timestamp,
        lease_ms: u32,
    ) -> Result<bool, Error> {
        self.call(
            Verb::LeaseSubscription,
            |x, s| x.call(s, (id, holder, now, lease_ms)),
            |a: StoreAnswer<bool>| store(a),
        )
    }

    /// Gives the delivery lease up, if `holder` holds it.
    pub fn release_subscription(&self, id: &str, holder: &str) -> Result<(), Error> {
        self.call(
            Verb::ReleaseSubscription,
            |x, s| x.call(s, (id, holder)),
            |a: StoreAnswer<()>| store(a),
        )
    }

    /// Keeps `attempts` (at most 20) among the last 20 the row holds.
    pub fn record_subscription_attempts(
        &self,
        id: &str,
        attempts: &[Attempt],
    ) -> Result<(), Error> {
        let wire: Vec<wit_subs::Attempt> = attempts.iter().cloned().map(Into::into).collect();
        self.call(
            Verb::RecordSubscriptionAttempts,
            |x, s| x.call(s, (id, &wire)),
            |a: StoreAnswer<()>| store(a),
        )
    }
}
