//! `leasehold restore`: a backup written back into a database. It owns the
//! order of work: the whole file is read and every digest checked before
//! anything is written; every target tenant is looked at before any is
//! written (one that holds a key refuses the whole restore, `not_empty`);
//! then each tenant's keys go in, in batches within one call's write budget
//! (`keys::copy`), and each ends with a digest of what was written and
//! `check` through the engine. It must never write into a tenant that held
//! anything, nor call a verb but `check`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

use clap::Args;
use leasehold_host::tenant_keys::hex;

use crate::context::Context;
use crate::error::CliError;
use crate::exit::REFUSED;
use crate::keys::backup_file::{BackupReader, check_backup};
use crate::keys::copy::copy_tenant;
use crate::keys::entries::{Entries, TenantWalk};
use crate::keys::error::MoveError;
use crate::keys::progress::Progress;
use crate::keys::store;
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
}

impl Restore {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        restore(self, cx, out)
    }
}

fn restore(args: &Restore, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
    let path = &args.input;
    let name = path.display().to_string();
    let open = || -> Result<Box<dyn BufRead>, MoveError> {
        let f = std::fs::File::open(path).map_err(|source| MoveError::Io {
            what: format!("open {name}"),
            source,
        })?;
        Ok(Box::new(BufReader::new(f)))
    };
    // Read through once, every line checked, before anything is written.
    let header = check_backup(open()?, &name)?.header;
    let named = cx.tenants_named()?;
    for t in &named {
        if !header.tenants.contains(t) {
            return Err(MoveError::Usage(format!("{name} holds no tenant {t}")).into());
        }
    }
    let chosen = |t: &str| named.is_empty() || named.iter().any(|n| n == t);
    let target = store::open(&args.to, false, cx.globals().wait)?;
    for t in header.tenants.iter().filter(|t| chosen(t)) {
        if let Some((key, _)) = TenantWalk::new(target.as_ref(), t)?.batch()?.first() {
            return Err(MoveError::NotEmpty {
                tenant: t.clone(),
                why: format!("it holds key {}", hex(key)),
            }
            .into());
        }
    }
    let mut reader = BackupReader::new(open()?, &name)?;
    let mut progress = Progress::new("restore", cx.progress())?;
    let mut copied = Vec::new();
    while let Some(mut section) = reader.next_tenant()? {
        let tenant = section.tenant().to_owned();
        if chosen(&tenant) {
            let c = copy_tenant(&mut section, target.as_ref(), &tenant, &mut progress)?;
            copied.push((tenant, c));
        }
        reader.give_back(section)?;
    }
    reader.finish()?;
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
