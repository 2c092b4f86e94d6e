//! `leasehold tenant export|import|delete`: one tenant's keys written to
//! JSON lines (the tenant-keys format, `leasehold_host::tenant_keys`), read
//! back into an empty tenant, or removed. It owns each command's order of
//! work and its answer; the keys are moved by `keys`. An import reads its
//! input once, through one descriptor, into one transaction on the target
//! that commits only after the last line matched. It must never call a
//! verb on a tenant it moves: the only engine call is `check`, which reads.

use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use clap::Subcommand;
use leasehold_host::storage::check_tenant;
use leasehold_host::tenant_keys::{Digest, DigestKey};

use crate::context::Context;
use crate::error::CliError;
use crate::exit::REFUSED;
use crate::keys::copy::{copy_tenant, delete_tenant};
use crate::keys::entries::{ExportReader, TenantWalk};
use crate::keys::error::MoveError;
use crate::keys::key_file;
use crate::keys::progress::Progress;
use crate::keys::store;
use crate::keys::target::Target;
use crate::keys::verify::verify;

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Write the tenant's keys as JSON lines (docs/operations.md describes
    /// the format), with their count and digest on the last line
    Export {
        /// Where to write [default: standard output]
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Seal the file with HMAC-SHA256 under the key this file holds, so
        /// that it can be authenticated (docs/operations.md)
        #[arg(long, value_name = "FILE")]
        digest_key_file: Option<PathBuf>,
    },
    /// Read an export into an empty tenant (--tenant, else the one the file
    /// names) in one transaction, then check it and compare digests; a
    /// refused or failed import writes nothing
    Import {
        /// The export file; - or nothing reads standard input
        #[arg(long = "in", value_name = "FILE|-")]
        input: Option<PathBuf>,
        /// The key a keyed export was sealed with; a keyed file is refused
        /// without it, a plain one with it
        #[arg(long, value_name = "FILE")]
        digest_key_file: Option<PathBuf>,
    },
    /// Delete every key of the tenant named with --tenant, in batches
    Delete {
        /// Yes, delete it: there is no undo
        #[arg(long)]
        yes: bool,
    },
}

/// `leasehold tenant export/import/delete`.
impl TenantCommand {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let db = cx.db_path();
        let db = db
            .to_str()
            .ok_or_else(|| MoveError::Usage(format!("{} is not UTF-8", db.display())))?
            .to_owned();
        match self {
            TenantCommand::Export {
                out: file,
                digest_key_file,
            } => {
                let key = key_file::read(digest_key_file.as_deref())?;
                export(cx, &db, file.as_deref(), key.as_ref(), out)
            }
            TenantCommand::Import {
                input,
                digest_key_file,
            } => {
                let key = key_file::read(digest_key_file.as_deref())?;
                import(cx, &db, input.as_deref(), key.as_ref(), out)
            }
            TenantCommand::Delete { yes } => delete(cx, &db, *yes, out),
        }
    }
}

fn export(
    cx: &Context,
    db: &str,
    file: Option<&Path>,
    key: Option<&DigestKey>,
    out: &mut dyn Write,
) -> Result<u8, CliError> {
    let tenant = cx.tenant_name();
    check_tenant(tenant).map_err(|e| MoveError::Usage(format!("--tenant {tenant:?}: {e}")))?;
    let store = store::open(db, true, cx.globals().wait)?;
    let export = |out: &mut dyn Write| -> Result<Digest, MoveError> {
        let digest = TenantWalk::new(store.as_ref(), tenant)?.export(out, "the export", key)?;
        out.flush().map_err(|source| MoveError::Io {
            what: "write the export".into(),
            source,
        })?;
        Ok(digest)
    };
    let Some(path) = file else {
        export(out)?;
        return Ok(0);
    };
    let io = |source| MoveError::Io {
        what: format!("write {}", path.display()),
        source,
    };
    // Something that is not a plain file (a device such as /dev/null, a
    // pipe) is written to as it is: renaming over it would replace it.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let mut target = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io)?;
        let digest = export(&mut target)?;
        return answer_export(cx, tenant, path, &digest, out);
    }
    // Written beside the file and renamed over it once whole, so that a
    // file by that name is always a whole export.
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    let digest = {
        let mut writer = std::io::BufWriter::new(temp.as_file_mut());
        export(&mut writer)?
    };
    temp.as_file().sync_all().map_err(io)?;
    temp.persist(path).map_err(|e| io(e.error))?;
    answer_export(cx, tenant, path, &digest, out)
}

