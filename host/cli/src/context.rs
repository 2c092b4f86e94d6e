//! What a command runs in: the global flags, and the verbs the command
//! calls, from which it opens the engine and the tenant. A command that
//! calls only verbs the host's table ([`leasehold_host::exported_functions`])
//! marks as reading opens the database read-only: it never creates, repairs
//! or changes it, works on a file the user may only read, and runs beside
//! other readers (on PostgreSQL it runs READ ONLY). It owns that choice and
//! the engine's options; it must never keep its own list of which verbs
//! write, and never make a call itself.

use std::io::Write;
use std::path::{Path, PathBuf};

use leasehold_host::storage::check_tenant;
use leasehold_host::{Engine, EngineBuilder, Error, OpenError, Tenant};

use crate::answer::Answer;
use crate::error::{CliError, with_sources};
use crate::globals::{Globals, ProgressArg};
use crate::keys::error::MoveError;
use crate::keys::progress::Show;
use crate::keys::store::Store;

/// One command's run: the flags, and the verbs it calls by their WIT names.
pub struct Context<'a> {
    globals: &'a Globals,
    verbs: &'static [&'static str],
}

impl<'a> Context<'a> {
    pub fn new(globals: &'a Globals, verbs: &'static [&'static str]) -> Context<'a> {
        Context { globals, verbs }
    }

    pub fn globals(&self) -> &Globals {
        self.globals
    }

    /// Whether `--json` asked for exact JSON.
    pub fn json(&self) -> bool {
        self.globals.json
    }

    /// The one tenant the command is scoped to.
    pub fn tenant_name(&self) -> &str {
        self.globals.tenant()
    }

    pub fn db_path(&self) -> PathBuf {
        self.globals.db_path()
    }

    /// Whether any verb the command calls may write, as the host's table
    /// says. A name that is no verb is the command line's own mistake.
    pub fn writes(&self) -> Result<bool, CliError> {
        let table = leasehold_host::exported_functions();
        let mut writes = false;
        for verb in self.verbs {
            let f = table.iter().find(|f| f.name == *verb).ok_or_else(|| {
                CliError::Failed(format!(
                    "the command calls {verb:?}, which the engine does not export"
                ))
            })?;
            writes |= f.writes;
        }
        Ok(writes)
    }

    /// An engine builder with the options every command shares: how long
    /// to wait for a busy file, whether instances are kept, and where
    /// compiled components are kept. Read-write; see [`Context::engine`].
    pub fn builder(&self) -> EngineBuilder {
        let g = self.globals;
        let engine = Engine::builder().file_wait(g.wait);
        let engine = if g.fresh_instances {
            engine.fresh_instances()
        } else {
            engine
        };
        if g.no_cache {
            return engine;
        }
        match g
            .cache_dir
            .clone()
            .or_else(leasehold_host::default_cache_dir)
        {
            Some(dir) => engine.compile_cache(dir),
            None => engine,
        }
    }

    /// [`Context::builder`], read-only unless a verb the command calls may
    /// write.
    pub fn engine(&self) -> Result<EngineBuilder, CliError> {
        let engine = self.builder();
        Ok(if self.writes()? {
            engine
        } else {
            engine.read_only()
        })
    }

    /// The tenant, on the database `--db` names, opened as
    /// [`Context::engine`] says.
    pub fn tenant(&self) -> Result<Tenant, CliError> {
        let engine = self.engine()?;
        let db = self.db_path();
        let engine = match db.to_str() {
            Some(url) if leasehold_host::is_url(url) => engine.postgres(url)?,
            _ => match engine.clone().open(&db) {
                // After a crash is when an operator most needs to look: a
                // reading command repairs the file when it may, and says so.
                Err(Error::Open(OpenError::NeedsRecovery { path })) => {
                    self.repair_to_read(&path)?;
                    engine.open(db)?
                }
                opened => opened?,
            },
        };
        Ok(engine.tenant(self.tenant_name())?)
    }

    /// Repairs a file a writer left open so that a reading command can
    /// read it, saying so on stderr; where this user or this moment cannot,
    /// refuses with the file's own error, which names the command that
    /// repairs it.
    fn repair_to_read(&self, path: &Path) -> Result<(), CliError> {
        match leasehold_host::repair(path, self.globals.wait) {
            Ok(_) => {
                eprintln!(
                    "leasehold: {} was not closed cleanly (its writer stopped); repaired it before reading",
                    path.display()
                );
                Ok(())
            }
            Err(why) => {
                eprintln!(
                    "error: {} was not closed cleanly, and this command could not repair it: {}",
                    path.display(),
                    with_sources(&why)
                );
                Err(Error::Open(OpenError::NeedsRecovery {
                    path: path.to_owned(),
                })
                .into())
            }
        }
    }

    /// The engine that runs `check` over keys just written through `store`:
    /// the same backend, so that a redb file is not opened twice.
    pub fn engine_on(&self, store: &Store) -> Result<Engine, CliError> {
        Ok(self.builder().backend(store.clone())?)
    }

    /// Every `--tenant` given, each checked as a tenant name; one given
    /// twice is refused (a move would meet its own first part).
    pub fn tenants_named(&self) -> Result<Vec<String>, MoveError> {
        let named = &self.globals.tenants;
        for (i, name) in named.iter().enumerate() {
            check_tenant(name).map_err(|e| MoveError::Usage(format!("--tenant {name:?}: {e}")))?;
            if named[..i].contains(name) {
                return Err(MoveError::Usage(format!("--tenant {name} is given twice")));
            }
        }
        Ok(named.clone())
    }

    /// Whether progress lines are printed, and how: `--progress auto` shows
    /// them only to a person at a terminal who did not ask for JSON.
    pub fn progress(&self) -> Show {
        use std::io::IsTerminal;
        let g = self.globals;
        match g.progress {
            ProgressArg::Never => Show::Never,
            ProgressArg::Always if g.json => Show::Json,
            ProgressArg::Always => Show::Text,
            ProgressArg::Auto if !g.json && std::io::stderr().is_terminal() => Show::Text,
            ProgressArg::Auto => Show::Never,
        }
    }

    /// Writes `answer` as `--json` asks, and answers its exit code.
    pub fn answer(&self, answer: &dyn Answer, out: &mut dyn Write) -> Result<u8, CliError> {
        crate::answer::write(answer, self.json(), out)
    }
}
