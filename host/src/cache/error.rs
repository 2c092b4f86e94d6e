//! Why the compile cache did not use a file, or could not keep one: the
//! cache's one error, which never reaches an engine's caller (the component
//! is compiled instead, and the error logged). It owns the words a log
//! line gives for each refusal; it must never decide what is trusted (the
//! `dir` module does).

use std::path::PathBuf;

/// Why a cache file was not used, or not written. Never an engine's error:
/// the component is compiled instead.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    /// The directory or a file could not be read, made or written.
    #[error("cannot use {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Others than this user may write the cache directory or the file, or
    /// they belong to another user: what is there could be anyone's code.
    #[error("{} is not this user's alone (owner {owner}, mode {mode:o}), so it is not trusted", path.display())]
    NotPrivate {
        path: PathBuf,
        owner: u32,
        mode: u32,
    },
    /// A directory above the cache may be written by others than root and
    /// this user, or another user owns it: they could put another cache
    /// directory in the cache's place.
    #[error("{}, above the cache, {why} (owner {owner}, mode {mode:o}): whoever may change it could put another cache in its place, so the cache is not trusted", path.display())]
    Above {
        path: PathBuf,
        why: &'static str,
        owner: u32,
        mode: u32,
    },
    /// The cache directory or a cache file is a symbolic link, which the
    /// cache never follows: its target is not where the cache was asked
    /// to be.
    #[error("{} is a symbolic link, which the cache does not follow", path.display())]
    Link { path: PathBuf },
    /// The cache directory is not a directory, or a cache file is not a
    /// regular file.
    #[error("{} is not a directory or a regular file as the cache expects", path.display())]
    NotRegular { path: PathBuf },
    /// The file is not one this cache wrote for this key, or it is not
    /// whole: a torn write, a damaged disk, a file put there by hand.
    #[error("{} is damaged or not a cache file for this component", path.display())]
    Damaged { path: PathBuf },
    /// wasmtime refused the verified file: written by a differently
    /// configured engine, say.
    #[error("wasmtime refused {}", path.display())]
    Refused {
        path: PathBuf,
        #[source]
        source: wasmtime::Error,
    },
    /// wasmtime could not serialize the compiled component.
    #[error("cannot serialize the compiled component")]
    Serialize(#[source] wasmtime::Error),
}
