//! `leasehold copy` and `leasehold tenant export/import/delete`: moving
//! tenants between databases and files, and removing one. It owns the
//! commands' order of work (copy, then digest both sides, then `check`
//! through the engine, a few tenants at a time), whether progress is shown,
//! and their answers; the keys themselves are moved by `keyspace`. It must never call a verb on a tenant it moves: the only
//! engine call is `check`, which reads.

use std::io::{BufReader, Write};
use std::path::Path;

use leasehold_host::storage::{Backend, check_tenant};
use leasehold_host::{Discrepancy, Engine};
use serde::Serialize;

use super::args::{Cli, CopyArgs, ProgressArg, TenantCommand};
use super::commands::{builder, db_path};
use super::error::{CliError, REFUSED};
use super::keyspace::{
    self, Copied, Entries, ExportReader, MoveError, Outcome, Progress, Show, Store, Walk,
};

/// One tenant's copy (or import), as answered.
#[derive(Debug, Serialize)]
pub(super) struct TenantReport {
    tenant: String,
    outcome: Outcome,
    /// Keys the target already held as the start of the source's.
    kept_keys: u64,
    /// Keys this run wrote.
    written_keys: u64,
    keys: u64,
    bytes: u64,
    source_sha256: String,
    target_sha256: String,
    digests_match: bool,
    discrepancies: Vec<Discrepancy>,
}

impl TenantReport {
    pub(super) fn ok(&self) -> bool {
        self.digests_match && self.discrepancies.is_empty()
    }

    pub(super) fn human(&self) -> String {
        let what = match self.outcome {
            Outcome::Copied => format!("copied {} keys ({} bytes)", self.keys, self.bytes),
            Outcome::Resumed => format!(
                "resumed: {} keys were there, wrote the other {} ({} keys, {} bytes in all)",
                self.kept_keys, self.written_keys, self.keys, self.bytes
            ),
            Outcome::AlreadyCopied => format!(
                "already copied ({} keys, {} bytes); nothing written",
                self.keys, self.bytes
            ),
            Outcome::Empty => "the source holds no key of it; nothing written".to_owned(),
        };
        let digests = if self.digests_match {
            "the digests match"
        } else {
            "THE DIGESTS DIFFER"
        };
        let check = if self.discrepancies.is_empty() {
            "check is clean".to_owned()
        } else {
            format!(
                "CHECK FOUND {} discrepancies: {}",
                self.discrepancies.len(),
                serde_json::to_string(&self.discrepancies).unwrap_or_default()
            )
        };
        format!(
            "{}: {what}.\n  source sha256 {}\n  target sha256 {}\n  {digests}; {check}.\n",
            self.tenant, self.source_sha256, self.target_sha256
        )
    }
}

/// After a tenant's keys are in: the target's digest, compared with the
/// source's, and `check` run through the engine on the target.
pub(super) fn verify(
    copied: Copied,
    target: &Store,
    engine: &Engine,
    tenant: &str,
) -> Result<TenantReport, MoveError> {
    let there = keyspace::digest(target.as_ref(), tenant)?;
    let check = |source| MoveError::Check {
        tenant: tenant.to_owned(),
        source: Box::new(source),
    };
    let discrepancies = engine
        .tenant(tenant)
        .map_err(check)?
        .check()
        .map_err(check)?;
    let (source_sha256, target_sha256) = (copied.source.hex(), there.hex());
    Ok(TenantReport {
        tenant: tenant.to_owned(),
        outcome: copied.outcome,
        kept_keys: copied.kept,
        written_keys: copied.written,
        keys: there.keys,
        bytes: there.bytes,
        digests_match: source_sha256 == target_sha256 && copied.source.keys == there.keys,
        source_sha256,
        target_sha256,
        discrepancies,
    })
}

