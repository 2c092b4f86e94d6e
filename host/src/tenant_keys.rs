//! One tenant's keys as bare bytes, and the tenant-keys format they travel
//! in: it owns walking a tenant's keys in key order from a read snapshot,
//! their digest, and the format's lines, with their writer and reader.
//! `leasehold tenant export` and `tenant import` write and read it whole; a
//! backup (`GET /backup`, `leasehold backup` and `restore`) holds one such
//! section per tenant. It must never read meaning into a key or a value
//! (that is the component's), never begin or commit a transaction (its
//! callers hand it a snapshot and write what it reads), and never open a
//! database.
//!
//! The format (docs/operations.md, "Moving between backends") is JSON lines:
//!
//! ```text
//! {"format":"leasehold-tenant-keys","version":1,"tenant":"acme"}
//! {"key":"<hex>","value":"<hex>"}            one line per key, keys rising
//! {"end":{"keys":2,"bytes":41,"sha256":"<hex>"}}
//! ```
//!
//! The digest of a keyspace is SHA-256 over every entry in key order, each
//! as the key's length (4 bytes, big-endian), the key, the value's length
//! and the value: equal digests mean the same keys holding the same values.
//! The last line carries the count, the bytes of keys and values, and the
//! digest of the lines before it, so a file cut short or changed is refused.

use std::io::{self, BufRead, Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::config::Limits;
use crate::storage::backend::{Entry, Txn};
use crate::storage::error::StorageError;

/// The format's name, on its first line: a reader refuses any other.
pub const FORMAT: &str = "leasehold-tenant-keys";
/// The format's version, on its first line: a reader refuses any other.
pub const VERSION: u32 = 1;

/// Why keys could not be walked, written or read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeysError {
    /// The snapshot could not be read.
    #[error("cannot read the tenant's keys")]
    Storage(#[source] StorageError),
    /// One entry is larger than a batch may hold; the engine never writes
    /// one (its key and value limits are far below a batch).
    #[error("the tenant holds an entry larger than a batch ({max_bytes} bytes)")]
    TooLarge {
        /// The most bytes of keys and values a batch holds.
        max_bytes: usize,
    },
    /// Writing or reading the lines failed.
    #[error("cannot write or read the lines")]
    Io(#[source] io::Error),
    /// A line that is not what the format says belongs there: the file is
    /// not one, or is damaged or cut short.
    #[error("line {line}: {why}")]
    BadLine {
        /// The line's number, counted from 1 at the input's first line.
        line: u64,
        /// What is wrong with it.
        why: String,
    },
}

/// The most entries, and bytes of keys and values, one batch holds: the
/// engine's budgets for one call, so that a batch written back is never a
/// larger transaction than a call may make.
pub fn batch_bounds() -> (u32, usize) {
    let limits = Limits::default();
    (
        limits.scan_entries,
        limits.call_write_bytes.min(limits.scan_bytes),
    )
}

/// One tenant's entries in key order, a batch at a time, from one read
/// snapshot (however long the walk takes, it sees one moment).
pub struct Walk {
    txn: Box<dyn Txn>,
    /// Where the next batch starts; `None` once the end was reached.
    next: Option<Vec<u8>>,
}

impl Walk {
    /// Walks the tenant `txn` was begun on, from its first key.
    pub fn new(txn: Box<dyn Txn>) -> Walk {
        Walk {
            txn,
            next: Some(Vec::new()),
        }
    }

    /// The next entries, at most [`batch_bounds`] of them; empty once there
    /// are no more.
    pub fn batch(&mut self) -> Result<Vec<Entry>, KeysError> {
        let Some(start) = self.next.take() else {
            return Ok(Vec::new());
        };
        let (limit, max_bytes) = batch_bounds();
        let (entries, more) = self
            .txn
            .scan(&start, None, limit, false, max_bytes)
            .map_err(KeysError::Storage)?;
        match entries.last() {
            Some((last, _)) => {
                // The key right after the last one, bytewise.
                let mut after = last.clone();
                after.push(0);
                self.next = Some(after);
            }
            None if more => return Err(KeysError::TooLarge { max_bytes }),
            None => {}
        }
        Ok(entries)
    }
}

/// A running digest of a keyspace (see the module's docs), with the count
/// of its keys and the bytes of its keys and values.
#[derive(Clone, Default)]
pub struct Digest {
    sha: Sha256,
    keys: u64,
    bytes: u64,
}

impl Digest {
    /// Adds the next entry, in key order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        for part in [key, value] {
            // Keys and values are within the engine's limits, far below 4 GiB.
            self.sha.update((part.len() as u32).to_be_bytes());
            self.sha.update(part);
        }
        self.keys += 1;
        self.bytes += (key.len() + value.len()) as u64;
    }

    /// How many entries were added.
    pub fn keys(&self) -> u64 {
        self.keys
    }

    /// The bytes of their keys and values.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The SHA-256 so far, in lowercase hex.
    pub fn hex(&self) -> String {
        hex(&self.sha.clone().finalize())
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Digest")
            .field("keys", &self.keys)
            .field("bytes", &self.bytes)
            .field("sha256", &self.hex())
            .finish()
    }
}

