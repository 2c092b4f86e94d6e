//! `leasehold component --out FILE`: the embedded component as a file, for
//! hosts in other languages, with its SHA-256 so anyone can tell that two
//! hosts ran the same bytes. It opens no database.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use leasehold_host::GUEST_COMPONENT;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::context::Context;
use crate::error::CliError;

#[derive(Debug, Args)]
pub struct Component {
    /// Where to write the .wasm file (replaced if it exists)
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// The SHA-256 of the embedded component, in lowercase hex.
pub fn sha256_hex() -> String {
    Sha256::digest(GUEST_COMPONENT)
        .iter()
        .fold(String::with_capacity(64), |mut hex, b| {
            // Writing to a String cannot fail.
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

impl Component {
    /// Writes the bytes to `--out` and prints `HASH  PATH`, the line
    /// `sha256sum` prints (so `sha256sum -c` can check the file), or a JSON
    /// object.
    pub fn run(&self, cx: &Context, stdout: &mut dyn Write) -> Result<u8, CliError> {
        write(&self.out, cx.json(), stdout).map(|()| 0)
    }
}

fn write(out: &std::path::Path, json: bool, stdout: &mut dyn Write) -> Result<(), CliError> {
    std::fs::write(out, GUEST_COMPONENT).map_err(|e| {
        CliError::Input(format!(
            "cannot write the component to {}: {e}",
            out.display()
        ))
    })?;
    let sha256 = sha256_hex();
    let line = if json {
        json!({
            "path": out.display().to_string(),
            "bytes": GUEST_COMPONENT.len(),
            "sha256": sha256,
        })
        .to_string()
    } else {
        format!("{sha256}  {}", out.display())
    };
    writeln!(stdout, "{line}")?;
    Ok(())
}
