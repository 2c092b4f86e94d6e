//! Page cursors as the API hands them out: the rules' own cursor (a queue
//! position that names a task) sealed with a server key, so a caller can
//! neither read which task a page ended on nor make a cursor of its own. A
//! cursor is bound to the tenant, the verb and the list it pages (the case,
//! or the caller's queue), and opens only for the same. It owns the key and
//! the sealing; it must never hand out, log or answer an unsealed cursor.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// What a sealed cursor looks like: URL-safe base64 without padding, of
/// the one length every cursor seals to ([`CURSOR_TEXT`]).
pub const PATTERN: &str = "^[A-Za-z0-9_-]{2870}$";

const NONCE: usize = 24;

/// Bytes the seal adds to what it seals: the nonce and the tag.
const SEAL_OVERHEAD: usize = NONCE + 16;

/// Characters of the text that seals `plain` bytes: URL-safe base64 of the
/// nonce, the sealed bytes and the tag, without padding.
pub const fn sealed_text_len(plain: usize) -> usize {
    (4 * (plain + SEAL_OVERHEAD)).div_ceil(3)
}

/// Characters of every sealed page cursor: each is padded to [`PADDED`]
/// bytes before it is sealed, and one that would not fit is not sealed.
pub const CURSOR_TEXT: usize = sealed_text_len(PADDED);

// The pattern the document gives says the same length.
const _: () = assert!(CURSOR_TEXT == 2870);

/// A cursor key: 32 bytes. Servers that share a database should share the
/// key (`leasehold serve --cursor-key`), so that a page from one can be read
/// on through another; a server without one makes its own at start.
#[derive(Clone)]
pub struct CursorKey([u8; 32]);

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

/// Why a cursor key could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CursorKeyError {
    /// The file could not be read.
    #[error("cannot read the cursor key file {path}: {source}")]
    Read {
        /// The key file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file does not hold a key.
    #[error("the cursor key file {path} must hold 64 hexadecimal digits (32 bytes)")]
    Format {
        /// The key file.
        path: String,
    },
    /// The system gave no random bytes for a fresh key.
    #[error("no random bytes from the system: {0}")]
    Random(String),
}

