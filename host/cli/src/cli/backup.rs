//! `leasehold backup` and the backup file read back: it owns fetching a
//! backup from a running server (or writing one from a database nobody
//! holds), checking every line of it as it is written, and the reader
//! `restore` uses. The format is the server's (`leasehold_serve::backup`):
//! a first line, each tenant as a tenant export, an end line with totals.
//! It must never leave a file by the name asked for that is not a whole,
//! checked backup, and never write to a database.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use leasehold_host::storage::{Backend, Mode};
use leasehold_host::{Error, Limits};
use leasehold_serve::backup::{
    BACKUP_FORMAT, BACKUP_VERSION, BackupEnd, BackupError, BackupHeader, write_backup,
};

use super::args::{BackupArgs, Cli};
use super::commands::db_path;
use super::error::CliError;
use super::keyspace::{self, Digest, Entries, ExportReader, Lines, MoveError};
use super::moving::tenants_named;

/// How long one tenant's snapshot may last in an offline backup.
const SNAPSHOT_DEADLINE: Duration = Duration::from_secs(24 * 3600);
/// How long connecting to the server may take; the stream itself takes as
/// long as the backup does.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of the stream is read (and written to the file) at a time.
const READ_BUFFER: usize = 256 * 1024;

/// A backup read a line at a time, each tenant through an
/// [`ExportReader`], the end line checked against what came before it.
pub struct BackupReader {
    lines: Option<Lines>,
    path: String,
    pub header: BackupHeader,
    /// Tenants read so far, with their digests.
    pub read: Vec<(String, Digest)>,
}

impl BackupReader {
    pub fn new(input: Box<dyn BufRead>, path: &str) -> Result<BackupReader, MoveError> {
        let mut lines = input.lines();
        let bad = |why: String| MoveError::BadFile {
            path: path.to_owned(),
            line: 1,
            why,
        };
        let first = match lines.next() {
            None => return Err(bad("the file is empty, not a backup".into())),
            Some(line) => line.map_err(|source| MoveError::Io {
                what: format!("read {path}"),
                source,
            })?,
        };
        let header: BackupHeader = serde_json::from_str(&first)
            .map_err(|e| bad(format!("not a backup's first line: {e}")))?;
        if header.format != BACKUP_FORMAT || header.version != BACKUP_VERSION {
            return Err(bad(format!(
                "format {:?} version {}; this build reads {BACKUP_FORMAT:?} version {BACKUP_VERSION}",
                header.format, header.version
            )));
        }
        Ok(BackupReader {
            lines: Some((lines, 1)),
            path: path.to_owned(),
            header,
            read: Vec::new(),
        })
    }

    fn bad(&self, line: u64, why: impl Into<String>) -> MoveError {
        MoveError::BadFile {
            path: self.path.clone(),
            line,
            why: why.into(),
        }
    }

    /// The next tenant's part, or `None` once every tenant the first line
    /// names was read. Hand it back with [`give_back`](Self::give_back)
    /// once read to its end.
    pub fn next_tenant(&mut self) -> Result<Option<ExportReader>, MoveError> {
        let Some(expected) = self.header.tenants.get(self.read.len()).cloned() else {
            return Ok(None);
        };
        let lines = self
            .lines
            .take()
            .ok_or_else(|| MoveError::Usage("a tenant's part was not handed back".into()))?;
        let line = lines.1 + 1;
        let section = ExportReader::section(lines, &self.path)?;
        if section.tenant != expected {
            return Err(self.bad(
                line,
                format!(
                    "tenant {:?} where the first line names {expected:?} next",
                    section.tenant
                ),
            ));
        }
        Ok(Some(section))
    }

    /// A tenant's part, read to its last line, whose count and digest
    /// matched.
    pub fn give_back(&mut self, mut section: ExportReader) -> Result<(), MoveError> {
        // A part whose last line was not reached yet is read on to it.
        while !section.ended() {
            if section.batch()?.is_empty() && !section.ended() {
                return Err(MoveError::Usage("a tenant's part ended early".into()));
            }
        }
        let entry = (section.tenant.clone(), section.digest().clone());
        self.lines = Some(section.rest());
        self.read.push(entry);
        Ok(())
    }

    /// Reads the end line, which must match the tenants read, and nothing
    /// after it; answers the totals.
    pub fn finish(&mut self) -> Result<BackupEnd, MoveError> {
        if self.read.len() != self.header.tenants.len() {
            return Err(MoveError::Usage(
                "the backup was not read through all its tenants".into(),
            ));
        }
        let Some((mut lines, line)) = self.lines.take() else {
            return Err(MoveError::Usage(
                "a tenant's part was not handed back".into(),
            ));
        };
        let io = |source| MoveError::Io {
            what: format!("read {}", self.path),
            source,
        };
        let Some(text) = lines.next() else {
            return Err(self.bad(
                line + 1,
                "the file ends before its end line: it was cut short",
            ));
        };
        let text = text.map_err(io)?;
        let end: BackupEnd = serde_json::from_str(&text)
            .map_err(|e| self.bad(line + 1, format!("not a backup's end line: {e}")))?;
        let keys: u64 = self.read.iter().map(|(_, d)| d.keys).sum();
        let bytes: u64 = self.read.iter().map(|(_, d)| d.bytes).sum();
        let totals = &end.backup_end;
        if totals.tenants != self.read.len() as u64 || totals.keys != keys || totals.bytes != bytes
        {
            return Err(self.bad(
                line + 1,
                format!(
                    "the end line says {} tenants, {} keys, {} bytes, but the lines before it hold {}, {keys}, {bytes}",
                    totals.tenants,
                    totals.keys,
                    totals.bytes,
                    self.read.len()
                ),
            ));
        }
        if lines.next().is_some() {
            return Err(self.bad(line + 2, "lines follow the end line"));
        }
        Ok(end)
    }
}

/// A backup read through: its first line, its end line, and each tenant's
/// digest.
pub struct Checked {
    pub header: BackupHeader,
    pub end: BackupEnd,
    pub read: Vec<(String, Digest)>,
}

/// Reads a whole backup through, checking every line, every tenant's
/// digest and the end line; writes nothing.
pub fn check_backup(input: Box<dyn BufRead>, path: &str) -> Result<Checked, MoveError> {
    let mut reader = BackupReader::new(input, path)?;
    while let Some(mut section) = reader.next_tenant()? {
        while !section.batch()?.is_empty() {}
        reader.give_back(section)?;
    }
    let end = reader.finish()?;
    Ok(Checked {
        header: reader.header,
        end,
        read: reader.read,
    })
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

/// `leasehold backup`.
pub fn backup(cli: &Cli, args: &BackupArgs, out: &mut dyn Write) -> Result<u8, CliError> {
    let tenants = tenants_named(cli)?;
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
            let db = db_path(cli).to_string_lossy().into_owned();
            let store = keyspace::open(&db, true, cli.wait)?;
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
                write_backup(&tenants, super::time::now(), &snapshot, &mut writer)
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
    if cli.json {
        let answer = serde_json::json!({
            "out": path,
            "from": source,
            "began_at_ms": header.began_at_ms,
            "snapshot": header.snapshot,
            "tenants": read.iter().map(|(t, d)| serde_json::json!({
                "tenant": t, "keys": d.keys, "bytes": d.bytes, "sha256": d.hex(),
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
