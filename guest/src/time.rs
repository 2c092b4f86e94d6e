//! What an instant is to the rules: a number the caller hands in, never a
//! clock read. A leaf that every other module may use (the model and the
//! storage trait both speak of instants); it must never import any of them.

/// Milliseconds since the Unix epoch.
pub type Timestamp = i64;