/// Bytes as lowercase hex, two digits each.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// The bytes `text` spells in hex (either case), or `None` if it is not
/// hex or has an odd length.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The first line: what the lines after it are, and whose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The tenant whose keys follow.
    pub tenant: String,
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
    /// Their digest, in lowercase hex.
    pub sha256: String,
}

impl Summary {
    fn of(digest: &Digest) -> Summary {
        Summary {
            keys: digest.keys,
            bytes: digest.bytes,
            sha256: digest.hex(),
        }
    }
}

/// Writes one tenant's lines: the first line, then an entry at a time (in
/// rising key order, as a [`Walk`] gives them), then the last line.
pub struct Writer<W: Write> {
    out: W,
    digest: Digest,
}

impl<W: Write> Writer<W> {
    /// Writes the first line, naming `tenant`.
    pub fn begin(mut out: W, tenant: &str) -> Result<Writer<W>, KeysError> {
        let header = Header {
            format: FORMAT.to_owned(),
            version: VERSION,
            tenant: tenant.to_owned(),
        };
        serde_json::to_writer(&mut out, &header).map_err(|e| KeysError::Io(e.into()))?;
        out.write_all(b"\n").map_err(KeysError::Io)?;
        Ok(Writer {
            out,
            digest: Digest::default(),
        })
    }

    /// Writes one entry's line; entries come in rising key order.
    pub fn entry(&mut self, key: &[u8], value: &[u8]) -> Result<(), KeysError> {
        self.digest.add(key, value);
        // Two hex strings in a fixed frame need no escaping: this is the
        // line serde would write, without its cost per byte.
        let mut line = Vec::with_capacity(24 + 2 * (key.len() + value.len()));
        line.extend_from_slice(b"{\"key\":\"");
        line.extend_from_slice(hex(key).as_bytes());
        line.extend_from_slice(b"\",\"value\":\"");
        line.extend_from_slice(hex(value).as_bytes());
        line.extend_from_slice(b"\"}\n");
        self.out.write_all(&line).map_err(KeysError::Io)
    }

    /// Writes the last line and answers the digest of the entries. It does
    /// not flush: more may follow (a backup's next tenant).
    pub fn finish(mut self) -> Result<Digest, KeysError> {
        let end = EndLine {
            end: Summary::of(&self.digest),
        };
        serde_json::to_writer(&mut self.out, &end).map_err(|e| KeysError::Io(e.into()))?;
        self.out.write_all(b"\n").map_err(KeysError::Io)?;
        Ok(self.digest)
    }
}

