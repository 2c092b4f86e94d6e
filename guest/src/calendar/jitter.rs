//! Deterministic jitter: how late an occurrence fires, as a function of the
//! schedule's id, the occurrence's instant and the bound only, so that every
//! host computes the same firing instant and spreads a crowd of schedules
//! due at the same minute. Reads no clock and no random source.
//!
//! The offset is the first 8 bytes (big-endian) of
//! `SHA-256("leasehold/schedule-jitter/v1\0" ‖ len(id) as u64 BE ‖ id ‖
//! occurrence as i64 BE)`, reduced modulo `bound + 1`: milliseconds in
//! `0..=bound`. The bias of the reduction is below 2⁻³⁶ for any allowed
//! bound. Changing any of this moves armed firings, so it is versioned in
//! its tag.

use sha2::{Digest, Sha256};

use crate::time::Timestamp;

/// One day: the largest jitter bound a schedule may ask for.
pub const MAX_JITTER_MS: u64 = 86_400_000;

const TAG: &[u8] = b"leasehold/schedule-jitter/v1\0";

/// The delay, in milliseconds within `0..=bound_ms`, of `occurrence` of the
/// schedule `schedule_id`.
pub fn jitter_offset(schedule_id: &str, occurrence: Timestamp, bound_ms: u64) -> u64 {
    let mut hash = Sha256::new();
    hash.update(TAG);
    hash.update((schedule_id.len() as u64).to_be_bytes());
    hash.update(schedule_id.as_bytes());
    hash.update(occurrence.to_be_bytes());
    let digest = hash.finalize();
    let mut word = [0u8; 8];
    word.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(word) % bound_ms.saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_jitter_is_a_fixed_function_of_id_and_instant() {
        // Pinned: a change here moves every armed firing.
        assert_eq!(
            jitter_offset("nightly-report", 1_700_000_000_000, 60_000),
            46_244
        );
        assert_ne!(
            jitter_offset("nightly-report", 1_700_000_000_000, 60_000),
            jitter_offset("nightly-report2", 1_700_000_000_000, 60_000)
        );
        assert_eq!(jitter_offset("x", 0, 0), 0);
        for occurrence in 0..1000 {
            assert!(jitter_offset("spread", occurrence * 60_000, 999) <= 999);
        }
    }
}
