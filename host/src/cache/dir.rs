//! Where the compile cache lives on disk, reached so that nothing but this
//! user and root can have put what it reads there: the cache directory is
//! opened one directory at a time from `/`, each by descriptor and without
//! following a link, each checked on its open descriptor, and its files
//! are opened, made, renamed and removed relative to that descriptor. It
//! owns the trust rule; it must never follow a link at the cache directory
//! or at its files, and never hand back a directory or file it did not
//! check on the descriptor it hands back.
//!
//! The rule, the way OpenSSH checks `~/.ssh`:
//! - the cache directory is a directory (not a link to one) that this user
//!   owns and that neither its group nor others may write;
//! - every directory above it, up to `/`, is owned by root or this user
//!   and may not be written by group or others, unless it is owned by root
//!   and sticky (as `/tmp` is: there only an entry's owner may rename or
//!   remove it);
//! - a cache file is a regular file (not a link) that this user owns and
//!   that neither group nor others may write.
//!
//! Links above the cache directory (`/var` on macOS, a home directory on
//! another disk) are resolved first; the real directories they lead to are
//! the ones walked and checked.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::error::CacheError;

/// How a directory above the cache is opened: only to look in it. Linux's
/// `O_PATH` needs no read permission on it; elsewhere it must be readable.
#[cfg(any(target_os = "linux", target_os = "android"))]
const ABOVE: OFlags = OFlags::PATH;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const ABOVE: OFlags = OFlags::RDONLY;

/// Flags every open here carries: no link followed, nothing inherited by a
/// child process.
const SAFE: OFlags = OFlags::NOFOLLOW.union(OFlags::CLOEXEC);

/// The cache directory, open and checked.
pub(crate) struct CacheDir {
    dir: fs::File,
    path: PathBuf,
}

/// Which rule a directory or file is held to.
#[derive(Clone, Copy)]
enum Rule {
    /// A directory above the cache.
    Above,
    /// The cache directory.
    Cache,
    /// A file in the cache directory.
    File,
}

fn me() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Refuses what `rule` does not allow, as `meta` (read from the open
/// descriptor) describes it.
fn check(rule: Rule, path: &Path, meta: &fs::Metadata) -> Result<(), CacheError> {
    let (owner, mode) = (meta.uid(), meta.mode() & 0o7777);
    let others_write = mode & 0o022 != 0;
    let refused = match rule {
        Rule::Above if !meta.is_dir() => Some("is not a directory"),
        Rule::Above if owner != 0 && owner != me() => Some("is owned by another user"),
        Rule::Above if others_write && !(owner == 0 && mode & 0o1000 != 0) => {
            Some("may be written by others")
        }
        Rule::Above => None,
        Rule::Cache | Rule::File => {
            let kind_ok = match rule {
                Rule::Cache => meta.is_dir(),
                _ => meta.is_file(),
            };
            if !kind_ok {
                return Err(CacheError::NotRegular {
                    path: path.to_owned(),
                });
            }
            if owner != me() || others_write {
                return Err(CacheError::NotPrivate {
                    path: path.to_owned(),
                    owner,
                    mode,
                });
            }
            None
        }
    };
    match refused {
        None => Ok(()),
        Some(why) => Err(CacheError::Above {
            path: path.to_owned(),
            why,
            owner,
            mode,
        }),
    }
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> CacheError + '_ {
    move |source| CacheError::Io {
        path: path.to_owned(),
        source,
    }
}

/// `name` in `dir`, opened with `flags` and never through a link: a link
/// there is refused by name, an absent entry is `Ok(None)`.
fn open_in(
    dir: &fs::File,
    name: &OsStr,
    flags: OFlags,
    path: &Path,
) -> Result<Option<fs::File>, CacheError> {
    match rustix::fs::openat(dir, name, flags | SAFE, Mode::empty()) {
        Ok(fd) => Ok(Some(fs::File::from(fd))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => {
            // Systems say "this is a link" with different errors (ELOOP,
            // EMLINK, ENOTDIR), so look at what is there.
            let link = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode).is_symlink());
            if link {
                Err(CacheError::Link {
                    path: path.to_owned(),
                })
            } else {
                Err(io_at(path)(e.into()))
            }
        }
    }
}

/// Opens `name` in `dir` as `rule` says and checks it on its descriptor.
fn step(
    dir: &fs::File,
    name: &OsStr,
    rule: Rule,
    path: &Path,
) -> Result<Option<fs::File>, CacheError> {
    let flags = match rule {
        Rule::Above => ABOVE | OFlags::DIRECTORY,
        Rule::Cache => OFlags::RDONLY | OFlags::DIRECTORY,
        // Non-blocking, so that a FIFO put there cannot hold the open.
        Rule::File => OFlags::RDONLY | OFlags::NONBLOCK,
    };
    let Some(opened) = open_in(dir, name, flags, path)? else {
        return Ok(None);
    };
    check(rule, path, &opened.metadata().map_err(io_at(path))?)?;
    Ok(Some(opened))
}