/// [`verify`] of every tenant copied, [`keyspace::VERIFY_AT_ONCE`] at a
/// time; the reports in the tenants' order, or the error of the first
/// tenant (in that order) that failed. Once one fails no other starts.
fn verify_all(
    copied: Vec<Copied>,
    tenants: &[String],
    target: &Store,
    engine: &Engine,
    progress: &mut Progress,
) -> Result<Vec<TenantReport>, MoveError> {
    use std::sync::Mutex;
    let count = tenants.len();
    let jobs = Mutex::new(
        tenants
            .iter()
            .zip(copied)
            .enumerate()
            .collect::<std::collections::VecDeque<_>>(),
    );
    let results: Mutex<Vec<Option<Result<TenantReport, MoveError>>>> =
        Mutex::new((0..count).map(|_| None).collect());
    let at_once = keyspace::VERIFY_AT_ONCE.min(count);
    if count > 0 {
        progress.checking(count, at_once);
    }
    let progress = Mutex::new(progress);
    std::thread::scope(|s| {
        for _ in 0..at_once {
            s.spawn(|| {
                loop {
                    let Some((i, (tenant, copied))) = lock(&jobs).pop_front() else {
                        return;
                    };
                    let report = verify(copied, target, engine, tenant);
                    if report.is_err() {
                        lock(&jobs).clear();
                    }
                    let mut results = lock(&results);
                    results[i] = Some(report);
                    let done = results.iter().filter(|r| r.is_some()).count();
                    drop(results);
                    let mut progress = lock(&progress);
                    progress.tenant(done, count);
                    progress.line("checked", tenant, None, None);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    // Tenants are started in order, so one never started comes after the
    // one whose failure stopped the rest.
    results.into_iter().flatten().collect()
}

/// A lock poisoned by a panicking worker still holds sound data: the panic
/// is raised again when the scope joins.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The engine that runs `check` over the target: the same backend the keys
/// went through, so a redb file is not opened twice.
pub(super) fn engine_over(cli: &Cli, target: &Store) -> Result<Engine, CliError> {
    Ok(builder(cli).backend(target.clone())?)
}

/// Whether progress lines are printed, and how: `--progress auto` shows
/// them only to a person at a terminal who did not ask for JSON.
pub(super) fn show(cli: &Cli) -> Show {
    use std::io::IsTerminal;
    match cli.progress {
        ProgressArg::Never => Show::Never,
        ProgressArg::Always if cli.json => Show::Json,
        ProgressArg::Always => Show::Text,
        ProgressArg::Auto if !cli.json && std::io::stderr().is_terminal() => Show::Text,
        ProgressArg::Auto => Show::Never,
    }
}

pub(super) fn tenants_named(cli: &Cli) -> Result<Vec<String>, MoveError> {
    for name in &cli.tenants {
        check_tenant(name).map_err(|e| MoveError::Usage(format!("--tenant {name:?}: {e}")))?;
    }
    Ok(cli.tenants.clone())
}

/// `leasehold copy`.
pub fn copy(cli: &Cli, args: &CopyArgs, out: &mut dyn Write) -> Result<u8, CliError> {
    if args.from == args.to {
        return Err(MoveError::Usage("--from and --to name the same database".into()).into());
    }
    let mut tenants = tenants_named(cli)?;
    let source = keyspace::open(&args.from, true, cli.wait)?;
    if tenants.is_empty() {
        tenants = source
            .tenants()
            .map_err(|source| MoveError::Storage {
                what: "list the tenants of",
                tenant: args.from.clone(),
                source,
            })?
            .ok_or_else(|| MoveError::Unlisted {
                db: args.from.clone(),
            })?;
    }
    let target = keyspace::open(&args.to, false, cli.wait)?;
    // Every tenant is looked at before any is written: one the target
    // cannot take refuses the whole copy, not the tenants after it.
    for tenant in &tenants {
        keyspace::may_copy(
            &mut Walk::new(source.as_ref(), tenant)?,
            target.as_ref(),
            tenant,
        )?;
    }
    let started = std::time::Instant::now();
    let mut progress = Progress::new("copy", show(cli))?;
    let mut copied = Vec::with_capacity(tenants.len());
    for (i, tenant) in tenants.iter().enumerate() {
        progress.tenant(i + 1, tenants.len());
        let mut walk = Walk::new(source.as_ref(), tenant)?;
        copied.push(keyspace::copy_tenant(
            &mut walk,
            target.as_ref(),
            tenant,
            &mut progress,
        )?);
    }
    // Compiled once the keys are in, not before: an early failure costs
    // nothing, and the copy itself needs no engine.
    let copy_ms = started.elapsed().as_millis();
    let engine = engine_over(cli, &target)?;
    let reports = verify_all(copied, &tenants, &target, &engine, &mut progress)?;
    let ok = reports.iter().all(TenantReport::ok);
    if cli.json {
        let answer = serde_json::json!({
            "from": args.from,
            "to": args.to,
            "tenants": reports,
            "ok": ok,
            // How long the keys took, and the digests and checks after them.
            "copy_ms": copy_ms,
            "verify_ms": started.elapsed().as_millis() - copy_ms,
        });
        writeln!(out, "{answer}")?;
    } else {
        if reports.is_empty() {
            writeln!(out, "{} holds no tenant; nothing copied.", args.from)?;
        }
        for report in &reports {
            out.write_all(report.human().as_bytes())?;
        }
    }
    Ok(if ok { 0 } else { REFUSED })
}

/// `leasehold tenant export/import/delete`.
pub fn tenant(cli: &Cli, verb: &TenantCommand, out: &mut dyn Write) -> Result<u8, CliError> {
    let db = db_path(cli);
    let db = db
        .to_str()
        .ok_or_else(|| MoveError::Usage(format!("{} is not UTF-8", db.display())))?
        .to_owned();
    match verb {
        TenantCommand::Export { out: file } => export(cli, &db, file.as_deref(), out),
        TenantCommand::Import { input } => import(cli, &db, input.as_deref(), out),
        TenantCommand::Delete { yes } => delete(cli, &db, *yes, out),
    }
}

fn export(cli: &Cli, db: &str, file: Option<&Path>, out: &mut dyn Write) -> Result<u8, CliError> {
    let tenant = cli.tenant();
    check_tenant(tenant).map_err(|e| MoveError::Usage(format!("--tenant {tenant:?}: {e}")))?;
    let store = keyspace::open(db, true, cli.wait)?;
    let Some(path) = file else {
        keyspace::export(store.as_ref(), tenant, out)?;
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
        let digest = keyspace::export(store.as_ref(), tenant, &mut target)?;
        return answer_export(cli, tenant, path, &digest, out);
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
        keyspace::export(store.as_ref(), tenant, &mut writer)?
    };
    temp.as_file().sync_all().map_err(io)?;
    temp.persist(path).map_err(|e| io(e.error))?;
    answer_export(cli, tenant, path, &digest, out)
}

/// What `tenant export --out` says it wrote.
fn answer_export(
    cli: &Cli,
    tenant: &str,
    path: &Path,
    digest: &keyspace::Digest,
    out: &mut dyn Write,
) -> Result<u8, CliError> {
    if cli.json {
        let answer = serde_json::json!({
            "tenant": tenant,
            "out": path,
            "keys": digest.keys,
            "bytes": digest.bytes,
            "sha256": digest.hex(),
        });
        writeln!(out, "{answer}")?;
    } else {
        writeln!(
            out,
            "Exported tenant {tenant}: {} keys ({} bytes) to {}.\n  sha256 {}",
            digest.keys,
            digest.bytes,
            path.display(),
            digest.hex()
        )?;
    }
    Ok(0)
}

fn import(cli: &Cli, db: &str, file: Option<&Path>, out: &mut dyn Write) -> Result<u8, CliError> {
    let open_file = |p: &Path| -> Result<Box<dyn std::io::BufRead>, MoveError> {
        let f = std::fs::File::open(p).map_err(|source| MoveError::Io {
            what: format!("open {}", p.display()),
            source,
        })?;
        Ok(Box::new(BufReader::new(f)))
    };
    let mut reader = match file.filter(|p| *p != Path::new("-")) {
        None => ExportReader::new(Box::new(BufReader::new(std::io::stdin())), "-")?,
        Some(p) => {
            let name = p.display().to_string();
            // A file is read through once before anything is written, so a
            // damaged one is refused whole; standard input can only be
            // checked as it goes.
            let mut whole = ExportReader::new(open_file(p)?, &name)?;
            while !whole.batch()?.is_empty() {}
            ExportReader::new(open_file(p)?, &name)?
        }
    };
    let name = file.map_or("-".into(), |p| p.display().to_string());
    let tenant = match tenants_named(cli)?.pop() {
        Some(t) => t,
        None => reader.tenant.clone(),
    };
    check_tenant(&tenant).map_err(|e| MoveError::Usage(format!("tenant {tenant:?}: {e}")))?;
    let target = keyspace::open(db, false, cli.wait)?;
    let mut progress = Progress::new("tenant import", show(cli))?;
    let copied = keyspace::copy_tenant(&mut reader, target.as_ref(), &tenant, &mut progress)?;
    // The copy stops at the first empty batch, which the reader gives only
    // past a last line that matched; say so plainly if it did not get there.
    if !reader.batch()?.is_empty() {
        return Err(MoveError::Usage(format!("{name}: the import stopped before its end")).into());
    }
    let engine = engine_over(cli, &target)?;
    let report = verify(copied, &target, &engine, &tenant)?;
    if cli.json {
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

fn delete(cli: &Cli, db: &str, yes: bool, out: &mut dyn Write) -> Result<u8, CliError> {
    // Never the default tenant by omission: the name is part of the ask.
    let Some(tenant) = tenants_named(cli)?.pop() else {
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
    let store = keyspace::open(db, false, cli.wait)?;
    let mut progress = Progress::new("tenant delete", show(cli))?;
    let deleted = keyspace::delete_tenant(store.as_ref(), &tenant, &mut progress)?;
    if cli.json {
        let answer = serde_json::json!({"tenant": tenant, "deleted_keys": deleted});
        writeln!(out, "{answer}")?;
    } else {
        writeln!(out, "Deleted tenant {tenant}: {deleted} keys.")?;
    }
    Ok(0)
}
