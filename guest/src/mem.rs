//! Byte comparison a word at a time, for the component's `memcmp` and
//! `bcmp`.
//!
//! Every ordered map of keys in the rules (the write buffer, the rows read
//! ahead) compares keys with `memcmp`, and keys share long prefixes. The
//! `memcmp` the wasm target links otherwise compares a byte per loop turn,
//! which made it the largest single cost of a call that reads many keys.

#![allow(unsafe_code)] // raw pointers are what `memcmp` is handed

use core::cmp::Ordering;

/// `a` against `b`, both `n` bytes long: as `memcmp` orders them.
///
/// # Safety
/// `a` and `b` must each be valid for reads of `n` bytes.
unsafe fn compare_raw(a: *const u8, b: *const u8, n: usize) -> Ordering {
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: `i + 8 <= n`, and both are valid for `n` bytes.
        let (x, y) = unsafe {
            (
                u64::from_le_bytes(a.add(i).cast::<[u8; 8]>().read_unaligned()),
                u64::from_le_bytes(b.add(i).cast::<[u8; 8]>().read_unaligned()),
            )
        };
        if x != y {
            // Little-endian words: the lowest set bit of the difference
            // lies in the first byte that differs.
            let shift = (x ^ y).trailing_zeros() & !7;
            return ((x >> shift) as u8).cmp(&((y >> shift) as u8));
        }
        i += 8;
    }
    while i < n {
        // SAFETY: `i < n`.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return x.cmp(&y);
        }
        i += 1;
    }
    Ordering::Equal
}

/// Safe entry for tests: equal-length prefixes of `a` and `b`.
#[cfg(test)]
fn compare(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    // SAFETY: both slices hold at least `n` bytes.
    unsafe { compare_raw(a.as_ptr(), b.as_ptr(), n) }
}

#[cfg(target_arch = "wasm32")]
mod symbols {
    use core::cmp::Ordering;

    /// # Safety
    /// As C's `memcmp`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: the caller's promise is `compare_raw`'s.
        match unsafe { super::compare_raw(a, b, n) } {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }
    }

    /// # Safety
    /// As C's `bcmp`: zero when equal.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: as for `memcmp`.
        unsafe { memcmp(a, b, n) }
    }
}

#[cfg(test)]
mod tests {
    use super::compare;
    use proptest::prelude::*;

    #[test]
    fn orders_as_slices_do_at_every_position_and_length() {
        for n in 0..40usize {
            let base: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            assert_eq!(compare(&base, &base), core::cmp::Ordering::Equal);
            for at in 0..n {
                for delta in [1u8, 0x80, 0xff] {
                    let mut other = base.clone();
                    other[at] = other[at].wrapping_add(delta);
                    assert_eq!(compare(&base, &other), base.cmp(&other), "n {n} at {at}");
                    assert_eq!(compare(&other, &base), other.cmp(&base), "n {n} at {at}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn agrees_with_slice_order(a in proptest::collection::vec(any::<u8>(), 0..48),
                                   b in proptest::collection::vec(any::<u8>(), 0..48)) {
            let n = a.len().min(b.len());
            prop_assert_eq!(compare(&a, &b), a[..n].cmp(&b[..n]));
        }
    }
}
