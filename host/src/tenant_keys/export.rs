//! One tenant's lines: the first line naming the tenant (and, from version
//! 2, the digest the file carries), one line per entry in rising key order,
//! and the last line with the count, the bytes and the digest; their writer
//! and their reader, which checks every line as it comes. It owns the
//! lines' shape and every check a line gets (bounds, order, hex, the
//! digest or keyed seal); it must never read meaning into a key or a value.

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::storage::backend::Entry;
use crate::storage::tenant_name::check_tenant;
use crate::tenant_keys::bounds::check_entry;
use crate::tenant_keys::digest::{Digest, DigestKey, Seal, hex, unhex};
use crate::tenant_keys::error::KeysError;
use crate::tenant_keys::lines::LineReader;
use crate::tenant_keys::walk::Walk;

/// The format's name, on its first line: a reader refuses any other.
pub const FORMAT: &str = "leasehold-tenant-keys";
/// The version of a file whose digest is the plain SHA-256 (its first line
/// names no digest): what an export without a key is written as.
pub const VERSION: u32 = 1;
/// The version whose first line names its digest (`"digest"`): what a
/// keyed export is written as. A reader takes both.
pub const VERSION_NAMED: u32 = 2;
/// The plain digest's name: SHA-256 over the entries.
pub const SHA256: &str = "sha256";
/// The keyed digest's name: HMAC-SHA256 over the file's bytes.
pub const HMAC_SHA256: &str = "hmac-sha256";

/// The first line: what the lines after it are, and whose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`] or [`VERSION_NAMED`].
    pub version: u32,
    /// The tenant whose keys follow.
    pub tenant: String,
    /// From [`VERSION_NAMED`] on: [`SHA256`] or [`HMAC_SHA256`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl Header {
    /// Whether the file's digest is keyed, from its first line; or why the
    /// line is not one this build reads.
    pub fn keyed(&self) -> Result<bool, String> {
        if self.format != FORMAT {
            return Err(format!(
                "format {:?}; this build reads {FORMAT:?}",
                self.format
            ));
        }
        match (self.version, self.digest.as_deref()) {
            (VERSION, None) => Ok(false),
            (VERSION_NAMED, Some(SHA256)) => Ok(false),
            (VERSION_NAMED, Some(HMAC_SHA256)) => Ok(true),
            (VERSION_NAMED, Some(other)) => Err(format!(
                "digest {other:?}; this build knows {SHA256:?} and {HMAC_SHA256:?}"
            )),
            (version, _) => Err(format!(
                "format {FORMAT:?} version {version}; this build reads versions {VERSION} and {VERSION_NAMED}"
            )),
        }
    }
}

/// One entry's line: key and value in hex.
#[derive(Debug, Serialize, Deserialize)]
struct EntryLine {
    key: String,
    value: String,
}

/// The last line, `{"end": …}`.
#[derive(Debug, Serialize, Deserialize)]
struct EndLine {
    end: Summary,
}

/// What the last line says of the lines before it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// How many entries.
    pub keys: u64,
    /// The bytes of their keys and values.
    pub bytes: u64,
    /// Their digest, in lowercase hex: the plain one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The keyed seal over every byte of the lines before the last (the
    /// first line's included), in lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac_sha256: Option<String>,
}

/// Writes one tenant's lines: the first line, then an entry at a time (in
/// rising key order, as a [`Walk`] gives them), then the last line.
pub struct Writer<W: Write> {
    out: W,
    digest: Digest,
    /// The keyed seal, over every byte written before the last line.
    seal: Option<Seal>,
}

impl<W: Write> Writer<W> {
    /// Writes the first line, naming `tenant`: a plain file (version 1),
    /// or, with `key`, a keyed one (version 2, `"digest":"hmac-sha256"`).
    pub fn begin(out: W, tenant: &str, key: Option<&DigestKey>) -> Result<Writer<W>, KeysError> {
        let header = Header {
            format: FORMAT.to_owned(),
            version: if key.is_some() {
                VERSION_NAMED
            } else {
                VERSION
            },
            tenant: tenant.to_owned(),
            digest: key.map(|_| HMAC_SHA256.to_owned()),
        };
        let mut line = serde_json::to_vec(&header).map_err(|e| KeysError::Io(e.into()))?;
        line.push(b'\n');
        let mut writer = Writer {
            out,
            digest: Digest::default(),
            seal: key.map(Seal::new),
        };
        writer.write(&line)?;
        Ok(writer)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), KeysError> {
        if let Some(seal) = self.seal.as_mut() {
            seal.update(bytes);
        }
        self.out.write_all(bytes).map_err(KeysError::Io)
    }

