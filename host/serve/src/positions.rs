//! Feed positions as each caller sees them. A service or operator credential
//! sees the feed's own positions (`f0.12_3.4`), checked for their shape
//! before they reach the engine. A reviewer sees only positions sealed for
//! it: the feed's position as a fixed-size block, encrypted with the
//! server's cursor key, bound to its tenant and actor, under a fresh nonce
//! each time; so a reviewer can neither count nor time the changes it may
//! not see, nor use another reviewer's position.
//!
//! It owns the two spellings and the refusal of a position that is neither;
//! it must never hand a reviewer a position in the clear, nor accept one
//! from a reviewer.

use leasehold_guest::changes::Cursor;
use leasehold_guest::schema::MAX_SHARDS;

use crate::auth::{Principal, Scope};
use crate::cursor::CursorKey;
use crate::problem::ApiError;

/// Bytes of a position laid out for sealing: one number per slot.
const BLOCK: usize = MAX_SHARDS as usize * 8;

/// How positions are spelt for one caller.
pub struct Positions<'a> {
    key: &'a CursorKey,
    principal: &'a Principal,
}

impl<'a> Positions<'a> {
    pub fn new(key: &'a CursorKey, principal: &'a Principal) -> Self {
        Positions { key, principal }
    }

    fn sealed(&self) -> bool {
        self.principal.scope == Scope::Reviewer
    }

    fn binding(&self) -> String {
        format!("events:{}", self.principal.actor)
    }

    /// The feed's position `pos` as this caller is shown it.
    pub fn show(&self, pos: &str) -> Result<String, ApiError> {
        if !self.sealed() {
            return Ok(pos.to_owned());
        }
        let cursor = Cursor::parse(pos).map_err(|_| {
            ApiError::Internal(
                format!("the feed gave a position of no known shape: {pos:?}").into(),
            )
        })?;
        let mut block = Vec::with_capacity(BLOCK);
        for seq in cursor.seqs() {
            block.extend_from_slice(&seq.to_be_bytes());
        }
        self.key
            .seal_bytes(&self.principal.tenant, &self.binding(), &block)
            .ok_or_else(|| ApiError::Internal("could not seal a position".into()))
    }

    /// The feed's position behind `given`, as this caller may give one:
    /// `field` names where it came from in the refusal.
    pub fn take(&self, field: &str, given: &str) -> Result<String, ApiError> {
        let refuse = |why: &str| ApiError::invalid(field, why.to_owned());
        if !self.sealed() {
            return Cursor::parse(given)
                .map(|c| c.encode())
                .map_err(|_| refuse("not a position of the feed: pass back an event's id, `next` or `head` as it came"));
        }
        let block = self
            .key
            .open_bytes(&self.principal.tenant, &self.binding(), given)
            .filter(|b| b.len() == BLOCK)
            .ok_or_else(|| {
                refuse(
                    "not a position this service gave this credential: pass back an event's id, \
                     `next` or `head` as it came",
                )
            })?;
        let mut seqs = [0u64; MAX_SHARDS as usize];
        for (seq, bytes) in seqs.iter_mut().zip(block.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            *seq = u64::from_be_bytes(b);
        }
        Cursor::from_seqs(seqs)
            .map(|c| c.encode())
            .ok_or_else(|| refuse("not a position of the feed"))
    }
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

    #[test]
    fn a_reviewer_sees_only_sealed_positions_of_one_length_that_open_only_for_it() {
        let key = CursorKey::random().expect("key");
        let alice = who("alice", Scope::Reviewer);
        let bob = who("bob", Scope::Reviewer);
        let p = Positions::new(&key, &alice);
        let short = p.show("f0.1").expect("sealed");
        let long = p.show("f0.123456789_7.99999999_63.5").expect("sealed");
        assert_eq!(short.len(), long.len(), "no length tells how many changes");
        assert_ne!(
            p.show("f0.1").expect("sealed"),
            short,
            "a fresh nonce each time"
        );
        // The feed's spelling has dots; base64url has none.
        assert!(!short.contains('.'));
        assert_eq!(p.take("after", &short).expect("opens"), "f0.1");
        assert_eq!(
            p.take("after", &long).expect("opens"),
            "f0.123456789_7.99999999_63.5"
        );
        assert_eq!(
            p.take("after", &p.show("f").expect("sealed"))
                .expect("opens"),
            "f"
        );
        for bad in ["f0.1", "", "\n", "garbage", &short[1..]] {
            assert!(p.take("after", bad).is_err(), "{bad:?}");
        }
        assert!(Positions::new(&key, &bob).take("after", &short).is_err());
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
}
