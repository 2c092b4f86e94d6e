//! A backup: a first line saying when it began and which tenants follow,
//! each tenant as one export's lines (`tenant_keys::export`), and an end
//! line with the totals; keyed, its first line names the digest and its
//! end line carries an HMAC-SHA256 seal over every byte before it, so a
//! tenant's part cannot be dropped, added or reordered unseen. It owns the
//! backup's lines and their writer (`leasehold backup --db` writes through
//! it; `GET /backup` writes the same lines); it must never write to a
//! database, and never name a tenant twice.

use std::collections::HashSet;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::storage::backend::Txn;
use crate::storage::error::BoxError;
use crate::storage::tenant_name::check_tenant;
use crate::tenant_keys::digest::{Digest, DigestKey, Seal};
use crate::tenant_keys::error::KeysError;
use crate::tenant_keys::export::{HMAC_SHA256, SHA256, Writer};
use crate::tenant_keys::walk::Walk;

/// The backup's `format`: a reader refuses any other.
pub const BACKUP_FORMAT: &str = "leasehold-backup";
/// A plain backup's version: its first line names no digest.
pub const BACKUP_VERSION: u32 = 1;
/// The version whose first line names its digest: a keyed backup's.
pub const BACKUP_VERSION_NAMED: u32 = 2;
/// How the tenants were read: one snapshot each.
pub const PER_TENANT: &str = "per-tenant";

/// The backup's first line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BackupHeader {
    /// [`BACKUP_FORMAT`].
    pub format: String,
    /// [`BACKUP_VERSION`] or [`BACKUP_VERSION_NAMED`].
    pub version: u32,
    /// When the backup began, in milliseconds since 1970: every write
    /// answered before then is in it.
    pub began_at_ms: i64,
    /// How the tenants were read: [`PER_TENANT`].
    pub snapshot: String,
    /// The tenants that follow, in order, each once.
    pub tenants: Vec<String>,
    /// From [`BACKUP_VERSION_NAMED`] on: `sha256` or `hmac-sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl BackupHeader {
    /// The first line of a backup of `tenants` begun at `began_at_ms`,
    /// keyed or not.
    pub fn new(tenants: &[String], began_at_ms: i64, keyed: bool) -> BackupHeader {
        BackupHeader {
            format: BACKUP_FORMAT.to_owned(),
            version: if keyed {
                BACKUP_VERSION_NAMED
            } else {
                BACKUP_VERSION
            },
            began_at_ms,
            snapshot: PER_TENANT.to_owned(),
            tenants: tenants.to_vec(),
            digest: keyed.then(|| HMAC_SHA256.to_owned()),
        }
    }

    /// Whether the backup is keyed; or why the line is not one this build
    /// reads: another format or version, an unknown digest, a name that is
    /// no tenant's, or a tenant named twice (its second part would find the
    /// first one written).
    pub fn check(&self) -> Result<bool, String> {
        if self.format != BACKUP_FORMAT {
            return Err(format!(
                "format {:?}; this build reads {BACKUP_FORMAT:?}",
                self.format
            ));
        }
        let keyed = match (self.version, self.digest.as_deref()) {
            (BACKUP_VERSION, None) | (BACKUP_VERSION_NAMED, Some(SHA256)) => false,
            (BACKUP_VERSION_NAMED, Some(HMAC_SHA256)) => true,
            (BACKUP_VERSION_NAMED, Some(other)) => {
                return Err(format!(
                    "digest {other:?}; this build knows {SHA256:?} and {HMAC_SHA256:?}"
                ));
            }
            (version, _) => {
                return Err(format!(
                    "format {BACKUP_FORMAT:?} version {version}; this build reads versions \
                     {BACKUP_VERSION} and {BACKUP_VERSION_NAMED}"
                ));
            }
        };
        let mut seen = HashSet::new();
        for tenant in &self.tenants {
            check_tenant(tenant).map_err(|e| format!("tenant {tenant:?}: {e}"))?;
            if !seen.insert(tenant.as_str()) {
                return Err(format!(
                    "tenant {tenant} is named twice; a backup holds each tenant once"
                ));
            }
        }
        Ok(keyed)
    }
}

/// The backup's last line.
#[derive(Debug, Serialize, Deserialize)]
pub struct BackupEnd {
    /// The totals.
    pub backup_end: BackupTotals,
}

