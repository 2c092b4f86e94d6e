//! `--if-revision`, which every task command that changes one task takes:
//! the call goes ahead only on the task at that revision, else it is
//! refused `stale` with the current revision and writes nothing. It owns
//! turning the flag into a guarded tenant; the rule is the engine's.

use clap::Args;
use leasehold_host::{Guard, Tenant};

use crate::context::Context;
use crate::error::CliError;

#[derive(Clone, Copy, Debug, Args)]
pub struct GuardArgs {
    /// Change the task only if its revision is still N (as `task get`
    /// printed it); else refused as stale with the current revision, and
    /// nothing is written
    #[arg(long = "if-revision", value_name = "N")]
    if_revision: Option<u64>,
}

impl GuardArgs {
    /// The tenant, guarded by `--if-revision` when it was given.
    pub fn tenant(self, cx: &Context) -> Result<Tenant, CliError> {
        let tenant = cx.tenant()?;
        Ok(match self.if_revision {
            Some(revision) => tenant.guarded(Guard {
                revision: Some(revision),
                job: None,
            }),
            None => tenant,
        })
    }
}