/// The real directory that holds `dir` (every link above `dir` resolved),
/// and the names below it, down to `dir`'s own, that do not exist yet (the
/// last always `dir`'s own name, which is never resolved).
fn split(dir: &Path) -> Result<(PathBuf, Vec<OsString>), CacheError> {
    let unnamed = || {
        io_at(dir)(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a cache directory's path must end in a name",
        ))
    };
    let abs = std::path::absolute(dir).map_err(io_at(dir))?;
    let Some(Component::Normal(name)) = abs.components().next_back() else {
        return Err(unnamed());
    };
    let mut below = vec![name.to_owned()];
    let mut base = abs.parent().ok_or_else(unnamed)?;
    loop {
        match fs::canonicalize(base) {
            Ok(real) => {
                below.reverse();
                return Ok((real, below));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let Some(Component::Normal(name)) = base.components().next_back() else {
                    return Err(io_at(base)(e));
                };
                below.push(name.to_owned());
                base = base.parent().ok_or_else(unnamed)?;
            }
            Err(e) => return Err(io_at(base)(e)),
        }
    }
}

impl CacheDir {
    /// The cache directory at `path`, checked with every directory above
    /// it; `Ok(None)` when it does not exist.
    pub(crate) fn open(path: &Path) -> Result<Option<CacheDir>, CacheError> {
        CacheDir::reach(path, false)
    }

    /// The cache directory at `path`, made (for this user alone, as are
    /// any missing directories above it) if need be.
    pub(crate) fn make(path: &Path) -> Result<CacheDir, CacheError> {
        CacheDir::reach(path, true)?.ok_or_else(|| {
            io_at(path)(io::Error::new(
                io::ErrorKind::NotFound,
                "it was removed as it was made",
            ))
        })
    }

    fn reach(path: &Path, make: bool) -> Result<Option<CacheDir>, CacheError> {
        let (real, below) = split(path)?;
        let root = Path::new("/");
        let mut at = fs::File::from(
            rustix::fs::open(
                root,
                ABOVE | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io_at(root)(e.into()))?,
        );
        check(Rule::Above, root, &at.metadata().map_err(io_at(root))?)?;
        let mut shown = root.to_path_buf();
        let names = real.components().filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        });
        for name in names {
            shown.push(name);
            match step(&at, name, Rule::Above, &shown)? {
                Some(next) => at = next,
                None => return Ok(None),
            }
        }
        let last = below.len() - 1;
        for (i, name) in below.iter().enumerate() {
            shown.push(name);
            let rule = if i == last { Rule::Cache } else { Rule::Above };
            if make {
                match rustix::fs::mkdirat(&at, name, Mode::RWXU) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(io_at(&shown)(e.into())),
                }
            }
            match step(&at, name, rule, &shown)? {
                Some(next) => at = next,
                None => return Ok(None),
            }
        }
        Ok(Some(CacheDir {
            dir: at,
            path: path.to_owned(),
        }))
    }

    /// The cache directory's path, as it was asked for.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file `name`, opened without following a link and checked on its
    /// descriptor: what is read from it is what was checked, whatever is
    /// put at its name meanwhile. `Ok(None)` when there is none.
    pub(crate) fn open_file(&self, name: &str) -> Result<Option<fs::File>, CacheError> {
        step(
            &self.dir,
            OsStr::new(name),
            Rule::File,
            &self.path.join(name),
        )
    }

    /// Creates `name`, which must not exist (not even as a link), readable
    /// and writable by this user alone, and fills it.
    pub(crate) fn write_new(
        &self,
        name: &str,
        fill: impl FnOnce(&mut fs::File) -> io::Result<()>,
    ) -> io::Result<()> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | SAFE;
        let mut f = fs::File::from(rustix::fs::openat(
            &self.dir,
            name,
            flags,
            Mode::RUSR | Mode::WUSR,
        )?);
        fill(&mut f)?;
        f.flush()
    }

    /// Renames `from` to `to` within the directory, replacing `to`.
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.dir, from, &self.dir, to)?)
    }

    /// Removes the file `name`; a link is removed, never what it names.
    pub(crate) fn remove(&self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.dir, name, AtFlags::empty())?)
    }

    /// The names in the directory that end in `.{extension}`, each with
    /// when it was last written (read on the file, not through a link).
    pub(crate) fn files(&self, extension: &str) -> io::Result<Vec<(SystemTime, String)>> {
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(&self.dir)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if !name.ends_with(&format!(".{extension}")) {
                continue;
            }
            let flags = OFlags::RDONLY | OFlags::NONBLOCK | SAFE;
            let Ok(fd) = rustix::fs::openat(&self.dir, name, flags, Mode::empty()) else {
                continue;
            };
            if let Ok(written) = fs::File::from(fd).metadata().and_then(|m| m.modified()) {
                out.push((written, name.to_owned()));
            }
        }
        Ok(out)
    }
}