/// Writes the whole of what `walk` gives as one tenant's lines, first to
/// last, and answers their digest.
pub fn write_tenant(
    walk: &mut Walk,
    tenant: &str,
    out: &mut dyn Write,
) -> Result<Digest, KeysError> {
    let mut writer = Writer::begin(out, tenant)?;
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

/// An input's lines, and the number of the last one read (0 before any).
pub type Lines<R> = (io::Lines<R>, u64);

/// Reads one tenant's lines back, an entry at a time, checking each: the
/// first line's format and version, every entry hex with keys strictly
/// rising, and the last line's count and digest against the entries before
/// it (when the last line is reached).
pub struct Reader<R: BufRead> {
    lines: io::Lines<R>,
    /// The number of the last line read.
    line: u64,
    tenant: String,
    digest: Digest,
    last_key: Option<Vec<u8>>,
    ended: bool,
    /// One tenant's part of a longer file: more lines follow its last.
    section: bool,
}

impl<R: BufRead> Reader<R> {
    /// A whole export: nothing may follow its last line.
    pub fn new(input: R) -> Result<Reader<R>, KeysError> {
        Reader::start((input.lines(), 0), false)
    }

    /// One tenant's part of a longer file (a backup), starting at the line
    /// after those already read; [`Reader::into_rest`] gives the lines
    /// after its last one back.
    pub fn section(lines: Lines<R>) -> Result<Reader<R>, KeysError> {
        Reader::start(lines, true)
    }

    fn start((lines, line): Lines<R>, section: bool) -> Result<Reader<R>, KeysError> {
        let mut reader = Reader {
            lines,
            line: line + 1,
            tenant: String::new(),
            digest: Digest::default(),
            last_key: None,
            ended: false,
            section,
        };
        let first = match reader.lines.next() {
            None if section => {
                return Err(reader.bad("the file ends before a tenant's part: it was cut short"));
            }
            None => return Err(reader.bad("the file is empty, not an export")),
            Some(line) => line.map_err(KeysError::Io)?,
        };
        let header: Header = serde_json::from_str(&first)
            .map_err(|e| reader.bad(format!("not an export's first line: {e}")))?;
        if header.format != FORMAT || header.version != VERSION {
            return Err(reader.bad(format!(
                "format {:?} version {}; this build reads {FORMAT:?} version {VERSION}",
                header.format, header.version
            )));
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

    /// The lines after this part's last one, and the number of that line.
    pub fn into_rest(self) -> Lines<R> {
        (self.lines, self.line)
    }

    /// The next entry, or `None` once the last line was read and matched
    /// what came before it.
    pub fn next_entry(&mut self) -> Result<Option<Entry>, KeysError> {
        if self.ended {
            return Ok(None);
        }
        let Some(text) = self.lines.next() else {
            return Err(self.bad("the file ends before its last line: it was cut short"));
        };
        self.line += 1;
        let text = text.map_err(KeysError::Io)?;
        if let Ok(last) = serde_json::from_str::<EndLine>(&text) {
            let end = last.end;
            let here = Summary::of(&self.digest);
            if end != here {
                return Err(self.bad(format!(
                    "the last line says {} keys with digest {}, but the lines before it hold {} with digest {}",
                    end.keys, end.sha256, here.keys, here.sha256
                )));
            }
            self.ended = true;
            if !self.section && self.lines.next().is_some() {
                return Err(self.bad("lines follow the last line"));
            }
            return Ok(None);
        }
        let line: EntryLine =
            serde_json::from_str(&text).map_err(|e| self.bad(format!("not an entry: {e}")))?;
        let (Some(key), Some(value)) = (unhex(&line.key), unhex(&line.value)) else {
            return Err(self.bad("a key or value is not hex"));
        };
        if self.last_key.as_ref().is_some_and(|last| *last >= key) {
            return Err(self.bad("keys are not in rising order"));
        }
        self.last_key = Some(key.clone());
        self.digest.add(&key, &value);
        Ok(Some((key, value)))
    }

    fn bad(&self, why: impl Into<String>) -> KeysError {
        KeysError::BadLine {
            line: self.line,
            why: why.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(tenant: &str, entries: &[(&[u8], &[u8])]) -> (Vec<u8>, Digest) {
        let mut out = Vec::new();
        let mut w = Writer::begin(&mut out, tenant).expect("first line");
        for (k, v) in entries {
            w.entry(k, v).expect("entry");
        }
        let digest = w.finish().expect("last line");
        (out, digest)
    }

    fn read_all(bytes: &[u8]) -> Result<(String, Vec<Entry>, Digest), KeysError> {
        let mut r = Reader::new(bytes)?;
        let mut entries = Vec::new();
        while let Some(e) = r.next_entry()? {
            entries.push(e);
        }
        Ok((r.tenant().to_owned(), entries, r.digest().clone()))
    }

    fn bad_line(bytes: &[u8]) -> (u64, String) {
        match read_all(bytes) {
            Err(KeysError::BadLine { line, why }) => (line, why),
            other => panic!("expected a bad line, got {other:?}"),
        }
    }

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0x7f, 0xff];
        assert_eq!(hex(&bytes), "00017fff");
        assert_eq!(unhex(&hex(&bytes)).as_deref(), Some(&bytes[..]));
        assert_eq!(unhex("ABcd").as_deref(), Some(&[0xab, 0xcd][..]));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn the_digest_tells_where_a_key_ends_and_its_value_begins() {
        let mut a = Digest::default();
        a.add(b"ab", b"c");
        let mut b = Digest::default();
        b.add(b"a", b"bc");
        assert_ne!(a.hex(), b.hex());
        assert_eq!((a.keys(), a.bytes()), (1, 3));
    }

    /// The digest is SHA-256 over length-prefixed keys and values, so any
    /// other implementation of the format can compute it.
    #[test]
    fn the_digest_is_sha256_over_length_prefixed_parts() {
        let mut d = Digest::default();
        d.add(b"k", b"vv");
        let mut sha = Sha256::new();
        sha.update([0, 0, 0, 1, b'k', 0, 0, 0, 2, b'v', b'v']);
        assert_eq!(d.hex(), hex(&sha.finalize()));
    }

    #[test]
    fn the_lines_are_the_documented_ones() {
        let (bytes, digest) = export("acme", &[(b"\x01", b"hi")]);
        let text = String::from_utf8(bytes).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"format":"leasehold-tenant-keys","version":1,"tenant":"acme"}"#
        );
        assert_eq!(lines[1], r#"{"key":"01","value":"6869"}"#);
        assert_eq!(
            lines[2],
            format!(
                r#"{{"end":{{"keys":1,"bytes":3,"sha256":"{}"}}}}"#,
                digest.hex()
            )
        );
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn what_is_written_reads_back_with_the_same_digest() {
        let entries: &[(&[u8], &[u8])] = &[(b"a", b""), (b"b\x00", b"\xff\xfe"), (b"c", b"x")];
        let (bytes, digest) = export("t-1", entries);
        let (tenant, read, again) = read_all(&bytes).expect("reads back");
        assert_eq!(tenant, "t-1");
        let read: Vec<(&[u8], &[u8])> = read
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        assert_eq!(read, entries);
        assert_eq!(again.hex(), digest.hex());
        assert_eq!(again.keys(), 3);
    }

    #[test]
    fn a_file_cut_short_or_changed_is_refused_naming_the_line() {
        let (bytes, _) = export("t", &[(b"a", b"1"), (b"b", b"2")]);
        let text = String::from_utf8(bytes).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();

        let cut = lines[..3].join("\n");
        let (line, why) = bad_line(cut.as_bytes());
        assert!(why.contains("cut short"), "{why}");
        assert_eq!(line, 3);

        let changed = text.replace(r#""value":"32""#, r#""value":"33""#);
        let (line, why) = bad_line(changed.as_bytes());
        assert!(why.contains("the last line says 2 keys"), "{why}");
        assert_eq!(line, 4);

        let swapped = [lines[0], lines[2], lines[1], lines[3]].join("\n");
        let (line, why) = bad_line(swapped.as_bytes());
        assert!(why.contains("rising order"), "{why}");
        assert_eq!(line, 3);

        let more = format!("{text}{}\n", lines[1]);
        assert!(bad_line(more.as_bytes()).1.contains("lines follow"));

        let not_hex = text.replace(r#""key":"61""#, r#""key":"6g""#);
        assert!(bad_line(not_hex.as_bytes()).1.contains("not hex"));

        assert!(bad_line(b"").1.contains("empty"));
        let other = text.replace("leasehold-tenant-keys", "something-else");
        let (line, why) = bad_line(other.as_bytes());
        assert!(why.contains("this build reads"), "{why}");
        assert_eq!(line, 1);
    }

    /// A backup holds sections back to back: each reads its own lines and
    /// hands the rest on.
    #[test]
    fn sections_read_one_after_another() {
        let (mut bytes, first) = export("a", &[(b"k", b"v")]);
        let (second_bytes, second) = export("b", &[]);
        bytes.extend_from_slice(&second_bytes);
        bytes.extend_from_slice(b"{\"after\":true}\n");
        let mut r = Reader::section((bytes.as_slice().lines(), 0)).expect("first");
        assert_eq!(r.tenant(), "a");
        while r.next_entry().expect("entry").is_some() {}
        assert!(r.ended());
        assert_eq!(r.digest().hex(), first.hex());
        let mut r = Reader::section(r.into_rest()).expect("second");
        assert_eq!(r.tenant(), "b");
        assert!(r.next_entry().expect("end").is_none());
        assert_eq!(r.digest().hex(), second.hex());
        let (mut rest, line) = r.into_rest();
        assert_eq!(line, 5);
        assert_eq!(
            rest.next().transpose().expect("read").as_deref(),
            Some("{\"after\":true}")
        );
        let (bytes, _) = export("a", &[]);
        let mut lines = bytes.as_slice().lines();
        lines.by_ref().for_each(drop);
        match Reader::section((lines, 2)) {
            Err(KeysError::BadLine { line: 3, why }) => assert!(why.contains("cut short")),
            other => panic!("expected a cut file, got {:?}", other.err()),
        }
    }
}
