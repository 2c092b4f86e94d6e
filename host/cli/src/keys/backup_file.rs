//! A backup file read back: its first line (a tenant named twice is
//! refused there, before anything is read on), each tenant's part as an
//! export (read by [`ExportReader`]), and its end line checked against the
//! tenants read (and, keyed, its seal over every byte before it). The
//! format is the host library's (`leasehold_host::tenant_keys`), which
//! `GET /backup` writes too; every line is held to its bounds. It must
//! never write.

use std::io::{BufRead, Write};

use leasehold_host::tenant_keys::{
    BackupEnd, BackupHeader, BackupWriter, Digest, DigestKey, LineReader, Seal,
};

use crate::keys::entries::{Entries, ExportReader};
use crate::keys::error::MoveError;

/// A backup read a line at a time, each tenant through an
/// [`ExportReader`], the end line checked against what came before it.
pub struct BackupReader {
    lines: Option<LineReader<Box<dyn BufRead>>>,
    path: String,
    key: Option<DigestKey>,
    pub header: BackupHeader,
    /// Tenants read so far, with their digests.
    pub read: Vec<(String, Digest)>,
}

impl BackupReader {
    /// Reads and checks the first line. With `key`, the backup must be
    /// keyed with it; without, it must not be keyed.
    pub fn new(
        input: Box<dyn BufRead>,
        path: &str,
        key: Option<&DigestKey>,
    ) -> Result<BackupReader, MoveError> {
        let mut lines = LineReader::new(input);
        let bad = |why: String| MoveError::BadFile {
            path: path.to_owned(),
            line: 1,
            why,
        };
        if let Some(key) = key {
            lines.tap(Seal::new(key));
        }
        let first = match lines.next_line().map_err(MoveError::reading(path))? {
            None => return Err(bad("the file is empty, not a backup".into())),
            Some(line) => line,
        };
        let header: BackupHeader = serde_json::from_slice(first.text())
            .map_err(|e| bad(format!("not a backup's first line: {e}")))?;
        let keyed = header.check().map_err(bad)?;
        match (keyed, key) {
            (true, None) => {
                return Err(bad(
                    "the backup's digests are keyed (HMAC-SHA256): give the key it was written \
                     with (--digest-key-file)"
                        .into(),
                ));
            }
            (false, Some(_)) => {
                return Err(bad(
                    "the backup's digests are plain SHA-256, not keyed: it cannot be \
                     authenticated with --digest-key-file"
                        .into(),
                ));
            }
            _ => {}
        }
        Ok(BackupReader {
            lines: Some(lines),
            path: path.to_owned(),
            key: key.cloned(),
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
        let line = lines.line() + 1;
        let section = ExportReader::section(lines, &self.path, self.key.as_ref())?;
        if section.tenant() != expected {
            return Err(self.bad(
                line,
                format!(
                    "tenant {:?} where the first line names {expected:?} next",
                    section.tenant()
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
        let entry = (section.tenant().to_owned(), section.digest().clone());
        self.lines = Some(section.rest());
        self.read.push(entry);
        Ok(())
    }

    /// Reads the end line, which must match the tenants read (and, keyed,
    /// seal every byte before it), and nothing after it; answers the
    /// totals.
    pub fn finish(&mut self) -> Result<BackupEnd, MoveError> {
        if self.read.len() != self.header.tenants.len() {
            return Err(MoveError::Usage(
                "the backup was not read through all its tenants".into(),
            ));
        }
        let Some(mut lines) = self.lines.take() else {
            return Err(MoveError::Usage(
                "a tenant's part was not handed back".into(),
            ));
        };
        // The seal over every byte before the end line, taken before it is
        // read.
        let sealed = lines.tapped().cloned();
        let line = lines.line() + 1;
        let Some(text) = lines.next_line().map_err(MoveError::reading(&self.path))? else {
            return Err(self.bad(line, "the file ends before its end line: it was cut short"));
        };
        let end: BackupEnd = serde_json::from_slice(text.text())
            .map_err(|e| self.bad(line, format!("not a backup's end line: {e}")))?;
        let keys: u64 = self.read.iter().map(|(_, d)| d.keys()).sum();
        let bytes: u64 = self.read.iter().map(|(_, d)| d.bytes()).sum();
        let totals = &end.backup_end;
        if totals.tenants != self.read.len() as u64 || totals.keys != keys || totals.bytes != bytes
        {
            return Err(self.bad(
                line,
                format!(
                    "the end line says {} tenants, {} keys, {} bytes, but the lines before it hold {}, {keys}, {bytes}",
                    totals.tenants,
                    totals.keys,
                    totals.bytes,
                    self.read.len()
                ),
            ));
        }
        match (sealed, &totals.hmac_sha256) {
            (None, None) => {}
            (Some(seal), Some(claimed)) if seal.matches(claimed) => {}
            (Some(_), Some(_)) => {
                return Err(self.bad(
                    line,
                    "the keyed digest (HMAC-SHA256) does not match the lines before it: the file \
                     was changed, or the key is not the one it was written with",
                ));
            }
            (Some(_), None) => return Err(self.bad(line, "the end line carries no hmac_sha256")),
            (None, Some(_)) => {
                return Err(self.bad(line, "a plain backup's end line carries an hmac_sha256"));
            }
        }
        if lines
            .next_line()
            .map_err(MoveError::reading(&self.path))?
            .is_some()
        {
            return Err(self.bad(line + 1, "lines follow the end line"));
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
/// digest and the end line (with `key`, every seal); writes nothing.
pub fn check_backup(
    input: Box<dyn BufRead>,
    path: &str,
    key: Option<&DigestKey>,
) -> Result<Checked, MoveError> {
    let mut reader = BackupReader::new(input, path, key)?;
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

/// Reads a plain backup through, checking it as [`check_backup`] does,
/// and writes it to `out` again keyed with `key`: the same first line
/// (keyed), the same tenants and entries, each part and the whole sealed.
pub fn seal_backup(
    input: Box<dyn BufRead>,
    path: &str,
    out: &mut dyn Write,
    key: &DigestKey,
) -> Result<Checked, MoveError> {
    let io = |e| MoveError::walking("(all)", "the backup")(e);
    let mut reader = BackupReader::new(input, path, None)?;
    let plain = &reader.header;
    let header = BackupHeader {
        snapshot: plain.snapshot.clone(),
        ..BackupHeader::new(&plain.tenants, plain.began_at_ms, true)
    };
    let mut writer = BackupWriter::begin(out, &header, Some(key)).map_err(io)?;
    while let Some(mut section) = reader.next_tenant()? {
        let tenant = section.tenant().to_owned();
        let mut part = writer.tenant(&tenant).map_err(io)?;
        loop {
            let batch = section.batch()?;
            if batch.is_empty() {
                break;
            }
            for (k, v) in &batch {
                part.entry(k, v).map_err(io)?;
            }
        }
        let digest = part.finish().map_err(io)?;
        writer.tenant_done(&digest);
        reader.give_back(section)?;
    }
    let end = reader.finish()?;
    writer.finish(end.backup_end.finished_at_ms).map_err(io)?;
    Ok(Checked {
        header: reader.header,
        end,
        read: reader.read,
    })
}
