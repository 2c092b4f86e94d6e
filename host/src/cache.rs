//! The compile cache: a compiled component kept in a directory on disk, so
//! that a process that starts again loads it instead of compiling the
//! component anew. It owns the files in that directory, their names and
//! their format. It must never decide what an engine runs: a file it cannot
//! vouch for is a miss and the component is compiled from its bytes, and a
//! cache that cannot be read or written costs time, never an engine. It
//! must never hand wasmtime bytes it has not verified.
//!
//! A file is named by a key that covers the component's bytes and
//! everything of the wasmtime engine a compilation depends on (its target,
//! compiler flags, tunables, features and wasmtime's version), so a build
//! of other rules, another engine configuration or another wasmtime looks
//! for another file. Its contents are a header (magic, the key again, the
//! SHA-256 of the rest) and what [`Component::serialize`] wrote. Files are
//! written to a temporary name and renamed, so a reader sees a whole file
//! or none; only the most recently written few are kept.
//!
//! What it reads must be this user's: the directory, every directory above
//! it and the file are checked on the descriptors they were opened by, and
//! the bytes are read from the file's descriptor (the rule is the `dir`
//! module's). Only where that can be done (unix) is there a cache; on
//! other platforms an engine asked for one compiles every time.

// Elsewhere than unix, nothing reads or writes a cache file.
#![cfg_attr(not(unix), allow(dead_code))]

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::{io::Read, io::Write, time::SystemTime};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

#[cfg(unix)]
mod dir;
mod error;

#[cfg(unix)]
use dir::CacheDir;
pub(crate) use error::CacheError;

/// What a cache file begins with; the last byte is the format's version.
const MAGIC: &[u8; 16] = b"leasehold-cwasm\x01";

/// The header: magic, key, digest of the payload.
const HEADER: usize = MAGIC.len() + 32 + 32;

/// How many cache files a directory keeps. Every build of other rules adds
/// one, and two versions of the rules may run side by side.
const KEEP: usize = 8;

/// The extension of a cache file.
const EXTENSION: &str = "cwasm";

/// How an engine's component came to be ready to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompiledFrom {
    /// Compiled from the component's bytes by this process: no cache was
    /// asked for, it held no usable file, or the file was refused.
    Compiler,
    /// Loaded from the compile cache, as an earlier compilation wrote it.
    Cache,
}

/// A digest that `Hash` implementations feed, so that a hash of wasmtime's
/// configuration is the same in every process (std's hashers promise no such
/// thing across builds).
struct Sha(Sha256);

impl Hasher for Sha {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        let mut first = [0; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first)
    }
}

