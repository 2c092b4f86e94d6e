//! The cache trusts only what it opened, over real files: a link where the
//! cache's directory or file should be, a directory above the cache that
//! others may write or that another user owns, a file of another user, and
//! a file swapped for another between its check and its read are each
//! refused, and the component compiled instead.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use super::*;

/// The smallest component: the header alone. Compiles in no time.
const EMPTY: &[u8] = b"\0asm\x0d\x00\x01\x00";

fn engine(epochs: bool) -> wasmtime::Engine {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true).epoch_interruption(epochs);
    wasmtime::Engine::new(&config).expect("an engine")
}

/// Keeps `EMPTY` compiled by `compiler` in `dir` under the key `e` gives
/// it: for another engine, a whole file that wasmtime refuses.
fn kept_as(dir: &Path, e: &wasmtime::Engine, compiler: &wasmtime::Engine) -> [u8; 32] {
    let key = key(e, EMPTY);
    let c = Component::new(compiler, EMPTY).expect("compiles");
    store(dir, &key, &c).expect("kept");
    key
}

fn kept(dir: &Path, e: &wasmtime::Engine) -> [u8; 32] {
    kept_as(dir, e, e)
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A private directory `name` under `parent`.
fn private_dir(parent: &Path, name: &str) -> std::path::PathBuf {
    let d = parent.join(name);
    fs::create_dir(&d).expect("mkdir");
    chmod(&d, 0o700);
    d
}

/// Asserts a refusal whose words (with their sources) hold `why`.
#[track_caller]
fn refused<T: std::fmt::Debug>(r: Result<T, CacheError>, why: &str) {
    match r {
        Err(e) => {
            let text = chain(&e);
            assert!(text.contains(why), "refused, but for {text:?}, not {why:?}");
        }
        Ok(v) => panic!("trusted ({v:?}); it should be refused for {why:?}"),
    }
}

fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A cache file that is a link to a whole, private cache file elsewhere
/// is not followed: the cache opens its files without following links.
#[test]
fn a_symlinked_cache_file_is_refused() {
    let top = tempfile::tempdir().expect("temp dir");
    let e = engine(true);
    let elsewhere = private_dir(top.path(), "elsewhere");
    let k = kept(&elsewhere, &e);
    let cache = private_dir(top.path(), "cache");
    symlink(file(&elsewhere, &k), file(&cache, &k)).expect("symlink");
    refused(load(&e, &cache, &k), "symbolic link");
    let (_, from) = component(&e, EMPTY, Some(&cache)).expect("compiles");
    assert_eq!(from, CompiledFrom::Compiler);
    // The compilation replaced the link, not the file it pointed to.
    assert!(
        !fs::symlink_metadata(file(&cache, &k))
            .expect("kept")
            .is_symlink()
    );
    assert!(load(&e, &cache, &k).expect("loads").is_some());
}

/// A cache directory that is a link to a private directory holding a whole
/// cache file is neither read nor written through.
#[test]
fn a_symlinked_cache_directory_is_refused() {
    let top = tempfile::tempdir().expect("temp dir");
    let e = engine(true);
    let real = private_dir(top.path(), "real");
    let k = kept(&real, &e);
    let link = top.path().join("cache");
    symlink(&real, &link).expect("symlink");
    refused(load(&e, &link, &k), "symbolic link");
    let c = Component::new(&e, EMPTY).expect("compiles");
    refused(store(&link, &[7; 32], &c), "symbolic link");
    assert!(!file(&real, &[7; 32]).exists(), "written through the link");
    let (_, from) = component(&e, EMPTY, Some(&link)).expect("compiles");
    assert_eq!(from, CompiledFrom::Compiler);
}

/// A directory above the cache that others may write (group or world, not
/// sticky) lets them put another cache directory in the cache's place:
/// refused, for reading and writing alike. A sticky directory that root
/// owns (as `/tmp` is) is not: only an entry's owner may move it there.
#[test]
fn a_directory_above_the_cache_that_others_may_write_is_refused() {
    let top = tempfile::tempdir().expect("temp dir");
    let e = engine(true);
    let shared = private_dir(top.path(), "shared");
    let cache = private_dir(&shared, "cache");
    let k = kept(&cache, &e);
    let c = Component::new(&e, EMPTY).expect("compiles");
    for mode in [0o777, 0o770, 0o702] {
        chmod(&shared, mode);
        refused(load(&e, &cache, &k), "may be written by others");
        refused(store(&cache, &[7; 32], &c), "may be written by others");
        let (_, from) = component(&e, EMPTY, Some(&cache)).expect("compiles");
        assert_eq!(from, CompiledFrom::Compiler, "mode {mode:o}");
    }
    // Two levels up is checked as well as one.
    chmod(&shared, 0o755);
    chmod(top.path(), 0o777);
    refused(load(&e, &cache, &k), "may be written by others");
    chmod(top.path(), 0o700);
    assert!(load(&e, &cache, &k).expect("loads").is_some());
    assert!(
        !file(&cache, &[7; 32]).exists(),
        "written under a shared directory"
    );
    if running_as_root() {
        // Root owns `shared`: sticky and world-writable is allowed.
        chmod(&shared, 0o1777);
        assert!(load(&e, &cache, &k).expect("loads").is_some());
    }
}

/// A directory above the cache that another user owns, or a cache file
/// another user owns, could hold anyone's code: refused. (Making a file
/// another user's needs root; the tests run as root here.)
#[test]
fn a_directory_or_file_another_user_owns_is_refused() {
    if !running_as_root() {
        eprintln!("skipped: giving a file to another user needs root");
        return;
    }
    const NOBODY: u32 = 65534;
    let top = tempfile::tempdir().expect("temp dir");
    let e = engine(true);
    let theirs = private_dir(top.path(), "theirs");
    chmod(&theirs, 0o755);
    let cache = private_dir(&theirs, "cache");
    let k = kept(&cache, &e);
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).expect("chown");
    refused(load(&e, &cache, &k), "owned by another user");
    let c = Component::new(&e, EMPTY).expect("compiles");
    refused(store(&cache, &[7; 32], &c), "owned by another user");
    std::os::unix::fs::chown(&theirs, Some(0), Some(0)).expect("chown");
    assert!(load(&e, &cache, &k).expect("loads").is_some());
    std::os::unix::fs::chown(file(&cache, &k), Some(NOBODY), None).expect("chown");
    refused(load(&e, &cache, &k), "not this user's alone");
    std::os::unix::fs::chown(&cache, Some(NOBODY), None).expect("chown");
    std::os::unix::fs::chown(file(&cache, &k), Some(0), None).expect("chown");
    refused(load(&e, &cache, &k), "not this user's alone");
}

