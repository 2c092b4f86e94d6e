//! The `leasehold` binary: parse, run, print, and map the outcome to an exit
//! code (0 done, 1 refused, 2 bad usage or input, 3 storage or sandbox
//! failure, 4 the database stayed busy). Everything else lives in `cli/`.

mod cli;

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

use cli::args::{Cli, Command};
use cli::error::CliError;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    if cli.tenants.len() > 1
        && !matches!(
            cli.command,
            Command::Copy(_) | Command::Backup(_) | Command::Restore(_)
        )
    {
        let e = CliError::Usage {
            message:
                "--tenant is given more than once; only `copy`, `backup` and `restore` take several"
                    .into(),
            argument: Some("--tenant".into()),
        };
        return fail(&e, cli.json);
    }
    let mut stdout = std::io::stdout().lock();
    let outcome = match cli.command {
        Command::Demo => cli::demo::run(&cli, &mut stdout).map(|()| 0),
        Command::Serve(ref args) => cli::serve::serve(&cli, args).map(|()| 0),
        Command::Token(ref verb) => cli::serve::token(&cli, verb, &mut stdout).map(|()| 0),
        Command::Component { ref out } => {
            cli::component::write(out, cli.json, &mut stdout).map(|()| 0)
        }
        Command::Copy(ref args) => cli::moving::copy(&cli, args, &mut stdout),
        Command::Tenant(ref verb) => cli::moving::tenant(&cli, verb, &mut stdout),
        Command::Backup(ref args) => cli::backup::backup(&cli, args, &mut stdout),
        Command::Restore(ref args) => cli::restore::restore(&cli, args, &mut stdout),
        Command::Events(ref args) if args.follow => cli::events::follow(&cli, args, &mut stdout),
        _ => cli::commands::run(&cli).and_then(|report| {
            let text = if cli.json {
                let json = report
                    .json()
                    .map_err(|e| CliError::Failed(format!("cannot encode the answer: {e}")))?;
                json + "\n"
            } else {
                report.human()
            };
            stdout.write_all(text.as_bytes())?;
            Ok(report.exit_code())
        }),
    };
    let outcome = outcome.and_then(|code| {
        stdout.flush()?;
        Ok(code)
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        // A reader that went away (`| head`) is not a failure worth a word.
        Err(CliError::Output(e)) if e.kind() == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail(&e, cli.json),
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
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(cli::error::BAD_INPUT))
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
