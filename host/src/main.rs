//! The `leasehold` binary: parse, run, print, and map the outcome to an exit
//! code (0 done, 1 refused, 2 bad usage or input, 3 storage or sandbox
//! failure). Everything else lives in `cli/`.

mod cli;

use std::io::{ErrorKind, Write};
use std::process::ExitCode;

use clap::Parser;

use cli::args::{Cli, Command};
use cli::error::CliError;

fn main() -> ExitCode {
    // clap prints its own usage errors and exits 2 (0 for --help).
    let cli = Cli::parse();
    let mut stdout = std::io::stdout().lock();
    let outcome = match cli.command {
        Command::Demo => cli::demo::run(&cli, &mut stdout).map(|()| 0),
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
        Err(e) => {
            let text = if cli.json {
                serde_json::to_string(&e.report()).unwrap_or_else(|_| e.message())
            } else {
                format!("error: {}", e.message())
            };
            // Nothing better to do if stderr is gone too.
            let _ = writeln!(std::io::stderr(), "{text}");
            ExitCode::from(e.exit_code())
        }
    }
}