/// While the cache file is swapped, over and over, between a private one
/// and one anybody may write that holds another engine's compilation,
/// every load answers the private file's compilation or refuses the other
/// as not private: never wasmtime's refusal, which would mean bytes were
/// read from a file other than the one checked.
#[test]
fn a_file_swapped_while_it_is_loaded_is_never_read_unchecked() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let top = tempfile::tempdir().expect("temp dir");
    let (e, other) = (engine(true), engine(false));
    let cache = private_dir(top.path(), "cache");
    let good = private_dir(top.path(), "good");
    let bad = private_dir(top.path(), "bad");
    let k = kept(&good, &e);
    assert_eq!(kept_as(&bad, &e, &other), k);
    chmod(&file(&bad, &k), 0o666);
    let path = file(&cache, &k);
    // Loads of each file, enough that a check and a read apart are caught.
    const SEEN: u32 = 10_000;
    let stop = AtomicBool::new(false);
    let (mut loaded, mut not_private) = (0u32, 0u32);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Each swap is one rename, so the path always names a whole
            // file: the good one or the bad one.
            let mut turn = [(&good, "g"), (&bad, "b")].into_iter().cycle();
            while !stop.load(Ordering::Relaxed) {
                let Some((from, name)) = turn.next() else {
                    break;
                };
                let temp = cache.join(format!(".{name}.swap"));
                let _ = fs::remove_file(&temp);
                fs::hard_link(file(from, &k), &temp).expect("link");
                fs::rename(&temp, &path).expect("rename");
            }
        });
        let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let swapped = |loaded, not_private| loaded >= SEEN && not_private >= SEEN;
        while !swapped(loaded, not_private) && std::time::Instant::now() < until {
            match load(&e, &cache, &k) {
                Ok(Some(_)) => loaded += 1,
                Ok(None) => {}
                Err(CacheError::NotPrivate { .. }) => not_private += 1,
                Err(wrong) => {
                    stop.store(true, Ordering::Relaxed);
                    panic!(
                        "after {loaded} loads and {not_private} refusals, a load read what it had not checked: {}",
                        chain(&wrong)
                    );
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        loaded >= SEEN && not_private >= SEEN,
        "the swaps were not seen: {loaded} loads, {not_private} refusals"
    );
}

/// The check and the read are one open: a file opened and checked is read
/// from that descriptor, so a file put at its name after the check (here
/// one anybody may write, holding another engine's compilation, which
/// wasmtime would refuse) is not what is read; the next load opens the new
/// one, and refuses it.
#[test]
fn the_check_and_the_read_are_one_open() {
    let top = tempfile::tempdir().expect("temp dir");
    let (e, other) = (engine(true), engine(false));
    let cache = private_dir(top.path(), "cache");
    let bad = private_dir(top.path(), "bad");
    let k = kept(&cache, &e);
    assert_eq!(kept_as(&bad, &e, &other), k);
    chmod(&file(&bad, &k), 0o666);
    let dir = CacheDir::open(&cache).expect("opens").expect("is there");
    let checked = dir
        .open_file(&name(&k))
        .expect("checked")
        .expect("is there");
    fs::rename(file(&bad, &k), file(&cache, &k)).expect("swapped");
    let read = load_from(&e, checked, &file(&cache, &k), &k);
    assert!(read.is_ok(), "{:?}", read.err().map(|e| chain(&e)));
    refused(load(&e, &cache, &k), "not this user's alone");
}
