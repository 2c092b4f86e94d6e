//! Which tenant names exist. A backend is only ever handed a name that
//! passed this check, so it may use one as a key prefix or a column value
//! as it is. This module owns the rule and must never widen it: names that
//! differ only in a way a backend might fold (case, trailing bytes) are
//! still different tenants.

/// The longest tenant name.
pub const MAX_TENANT_BYTES: usize = 64;

/// A tenant name that cannot be used, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid tenant name {name:?}: {why}")]
pub struct InvalidTenant {
    /// The name as given.
    pub name: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Checks a tenant name: 1–64 bytes of ASCII letters, digits, `-`, `_`, `.`.
pub fn check_tenant(name: &str) -> Result<(), InvalidTenant> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.len() > MAX_TENANT_BYTES {
        "it is longer than 64 bytes"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        "use only ASCII letters, digits, '-', '_' and '.'"
    } else {
        return Ok(());
    };
    Err(InvalidTenant {
        name: name.to_owned(),
        why,
    })
}