/// What a whole backup holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BackupTotals {
    /// Tenants written.
    pub tenants: u64,
    /// Keys over all of them.
    pub keys: u64,
    /// Bytes of keys and values over all of them.
    pub bytes: u64,
    /// When the last tenant's snapshot was read through.
    pub finished_at_ms: i64,
    /// Keyed: the seal over every byte of the backup before this line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac_sha256: Option<String>,
}

/// Writes through to `out`, sealing what it writes when keyed.
struct Sealing<W> {
    out: W,
    seal: Option<Seal>,
}

impl<W: Write> Write for Sealing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        if let Some(seal) = self.seal.as_mut() {
            seal.update(&buf[..n]);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes a backup: its first line, each tenant's part in the order the
/// first line names, and its end line.
pub struct BackupWriter<W: Write> {
    out: Sealing<W>,
    key: Option<DigestKey>,
    tenants: Vec<String>,
    totals: BackupTotals,
}

impl<W: Write> BackupWriter<W> {
    /// Writes `header`, which must be keyed exactly when `key` is given.
    pub fn begin(
        out: W,
        header: &BackupHeader,
        key: Option<&DigestKey>,
    ) -> Result<BackupWriter<W>, KeysError> {
        let keyed = header.check().map_err(KeysError::Refused)?;
        if keyed != key.is_some() {
            return Err(KeysError::Refused(
                "a keyed backup is written with its key, a plain one without".into(),
            ));
        }
        let mut out = Sealing {
            out,
            seal: key.map(Seal::new),
        };
        let mut line = serde_json::to_vec(header).map_err(|e| KeysError::Io(e.into()))?;
        line.push(b'\n');
        out.write_all(&line).map_err(KeysError::Io)?;
        Ok(BackupWriter {
            out,
            key: key.cloned(),
            tenants: header.tenants.clone(),
            totals: BackupTotals::default(),
        })
    }

    /// The writer of the next tenant's part, which must be `tenant`, the
    /// next the first line names. Hand its digest to
    /// [`tenant_done`](Self::tenant_done) once it finished.
    pub fn tenant(&mut self, tenant: &str) -> Result<Writer<&mut dyn Write>, KeysError> {
        let expected = self.tenants.get(self.totals.tenants as usize);
        if expected.map(String::as_str) != Some(tenant) {
            return Err(KeysError::Refused(format!(
                "tenant {tenant} where the first line names {expected:?} next"
            )));
        }
        Writer::begin(&mut self.out as &mut dyn Write, tenant, self.key.as_ref())
    }

    /// A tenant's part was written whole, with this digest.
    pub fn tenant_done(&mut self, digest: &Digest) {
        self.totals.tenants += 1;
        self.totals.keys += digest.keys();
        self.totals.bytes += digest.bytes();
    }

