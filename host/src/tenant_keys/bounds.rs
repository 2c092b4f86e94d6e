//! The bounds every tenant-keys line and entry is held to, derived from the
//! engine's own limits: an entry's key and value no larger than a call may
//! write (`Limits::key_bytes`, `Limits::value_bytes`, which the call's view
//! enforces on every put), a batch no larger than one call's budgets, and a
//! line no longer than the largest entry's line. It owns these numbers and
//! the check of one entry; it must never read or write a line itself.

use crate::config::Limits;

/// What a line holds besides its key's and value's hex: the frame
/// `{"key":"","value":""}` (21 bytes) and the newline, rounded up. The
/// first and last lines (a name, a few counts and a digest) are far below
/// an entry's bound.
pub const LINE_OVERHEAD: usize = 64;

/// The most entries, and bytes of keys and values, one batch holds: the
/// engine's budgets for one call, so that a batch written back is never a
/// larger transaction than a call may make.
pub fn batch_bounds() -> (u32, usize) {
    let limits = Limits::default();
    (
        limits.scan_entries,
        limits.call_write_bytes.min(limits.scan_bytes),
    )
}

/// The longest key and the largest value an entry may have: those a call
/// may write.
pub fn entry_bounds() -> (usize, usize) {
    let limits = Limits::default();
    (limits.key_bytes, limits.value_bytes)
}

/// The longest line a reader takes, newline included: the largest entry's
/// key and value in hex, and [`LINE_OVERHEAD`]. A reader refuses a longer
/// line having read only this many bytes of it.
pub fn max_line_bytes() -> usize {
    let (key, value) = entry_bounds();
    2 * (key + value) + LINE_OVERHEAD
}

/// Refuses an entry no call could have written: a key or a value over the
/// engine's limits. Answers why, in words that name both sizes.
pub fn check_entry(key: &[u8], value: &[u8]) -> Result<(), String> {
    let (max_key, max_value) = entry_bounds();
    if key.len() > max_key {
        return Err(format!(
            "a key of {} bytes, over the engine's limit of {max_key}",
            key.len()
        ));
    }
    if value.len() > max_value {
        return Err(format!(
            "a value of {} bytes, over the engine's limit of {max_value}",
            value.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest entry a call may write fits a line, and one byte more
    /// of either part does not pass the entry check.
    #[test]
    fn the_largest_entry_fits_a_line_and_one_byte_more_is_refused() {
        let (k, v) = entry_bounds();
        let frame = r#"{"key":"","value":""}"#.len() + 1;
        assert!(2 * (k + v) + frame <= max_line_bytes());
        let (key, value) = (vec![1u8; k], vec![2u8; v]);
        assert_eq!(check_entry(&key, &value), Ok(()));
        let long = vec![1u8; k + 1];
        assert!(check_entry(&long, b"").is_err_and(|e| e.contains("a key of 4097 bytes")));
        let big = vec![2u8; v + 1];
        assert!(check_entry(b"k", &big).is_err_and(|e| e.contains("over the engine's limit")));
        // An entry within the limits is within a batch, so it is never
        // refused for the batch's sake.
        assert!(k + v <= batch_bounds().1);
    }
}
