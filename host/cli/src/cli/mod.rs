//! The `leasehold` command line over the host library: parse the arguments,
//! make the calls, render the answer for a person or a script, and pick the
//! exit code. It reads the clock and the files; the engine does neither.

pub mod args;
pub mod backup;
pub mod commands;
pub mod component;
pub mod demo;
pub mod error;
pub mod events;
pub mod input;
pub mod keyspace;
pub mod moving;
pub mod output;
pub mod restore;
pub mod serve;
pub mod time;