    /// Writes one entry's line; entries come in rising key order. An entry
    /// over the engine's limits is refused: no reader would take it back.
    pub fn entry(&mut self, key: &[u8], value: &[u8]) -> Result<(), KeysError> {
        check_entry(key, value)
            .map_err(|why| KeysError::OverLimit(format!("an entry with {why}")))?;
        self.digest.add(key, value);
        // Two hex strings in a fixed frame need no escaping: this is the
        // line serde would write, without its cost per byte.
        let mut line = Vec::with_capacity(24 + 2 * (key.len() + value.len()));
        line.extend_from_slice(b"{\"key\":\"");
        line.extend_from_slice(hex(key).as_bytes());
        line.extend_from_slice(b"\",\"value\":\"");
        line.extend_from_slice(hex(value).as_bytes());
        line.extend_from_slice(b"\"}\n");
        self.write(&line)
    }

    /// Writes the last line and answers the digest of the entries. It does
    /// not flush: more may follow (a backup's next tenant).
    pub fn finish(mut self) -> Result<Digest, KeysError> {
        let end = EndLine {
            end: Summary {
                keys: self.digest.keys(),
                bytes: self.digest.bytes(),
                sha256: self.seal.is_none().then(|| self.digest.hex()),
                hmac_sha256: self.seal.as_ref().map(Seal::hex),
            },
        };
        let mut line = serde_json::to_vec(&end).map_err(|e| KeysError::Io(e.into()))?;
        line.push(b'\n');
        self.out.write_all(&line).map_err(KeysError::Io)?;
        Ok(self.digest)
    }
}

/// Writes the whole of what `walk` gives as one tenant's lines, first to
/// last (keyed with `key`, if given), and answers their digest.
pub fn write_tenant(
    walk: &mut Walk,
    tenant: &str,
    out: &mut dyn Write,
    key: Option<&DigestKey>,
) -> Result<Digest, KeysError> {
    let mut writer = Writer::begin(out, tenant, key)?;
    loop {
        let batch = walk.batch()?;
        if batch.is_empty() {
            return writer.finish();
        }
        for (key, value) in &batch {
            writer.entry(key, value)?;
        }
    }
}

/// Reads one tenant's lines back, an entry at a time, checking each: the
/// first line's format, version and digest (a keyed file only with its
/// key, a key only for a keyed file), every line within the line bound,
/// every entry hex, within the engine's key and value limits, with keys
/// strictly rising, and the last line's count and digest (or seal) against
/// the lines before it, when the last line is reached.
pub struct Reader<R: BufRead> {
    lines: LineReader<R>,
    tenant: String,
    digest: Digest,
    /// The keyed seal over this part's lines so far, for a keyed file.
    seal: Option<Seal>,
    last_key: Option<Vec<u8>>,
    ended: bool,
    /// One tenant's part of a longer file: more lines follow its last.
    section: bool,
}

impl<R: BufRead> Reader<R> {
    /// A whole export: nothing may follow its last line. With `key`, the
    /// file must be keyed with it; without, it must not be keyed.
    pub fn new(input: R, key: Option<&DigestKey>) -> Result<Reader<R>, KeysError> {
        Reader::start(LineReader::new(input), false, key)
    }

    /// One tenant's part of a longer file (a backup), starting at the line
    /// after those already read; [`Reader::into_rest`] gives the lines
    /// after its last one back.
    pub fn section(lines: LineReader<R>, key: Option<&DigestKey>) -> Result<Reader<R>, KeysError> {
        Reader::start(lines, true, key)
    }

