//! `leasehold restore`: a backup written back into a database. It owns the
//! order of work: the file is opened once and read once, through that one
//! descriptor; its first line is checked before anything else (a tenant
//! named twice refuses the restore there); one transaction on the target
//! (`keys::target`) then looks at every target tenant first (one that
//! holds a key refuses the whole restore, `not_empty`) and holds them,
//! takes each tenant's keys as they are read, each entry checked against
//! the engine's limits, and commits only once the end line matched: a
//! refusal or a failure anywhere leaves the target as it was. Each tenant
//! then ends with a digest of what was written and `check` through the
//! engine. It must never write into a tenant that held anything, nor call
//! a verb but `check`.

use std::io::{BufReader, Write};
use std::path::PathBuf;

use clap::Args;
use leasehold_host::tenant_keys::hex;

use crate::context::Context;
use crate::error::CliError;
use crate::exit::REFUSED;
use crate::keys::backup_file::BackupReader;
use crate::keys::copy::{copy_tenant, first_key};
use crate::keys::entries::Entries;
use crate::keys::error::MoveError;
use crate::keys::key_file;
use crate::keys::progress::Progress;
use crate::keys::target::Target;
use crate::keys::verify::{TenantReport, verify};

/// `leasehold restore`: from where, to where.
#[derive(Debug, Args)]
pub struct Restore {
    /// The backup file
    #[arg(long = "in", value_name = "FILE")]
    input: PathBuf,
    /// The database to restore into (a redb file is created if missing)
    #[arg(long, value_name = "PATH|URL")]
    to: String,
    /// The key a keyed backup was sealed with; a keyed backup is refused
    /// without it, a plain one with it
    #[arg(long, value_name = "FILE")]
    digest_key_file: Option<PathBuf>,
}

impl Restore {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        restore(self, cx, out)
    }
}

fn restore(args: &Restore, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
    let path = &args.input;
    let name = path.display().to_string();
    let key = key_file::read(args.digest_key_file.as_deref())?;
    let file = std::fs::File::open(path).map_err(|source| MoveError::Io {
        what: format!("open {name}"),
        source,
    })?;
    let mut reader = BackupReader::new(Box::new(BufReader::new(file)), &name, key.as_ref())?;
    let header = reader.header.clone();
    let named = cx.tenants_named()?;
    for t in &named {
        if !header.tenants.contains(t) {
            return Err(MoveError::Usage(format!("{name} holds no tenant {t}")).into());
        }
    }
    let chosen = |t: &str| named.is_empty() || named.iter().any(|n| n == t);
    let mut target = Target::open(&args.to, cx.globals().wait)?;
    let mut load = target.begin()?;
    // Every target tenant is looked at before any is written, in the
    // transaction that writes them: none can be written by anyone else
    // until it ends.
    for t in header.tenants.iter().filter(|t| chosen(t)) {
        if let Some(key) = first_key(load.as_mut(), t)? {
            return Err(MoveError::NotEmpty {
                tenant: t.clone(),
                why: format!("it holds key {}", hex(&key)),
            }
            .into());
        }
    }
    let mut progress = Progress::new("restore", cx.progress())?;
    let mut copied = Vec::new();
    let count = header.tenants.iter().filter(|t| chosen(t)).count();
    while let Some(mut section) = reader.next_tenant()? {
        let tenant = section.tenant().to_owned();
        if chosen(&tenant) {
            progress.tenant(copied.len() + 1, count);
            let c = copy_tenant(&mut section, load.as_mut(), &tenant, &mut progress)?;
            copied.push((tenant, c));
        } else {
            // Read through all the same: its lines are checked too.
            while !section.batch()?.is_empty() {}
        }
        reader.give_back(section)?;
    }
    reader.finish()?;
    target.commit(load)?;
    let target = target.store;
    let engine = cx.engine_on(&target)?;
    let mut reports: Vec<TenantReport> = Vec::with_capacity(copied.len());
    for (tenant, c) in copied {
        reports.push(verify(c, &target, &engine, &tenant)?);
    }
    let ok = reports.iter().all(TenantReport::ok);
    if cx.json() {
        let answer = serde_json::json!({
            "in": path,
            "to": args.to,
            "began_at_ms": header.began_at_ms,
            "tenants": reports,
            "ok": ok,
        });
        writeln!(out, "{answer}")?;
    } else {
        writeln!(
            out,
            "Restored {} tenants from {name} (a backup begun at {} ms) into {}:",
            reports.len(),
            header.began_at_ms,
            args.to
        )?;
        for report in &reports {
            out.write_all(report.human().as_bytes())?;
        }
    }
    Ok(if ok { 0 } else { REFUSED })
}
