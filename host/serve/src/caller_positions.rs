//! Per-caller positions: feed positions as each caller sees them. A service or operator credential
//! sees the feed's own positions (`f0.12_3.4`), checked for their shape
//! before they reach the engine. A reviewer sees only its own positions
//! ([`crate::reviewer_view`]), sealed for it: bound to its tenant and actor, under a
//! nonce drawn from the view itself, so that one view always reads the
//! same and tells nothing of the changes the reviewer may not see.
//!
//! It owns the two spellings and the refusal of a position that is neither;
//! it must never hand a reviewer a position of the feed, nor take one from
//! a reviewer.

use leasehold_guest::changes::Cursor;

use crate::auth::{Principal, Scope};
use crate::cursor::{CursorKey, sealed_text_len};
use crate::problem::ApiError;
use crate::reviewer_view::{MAX_VIEW_BYTES, MIN_VIEW_BYTES, View};

/// The fewest characters of a reviewer's position as it is shown: the
/// shortest view, sealed.
pub const MIN_VIEW_TEXT: usize = sealed_text_len(MIN_VIEW_BYTES);

/// The most characters of a reviewer's position as it is shown: the
/// longest view, sealed. The document says both bounds, and a position
/// outside them is refused before it is opened.
pub const MAX_VIEW_TEXT: usize = sealed_text_len(MAX_VIEW_BYTES);

/// How positions are spelt for one caller. It holds its own copy of the
/// key and the caller, so a stream may keep it for as long as it runs.
pub struct Positions {
    key: CursorKey,
    principal: Principal,
}

impl Positions {
    pub fn new(key: &CursorKey, principal: &Principal) -> Self {
        Positions {
            key: key.clone(),
            principal: principal.clone(),
        }
    }

    /// The caller these positions are spelt for.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Whether this caller is shown views rather than the feed's positions.
    pub fn viewer(&self) -> bool {
        self.principal.scope == Scope::Reviewer
    }

    fn binding(&self) -> String {
        format!("view:{}", self.principal.actor)
    }

    /// The feed's position `pos` as a service or operator is shown it.
    pub fn show(&self, pos: &str) -> Result<String, ApiError> {
        if self.viewer() {
            return Err(ApiError::Internal(
                "a feed position was about to be shown to a reviewer".into(),
            ));
        }
        Ok(pos.to_owned())
    }

    /// A reviewer's view, sealed for it.
    pub fn show_view(&self, view: &View) -> Result<String, ApiError> {
        let shown = self
            .key
            .seal_fixed(&self.principal.tenant, &self.binding(), &view.to_bytes())
            .ok_or_else(|| ApiError::Internal("could not seal a position".into()))?;
        if !(MIN_VIEW_TEXT..=MAX_VIEW_TEXT).contains(&shown.len()) {
            return Err(ApiError::Internal(
                "a reviewer's position came out longer or shorter than the document says".into(),
            ));
        }
        Ok(shown)
    }

    /// The feed's position behind `given`, as a service or operator may
    /// give one: `field` names where it came from in the refusal.
    pub fn take(&self, field: &str, given: &str) -> Result<String, ApiError> {
        if self.viewer() {
            return Err(refuse_view(field));
        }
        Cursor::parse(given).map(|c| c.encode()).map_err(|_| {
            ApiError::invalid(
                field,
                "not a position of the feed: pass back an event's id, `next` or `head` as it came"
                    .to_owned(),
            )
        })
    }

    /// The view behind `given`, as a reviewer may give one.
    pub fn take_view(&self, field: &str, given: &str) -> Result<View, ApiError> {
        if !(MIN_VIEW_TEXT..=MAX_VIEW_TEXT).contains(&given.len()) {
            return Err(refuse_view(field));
        }
        self.key
            .open_bytes(&self.principal.tenant, &self.binding(), given)
            .and_then(|b| View::from_bytes(&b))
            .ok_or_else(|| refuse_view(field))
    }
}

