//! `leasehold backup`: every tenant (or those named) to one file, from a
//! running server (`GET /backup`, while it serves) or from a database
//! nobody holds, every line checked as it is written (`keys::backup_file`).
//! The format is the server's (`leasehold_serve::backup`). It must never
//! leave a file by the name asked for that is not a whole, checked backup,
//! and never write to a database.

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use leasehold_host::storage::Mode;
use leasehold_host::{Error, Limits};
use leasehold_serve::backup::{BackupError, write_backup};

use crate::context::Context;
use crate::error::CliError;
use crate::keys::backup_file::{Checked, check_backup};
use crate::keys::error::MoveError;
use crate::keys::store;
use crate::values;

/// How long one tenant's snapshot may last in an offline backup.
const SNAPSHOT_DEADLINE: Duration = Duration::from_secs(24 * 3600);
/// How long connecting to the server may take; the stream itself takes as
/// long as the backup does.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of the stream is read (and written to the file) at a time.
const READ_BUFFER: usize = 256 * 1024;

/// `leasehold backup`: from where, to where.
#[derive(Debug, Args)]
pub struct Backup {
    /// The running server's address (http://host:port); without it the
    /// backup reads --db, which no other process may hold
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// A file holding an operator's bearer token for --server (its first
    /// line)
    #[arg(long, value_name = "FILE", requires = "server")]
    token_file: Option<PathBuf>,
    /// Where to write the backup (written beside it, then renamed over it
    /// once whole and checked)
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Copies what is read into a file as it goes.
struct Tee<R> {
    from: R,
    to: std::fs::File,
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.from.read(buf)?;
        self.to.write_all(&buf[..n])?;
        Ok(n)
    }
}

fn backup_error(e: BackupError) -> MoveError {
    MoveError::Io {
        what: "write the backup".into(),
        source: std::io::Error::other(e),
    }
}

impl Backup {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        backup(self, cx, out)
    }
}

fn backup(args: &Backup, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
    let tenants = cx.tenants_named()?;
    let path = args.out.as_path();
    let io = |source| MoveError::Io {
        what: format!("write {}", path.display()),
        source,
    };
    // Written beside the file and renamed over it once whole and checked,
    // so that a file by that name is always a whole backup.
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let temp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    let started = Instant::now();
    let (source, Checked { header, end, read }) = match &args.server {
        Some(server) => {
            let url = format!("{}/backup", server.trim_end_matches('/'));
            let response = fetch(&url, args.token_file.as_deref(), &tenants)?;
            let tee = Tee {
                from: response,
                to: temp.reopen().map_err(io)?,
            };
            let input = Box::new(BufReader::with_capacity(READ_BUFFER, tee));
            (url.clone(), check_backup(input, &url)?)
        }
        None => {
            let db = cx.db_path().to_string_lossy().into_owned();
            let store = store::open(&db, true, cx.globals().wait)?;
            let tenants = if tenants.is_empty() {
                store
                    .tenants()
                    .map_err(|source| MoveError::Storage {
                        what: "list the tenants of",
                        tenant: db.clone(),
                        source,
                    })?
                    .ok_or_else(|| MoveError::Unlisted { db: db.clone() })?
            } else {
                tenants
            };
            let snapshot = |t: &str| {
                store
                    .begin_with_deadline(
                        t,
                        Mode::Read,
                        Limits::default().lock_wait,
                        SNAPSHOT_DEADLINE,
                    )
                    .map_err(Error::from)
            };
            {
                let mut writer = std::io::BufWriter::new(temp.as_file());
                write_backup(&tenants, values::now(), &snapshot, &mut writer)
                    .map_err(backup_error)?;
            }
            let name = temp.path().display().to_string();
            let input = Box::new(BufReader::new(temp.reopen().map_err(io)?));
            (db, check_backup(input, &name)?)
        }
    };
    temp.as_file().sync_all().map_err(io)?;
    let file_bytes = temp.as_file().metadata().map_err(io)?.len();
    temp.persist(path).map_err(|e| io(e.error))?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let totals = &end.backup_end;
    if cx.json() {
        let answer = serde_json::json!({
            "out": path,
            "from": source,
            "began_at_ms": header.began_at_ms,
            "snapshot": header.snapshot,
            "tenants": read.iter().map(|(t, d)| serde_json::json!({
                "tenant": t, "keys": d.keys(), "bytes": d.bytes(), "sha256": d.hex(),
            })).collect::<Vec<_>>(),
            "keys": totals.keys,
            "bytes": totals.bytes,
            "file_bytes": file_bytes,
            "ms": (secs * 1000.0) as u64,
            "keys_per_s": (totals.keys as f64 / secs) as u64,
            "file_mb_per_s": file_bytes as f64 / secs / 1e6,
        });
        writeln!(out, "{answer}")?;
    } else {
        writeln!(
            out,
            "Backed up {} tenants ({} keys, {} bytes of keys and values) from {source} to {}, \
             begun at {} ms, one snapshot per tenant; every digest checked.\n  \
             {file_bytes} bytes in {:.1}s: {:.0} keys/s, {:.1} MB/s of file",
            totals.tenants,
            totals.keys,
            totals.bytes,
            path.display(),
            header.began_at_ms,
            secs,
            totals.keys as f64 / secs,
            file_bytes as f64 / secs / 1e6,
        )?;
    }
    Ok(0)
}

/// Asks the server for the stream; a refusal is answered with the
/// problem's detail.
fn fetch(
    url: &str,
    token_file: Option<&Path>,
    tenants: &[String],
) -> Result<reqwest::blocking::Response, MoveError> {
    let mut request = reqwest::blocking::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(None)
        .build()
        .map_err(|e| MoveError::Io {
            what: "start an HTTP client".into(),
            source: std::io::Error::other(e),
        })?
        .get(url)
        .query(&tenants.iter().map(|t| ("tenant", t)).collect::<Vec<_>>());
    if let Some(file) = token_file {
        let text = std::fs::read_to_string(file).map_err(|source| MoveError::Io {
            what: format!("read {}", file.display()),
            source,
        })?;
        let token = text.lines().next().unwrap_or_default().trim();
        if token.is_empty() {
            return Err(MoveError::Usage(format!(
                "{}: the first line holds no token",
                file.display()
            )));
        }
        request = request.bearer_auth(token);
    }
    let response = request.send().map_err(|e| MoveError::Io {
        what: format!("ask {url} for a backup"),
        source: std::io::Error::other(e),
    })?;
    let status = response.status().as_u16();
    if status != 200 {
        let body = response.text().unwrap_or_default();
        let detail = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("detail")?.as_str().map(str::to_owned))
            .unwrap_or(body);
        return Err(MoveError::Server { status, detail });
    }
    Ok(response)
}