impl CursorKey {
    /// A fresh key from the system's random source.
    pub fn random() -> Result<CursorKey, CursorKeyError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| CursorKeyError::Random(e.to_string()))?;
        Ok(CursorKey(key))
    }

    /// The key these 32 bytes are.
    pub fn from_bytes(key: [u8; 32]) -> CursorKey {
        CursorKey(key)
    }

    /// A key from a file of 64 hexadecimal digits (surrounding white space
    /// ignored), such as `openssl rand -hex 32` writes.
    pub fn load(path: &std::path::Path) -> Result<CursorKey, CursorKeyError> {
        let text = std::fs::read_to_string(path).map_err(|source| CursorKeyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let bad = || CursorKeyError::Format {
            path: path.display().to_string(),
        };
        let hex = text.trim();
        if hex.len() != 64 {
            return Err(bad());
        }
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(CursorKey(key))
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new((&self.0).into())
    }

    /// Seals the rules' cursor for pages of `list` (a verb and what it
    /// pages) in `tenant`, padded to one length whatever task it names.
    pub fn seal(&self, tenant: &str, list: &str, cursor: &str) -> Option<String> {
        self.seal_bytes(tenant, list, &pad(cursor)?)
    }

    /// The rules' cursor inside `sealed`, if this key sealed it for the same
    /// tenant and list (and so it is `CURSOR_TEXT` characters long, as the document
    /// says every cursor is).
    pub fn open(&self, tenant: &str, list: &str, sealed: &str) -> Option<String> {
        if sealed.len() != CURSOR_TEXT {
            return None;
        }
        unpad(&self.open_bytes(tenant, list, sealed)?)
    }

    /// Seals `plain` for `list` in `tenant` under a fresh nonce.
    pub fn seal_bytes(&self, tenant: &str, list: &str, plain: &[u8]) -> Option<String> {
        let mut nonce = [0u8; NONCE];
        getrandom::fill(&mut nonce).ok()?;
        self.seal_with(&nonce, &binding(tenant, list), plain)
    }

    /// Seals `plain` for `list` in `tenant` under a nonce drawn from the
    /// key and the plain bytes themselves (a synthetic nonce, as AES-SIV
    /// makes one): the same bytes always seal to the same text, and
    /// different bytes never share a nonce. For what must read the same
    /// whenever it means the same, and whose sameness tells nothing.
    pub fn seal_fixed(&self, tenant: &str, list: &str, plain: &[u8]) -> Option<String> {
        use hmac::{Hmac, Mac};
        let aad = binding(tenant, list);
        let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.0).ok()?;
        mac.update(b"leasehold synthetic nonce\0");
        mac.update(&(aad.len() as u64).to_be_bytes());
        mac.update(&aad);
        mac.update(plain);
        let nonce: [u8; NONCE] = mac.finalize().into_bytes()[..NONCE].try_into().ok()?;
        self.seal_with(&nonce, &aad, plain)
    }

    fn seal_with(&self, nonce: &[u8; NONCE], aad: &[u8], plain: &[u8]) -> Option<String> {
        let sealed = self
            .cipher()
            .encrypt(XNonce::from_slice(nonce), Payload { msg: plain, aad })
            .ok()?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Some(URL_SAFE_NO_PAD.encode(out))
    }

    /// The bytes inside `sealed`, if this key sealed them for the same
    /// tenant and list.
    pub fn open_bytes(&self, tenant: &str, list: &str, sealed: &str) -> Option<Vec<u8>> {
        if sealed.len() > MAX_SEALED {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(sealed).ok()?;
        if bytes.len() <= NONCE {
            return None;
        }
        let (nonce, body) = bytes.split_at(NONCE);
        let aad = binding(tenant, list);
        self.cipher()
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: &aad,
                },
            )
            .ok()
    }
}

/// The longest sealed text opened: a reviewer's feed position names a
/// task for each writer slot it has seen a change in.
pub const MAX_SEALED: usize = 32 << 10;

/// Bytes every cursor is padded to before sealing: the longest cursor the
/// rules make (a verb's letter and the hex of a position whose task id is
/// the longest a name may be, escaped) kept as bytes, with room to spare.
const PADDED: usize = 2112;

/// A cursor laid out for sealing at one length: a form byte, then either
/// the verb's letter and the position's bytes (the rules' `letter + hex`
/// spelling, halved) or the cursor's text, then its length and zeros.
fn pad(cursor: &str) -> Option<Vec<u8>> {
    let hex = cursor.get(1..).filter(|h| {
        cursor.as_bytes()[0].is_ascii_alphabetic()
            && h.len() % 2 == 0
            && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    });
    let mut body = Vec::with_capacity(PADDED);
    match hex {
        Some(h) => {
            body.push(1u8);
            body.push(cursor.as_bytes()[0]);
            for i in (0..h.len()).step_by(2) {
                body.push(u8::from_str_radix(&h[i..i + 2], 16).ok()?);
            }
        }
        None => {
            body.push(0u8);
            body.extend_from_slice(cursor.as_bytes());
        }
    }
    let len = u16::try_from(body.len()).ok()?;
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    // None is longer than the padding (see [`PADDED`]); one that were would
    // not be sealed, rather than issued at a length the document forbids.
    if out.len() > PADDED {
        return None;
    }
    out.resize(PADDED, 0);
    Some(out)
}

fn unpad(block: &[u8]) -> Option<String> {
    let len = usize::from(u16::from_be_bytes([*block.first()?, *block.get(1)?]));
    let body = block.get(2..2 + len)?;
    match body.split_first()? {
        (1, rest) => {
            let (letter, bytes) = rest.split_first()?;
            let mut text = String::with_capacity(1 + 2 * bytes.len());
            text.push(char::from(*letter));
            for b in bytes {
                text.push_str(&format!("{b:02x}"));
            }
            Some(text)
        }
        (0, rest) => String::from_utf8(rest.to_vec()).ok(),
        _ => None,
    }
}

