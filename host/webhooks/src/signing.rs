//! The wire format of [Standard Webhooks](https://www.standardwebhooks.com/):
//! signing secrets in their `whsec_` form, the `webhook-id` of a feed entry
//! for one subscription, and the `webhook-signature` header (`v1,` and the
//! base64 HMAC-SHA256 of `id.timestamp.body`, one per secret in force). It
//! owns these spellings alone; it must never send anything, nor let a
//! caller-chosen string into a message id (the spec asks that ids carry no
//! `.`, which would let one signed content pass for another).
//!
//! Built on `hmac` and `sha2` rather than the `standardwebhooks` crate:
//! that crate pins `http` 0.2 and refuses bodies that are not UTF-8, and
//! the signature is one HMAC; its test vector and the Python and
//! JavaScript `standardwebhooks` packages check ours (see the tests and
//! `tests/receivers.rs`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The prefix of a symmetric secret as the spec spells it for people.
pub const SECRET_PREFIX: &str = "whsec_";
/// The bytes of a secret this crate makes: the spec asks for 24 to 64.
pub const SECRET_BYTES: usize = 32;
/// The fewest and most bytes a secret may have (the spec's bounds).
pub const SECRET_MIN_BYTES: usize = 24;
/// See [`SECRET_MIN_BYTES`].
pub const SECRET_MAX_BYTES: usize = 64;

/// Headers every delivery carries.
pub const HEADER_ID: &str = "webhook-id";
/// See [`HEADER_ID`].
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// See [`HEADER_ID`].
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// A symmetric signing secret. Its `Debug` shows no key bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// Why a secret was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretError {
    /// The text is not `whsec_` followed by standard base64.
    #[error("a signing secret is `whsec_` followed by base64")]
    Format,
    /// Fewer than 24 or more than 64 bytes.
    #[error("a signing secret holds 24 to 64 bytes; this one holds {0}")]
    Length(usize),
    /// The system's random source failed.
    #[error("the system's random source failed: {0}")]
    Random(String),
}

impl Secret {
    /// A new random secret of [`SECRET_BYTES`] bytes from the system's
    /// random source.
    pub fn generate() -> Result<Secret, SecretError> {
        let mut key = vec![0u8; SECRET_BYTES];
        getrandom::fill(&mut key).map_err(|e| SecretError::Random(e.to_string()))?;
        Ok(Secret(key))
    }

    /// A secret of these bytes (24 to 64 of them).
    pub fn from_bytes(key: Vec<u8>) -> Result<Secret, SecretError> {
        if !(SECRET_MIN_BYTES..=SECRET_MAX_BYTES).contains(&key.len()) {
            return Err(SecretError::Length(key.len()));
        }
        Ok(Secret(key))
    }

    /// Parses the `whsec_…` form. Strict: the prefix is required and the
    /// base64 must be canonical, so one secret has one spelling.
    pub fn parse(text: &str) -> Result<Secret, SecretError> {
        let body = text
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SecretError::Format)?;
        let key = BASE64.decode(body).map_err(|_| SecretError::Format)?;
        Secret::from_bytes(key)
    }

    /// The `whsec_…` form, as a receiver configures it.
    pub fn to_whsec(&self) -> String {
        format!("{SECRET_PREFIX}{}", BASE64.encode(&self.0))
    }

    /// The key's bytes, for a store to keep.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under this
    /// secret.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        format!("v1,{}", BASE64.encode(self.mac(id, timestamp, body)))
    }

    /// The HMAC of `id.timestamp.body`, not yet finalized.
    fn keyed(&self, id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        // new_from_slice takes a key of any length; ours are 24 to 64 bytes.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> [u8; 32] {
        self.keyed(id, timestamp, body)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `header` (a `webhook-signature` value) holds a `v1`
    /// signature of `id.timestamp.body` under this secret, compared in
    /// constant time. For receivers written in Rust and for tests; the
    /// timestamp's freshness is the receiver's to check.
    pub fn verify(&self, header: &str, id: &str, timestamp: i64, body: &[u8]) -> bool {
        header
            .split(' ')
            .filter_map(|s| s.strip_prefix("v1,"))
            .filter_map(|b| BASE64.decode(b).ok())
            // verify_slice compares in constant time.
            .any(|got| self.keyed(id, timestamp, body).verify_slice(&got).is_ok())
    }
}

