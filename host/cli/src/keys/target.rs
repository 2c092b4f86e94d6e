//! The database a restore, an import or a copy writes, and the one
//! transaction it writes in (`leasehold_host::storage::Load`): every key
//! of the move is committed at once or not at all, and the tenants it
//! reads stay held against other writers until then. A redb file that does
//! not exist yet is built under a temporary name beside it and renamed into
//! place (never over anything) once committed, so a move that is refused
//! or fails leaves no file by that name. It owns that order; it must never
//! commit a load its caller did not hand back, nor leave a half-built file
//! at the name asked for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use leasehold_host::Limits;
use leasehold_host::storage::Load;

use crate::keys::error::MoveError;
use crate::keys::store::{self, Store};

/// How long one load's transaction may last: it writes whole tenants,
/// however large, so it is not held to a call's deadline.
const LOAD_DEADLINE: Duration = Duration::from_secs(24 * 3600);

/// A redb file built beside the name asked for.
struct Staged {
    /// Holds the file until it is renamed out; removed with what is left.
    dir: tempfile::TempDir,
    file: PathBuf,
    to: PathBuf,
}

/// The database a move writes.
pub struct Target {
    pub store: Store,
    db: String,
    staged: Option<Staged>,
}

impl Target {
    /// Opens `db` (a redb file, created if missing, or a PostgreSQL URL)
    /// to be written in one load.
    pub fn open(db: &str, wait: Duration) -> Result<Target, MoveError> {
        let path = Path::new(db);
        if leasehold_host::is_url(db) || path.symlink_metadata().is_ok() {
            return Ok(Target {
                store: store::open(db, false, wait)?,
                db: db.to_owned(),
                staged: None,
            });
        }
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = tempfile::Builder::new()
            .prefix(&format!(".{name}.leasehold-partial-"))
            .tempdir_in(parent)
            .map_err(|source| MoveError::Io {
                what: format!("make a place to build {db} in {}", parent.display()),
                source,
            })?;
        let file = dir.path().join("building.redb");
        let staged_name = file.to_string_lossy().into_owned();
        Ok(Target {
            store: store::open(&staged_name, false, wait)?,
            db: db.to_owned(),
            staged: Some(Staged {
                dir,
                file,
                to: path.to_owned(),
            }),
        })
    }

    /// Begins the move's one transaction.
    pub fn begin(&self) -> Result<Box<dyn Load>, MoveError> {
        self.store
            .begin_load(Limits::default().lock_wait, LOAD_DEADLINE)
            .map_err(|source| MoveError::Commit {
                db: self.db.clone(),
                source,
            })?
            .ok_or_else(|| {
                MoveError::Usage(format!("{} cannot take a move in one transaction", self.db))
            })
    }

    /// Commits `load`, then (for a file built beside its name) renames the
    /// file into place, refusing if something took the name meanwhile.
    pub fn commit(&mut self, load: Box<dyn Load>) -> Result<(), MoveError> {
        load.commit().map_err(|source| MoveError::Commit {
            db: self.db.clone(),
            source,
        })?;
        let Some(staged) = self.staged.take() else {
            return Ok(());
        };
        let io = |source| MoveError::Io {
            what: format!("put the database built beside {} in place", self.db),
            source,
        };
        tempfile::TempPath::try_from_path(&staged.file)
            .map_err(io)?
            .persist_noclobber(&staged.to)
            .map_err(|e| io(e.error))?;
        // The rename is durable once the folder that holds it is.
        if let Some(parent) = staged.to.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(parent)
                .and_then(|f| f.sync_all())
                .map_err(io)?;
        }
        drop(staged.dir);
        Ok(())
    }
}
