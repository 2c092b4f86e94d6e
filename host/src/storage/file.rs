//! Opening the redb file, for writing or for reading only: waiting a bounded
//! time while another process holds it, and naming what is wrong with a file
//! that cannot be opened. It never turns an existing file into a database:
//! only a path that does not exist is created, and only for writing.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::{ReadableDatabase, TableDefinition, TableError};

use crate::storage::error::StorageError;

/// The name of the one redb table: tenant-prefixed guest keys to guest values.
pub const KV_TABLE_NAME: &str = "leasehold-kv";

pub(crate) const KV_TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new(KV_TABLE_NAME);

/// redb's error in the storage boundary's words.
pub(crate) fn redb_error(e: impl Into<redb::Error>) -> StorageError {
    match e.into() {
        e @ redb::Error::Corrupted(_) => StorageError::Corrupt(Box::new(e)),
        e @ redb::Error::Io(_) => StorageError::Unavailable(Box::new(e)),
        e => StorageError::Other(Box::new(e)),
    }
}

/// The first pause between attempts to take a held file. redb takes its lock
/// without blocking, so a waiter polls; a Leasehold writer holds the file for
/// one call, so the first retries come soon.
const FIRST_PAUSE: Duration = Duration::from_millis(2);

/// The longest pause between attempts, so a waiter notices a released file
/// quickly even late in a long wait.
const LONGEST_PAUSE: Duration = Duration::from_millis(50);

/// Why a database file could not be opened. Each variant calls for a
/// different response: `Busy` is transient, `Missing` is a wrong path, the
/// others are a file that is not (or not yet again) a usable database.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Another process had the file open for the whole wait.
    #[error("the database {} is busy: {}", path.display(), busy_for(*waited))]
    Busy {
        /// The database file.
        path: PathBuf,
        /// How long the open waited.
        waited: Duration,
    },
    /// Nothing at the path, for an open that may not create one.
    #[error("there is no database at {}", path.display())]
    Missing {
        /// The database file.
        path: PathBuf,
    },
    /// A zero-byte file: a truncated database or the wrong path, never a
    /// place to start a new one.
    #[error("{} is an empty file (0 bytes), not a database; it was left as it is", path.display())]
    Empty {
        /// The database file.
        path: PathBuf,
    },
    /// The file does not begin as a redb database does.
    #[error("{} is not a database", path.display())]
    NotADatabase {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A redb database that lacks Leasehold's table: some other program's.
    #[error("{} is a redb database without Leasehold's table", path.display())]
    NotLeasehold {
        /// The database file.
        path: PathBuf,
    },
    /// A writer stopped without closing the file. Opening it for writing
    /// repairs it; a read-only open may not.
    #[error(
        "{} was not closed cleanly; a read-only open cannot repair it, the next open for writing will",
        path.display()
    )]
    NeedsRecovery {
        /// The database file.
        path: PathBuf,
    },
    /// The file system refused: permissions, a missing folder, a directory.
    #[error("cannot open {}", path.display())]
    Io {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// redb refused the file for another reason.
    #[error("cannot open {}", path.display())]
    Storage {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: redb::Error,
    },
}

fn busy_for(waited: Duration) -> String {
    if waited.is_zero() {
        "another process has it open".to_owned()
    } else {
        format!("another process held it for all of {waited:?}")
    }
}

/// How an engine opens its file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    /// Creates the file if the path does not exist.
    #[default]
    Write,
    /// Never creates, repairs or writes the file; needs only read permission.
    ReadOnly,
}

/// An open database.
pub(crate) enum Db {
    Write(redb::Database),
    ReadOnly(redb::ReadOnlyDatabase),
}

impl Db {
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self, Db::ReadOnly(_))
    }
}

/// Opens the file at `path`, waiting up to `lock_wait` while another
/// process has it open.
pub(crate) fn open(path: &Path, access: Access, lock_wait: Duration) -> Result<Db, OpenError> {
    if !check_path(path, access)? {
        create(path)?;
    }
    let storage = |source: redb::Error| OpenError::Storage {
        path: path.to_owned(),
        source,
    };
    match access {
        Access::Write => {
            // `open`, never `create`: redb would initialize an empty file.
            let db = waiting(path, lock_wait, || redb::Database::builder().open(path))?;
            ensure_table(&db).map_err(storage)?;
            Ok(Db::Write(db))
        }
        Access::ReadOnly => {
            let db = waiting(path, lock_wait, || {
                redb::Database::builder().open_read_only(path)
            })?;
            let found = db
                .begin_read()
                .map_err(redb::Error::from)
                .and_then(|r| Ok(r.open_table(KV_TABLE)?));
            match found {
                Ok(_) => Ok(Db::ReadOnly(db)),
                Err(redb::Error::TableDoesNotExist(_)) => Err(OpenError::NotLeasehold {
                    path: path.to_owned(),
                }),
                Err(e) => Err(storage(e)),
            }
        }
    }
}

