//! The exit codes, the CLI's contract with scripts: 1 when the engine
//! refused (a claim ladder rung, an unknown id) or a check found something,
//! 2 when the caller's input was wrong, 3 when storage or the sandbox failed
//! or the file is no database, 4 when another process kept the database
//! busy or won every race for it. The codes live here and nowhere else;
//! which error earns which is `error`'s (and `keys::error`'s) to say.

/// The engine refused, or `check` found discrepancies.
pub const REFUSED: u8 = 1;
/// Usage or input error.
pub const BAD_INPUT: u8 = 2;
/// Storage or sandbox failure.
pub const FAILED: u8 = 3;
/// Another process had the database open for the whole `--wait`, or
/// (PostgreSQL) the call lost every race with concurrent calls. Nothing was
/// done; the same command may succeed when run again.
pub const BUSY: u8 = 4;