/// What a cursor is bound to, each part length-prefixed so no two pairs of
/// names run together into the same bytes.
fn binding(tenant: &str, list: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(tenant.len() + list.len() + 16);
    for part in [tenant, list] {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CursorKey {
        CursorKey::random().expect("random")
    }

    #[test]
    fn a_sealed_cursor_opens_only_for_its_tenant_and_list_under_its_key() {
        let k = key();
        let sealed = k.seal("acme", "for-case:c1", "c0a1b2").expect("sealed");
        assert!(
            regex::Regex::new(PATTERN)
                .expect("pattern")
                .is_match(&sealed)
        );
        assert_eq!(
            k.open("acme", "for-case:c1", &sealed).as_deref(),
            Some("c0a1b2")
        );
        assert_eq!(k.open("acmE", "for-case:c1", &sealed), None);
        assert_eq!(k.open("acme", "for-case:c2", &sealed), None);
        assert_eq!(k.open("acme", "queue", &sealed), None);
        assert_eq!(key().open("acme", "for-case:c1", &sealed), None);
        // Names that run together differently bind differently.
        let s = k.seal("ab", "c", "x").expect("sealed");
        assert_eq!(k.open("a", "bc", &s), None);
    }

    #[test]
    fn a_sealed_cursor_carries_nothing_readable_and_never_repeats() {
        let k = key();
        let a = k.seal("acme", "queue", "secret-task-id").expect("sealed");
        let b = k.seal("acme", "queue", "secret-task-id").expect("sealed");
        assert_ne!(a, b, "a fresh nonce every time");
        for s in [&a, &b] {
            let bytes = URL_SAFE_NO_PAD.decode(s).expect("base64");
            assert!(!bytes.windows(6).any(|w| w == b"secret"));
            assert!(!s.contains("secret"));
        }
    }

    #[test]
    fn every_cursor_seals_to_one_length() {
        let k = key();
        let short = k.seal("acme", "queue", "q0a").expect("sealed");
        let long = k
            .seal("acme", "queue", &format!("q{}", "ab".repeat(900)))
            .expect("sealed");
        let text = k.seal("acme", "queue", "not hex at all").expect("sealed");
        assert_eq!(short.len(), long.len());
        assert_eq!(short.len(), text.len());
        assert!(regex::Regex::new(PATTERN).expect("pattern").is_match(&long));
        assert_eq!(k.open("acme", "queue", &short).as_deref(), Some("q0a"));
        assert_eq!(
            k.open("acme", "queue", &long),
            Some(format!("q{}", "ab".repeat(900)))
        );
        assert_eq!(
            k.open("acme", "queue", &text).as_deref(),
            Some("not hex at all")
        );
    }

    #[test]
    fn a_forged_or_damaged_cursor_opens_to_nothing() {
        let k = key();
        let sealed = k.seal("acme", "queue", "c01").expect("sealed");
        let mut bytes = URL_SAFE_NO_PAD.decode(&sealed).expect("base64");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(
            k.open("acme", "queue", &URL_SAFE_NO_PAD.encode(&bytes)),
            None
        );
        for junk in ["", "c01", "!!!!", &"A".repeat(80)] {
            assert_eq!(k.open("acme", "queue", junk), None, "{junk:?}");
        }
    }

    #[test]
    fn a_key_file_holds_64_hex_digits() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("k");
        std::fs::write(&path, format!("{}\n", "ab".repeat(32))).expect("write");
        assert!(CursorKey::load(&path).is_ok());
        for bad in ["ab", &"zz".repeat(32), &"ab".repeat(33)] {
            std::fs::write(&path, bad).expect("write");
            assert!(matches!(
                CursorKey::load(&path),
                Err(CursorKeyError::Format { .. })
            ));
        }
    }
}
