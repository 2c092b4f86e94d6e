//! The sweeper's timetable: each known tenant's next instant, and the line
//! of tenants whose instant has come, in the order they take their turns.
//! One entry per tenant, in one or the other, so reading a tenant again
//! replaces its entry, and the schedule grows with the tenants it knows,
//! never with their commits. A tenant whose turn ended with more to do goes
//! to the back of the line, behind every tenant that came due during its
//! turn. It knows nothing of what a turn does, nor of any clock: instants
//! are handed in.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use leasehold_guest::model::Timestamp;

/// Where a tenant stands in the [`Timetable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Nothing to wait for.
    Idle,
    /// Waiting for this instant.
    Waiting(Timestamp),
    /// In the line of due tenants.
    InLine,
    /// Taking its turn, out of the line until it ends.
    Turn,
}

/// Each known tenant's next instant, and the line of tenants whose instant
/// has come, in the order they take their turns: one entry per tenant, in
/// one or the other, so that reading a tenant again replaces its entry.
#[derive(Default)]
pub(super) struct Timetable {
    place: HashMap<Arc<str>, Place>,
    /// (instant, tenant) of each waiting tenant, earliest first.
    waiting: BTreeSet<(Timestamp, Arc<str>)>,
    /// (the instant it came due at, tenant), front first.
    line: VecDeque<(Timestamp, Arc<str>)>,
}

impl Timetable {
    /// Tenants it knows.
    pub(super) fn tenants(&self) -> usize {
        self.place.len()
    }

    /// Every tenant it knows.
    pub(super) fn tenants_known(&self) -> Vec<Arc<str>> {
        self.place.keys().cloned().collect()
    }

    /// Entries waiting or in line.
    pub(super) fn entries(&self) -> usize {
        self.waiting.len() + self.line.len()
    }

    pub(super) fn in_line(&self, tenant: &str) -> bool {
        self.place.get(tenant) == Some(&Place::InLine)
    }

    /// Whether a tenant waits in line, due now.
    pub(super) fn any_due(&self) -> bool {
        !self.line.is_empty()
    }

    /// The earliest instant a tenant waits for.
    pub(super) fn earliest(&self) -> Option<Timestamp> {
        self.waiting.first().map(|(at, _)| *at)
    }

    /// Records `tenant`'s next instant as read, in place of the one it had.
    /// A tenant in the line keeps its place: its turn reads it again.
    pub(super) fn set(&mut self, tenant: &Arc<str>, next: Option<Timestamp>) {
        let place = next.map_or(Place::Idle, Place::Waiting);
        match self.place.insert(tenant.clone(), place) {
            Some(Place::InLine) => {
                self.place.insert(tenant.clone(), Place::InLine);
                return;
            }
            Some(Place::Waiting(old)) => {
                self.waiting.remove(&(old, tenant.clone()));
            }
            Some(Place::Idle | Place::Turn) | None => {}
        }
        if let Some(at) = next {
            self.waiting.insert((at, tenant.clone()));
        }
    }

    /// Puts every tenant whose instant is at or before `now` at the back of
    /// the line, earliest instant first.
    pub(super) fn come_due(&mut self, now: Timestamp) {
        while self.earliest().is_some_and(|at| at <= now) {
            if let Some((at, tenant)) = self.waiting.pop_first() {
                self.place.insert(tenant.clone(), Place::InLine);
                self.line.push_back((at, tenant));
            }
        }
    }

    /// The tenant at the front of the line, out of it for its turn, and
    /// the instant it came due at.
    pub(super) fn next_turn(&mut self) -> Option<(Timestamp, Arc<str>)> {
        let (at, tenant) = self.line.pop_front()?;
        self.place.insert(tenant.clone(), Place::Turn);
        Some((at, tenant))
    }

    /// Puts a tenant whose turn ended with more to do at the back of the
    /// line; it keeps the instant it came due at.
    pub(super) fn back_of_line(&mut self, tenant: &Arc<str>, at: Timestamp) {
        self.place.insert(tenant.clone(), Place::InLine);
        self.line.push_back((at, tenant.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    /// The order the line hands out turns in.
    fn turns(table: &mut Timetable) -> Vec<(Timestamp, String)> {
        std::iter::from_fn(|| table.next_turn())
            .map(|(at, t)| (at, t.to_string()))
            .collect()
    }

    #[test]
    fn a_tenant_read_again_and_again_keeps_one_entry() {
        let mut table = Timetable::default();
        let (acme, globex) = (name("acme"), name("globex"));
        table.set(&globex, Some(50));
        for i in 0..1_000 {
            // The same instant, or one that moves.
            table.set(&acme, Some(1_000_000 - (i / 2)));
            assert_eq!(table.entries(), 2, "after {i} reads");
        }
        assert_eq!(table.earliest(), Some(50));
        table.set(&globex, None);
        assert_eq!((table.entries(), table.tenants()), (1, 2));
        assert_eq!(table.earliest(), Some(1_000_000 - 499));
        table.come_due(1_000_000);
        assert_eq!(turns(&mut table), [(1_000_000 - 499, "acme".to_owned())]);
        assert_eq!(table.entries(), 0);
    }

    #[test]
    fn due_tenants_take_turns_earliest_first_and_a_tenant_with_more_goes_to_the_back() {
        let mut table = Timetable::default();
        for (t, at) in [("c", 10), ("b", 10), ("a", 20), ("later", 100)] {
            table.set(&name(t), Some(at));
        }
        table.come_due(20);
        assert!(table.any_due());
        let (at, first) = table.next_turn().expect("a turn");
        assert_eq!((at, &*first), (10, "b"));
        // b's turn ends with more to do as `later` comes due: `later` goes
        // ahead of b, and b keeps the instant it came due at.
        table.come_due(100);
        table.back_of_line(&first, at);
        assert_eq!(table.entries(), 4);
        assert_eq!(
            turns(&mut table),
            [
                (10, "c".to_owned()),
                (20, "a".to_owned()),
                (100, "later".to_owned()),
                (10, "b".to_owned()),
            ]
        );
        assert!(!table.any_due());
        assert_eq!(table.entries(), 0);
    }

    #[test]
    fn a_tenant_in_the_line_keeps_its_place_when_read_again() {
        let mut table = Timetable::default();
        let (acme, globex) = (name("acme"), name("globex"));
        table.set(&acme, Some(10));
        table.set(&globex, Some(10));
        table.come_due(10);
        table.set(&acme, Some(5_000));
        table.set(&acme, None);
        assert!(table.in_line(&acme));
        assert_eq!(table.entries(), 2);
        assert_eq!(table.earliest(), None);
        let (_, t) = table.next_turn().expect("a turn");
        assert_eq!(&*t, "acme");
        // Once its turn is over, a read places it again.
        table.set(&t, Some(5_000));
        assert_eq!(table.earliest(), Some(5_000));
        assert_eq!(table.entries(), 2);
    }
}