fn refuse_view(field: &str) -> ApiError {
    ApiError::invalid(
        field,
        "not a position this service gave this credential: pass back an event's id, `next` or \
         `head` as it came"
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(actor: &str, scope: Scope) -> Principal {
        Principal {
            tenant: "acme".into(),
            actor: actor.into(),
            roles: vec!["finance".into()],
            scope,
        }
    }

    fn cursor(text: &str) -> Cursor {
        Cursor::parse(text).expect("a position")
    }

    #[test]
    fn a_reviewer_sees_sealed_views_that_read_the_same_when_they_mean_the_same() {
        let key = CursorKey::random().expect("key");
        let alice = who("alice", Scope::Reviewer);
        let bob = who("bob", Scope::Reviewer);
        let p = Positions::new(&key, &alice);
        let mut v = View::starting(&cursor("f0.3"), false);
        v.seen(0, "fin-1", 1, cursor("f0.9"));
        let shown = p.show_view(&v).expect("sealed");
        assert_eq!(
            p.show_view(&v).expect("sealed"),
            shown,
            "one view, one text"
        );
        let mut w = View::starting(&cursor("f0.3"), false);
        w.seen(0, "fin-1", 1, cursor("f0.4"));
        assert_eq!(
            p.show_view(&w).expect("sealed"),
            shown,
            "whatever came between"
        );
        let mut other = v.clone();
        other.seen(0, "fin-2", 1, cursor("f0.10"));
        assert_ne!(p.show_view(&other).expect("sealed"), shown);
        // Nothing readable: no dots of the feed's spelling, no task name.
        assert!(!shown.contains('.') && !shown.contains("fin"));
        assert_eq!(p.take_view("after", &shown).expect("opens"), v);
        for bad in ["f0.1", "", "\n", "garbage", &shown[1..]] {
            assert!(p.take_view("after", bad).is_err(), "{bad:?}");
        }
        assert!(
            Positions::new(&key, &bob)
                .take_view("after", &shown)
                .is_err()
        );
        assert!(p.take("after", "f0.1").is_err(), "never the feed's own");
        assert!(p.show("f0.1").is_err(), "never shown the feed's own");
    }

    #[test]
    fn a_service_sees_plain_positions_checked_for_their_shape() {
        let key = CursorKey::random().expect("key");
        let sam = who("sam", Scope::Service);
        let p = Positions::new(&key, &sam);
        assert_eq!(p.show("f0.3").expect("plain"), "f0.3");
        assert_eq!(p.take("after", "f0.3_2.9").expect("ok"), "f0.3_2.9");
        for bad in ["\n", "\0", "garbage", "f0.01", "f2.1_1.1", "f 0.1", "F0.1"] {
            assert!(p.take("after", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_reviewers_position_is_never_shorter_or_longer_than_the_document_says() {
        use crate::reviewer_view::MAX_MARKS;
        use leasehold_guest::schema::MAX_SHARDS;
        let key = CursorKey::random().expect("key");
        let p = Positions::new(&key, &who("alice", Scope::Reviewer));
        let shortest = View::starting(&Cursor::START, false);
        assert_eq!(shortest.to_bytes().len(), MIN_VIEW_BYTES);
        assert_eq!(p.show_view(&shortest).expect("sealed").len(), MIN_VIEW_TEXT);
        // The longest: a change seen in every slot, of names as long as
        // the marks may spell before the view keeps only how far it read,
        // and how far a reading went in every slot.
        let all = Cursor::from_seqs([1; MAX_SHARDS as usize]).expect("a position");
        let name = "n".repeat(MAX_MARKS / usize::from(MAX_SHARDS) - 12);
        let mut longest = View::starting(&Cursor::START, true);
        for s in 0..MAX_SHARDS {
            longest.seen(s, &name, 1, all);
        }
        let longest = longest.reached(all);
        assert_eq!(longest.to_bytes().len(), MAX_VIEW_BYTES);
        let shown = p.show_view(&longest).expect("sealed");
        assert_eq!(shown.len(), MAX_VIEW_TEXT);
        assert_eq!(p.take_view("after", &shown).expect("taken back"), longest);
        for bad in ["A".repeat(MIN_VIEW_TEXT - 1), "A".repeat(MAX_VIEW_TEXT + 1)] {
            assert!(p.take_view("after", &bad).is_err());
        }
    }
}
