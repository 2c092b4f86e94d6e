//! What the unit tests of several modules share. Test-only; it must never
//! hold anything a build for use could reach.

use std::sync::Mutex;

/// Held by every unit test that makes an engine while another counts the
/// deadline clocks of the process, so the count sees only its own.
pub(crate) static ENGINE_TESTS: Mutex<()> = Mutex::new(());