/// The key of `bytes` compiled by `engine`.
pub(crate) fn key(engine: &wasmtime::Engine, bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha(Sha256::new());
    h.write(MAGIC);
    h.write(&Sha256::digest(bytes));
    engine.precompile_compatibility_hash().hash(&mut h);
    h.0.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The name of the file a key is kept in.
fn name(key: &[u8; 32]) -> String {
    format!("{}.{EXTENSION}", hex(key))
}

/// The file a key is kept in.
#[cfg(test)]
pub(crate) fn file(dir: &Path, key: &[u8; 32]) -> PathBuf {
    dir.join(name(key))
}

/// The directory the `leasehold` command keeps compiled components in:
/// `$XDG_CACHE_HOME/leasehold`, else `$HOME/.cache/leasehold`; `None` when
/// neither variable is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    let nonempty = |v: &str| std::env::var_os(v).filter(|p| !p.is_empty());
    nonempty("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|base| base.join("leasehold"))
}

/// The compiled component kept for `key` in `dir`, if there is a whole one
/// this engine accepts; `Ok(None)` when there is no file.
#[cfg(unix)]
pub(crate) fn load(
    engine: &wasmtime::Engine,
    dir: &Path,
    key: &[u8; 32],
) -> Result<Option<Component>, CacheError> {
    let Some(dir) = CacheDir::open(dir)? else {
        return Ok(None);
    };
    let name = name(key);
    match dir.open_file(&name)? {
        Some(f) => load_from(engine, f, &dir.path().join(name), key).map(Some),
        None => Ok(None),
    }
}

/// The compiled component in `f`, opened and checked as the cache file
/// of `key` at `path`: its bytes are read from `f` alone, so a file put at
/// `path` since it was opened is never what is read.
#[cfg(unix)]
fn load_from(
    engine: &wasmtime::Engine,
    mut f: std::fs::File,
    path: &Path,
    key: &[u8; 32],
) -> Result<Component, CacheError> {
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(|source| CacheError::Io {
        path: path.to_owned(),
        source,
    })?;
    let damaged = || CacheError::Damaged {
        path: path.to_owned(),
    };
    if bytes.len() < HEADER {
        return Err(damaged());
    }
    let (header, payload) = bytes.split_at(HEADER);
    let (magic, rest) = header.split_at(MAGIC.len());
    let (named, digest) = rest.split_at(32);
    if magic != MAGIC || named != key || digest != Sha256::digest(payload).as_slice() {
        return Err(damaged());
    }
    deserialize(engine, payload).map_err(|source| CacheError::Refused {
        path: path.to_owned(),
        source,
    })
}

/// The one unsafe step: wasmtime maps the bytes as code.
#[allow(unsafe_code)]
fn deserialize(engine: &wasmtime::Engine, payload: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime requires bytes that `Component::serialize` produced;
    // it checks itself that they were produced for a compatible engine (and
    // refuses them otherwise), but not that they are intact. These are:
    // `load` only reaches here with bytes read from the descriptor of a
    // regular file that this user owns and alone may write, opened without
    // following a link in a directory that this user owns and alone may
    // write, every directory above which only root or this user may change
    // (each checked on the descriptor it was reached by); `store` wrote it
    // (its header names this key), and its SHA-256 digest, written in the
    // same file, matches the bytes read. So they are the whole of what
    // `serialize` wrote, never a torn write, a damaged file or another
    // user's.
    unsafe { Component::deserialize(engine, payload) }
}

/// Keeps `component`, compiled by `engine`, under `key` in `dir`, making
/// the directory (for this user alone) if need be, and removes the oldest
/// files beyond the few the directory keeps. Writes only into a directory
/// [`load`] would trust, to a new file of its own that it renames into
/// place.
#[cfg(unix)]
pub(crate) fn store(dir: &Path, key: &[u8; 32], component: &Component) -> Result<(), CacheError> {
    let payload = component.serialize().map_err(CacheError::Serialize)?;
    let dir = CacheDir::make(dir)?;
    let name = name(key);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    // A name no other writer uses: several processes may compile at once,
    // and each renames a whole file of its own into place.
    let temp = format!(".{}.{}.{nanos}.tmp", hex(&key[..8]), std::process::id());
    let written = dir
        .write_new(&temp, |f| {
            f.write_all(MAGIC)?;
            f.write_all(key)?;
            f.write_all(&Sha256::digest(&payload))?;
            f.write_all(&payload)
        })
        .and_then(|()| dir.rename(&temp, &name));
    if let Err(source) = written {
        // Nothing to do if the temporary file cannot go either.
        let _ = dir.remove(&temp);
        return Err(CacheError::Io {
            path: dir.path().join(name),
            source,
        });
    }
    prune(&dir);
    Ok(())
}

/// Removes all but the [`KEEP`] most recently written cache files. Best
/// effort: another process may be pruning too.
#[cfg(unix)]
fn prune(dir: &CacheDir) {
    let Ok(mut files) = dir.files(EXTENSION) else {
        return;
    };
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (_, old) in files.into_iter().skip(KEEP) {
        let _ = dir.remove(&old);
    }
}

/// An error and its sources, for a log line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// `bytes` compiled for `engine`: loaded from `dir` when it holds this
/// compilation, else compiled and kept there for the next process. Fails
/// only as compiling fails; a cache that cannot be used is logged and
/// compiled around.
pub(crate) fn component(
    engine: &wasmtime::Engine,
    bytes: &[u8],
    dir: Option<&Path>,
) -> wasmtime::Result<(Component, CompiledFrom)> {
    let Some(dir) = dir else {
        return Ok((Component::new(engine, bytes)?, CompiledFrom::Compiler));
    };
    #[cfg(not(unix))]
    {
        tracing::warn!(
            dir = %dir.display(),
            "compiling the component: there is no compile cache on this platform, where it cannot check who may change a file"
        );
        Ok((Component::new(engine, bytes)?, CompiledFrom::Compiler))
    }
    #[cfg(unix)]
    cached(engine, bytes, dir)
}

/// [`component`], with the cache in `dir`.
#[cfg(unix)]
fn cached(
    engine: &wasmtime::Engine,
    bytes: &[u8],
    dir: &Path,
) -> wasmtime::Result<(Component, CompiledFrom)> {
    let key = key(engine, bytes);
    match load(engine, dir, &key) {
        Ok(Some(c)) => {
            tracing::debug!(dir = %dir.display(), "loaded the compiled component from the cache");
            return Ok((c, CompiledFrom::Cache));
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(
            error = %chain(&e),
            "compiling the component: its cached compilation was not used"
        ),
    }
    let c = Component::new(engine, bytes)?;
    if let Err(e) = store(dir, &key, &c) {
        tracing::warn!(
            error = %chain(&e),
            "the compiled component could not be kept in the cache"
        );
    }
    Ok((c, CompiledFrom::Compiler))
}

#[cfg(all(test, unix))]
mod trust_tests;

#[cfg(all(test, unix))]
mod tests {
    use std::fs;

    use super::*;

    /// The smallest component: the header alone. Compiles in no time.
    const EMPTY: &[u8] = b"\0asm\x0d\x00\x01\x00";

    fn engine(epochs: bool) -> wasmtime::Engine {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).epoch_interruption(epochs);
        wasmtime::Engine::new(&config).expect("an engine")
    }

    fn kept(dir: &Path, engine: &wasmtime::Engine) -> [u8; 32] {
        let key = key(engine, EMPTY);
        let c = Component::new(engine, EMPTY).expect("compiles");
        store(dir, &key, &c).expect("kept");
        key
    }

    #[test]
    fn a_kept_compilation_loads_for_its_own_key_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let dir = dir.path().join("made");
        let e = engine(true);
        assert!(load(&e, &dir, &key(&e, EMPTY)).expect("no file").is_none());
        let k = kept(&dir, &e);
        assert!(load(&e, &dir, &k).expect("loads").is_some());
        let other = key(&e, b"\0asm\x0d\x00\x01\x00\0\x01x");
        assert_ne!(other, k, "other bytes, another key");
        assert!(load(&e, &dir, &other).expect("no file").is_none());
        assert_ne!(key(&engine(false), EMPTY), k, "another engine, another key");
    }

    #[test]
    fn a_damaged_file_is_refused_before_wasmtime_sees_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let e = engine(true);
        let k = kept(dir.path(), &e);
        let path = file(dir.path(), &k);
        let whole = fs::read(&path).expect("read");
        let mut flipped_payload = whole.clone();
        *flipped_payload.last_mut().expect("bytes") ^= 1;
        let mut flipped_key = whole.clone();
        flipped_key[MAGIC.len()] ^= 1;
        for damaged in [
            whole[..whole.len() - 1].to_vec(),
            whole[..HEADER - 1].to_vec(),
            flipped_payload,
            flipped_key,
            Vec::new(),
        ] {
            fs::write(&path, damaged).expect("write");
            let r = load(&e, dir.path(), &k);
            assert!(matches!(r, Err(CacheError::Damaged { .. })), "{r:?}");
        }
    }

    /// A whole file, with the right key, that another engine's
    /// configuration compiled (as if a key were ever shared): wasmtime's own
    /// check refuses it, so no engine runs code compiled for another.
    #[test]
    fn another_engines_compilation_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (ours, theirs) = (engine(true), engine(false));
        let k = key(&ours, EMPTY);
        let foreign = Component::new(&theirs, EMPTY).expect("compiles");
        store(dir.path(), &k, &foreign).expect("kept");
        let r = load(&ours, dir.path(), &k);
        assert!(matches!(r, Err(CacheError::Refused { .. })), "{r:?}");
    }

    #[cfg(unix)]
    #[test]
    fn files_others_may_write_are_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let e = engine(true);
        let k = kept(dir.path(), &e);
        let path = file(dir.path(), &k);
        let mode = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m));
        assert!(load(&e, dir.path(), &k).expect("loads").is_some());
        mode(&path, 0o620).expect("chmod");
        let r = load(&e, dir.path(), &k);
        assert!(matches!(r, Err(CacheError::NotPrivate { .. })), "{r:?}");
        mode(&path, 0o600).expect("chmod");
        mode(dir.path(), 0o777).expect("chmod");
        let r = load(&e, dir.path(), &k);
        assert!(matches!(r, Err(CacheError::NotPrivate { .. })), "{r:?}");
        let r = store(
            dir.path(),
            &k,
            &Component::new(&e, EMPTY).expect("compiles"),
        );
        assert!(matches!(r, Err(CacheError::NotPrivate { .. })), "{r:?}");
    }

    #[test]
    fn only_the_newest_files_are_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let e = engine(true);
        let c = Component::new(&e, EMPTY).expect("compiles");
        for n in 0..KEEP + 3 {
            store(dir.path(), &[n as u8; 32], &c).expect("kept");
        }
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("a dir")
            .map(|e| e.expect("an entry").file_name())
            .collect();
        assert_eq!(names.len(), KEEP, "{names:?}");
        assert!(
            names
                .iter()
                .all(|n| n.to_string_lossy().ends_with(".cwasm")),
            "no temporary file stays: {names:?}"
        );
    }

    #[test]
    fn a_refused_file_is_compiled_around_and_replaced() {
        let dir = tempfile::tempdir().expect("temp dir");
        let e = engine(true);
        let (_, from) = component(&e, EMPTY, Some(dir.path())).expect("compiles");
        assert_eq!(from, CompiledFrom::Compiler);
        let (_, from) = component(&e, EMPTY, Some(dir.path())).expect("loads");
        assert_eq!(from, CompiledFrom::Cache);
        let path = file(dir.path(), &key(&e, EMPTY));
        fs::write(&path, b"leasehold-cwasm\x01 but not much else").expect("write");
        let (_, from) = component(&e, EMPTY, Some(dir.path())).expect("compiles");
        assert_eq!(from, CompiledFrom::Compiler);
        let (_, from) = component(&e, EMPTY, Some(dir.path())).expect("loads");
        assert_eq!(from, CompiledFrom::Cache, "the refused file was replaced");
        // A directory that cannot be made is compiled around too.
        let blocked = dir.path().join("a-file");
        fs::write(&blocked, b"").expect("write");
        let (_, from) = component(&e, EMPTY, Some(&blocked.join("cache"))).expect("compiles");
        assert_eq!(from, CompiledFrom::Compiler);
    }
}
