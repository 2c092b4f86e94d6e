//! A backup file read back: its first line, each tenant's part as an
//! export (read by [`ExportReader`]), and its end line checked against the
//! tenants read. The format is the server's (`leasehold_serve::backup`): a
//! first line, each tenant as a tenant export, an end line with totals. It
//! must never write.

use std::io::BufRead;

use leasehold_host::tenant_keys::{Digest, Lines};
use leasehold_serve::backup::{BACKUP_FORMAT, BACKUP_VERSION, BackupEnd, BackupHeader};

use crate::keys::entries::{Entries, ExportReader};
use crate::keys::error::MoveError;

/// A backup read a line at a time, each tenant through an
/// [`ExportReader`], the end line checked against what came before it.
pub struct BackupReader {
    lines: Option<Lines<Box<dyn BufRead>>>,
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
        let keys: u64 = self.read.iter().map(|(_, d)| d.keys()).sum();
        let bytes: u64 = self.read.iter().map(|(_, d)| d.bytes()).sum();
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