/// What `tenant export --out` says it wrote.
fn answer_export(
    cx: &Context,
    tenant: &str,
    path: &Path,
    digest: &Digest,
    out: &mut dyn Write,
) -> Result<u8, CliError> {
    if cx.json() {
        let answer = serde_json::json!({
            "tenant": tenant,
            "out": path,
            "keys": digest.keys(),
            "bytes": digest.bytes(),
            "sha256": digest.hex(),
        });
        writeln!(out, "{answer}")?;
    } else {
        writeln!(
            out,
            "Exported tenant {tenant}: {} keys ({} bytes) to {}.\n  sha256 {}",
            digest.keys(),
            digest.bytes(),
            path.display(),
            digest.hex()
        )?;
    }
    Ok(0)
}

fn import(
    cx: &Context,
    db: &str,
    file: Option<&Path>,
    key: Option<&DigestKey>,
    out: &mut dyn Write,
) -> Result<u8, CliError> {
    // Opened once and read once, through this one descriptor: what is
    // checked is what is written, whatever happens at the path meanwhile.
    let (input, name): (Box<dyn std::io::BufRead>, String) =
        match file.filter(|p| *p != Path::new("-")) {
            None => (Box::new(BufReader::new(std::io::stdin())), "-".into()),
            Some(p) => {
                let f = std::fs::File::open(p).map_err(|source| MoveError::Io {
                    what: format!("open {}", p.display()),
                    source,
                })?;
                (Box::new(BufReader::new(f)), p.display().to_string())
            }
        };
    let mut reader = ExportReader::new(input, &name, key)?;
    let tenant = match cx.tenants_named()?.pop() {
        Some(t) => t,
        None => reader.tenant().to_owned(),
    };
    check_tenant(&tenant).map_err(|e| MoveError::Usage(format!("tenant {tenant:?}: {e}")))?;
    let mut target = Target::open(db, cx.globals().wait)?;
    let mut load = target.begin()?;
    let mut progress = Progress::new("tenant import", cx.progress())?;
    let copied = copy_tenant(&mut reader, load.as_mut(), &tenant, &mut progress)?;
    // The copy stops at the first empty batch, which the reader gives only
    // past a last line that matched; say so plainly if it did not get there.
    if !reader.ended() {
        return Err(MoveError::Usage(format!("{name}: the import stopped before its end")).into());
    }
    target.commit(load)?;
    let engine = cx.engine_on(&target.store)?;
    let report = verify(copied, &target.store, &engine, &tenant)?;
    if cx.json() {
        writeln!(
            out,
            "{}",
            serde_json::to_string(&report).unwrap_or_default()
        )?;
    } else {
        out.write_all(report.human().as_bytes())?;
    }
    Ok(if report.ok() { 0 } else { REFUSED })
}

fn delete(cx: &Context, db: &str, yes: bool, out: &mut dyn Write) -> Result<u8, CliError> {
    // Never the default tenant by omission: the name is part of the ask.
    let Some(tenant) = cx.tenants_named()?.pop() else {
        return Err(CliError::Usage {
            message: "name the tenant to delete with --tenant".into(),
            argument: Some("--tenant".into()),
        });
    };
    if !yes {
        return Err(CliError::Usage {
            message: format!(
                "deleting tenant {tenant} removes every key of it, with no undo; add --yes to do it"
            ),
            argument: Some("--yes".into()),
        });
    }
    let store = store::open(db, false, cx.globals().wait)?;
    let mut progress = Progress::new("tenant delete", cx.progress())?;
    let deleted = delete_tenant(store.as_ref(), &tenant, &mut progress)?;
    if cx.json() {
        let answer = serde_json::json!({"tenant": tenant, "deleted_keys": deleted});
        writeln!(out, "{answer}")?;
    } else {
        writeln!(out, "Deleted tenant {tenant}: {deleted} keys.")?;
    }
    Ok(0)
}
