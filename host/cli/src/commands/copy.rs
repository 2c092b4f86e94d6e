//! `leasehold copy`: tenants' keys from one database to another (a redb
//! file or a PostgreSQL URL each). It owns the command's order of work: in
//! one transaction on the target (`keys::target`), every tenant looked at
//! before any is written (and held from then on), then each copied, every
//! entry checked against the engine's limits, then one commit, so a copy
//! refused or failed anywhere leaves the target as it was; then the
//! digests of both sides and `check` through the engine, a few tenants at
//! a time. It must never call a verb on a tenant it moves: the only engine
//! call is `check`, which reads.

use std::io::Write;

use clap::Args;

use crate::context::Context;
use crate::error::CliError;
use crate::exit::REFUSED;
use crate::keys::copy::{copy_tenant, may_copy};
use crate::keys::entries::TenantWalk;
use crate::keys::error::MoveError;
use crate::keys::progress::Progress;
use crate::keys::store;
use crate::keys::target::Target;
use crate::keys::verify::{TenantReport, verify_all};

/// `leasehold copy`: from where, to where.
#[derive(Debug, Args)]
pub struct Copy {
    /// The database to copy from (read only)
    #[arg(long, value_name = "PATH|URL")]
    from: String,
    /// The database to copy to (a redb file is created if missing)
    #[arg(long, value_name = "PATH|URL")]
    to: String,
}

impl Copy {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let args = self;
        if args.from == args.to {
            return Err(MoveError::Usage("--from and --to name the same database".into()).into());
        }
        let mut tenants = cx.tenants_named()?;
        let source = store::open(&args.from, true, cx.globals().wait)?;
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
        let mut target = Target::open(&args.to, cx.globals().wait)?;
        let mut load = target.begin()?;
        // Every tenant is looked at before any is written: one the target
        // cannot take refuses the whole copy before it writes anything.
        for tenant in &tenants {
            may_copy(
                &mut TenantWalk::new(source.as_ref(), tenant)?,
                load.as_mut(),
                tenant,
            )?;
        }
        let started = std::time::Instant::now();
        let mut progress = Progress::new("copy", cx.progress())?;
        let mut copied = Vec::with_capacity(tenants.len());
        for (i, tenant) in tenants.iter().enumerate() {
            progress.tenant(i + 1, tenants.len());
            let mut walk = TenantWalk::new(source.as_ref(), tenant)?;
            copied.push(copy_tenant(
                &mut walk,
                load.as_mut(),
                tenant,
                &mut progress,
            )?);
        }
        target.commit(load)?;
        let target = target.store;
        // Compiled once the keys are in, not before: an early failure costs
        // nothing, and the copy itself needs no engine.
        let copy_ms = started.elapsed().as_millis();
        let engine = cx.engine_on(&target)?;
        let reports = verify_all(copied, &tenants, &target, &engine, &mut progress)?;
        let ok = reports.iter().all(TenantReport::ok);
        if cx.json() {
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
}
