//! Looking after a database: `check` (the consistency check, through the
//! engine) and `repair` (recovering a redb file whose writer stopped
//! without closing it). It must never change a row: `check` reads, and
//! `repair` is redb's own recovery.

use std::io::Write;
use std::path::PathBuf;

use leasehold_host::{Discrepancy, Error};

use crate::answer::Answer;
use crate::context::Context;
use crate::error::CliError;
use crate::exit::REFUSED;
use crate::render::{count, table};

/// `check`.
pub fn check(cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
    let discrepancies = cx.tenant()?.check()?;
    cx.answer(&Checked(discrepancies), out)
}

struct Checked(Vec<Discrepancy>);

impl Answer for Checked {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.0)
    }

    fn human(&self) -> String {
        let discrepancies = &self.0;
        if discrepancies.is_empty() {
            return "Consistent: every row agrees with its indexes and counters.\n".to_owned();
        }
        let rows = discrepancies
            .iter()
            .map(|d| vec![d.structure.clone(), d.subject.clone(), d.detail.clone()])
            .collect();
        format!(
            "{}\n{} found.\n",
            table(&["STRUCTURE", "SUBJECT", "DETAIL"], rows),
            count(discrepancies.len() as u64, "discrepancy", "discrepancies")
        )
    }

    /// A discrepancy found is a finding a script must notice.
    fn exit_code(&self) -> u8 {
        if self.0.is_empty() { 0 } else { REFUSED }
    }
}

/// `repair`.
pub fn repair(cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
    let path = cx.db_path();
    if path.to_str().is_some_and(leasehold_host::is_url) {
        return Err(CliError::Usage {
            message: "repair is for a redb file; a PostgreSQL server recovers its own data".into(),
            argument: Some("repair".into()),
        });
    }
    let repaired = leasehold_host::repair(&path, cx.globals().wait).map_err(Error::Open)?;
    cx.answer(&Repaired { path, repaired }, out)
}

struct Repaired {
    path: PathBuf,
    repaired: bool,
}

impl Answer for Repaired {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&serde_json::json!({
            "path": self.path,
            "repaired": self.repaired,
        }))
    }

    fn human(&self) -> String {
        if self.repaired {
            format!(
                "Repaired {}: it was not closed cleanly.\n",
                self.path.display()
            )
        } else {
            format!(
                "{} was closed cleanly; nothing to repair.\n",
                self.path.display()
            )
        }
    }
}