    fn start(
        lines: LineReader<R>,
        section: bool,
        key: Option<&DigestKey>,
    ) -> Result<Reader<R>, KeysError> {
        let mut reader = Reader {
            lines,
            tenant: String::new(),
            digest: Digest::default(),
            seal: None,
            last_key: None,
            ended: false,
            section,
        };
        let first = match reader.lines.next_line()? {
            None if section => {
                return Err(
                    reader.bad_next("the file ends before a tenant's part: it was cut short")
                );
            }
            None => return Err(reader.bad_next("the file is empty, not an export")),
            Some(line) => line,
        };
        let header: Header = serde_json::from_slice(first.text())
            .map_err(|e| reader.bad(format!("not an export's first line: {e}")))?;
        let keyed = header.keyed().map_err(|why| reader.bad(why))?;
        check_tenant(&header.tenant)
            .map_err(|e| reader.bad(format!("tenant {:?}: {e}", header.tenant)))?;
        match (keyed, key) {
            (true, Some(key)) => {
                let mut seal = Seal::new(key);
                seal.update(first.raw());
                reader.seal = Some(seal);
            }
            (true, None) => {
                return Err(reader.bad(
                    "the file's digests are keyed (HMAC-SHA256): it is read only with the key it was written with",
                ));
            }
            (false, Some(_)) => {
                return Err(reader.bad(
                    "the file's digest is plain SHA-256, not keyed: it cannot be authenticated with a key",
                ));
            }
            (false, None) => {}
        }
        reader.tenant = header.tenant;
        Ok(reader)
    }

    /// The tenant the first line names.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The count, bytes and digest of the entries read so far.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// Whether the last line was read, and matched.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The lines after this part's last one.
    pub fn into_rest(self) -> LineReader<R> {
        self.lines
    }

    /// The next entry, or `None` once the last line was read and matched
    /// what came before it.
    pub fn next_entry(&mut self) -> Result<Option<Entry>, KeysError> {
        if self.ended {
            return Ok(None);
        }
        let Some(line) = self.lines.next_line()? else {
            return Err(self.bad("the file ends before its last line: it was cut short"));
        };
        let text = line.text();
        if !text.starts_with(b"{\"key\"")
            && let Ok(last) = serde_json::from_slice::<EndLine>(text)
        {
            self.end(last.end)?;
            if !self.section && self.lines.next_line()?.is_some() {
                return Err(self.bad("lines follow the last line"));
            }
            return Ok(None);
        }
        let entry: EntryLine =
            serde_json::from_slice(text).map_err(|e| self.bad(format!("not an entry: {e}")))?;
        let (Some(key), Some(value)) = (unhex(&entry.key), unhex(&entry.value)) else {
            return Err(self.bad("a key or value is not hex"));
        };
        check_entry(&key, &value).map_err(|why| self.bad(format!("an entry with {why}")))?;
        if self.last_key.as_ref().is_some_and(|last| *last >= key) {
            return Err(self.bad("keys are not in rising order"));
        }
        if let Some(seal) = self.seal.as_mut() {
            seal.update(line.raw());
        }
        self.last_key = Some(key.clone());
        self.digest.add(&key, &value);
        Ok(Some((key, value)))
    }

    /// Checks the last line against the lines before it.
    fn end(&mut self, end: Summary) -> Result<(), KeysError> {
        let here = &self.digest;
        if (end.keys, end.bytes) != (here.keys(), here.bytes()) {
            return Err(self.bad(format!(
                "the last line says {} keys ({} bytes), but the lines before it hold {} ({} bytes)",
                end.keys,
                end.bytes,
                here.keys(),
                here.bytes()
            )));
        }
        match (&self.seal, &end.sha256, &end.hmac_sha256) {
            (None, Some(sha256), None) if *sha256 == here.hex() => {}
            (None, Some(sha256), None) => {
                return Err(self.bad(format!(
                    "the last line says {} keys with digest {sha256}, but the lines before it hold {} with digest {}",
                    end.keys,
                    here.keys(),
                    here.hex()
                )));
            }
            (Some(seal), None, Some(claimed)) if seal.matches(claimed) => {}
            (Some(_), None, Some(_)) => {
                return Err(self.bad(
                    "the keyed digest (HMAC-SHA256) does not match the lines before it: \
                     the file was changed, or the key is not the one it was written with",
                ));
            }
            (None, _, _) => return Err(self.bad("the last line carries no plain sha256 digest")),
            (Some(_), _, _) => {
                return Err(self.bad("the last line carries no keyed hmac_sha256 digest"));
            }
        }
        self.ended = true;
        Ok(())
    }

    /// What is wrong with the line just read.
    fn bad(&self, why: impl Into<String>) -> KeysError {
        KeysError::BadLine {
            line: self.lines.line(),
            why: why.into(),
        }
    }

    /// What is wrong where the next line should have been.
    fn bad_next(&self, why: impl Into<String>) -> KeysError {
        KeysError::BadLine {
            line: self.lines.line() + 1,
            why: why.into(),
        }
    }
}

#[cfg(test)]
#[path = "export_tests.rs"]
mod tests;
