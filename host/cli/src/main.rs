//! The `leasehold` binary: parse the arguments, dispatch to the command,
//! and map the outcome to an exit code (0 done, 1 refused, 2 bad usage or
//! input, 3 storage or sandbox failure, 4 the database stayed busy). Every
//! command lives in `commands/`, a group per file; what they share sits
//! beside it (`context`, `answer`, `render`, `values`, `input`, `keys`).

mod answer;
#[cfg(test)]
mod checklist;
mod commands;
mod context;
mod error;
mod exit;
mod globals;
mod input;
mod keys;
#[cfg(test)]
mod layering;
mod render;
mod values;

/// Each call frees many small blocks (the strings and lists lifted out of
/// the component, the keys and values of its batch) and then makes one large
/// allocation (the next call's `Store`); glibc's allocator merges every small
/// free block at that point, which profiles showed as a fixed cost of every
/// call. mimalloc keeps small blocks in per-size pages and never does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::ffi::OsString;
use std::io::{ErrorKind, Write};
use std::process::ExitCode;

use clap::Parser;

use crate::commands::Command;
use crate::context::Context;
use crate::error::CliError;
use crate::globals::Globals;

const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  the engine refused (claim refused, not found, not held...); `check` found discrepancies
  2  usage or input error (the message says what was wrong and where)
  3  storage or sandbox failure; a database file that is empty, damaged or not one
  4  busy: another process kept the database open for longer than --wait,
     or a PostgreSQL call lost every retry to concurrent calls; run it again

Times are RFC 3339 (2026-05-04T09:00:00Z, any offset) or integer milliseconds
since 1970. Durations are written with a unit: 30s, 5m, 1500ms.";

/// A human-task worklist and durable-timer engine whose rules run as a
/// sandboxed WebAssembly component over a local redb file or a shared
/// PostgreSQL database.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(flatten)]
    globals: Globals,

    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    let json = cli.globals.json;
    if cli.globals.tenants.len() > 1 && !cli.command.takes_several_tenants() {
        let e = CliError::Usage {
            message:
                "--tenant is given more than once; only `copy`, `backup` and `restore` take several"
                    .into(),
            argument: Some("--tenant".into()),
        };
        return fail(&e, json);
    }
    let cx = Context::new(&cli.globals, cli.command.verbs());
    let mut stdout = std::io::stdout().lock();
    let outcome = cli.command.run(&cx, &mut stdout).and_then(|code| {
        stdout.flush()?;
        Ok(code)
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        // A reader that went away (`| head`) is not a failure worth a word.
        Err(CliError::Output(e)) if e.kind() == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail(&e, json),
    }
}

/// Arguments that do not parse. clap prints help and its own errors, except
/// that under `--json` an error is one JSON object like every other.
fn usage(e: &clap::Error) -> ExitCode {
    if e.use_stderr() && json_requested(std::env::args_os()) {
        return fail(&CliError::from(e), true);
    }
    // Nothing better to do if the terminal is gone.
    let _ = e.print();
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(exit::BAD_INPUT))
}

/// Whether `--json` was given, from the raw arguments: the parse that would
/// say so failed. Anything after `--` is a value, not a flag.
fn json_requested(args: impl Iterator<Item = OsString>) -> bool {
    args.skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

fn fail(e: &CliError, json: bool) -> ExitCode {
    let text = if json {
        serde_json::to_string(&e.report()).unwrap_or_else(|_| e.message())
    } else {
        format!("error: {}", e.message())
    };
    // Nothing better to do if stderr is gone too.
    let _ = writeln!(std::io::stderr(), "{text}");
    ExitCode::from(e.exit_code())
}