    /// Writes the end line and flushes; answers the totals and the output.
    pub fn finish(mut self, finished_at_ms: i64) -> Result<(BackupTotals, W), KeysError> {
        if self.totals.tenants as usize != self.tenants.len() {
            return Err(KeysError::Refused(format!(
                "{} tenants' parts written of the {} the first line names",
                self.totals.tenants,
                self.tenants.len()
            )));
        }
        self.totals.finished_at_ms = finished_at_ms;
        self.totals.hmac_sha256 = self.out.seal.as_ref().map(Seal::hex);
        let end = BackupEnd {
            backup_end: self.totals.clone(),
        };
        let mut line = serde_json::to_vec(&end).map_err(|e| KeysError::Io(e.into()))?;
        line.push(b'\n');
        self.out.out.write_all(&line).map_err(KeysError::Io)?;
        self.out.out.flush().map_err(KeysError::Io)?;
        Ok((self.totals, self.out.out))
    }
}

/// Begins one tenant's read snapshot.
pub type Snapshot<'a> = dyn Fn(&str) -> Result<Box<dyn Txn>, BoxError> + 'a;

/// Writes a backup of `tenants` to `out`, each read through a snapshot of
/// its own begun by `snapshot` after the first line records
/// `began_at_ms`, keyed with `key` if given; answers the totals, whose
/// `finished_at_ms` is `finished_at()` once the last tenant was read.
pub fn write_backup(
    tenants: &[String],
    began_at_ms: i64,
    snapshot: &Snapshot<'_>,
    out: &mut dyn Write,
    key: Option<&DigestKey>,
    finished_at: &dyn Fn() -> i64,
) -> Result<BackupTotals, KeysError> {
    let header = BackupHeader::new(tenants, began_at_ms, key.is_some());
    let mut backup = BackupWriter::begin(out, &header, key)?;
    for tenant in tenants {
        let txn = snapshot(tenant).map_err(|source| KeysError::Snapshot {
            tenant: tenant.clone(),
            source,
        })?;
        let mut walk = Walk::new(txn);
        let mut writer = backup.tenant(tenant)?;
        loop {
            let batch = walk.batch()?;
            if batch.is_empty() {
                break;
            }
            for (k, v) in &batch {
                writer.entry(k, v)?;
            }
        }
        // The snapshot ends before the next one begins.
        drop(walk);
        let digest = writer.finish()?;
        backup.tenant_done(&digest);
    }
    Ok(backup.finish(finished_at())?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> DigestKey {
        DigestKey::from_file_bytes(vec![byte; 32]).expect("a key")
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_header_naming_a_tenant_twice_or_no_tenant_is_refused() {
        let twice = BackupHeader::new(&names(&["a", "b", "a"]), 0, false);
        assert!(twice.check().is_err_and(|e| e.contains("named twice")));
        let bad = BackupHeader::new(&names(&["a b"]), 0, false);
        assert!(bad.check().is_err_and(|e| e.contains("\"a b\"")));
        assert_eq!(BackupHeader::new(&names(&["a"]), 0, true).check(), Ok(true));
        assert_eq!(
            BackupHeader::new(&names(&["a"]), 0, false).check(),
            Ok(false)
        );
        let mut future = BackupHeader::new(&names(&["a"]), 0, false);
        future.version = 3;
        assert!(future.check().is_err_and(|e| e.contains("version 3")));
        assert!(matches!(
            BackupWriter::begin(Vec::new(), &twice, None),
            Err(KeysError::Refused(_))
        ));
    }

    /// The plain lines are the ones `GET /backup` writes; keyed, the first
    /// line names the digest and the end line seals every byte before it.
    #[test]
    fn the_lines_are_the_documented_ones_plain_and_keyed() {
        let write = |key: Option<&DigestKey>| {
            let header = BackupHeader::new(&names(&["a"]), 7, key.is_some());
            let mut backup = BackupWriter::begin(Vec::new(), &header, key).expect("begin");
            let mut w = backup.tenant("a").expect("a");
            w.entry(b"k", b"v").expect("entry");
            let digest = w.finish().expect("end");
            backup.tenant_done(&digest);
            let (totals, out) = backup.finish(9).expect("finish");
            assert_eq!((totals.tenants, totals.keys, totals.bytes), (1, 1, 2));
            String::from_utf8(out).expect("utf-8")
        };
        let plain = write(None);
        let lines: Vec<&str> = plain.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"format":"leasehold-backup","version":1,"began_at_ms":7,"snapshot":"per-tenant","tenants":["a"]}"#
        );
        assert_eq!(
            lines[4],
            r#"{"backup_end":{"tenants":1,"keys":1,"bytes":2,"finished_at_ms":9}}"#
        );
        let k = key(3);
        let keyed = write(Some(&k));
        let lines: Vec<&str> = keyed.lines().collect();
        assert!(
            lines[0].ends_with(r#""tenants":["a"],"digest":"hmac-sha256"}"#),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains(r#""digest":"hmac-sha256""#));
        let before_end = &keyed[..keyed.len() - lines[4].len() - 1];
        let mut seal = Seal::new(&k);
        seal.update(before_end.as_bytes());
        let end: BackupEnd = serde_json::from_str(lines[4]).expect("end line");
        assert_eq!(end.backup_end.hmac_sha256, Some(seal.hex()));
    }

    #[test]
    fn parts_come_in_the_order_the_first_line_names_and_all_of_them() {
        let header = BackupHeader::new(&names(&["a", "b"]), 0, false);
        let mut backup = BackupWriter::begin(Vec::new(), &header, None).expect("begin");
        assert!(matches!(backup.tenant("b"), Err(KeysError::Refused(_))));
        let digest = backup.tenant("a").expect("a").finish().expect("end");
        backup.tenant_done(&digest);
        assert!(matches!(backup.finish(0), Err(KeysError::Refused(_))));
    }
}