/// The `webhook-signature` header of one attempt: each secret's signature,
/// space-separated (two while a rotation's old secret is still in force).
pub fn signature_header(secrets: &[&Secret], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| s.sign(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where one feed entry sits in its tenant's feed: its writer slot and its
/// number there. Unlike a position (which depends on where a read began),
/// it names the entry itself, and stays the same across reads, restarts,
/// backups and restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryPlace {
    /// The writer slot.
    pub slot: u8,
    /// The entry's number in that slot.
    pub seq: u64,
}

/// The `webhook-id` of feed entry `place` delivered to `subscription`:
/// `msg_` and the first 16 bytes of SHA-256 over the subscription's id and
/// the entry's place, in lowercase hex. The same entry to the same
/// subscription always gets the same id (so every retry, and every re-send
/// after a restart or a replay, carries it); different subscriptions get
/// different ids for one entry. Hashed so that no character of a
/// subscription id reaches the signed content.
pub fn message_id(subscription: &str, place: EntryPlace) -> String {
    let mut h = Sha256::new();
    h.update(b"leasehold-webhook-id\0");
    h.update((subscription.len() as u64).to_be_bytes());
    h.update(subscription.as_bytes());
    h.update([place.slot]);
    h.update(place.seq.to_be_bytes());
    let digest = h.finalize();
    let mut out = String::with_capacity(4 + 32);
    out.push_str("msg_");
    for b in &digest[..16] {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of the spec's reference libraries (Rust, Python,
    /// JavaScript: `test_sign`).
    #[test]
    fn signs_the_reference_libraries_test_vector() {
        let secret = Secret::parse("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").expect("secret");
        let body = br#"{"email":"test@example.com","username":"test_user"}"#;
        assert_eq!(
            secret.sign("msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553, body),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn several_secrets_sign_space_separated_and_each_verifies() {
        let old = Secret::from_bytes(vec![7; 24]).expect("secret");
        let new = Secret::generate().expect("secret");
        let header = signature_header(&[&new, &old], "msg_x", 1700000000, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.starts_with("v1,")));
        assert!(new.verify(&header, "msg_x", 1700000000, b"{}"));
        assert!(old.verify(&header, "msg_x", 1700000000, b"{}"));
        let other = Secret::generate().expect("secret");
        assert!(!other.verify(&header, "msg_x", 1700000000, b"{}"));
        // Any change to the id, the time or the body breaks it.
        assert!(!new.verify(&header, "msg_y", 1700000000, b"{}"));
        assert!(!new.verify(&header, "msg_x", 1700000001, b"{}"));
        assert!(!new.verify(&header, "msg_x", 1700000000, b"{ }"));
    }

    #[test]
    fn a_secret_round_trips_its_whsec_form_and_bad_ones_are_refused() {
        let s = Secret::generate().expect("secret");
        assert_eq!(s.as_bytes().len(), SECRET_BYTES);
        assert_eq!(Secret::parse(&s.to_whsec()), Ok(s.clone()));
        assert!(!format!("{s:?}").contains(&s.to_whsec()[6..]));
        assert_eq!(
            Secret::parse("C2FVsBQIhrscChlQIMV+b5sSYspob7oD"),
            Err(SecretError::Format)
        );
        assert_eq!(Secret::parse("whsec_not base64!"), Err(SecretError::Format));
        assert_eq!(Secret::parse("whsec_AAAA"), Err(SecretError::Length(3)));
        assert_eq!(
            Secret::from_bytes(vec![0; 65]),
            Err(SecretError::Length(65))
        );
    }

    #[test]
    fn a_message_id_names_the_entry_and_the_subscription_and_nothing_else() {
        let p = EntryPlace { slot: 3, seq: 41 };
        let id = message_id("sub_a", p);
        assert_eq!(id, message_id("sub_a", p), "stable");
        assert!(id.starts_with("msg_") && id.len() == 36);
        assert!(id[4..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(id, message_id("sub_b", p));
        assert_ne!(id, message_id("sub_a", EntryPlace { slot: 3, seq: 42 }));
        assert_ne!(id, message_id("sub_a", EntryPlace { slot: 4, seq: 41 }));
        // A subscription id cannot smuggle a dot (or anything) into it.
        assert!(!message_id("a.b", p).contains('.'));
    }
}
