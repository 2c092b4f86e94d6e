//! `leasehold backup`: every tenant (or those named) to one file, from a
//! running server (`GET /backup`, while it serves, over TLS trusting a
//! private authority if asked) or from a database nobody holds, every line
//! checked, within the format's bounds, as it is written
//! (`keys::backup_file`); keyed, if the operator gives a digest key. The
//! format is the host library's (`leasehold_host::tenant_keys`), which the
//! server writes too. It must never leave a file by the name asked for
//! that is not a whole, checked backup, never hold more of a hostile
//! server's answer than a line's bound, and never write to a database.

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use leasehold_host::Limits;
use leasehold_host::storage::{BoxError, Mode};
use leasehold_host::tenant_keys::write_backup;

use crate::context::Context;
use crate::error::CliError;
use crate::keys::backup_file::{Checked, check_backup, seal_backup};
use crate::keys::error::MoveError;
use crate::keys::{key_file, store};
use crate::values;

/// How long one tenant's snapshot may last in an offline backup.
const SNAPSHOT_DEADLINE: Duration = Duration::from_secs(24 * 3600);
/// How long connecting to the server may take; the stream itself takes as
/// long as the backup does.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of the stream is read (and written to the file) at a time.
const READ_BUFFER: usize = 256 * 1024;
/// The most of a refusal's body read: a problem document is a few hundred
/// bytes, and a server that sends more is not believed further.
const MAX_PROBLEM: u64 = 64 * 1024;

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
    /// A PEM file of the certificate authorities that may sign --server's
    /// certificate, trusted beside the usual public ones (a private CA)
    #[arg(long, value_name = "FILE", requires = "server")]
    ca_file: Option<PathBuf>,
    /// Seal the backup with HMAC-SHA256 under the key this file holds, so
    /// that `restore` can authenticate it (docs/operations.md)
    #[arg(long, value_name = "FILE")]
    digest_key_file: Option<PathBuf>,
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

impl Backup {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        backup(self, cx, out)
    }
}

fn backup(args: &Backup, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
    let tenants = cx.tenants_named()?;
    let key = key_file::read(args.digest_key_file.as_deref())?;
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
            let response = fetch(
                &url,
                args.token_file.as_deref(),
                args.ca_file.as_deref(),
                &tenants,
            )?;
            let checked = match &key {
                // The server's stream, kept byte for byte as it is checked.
                None => {
                    let tee = Tee {
                        from: response,
                        to: temp.reopen().map_err(io)?,
                    };
                    let input = Box::new(BufReader::with_capacity(READ_BUFFER, tee));
                    check_backup(input, &url, None)?
                }
                // Checked as it comes, and written again sealed.
                Some(key) => {
                    let input = Box::new(BufReader::with_capacity(READ_BUFFER, response));
                    let mut writer = std::io::BufWriter::new(temp.as_file());
                    let checked = seal_backup(input, &url, &mut writer, key)?;
                    writer.flush().map_err(io)?;
                    checked
                }
            };
            if key.is_some() {
                // The sealed file, read back whole with its key.
                let name = temp.path().display().to_string();
                let input = Box::new(BufReader::new(temp.reopen().map_err(io)?));
                check_backup(input, &name, key.as_ref())?;
            }
            (url.clone(), checked)
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
                    .map_err(|e| Box::new(e) as BoxError)
            };
            {
                let mut writer = std::io::BufWriter::new(temp.as_file());
                write_backup(
                    &tenants,
                    values::now(),
                    &snapshot,
                    &mut writer,
                    key.as_ref(),
                    &values::now,
                )
                .map_err(MoveError::walking("(all)", "the backup"))?;
            }
            let name = temp.path().display().to_string();
            let input = Box::new(BufReader::new(temp.reopen().map_err(io)?));
            (db, check_backup(input, &name, key.as_ref())?)
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

/// Asks the server for the stream, trusting the authorities in `ca_file`
/// beside the public ones; a refusal is answered with the problem's
/// detail, of which at most [`MAX_PROBLEM`] bytes are read.
fn fetch(
    url: &str,
    token_file: Option<&Path>,
    ca_file: Option<&Path>,
    tenants: &[String],
) -> Result<reqwest::blocking::Response, MoveError> {
    let mut client = reqwest::blocking::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(None);
    if let Some(file) = ca_file {
        let pem = std::fs::read(file).map_err(|source| MoveError::Io {
            what: format!("read {}", file.display()),
            source,
        })?;
        let roots = reqwest::Certificate::from_pem_bundle(&pem)
            .ok()
            .filter(|roots| !roots.is_empty())
            .ok_or_else(|| {
                MoveError::Usage(format!(
                    "--ca-file {}: holds no PEM certificate",
                    file.display()
                ))
            })?;
        for root in roots {
            client = client.add_root_certificate(root);
        }
    }
    let mut request = client
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
        let mut body = String::new();
        let _ = response.take(MAX_PROBLEM).read_to_string(&mut body);
        let detail = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("detail")?.as_str().map(str::to_owned))
            .unwrap_or(body);
        return Err(MoveError::Server { status, detail });
    }
    Ok(response)
}