/// Refuses, before redb sees them, what an open of `path` must not touch:
/// an empty file is what redb would otherwise initialize, and a missing one
/// what it would create (unless the open may create it). Answers whether
/// the path exists. Cheap enough to ask before anything slow, so that a
/// wrong path is reported at once.
pub(crate) fn check_path(path: &Path, access: Access) -> Result<bool, OpenError> {
    match fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() == 0 => Err(OpenError::Empty {
            path: path.to_owned(),
        }),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => match access {
            Access::Write => Ok(false),
            Access::ReadOnly => Err(OpenError::Missing {
                path: path.to_owned(),
            }),
        },
        Err(source) => Err(OpenError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// A database that lives in memory.
pub(crate) fn in_memory() -> Result<Db, StorageError> {
    let db = redb::Database::builder()
        .create_with_backend(redb::backends::InMemoryBackend::new())
        .map_err(redb_error)?;
    ensure_table(&db).map_err(redb_error)?;
    Ok(Db::Write(db))
}

/// Repairs the database file at `path` if a writer stopped without closing
/// it (killed, or the machine lost power), and answers whether it had to.
/// Repairing is opening it for writing, which makes redb recover it, and
/// closing it again: it needs write permission and the writer's lock, and
/// waits up to `lock_wait` while another process has the file open. A file
/// that was closed cleanly is left as it is.
pub fn repair(path: &Path, lock_wait: Duration) -> Result<bool, OpenError> {
    match open(path, Access::ReadOnly, lock_wait) {
        Ok(db) => {
            drop(db);
            Ok(false)
        }
        Err(OpenError::NeedsRecovery { .. }) => {
            drop(open(path, Access::Write, lock_wait)?);
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// A database on a storage backend of the caller's, created there when the
/// backend is empty; redb repairs one a writer left open.
pub(crate) fn on_storage(storage: impl redb::StorageBackend) -> Result<Db, StorageError> {
    let db = redb::Database::builder()
        .create_with_backend(storage)
        .map_err(redb_error)?;
    ensure_table(&db).map_err(redb_error)?;
    Ok(Db::Write(db))
}

/// Read transactions need the table to exist; it is created once, so opening
/// an existing database commits nothing.
fn ensure_table(db: &redb::Database) -> Result<(), redb::Error> {
    match ReadableDatabase::begin_read(db)?.open_table(KV_TABLE) {
        Ok(_) => return Ok(()),
        Err(TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let w = db.begin_write()?;
    w.open_table(KV_TABLE)?;
    w.commit()?;
    Ok(())
}

/// Makes a new, empty Leasehold database at `path`. It is built under a
/// temporary name beside it and then given the name, which fails if the
/// name exists: no other process ever sees a half-made file, and of two
/// processes creating it at once, one wins and the other uses its file.
fn create(path: &Path) -> Result<(), OpenError> {
    let io = |source| OpenError::Io {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let temporary = dir.join(format!(
        ".leasehold-new-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let made = make_empty(&temporary, path);
    // Linking the finished file under the name fails if the name exists.
    let linked = made.and_then(|()| match fs::hard_link(&temporary, path) {
        Ok(()) => Ok(()),
        // Another process made it first; its file is the database.
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io(e)),
    });
    let _ = fs::remove_file(&temporary);
    linked?;
    // The name must survive a crash, as the data committed under it will.
    #[cfg(unix)]
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    Ok(())
}

/// Makes an empty Leasehold database at `temporary`, closed and on disk.
fn make_empty(temporary: &Path, path: &Path) -> Result<(), OpenError> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // What a plain create asks for; the umask applies as it would.
        options.mode(0o666);
    }
    options.open(temporary).map_err(|source| OpenError::Io {
        path: path.to_owned(),
        source,
    })?;
    let db = redb::Database::create(temporary).map_err(|e| classify(path, e))?;
    ensure_table(&db).map_err(|source| OpenError::Storage {
        path: path.to_owned(),
        source,
    })?;
    db.close().map_err(|e| classify(path, e))
}

/// Runs `attempt` until the file is not held by another process or
/// `lock_wait` has passed.
fn waiting<T>(
    path: &Path,
    lock_wait: Duration,
    mut attempt: impl FnMut() -> Result<T, redb::DatabaseError>,
) -> Result<T, OpenError> {
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        match attempt() {
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                let left = lock_wait.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return Err(OpenError::Busy {
                        path: path.to_owned(),
                        waited: lock_wait,
                    });
                }
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(LONGEST_PAUSE);
            }
            other => return other.map_err(|e| classify(path, e)),
        }
    }
}

fn classify(path: &Path, e: redb::DatabaseError) -> OpenError {
    use redb::{DatabaseError as D, StorageError as S};
    let path = path.to_owned();
    match e {
        D::DatabaseAlreadyOpen => OpenError::Busy {
            path,
            waited: Duration::ZERO,
        },
        // Only a read-only open gives up on a repair (no callback aborts one).
        D::RepairAborted => OpenError::NeedsRecovery { path },
        D::Storage(S::Io(source)) => match source.kind() {
            ErrorKind::NotFound => OpenError::Missing { path },
            // How redb says the bytes are not a database.
            ErrorKind::InvalidData => OpenError::NotADatabase { path, source },
            _ => OpenError::Io { path, source },
        },
        other => OpenError::Storage {
            path,
            source: other.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("test.redb");
        (dir, path)
    }

    const NO_WAIT: Duration = Duration::ZERO;

    #[test]
    fn an_empty_file_is_refused_and_left_empty() {
        let (_dir, path) = scratch();
        fs::write(&path, b"").expect("write");
        for access in [Access::Write, Access::ReadOnly] {
            let r = open(&path, access, NO_WAIT);
            assert!(matches!(r, Err(OpenError::Empty { .. })), "{access:?}");
        }
        assert_eq!(fs::metadata(&path).expect("metadata").len(), 0);
    }

    #[test]
    fn a_file_that_is_not_redb_is_refused_and_left_unchanged() {
        let (_dir, path) = scratch();
        let text = b"not a database, just some text".repeat(500);
        fs::write(&path, &text).expect("write");
        for access in [Access::Write, Access::ReadOnly] {
            let r = open(&path, access, NO_WAIT);
            assert!(
                matches!(r, Err(OpenError::NotADatabase { .. })),
                "{access:?}"
            );
        }
        assert_eq!(fs::read(&path).expect("read"), text);
    }

    #[test]
    fn only_an_open_for_writing_creates_a_missing_file() {
        let (dir, path) = scratch();
        let r = open(&path, Access::ReadOnly, NO_WAIT);
        assert!(matches!(r, Err(OpenError::Missing { .. })));
        assert!(!path.exists());
        drop(open(&path, Access::Write, NO_WAIT).expect("created"));
        assert!(open(&path, Access::ReadOnly, NO_WAIT).is_ok());
        // Built under another name, which is gone once the file has its own.
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["test.redb"]);
    }

    #[test]
    fn a_redb_file_without_leaseholds_table_is_not_read_as_one() {
        let (_dir, path) = scratch();
        drop(redb::Database::create(&path).expect("someone else's database"));
        let r = open(&path, Access::ReadOnly, NO_WAIT);
        assert!(matches!(r, Err(OpenError::NotLeasehold { .. })));
    }

    #[test]
    fn a_file_held_past_the_wait_is_busy() {
        let (_dir, path) = scratch();
        let _held = open(&path, Access::Write, NO_WAIT).expect("created");
        let wait = Duration::from_millis(150);
        for access in [Access::Write, Access::ReadOnly] {
            let started = Instant::now();
            let r = open(&path, access, wait);
            assert!(
                matches!(r, Err(OpenError::Busy { waited, .. }) if waited == wait),
                "{access:?}"
            );
            assert!(started.elapsed() >= wait, "gave up early");
        }
    }

    #[test]
    fn a_file_released_during_the_wait_is_opened() {
        let (_dir, path) = scratch();
        let held = open(&path, Access::Write, NO_WAIT).expect("created");
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        let r = open(&path, Access::Write, Duration::from_secs(10));
        assert!(r.is_ok(), "{:?}", r.err());
        release.join().expect("release thread");
    }

    #[test]
    fn readers_share_the_file_and_keep_writers_out() {
        let (_dir, path) = scratch();
        drop(open(&path, Access::Write, NO_WAIT).expect("created"));
        let first = open(&path, Access::ReadOnly, NO_WAIT).expect("one reader");
        let second = open(&path, Access::ReadOnly, NO_WAIT).expect("a second reader");
        let r = open(&path, Access::Write, NO_WAIT);
        assert!(matches!(r, Err(OpenError::Busy { .. })));
        drop((first, second));
    }

    /// A copy of a file taken while a writer has it open is what a crash of
    /// that writer leaves on disk.
    #[test]
    fn a_file_a_writer_left_open_is_repaired_by_a_writer_not_a_reader() {
        let (dir, path) = scratch();
        let held = open(&path, Access::Write, NO_WAIT).expect("created");
        let crashed = dir.path().join("crashed.redb");
        fs::copy(&path, &crashed).expect("copy");
        drop(held);
        let before = fs::read(&crashed).expect("read");
        let r = open(&crashed, Access::ReadOnly, NO_WAIT);
        assert!(
            matches!(r, Err(OpenError::NeedsRecovery { .. })),
            "{:?}",
            r.err()
        );
        assert_eq!(fs::read(&crashed).expect("read"), before);
        drop(open(&crashed, Access::Write, NO_WAIT).expect("repaired"));
        assert!(open(&crashed, Access::ReadOnly, NO_WAIT).is_ok());
    }
}
