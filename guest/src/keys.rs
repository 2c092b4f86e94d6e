//! The order-preserving tuple encoding every key is written in.
//!
//! A key is a tuple of integers and strings; its bytes compare exactly as the
//! tuple does, element by element, so a range scan over encoded keys walks the
//! tuples in order. Integers are a tag byte then eight big-endian bytes with
//! the sign bit flipped (so negatives sort first); strings are a tag byte, the
//! UTF-8 bytes with every `0x00` escaped as `0x00 0xFF`, and a `0x00`
//! terminator (so `"a"` sorts before `"ab"`, and no string can run into the
//! element after it). This module never interprets what a key means.

#[allow(unused_imports)]
use crate::prelude::*;
use core::fmt;

const TAG_STR: u8 = 0x02;
const TAG_INT: u8 = 0x15;

/// One element of a key tuple.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Elem {
    Str(String),
    Int(i64),
}

impl From<&str> for Elem {
    fn from(s: &str) -> Self {
        Elem::Str(s.to_owned())
    }
}

impl From<i64> for Elem {
    fn from(n: i64) -> Self {
        Elem::Int(n)
    }
}

/// Builds an encoded key one element at a time.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key(Vec<u8>);

impl Key {
    pub fn new() -> Self {
        Key(Vec::with_capacity(48))
    }

    pub fn str(mut self, s: &str) -> Self {
        let mut rest = s.as_bytes();
        self.0.reserve(rest.len() + 2);
        self.0.push(TAG_STR);
        // Copied a run at a time: a byte at a time costs more than the rest
        // of building most keys.
        while let Some(at) = rest.iter().position(|&b| b == 0) {
            self.0.extend_from_slice(&rest[..=at]);
            self.0.push(0xFF);
            rest = &rest[at + 1..];
        }
        self.0.extend_from_slice(rest);
        self.0.push(0);
        self
    }

    pub fn int(mut self, n: i64) -> Self {
        self.0.push(TAG_INT);
        self.0
            .extend_from_slice(&((n as u64) ^ (1 << 63)).to_be_bytes());
        self
    }

    pub fn push(self, e: &Elem) -> Self {
        match e {
            Elem::Str(s) => self.str(s),
            Elem::Int(n) => self.int(*n),
        }
    }

    /// Appends raw bytes that are themselves an encoded tuple (a cursor).
    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// The exclusive upper bound of every key that extends this one by at
    /// least one element: each element starts with a tag byte below `0xFF`.
    pub fn prefix_end(&self) -> Vec<u8> {
        let mut end = self.0.clone();
        end.push(0xFF);
        end
    }

    /// The smallest key strictly greater than this one.
    pub fn successor(&self) -> Vec<u8> {
        let mut next = self.0.clone();
        next.push(0x00);
        next
    }
}

/// Encodes a whole tuple.
pub fn encode(elems: &[Elem]) -> Vec<u8> {
    elems.iter().fold(Key::new(), |k, e| k.push(e)).into_bytes()
}

/// Why bytes are not an encoded tuple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Decodes a whole tuple; every byte must belong to an element.
pub fn decode(mut bytes: &[u8]) -> Result<Vec<Elem>, DecodeError> {
    let mut out = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        match tag {
            TAG_INT => {
                let raw: [u8; 8] = rest
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .ok_or(DecodeError("integer element is cut short"))?;
                out.push(Elem::Int((u64::from_be_bytes(raw) ^ (1 << 63)) as i64));
                bytes = &rest[8..];
            }
            TAG_STR => {
                let mut s = Vec::new();
                let mut i = 0;
                loop {
                    match rest.get(i) {
                        None => return Err(DecodeError("string element has no terminator")),
                        Some(0) if rest.get(i + 1) == Some(&0xFF) => {
                            s.push(0);
                            i += 2;
                        }
                        Some(0) => break,
                        Some(&b) => {
                            s.push(b);
                            i += 1;
                        }
                    }
                }
                let s =
                    String::from_utf8(s).map_err(|_| DecodeError("string element is not UTF-8"))?;
                out.push(Elem::Str(s));
                bytes = &rest[i + 1..];
            }
            _ => return Err(DecodeError("unknown element tag")),
        }
    }
    Ok(out)
}

/// Lowercase hex, for cursors: opaque to callers, but plain ASCII.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xF)] as char);
    }
    s
}

pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn elem() -> impl Strategy<Value = Elem> {
        prop_oneof![
            any::<i64>().prop_map(Elem::Int),
            // Bias towards the bytes the escaping must get right.
            proptest::collection::vec(
                prop_oneof![Just('\0'), Just('\u{ff}'), Just('a'), any::<char>()],
                0..6
            )
            .prop_map(|cs| Elem::Str(cs.into_iter().collect())),
        ]
    }

    /// Tuples whose elements have the same type at each position, as every
    /// key layout in Leasehold does.
    fn same_shape_pair() -> impl Strategy<Value = (Vec<Elem>, Vec<Elem>)> {
        proptest::collection::vec(any::<bool>(), 0..5).prop_flat_map(|shape| {
            let one = move |shape: Vec<bool>| {
                shape
                    .into_iter()
                    .map(|is_int| {
                        if is_int {
                            prop_oneof![any::<i64>(), -3i64..3]
                                .prop_map(Elem::Int)
                                .boxed()
                        } else {
                            proptest::collection::vec(
                                prop_oneof![Just('\0'), Just('a'), Just('b'), any::<char>()],
                                0..4,
                            )
                            .prop_map(|cs| Elem::Str(cs.into_iter().collect()))
                            .boxed()
                        }
                    })
                    .collect::<Vec<_>>()
            };
            (one(shape.clone()), one(shape))
        })
    }

    proptest! {
        #[test]
        fn every_tuple_round_trips(t in proptest::collection::vec(elem(), 0..6)) {
            prop_assert_eq!(decode(&encode(&t)).expect("decodes"), t);
        }

        #[test]
        fn byte_order_is_tuple_order((a, b) in same_shape_pair()) {
            prop_assert_eq!(encode(&a).cmp(&encode(&b)), a.cmp(&b));
        }

        #[test]
        fn a_prefix_range_holds_exactly_its_extensions(
            p in proptest::collection::vec(elem(), 0..3),
            rest in proptest::collection::vec(elem(), 0..3),
            other in proptest::collection::vec(elem(), 0..4),
        ) {
            let prefix = p.iter().fold(Key::new(), |k, e| k.push(e));
            let mut full = p.clone();
            full.extend(rest.clone());
            let key = encode(&full);
            let in_range = |k: &[u8]| k >= prefix.as_bytes() && k < prefix.prefix_end().as_slice();
            prop_assert!(in_range(&key));
            prop_assert_eq!(in_range(&encode(&other)), other.starts_with(&p));
        }

        #[test]
        fn hex_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(from_hex(&to_hex(&bytes)), Some(bytes));
        }
    }

    #[test]
    fn a_string_never_runs_into_the_next_element() {
        let a = encode(&["a".into(), "b".into()]);
        let b = encode(&["a\0b".into()]);
        assert_ne!(a, b);
        assert!(encode(&["a".into()]) < encode(&["a\0".into()]));
        assert!(encode(&["a".into(), Elem::Int(i64::MAX)]) < encode(&["ab".into()]));
    }

    #[test]
    fn garbage_does_not_decode() {
        assert!(decode(&[0x99]).is_err());
        assert!(decode(&[TAG_INT, 1, 2]).is_err());
        assert!(decode(&[TAG_STR, b'a']).is_err());
        assert!(decode(&[TAG_STR, 0xC3, 0x00]).is_err());
    }
}
