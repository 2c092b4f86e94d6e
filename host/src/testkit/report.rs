//! How the kit reports: a failed promise, a check's signature, and running
//! one check with a panic counted as its failure. It owns the words of a
//! report; it must never know a check or a backend's insides.

use crate::storage::backend::Backend;

/// A promise a backend did not keep: which check found it, and what it saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The check that found it.
    pub check: &'static str,
    /// What it saw.
    pub what: String,
}

impl Failure {
    /// A failure of `check`, which saw `what`.
    pub fn new(check: &'static str, what: impl Into<String>) -> Failure {
        Failure {
            check,
            what: what.into(),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.check, self.what)
    }
}

impl std::error::Error for Failure {}

/// A check of the kit: its name, and the function that runs it on a
/// backend from `make`.
pub type Check<B> = (&'static str, fn(&dyn Fn() -> B) -> Result<(), Failure>);

/// Runs one check, a panic inside it reported as its failure.
pub fn run_one<B: Backend>(
    name: &'static str,
    check: fn(&dyn Fn() -> B) -> Result<(), Failure>,
    make: &dyn Fn() -> B,
) -> Result<(), Failure> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(make))) {
        Ok(out) => out,
        Err(panic) => Err(Failure::new(
            name,
            format!("panicked: {}", panic_text(&*panic)),
        )),
    }
}

/// What a panic said, for a report.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "it panicked".to_owned())
}

/// Panics with the failure, for a `#[test]`.
pub fn assert_passes(out: Result<(), Failure>) {
    if let Err(f) = out {
        panic!("the backend broke a promise of the storage trait: {f}");
    }
}
