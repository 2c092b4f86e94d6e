//! `task open` and `task get`: a task written as JSON opened, and one task
//! read. The document is read as `leasehold_host::new_task` says (the
//! `ByHand` form: what the service takes, plus RFC 3339 times and a
//! printed task read back); this module owns reading the file and the
//! sentence, never the defaults.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use leasehold_host::new_task::{ByHand, NewTask};
use leasehold_host::{Error, StoreError};

use crate::commands::task::shown::Shown;
use crate::context::Context;
use crate::error::CliError;
use crate::input::{invalid_document, parse, read_source};
use crate::values;

#[derive(Debug, Args)]
pub struct Open {
    /// JSON file holding the task; - or nothing reads standard input
    #[arg(value_name = "FILE|-")]
    file: Option<PathBuf>,
}

impl Open {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let source = read_source(self.file.as_deref(), "a task")?;
        let input: NewTask<ByHand> = parse(&source, "a task")?;
        let created_at = input.created_at.unwrap_or_else(values::now);
        let task = input.into_task(created_at);
        let t = cx.tenant()?;
        // Only for the sentence: `open` answers the stored task either
        // way, and a race here changes nothing but the wording.
        let invalid = |e| invalid_document(&source, "the task", e);
        let existed = t.get(&task.id).map_err(invalid)?.is_some();
        let stored = t.open(&task).map_err(invalid)?;
        let headline = if existed {
            format!(
                "Task {} already exists; the first open wins, so it stands as stored:",
                stored.id
            )
        } else {
            format!("Opened task {}.", stored.id)
        };
        let shown = Shown {
            task: stored,
            headline,
        };
        cx.answer(&shown, out)
    }
}

#[derive(Debug, Args)]
pub struct Get {
    id: String,
}

impl Get {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let id = &self.id;
        let task = cx
            .tenant()?
            .get(id)?
            .ok_or_else(|| Error::Store(StoreError::NotFound(id.clone())))?;
        let shown = Shown {
            headline: format!("Task {id}:"),
            task,
        };
        cx.answer(&shown, out)
    }
}
