//! The digests a tenant-keys file carries: the SHA-256 of a keyspace (equal
//! digests mean the same keys holding the same values, whatever wrote
//! them), and, when the operator gives a key, an HMAC-SHA256 seal over the
//! file's own bytes, which only a holder of the key can make, so a file can
//! be authenticated and not only checked. It owns both computations and the
//! hex they are written in; it must never read or write a file.

use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};

use crate::tenant_keys::error::KeysError;

/// A running digest of a keyspace: SHA-256 over every entry in key order,
/// each as the key's length (4 bytes, big-endian), the key, the value's
/// length and the value; with the count of its keys and the bytes of its
/// keys and values.
#[derive(Clone, Default)]
pub struct Digest {
    sha: Sha256,
    keys: u64,
    bytes: u64,
}

impl Digest {
    /// Adds the next entry, in key order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        for part in [key, value] {
            // Entries are checked against the engine's limits, far below
            // 4 GiB, before they are digested.
            self.sha.update((part.len() as u32).to_be_bytes());
            self.sha.update(part);
        }
        self.keys += 1;
        self.bytes += (key.len() + value.len()) as u64;
    }

    /// How many entries were added.
    pub fn keys(&self) -> u64 {
        self.keys
    }

    /// The bytes of their keys and values.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The SHA-256 so far, in lowercase hex.
    pub fn hex(&self) -> String {
        hex(&self.sha.clone().finalize())
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Digest")
            .field("keys", &self.keys)
            .field("bytes", &self.bytes)
            .field("sha256", &self.hex())
            .finish()
    }
}

/// The operator's secret for keyed digests. Never printed.
#[derive(Clone)]
pub struct DigestKey(Vec<u8>);

impl DigestKey {
    /// The shortest key taken: a shorter one authenticates nothing worth
    /// the name (a 32-byte random key is what the docs advise).
    pub const MIN_BYTES: usize = 16;

    /// The key a key file holds: its bytes, without one trailing newline
    /// (`\n` or `\r\n`), so that `openssl rand -hex 32 > key` works as is.
    pub fn from_file_bytes(mut bytes: Vec<u8>) -> Result<DigestKey, KeysError> {
        if bytes.ends_with(b"\n") {
            bytes.pop();
            if bytes.ends_with(b"\r") {
                bytes.pop();
            }
        }
        if bytes.len() < DigestKey::MIN_BYTES {
            return Err(KeysError::BadKey(format!(
                "a digest key of {} bytes; it must hold at least {} (e.g. `openssl rand -hex 32`)",
                bytes.len(),
                DigestKey::MIN_BYTES
            )));
        }
        Ok(DigestKey(bytes))
    }
}

impl std::fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DigestKey({} bytes)", self.0.len())
    }
}

/// A running HMAC-SHA256 seal over bytes as they are written or read.
#[derive(Clone)]
pub struct Seal(Hmac<Sha256>);

impl Seal {
    /// A seal with `key`, over nothing yet.
    pub fn new(key: &DigestKey) -> Seal {
        Seal(Hmac::<Sha256>::new_from_slice(&key.0).expect("HMAC takes a key of any length"))
    }

    /// Adds the next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The seal so far, in lowercase hex.
    pub fn hex(&self) -> String {
        hex(&self.0.clone().finalize().into_bytes())
    }

    /// Whether `claimed` (hex) is the seal so far, compared in constant
    /// time.
    pub fn matches(&self, claimed: &str) -> bool {
        unhex(claimed).is_some_and(|bytes| self.0.clone().verify_slice(&bytes).is_ok())
    }
}

/// Bytes as lowercase hex, two digits each.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// The bytes `text` spells in hex (either case), or `None` if it is not
/// hex or has an odd length.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0x7f, 0xff];
        assert_eq!(hex(&bytes), "00017fff");
        assert_eq!(unhex(&hex(&bytes)).as_deref(), Some(&bytes[..]));
        assert_eq!(unhex("ABcd").as_deref(), Some(&[0xab, 0xcd][..]));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn the_digest_tells_where_a_key_ends_and_its_value_begins() {
        let mut a = Digest::default();
        a.add(b"ab", b"c");
        let mut b = Digest::default();
        b.add(b"a", b"bc");
        assert_ne!(a.hex(), b.hex());
        assert_eq!((a.keys(), a.bytes()), (1, 3));
    }

    /// The digest is SHA-256 over length-prefixed parts, so any other
    /// implementation of the format can compute it.
    #[test]
    fn the_digest_is_sha256_over_length_prefixed_parts() {
        let mut d = Digest::default();
        d.add(b"k", b"vv");
        let mut sha = Sha256::new();
        sha.update([0, 0, 0, 1, b'k', 0, 0, 0, 2, b'v', b'v']);
        assert_eq!(d.hex(), hex(&sha.finalize()));
    }

    /// The seal is RFC 4231's HMAC-SHA256 (its test case 2), so any other
    /// implementation can make and check it.
    #[test]
    fn the_seal_is_hmac_sha256_and_checks_in_constant_time() {
        let key = DigestKey(b"Jefe".to_vec());
        let mut seal = Seal::new(&key);
        seal.update(b"what do ya want ");
        seal.update(b"for nothing?");
        let expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        assert_eq!(seal.hex(), expected);
        assert!(seal.matches(expected));
        assert!(seal.matches(&expected.to_uppercase()));
        assert!(!seal.matches(&expected.replace('5', "6")));
        assert!(!seal.matches("not hex"));
        let other = Seal::new(&DigestKey(b"another key entirely".to_vec()));
        assert_ne!(other.hex(), Seal::new(&key).hex());
    }

    #[test]
    fn a_key_file_loses_one_trailing_newline_and_a_short_key_is_refused() {
        let key = DigestKey::from_file_bytes(b"0123456789abcdef0123\r\n".to_vec()).expect("key");
        assert_eq!(key.0, b"0123456789abcdef0123");
        assert!(matches!(
            DigestKey::from_file_bytes(b"short\n".to_vec()),
            Err(KeysError::BadKey(why)) if why.contains("5 bytes")
        ));
        assert_eq!(format!("{key:?}"), "DigestKey(20 bytes)");
    }
}
