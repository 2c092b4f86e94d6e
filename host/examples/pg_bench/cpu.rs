//! CPU time of the benchmark's worker processes and of the PostgreSQL
//! server's processes, read from `/proc` by the parent around a measurement
//! window (utime + stime, in clock ticks). The server's processes are the
//! postmaster's children: those whose client port is a socket of a worker
//! process serve the workers (every connection a worker opens, its notifier's
//! included); the other client backends are someone else's; the rest
//! (autovacuum, checkpointer, walwriter, background writer, and the
//! postmaster itself, with the children it reaped during the window) are
//! the server's own. It only reads `/proc`; on a server that is not on this
//! machine or not readable it answers nothing.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::Result;

/// Clock ticks per second (`getconf CLK_TCK`; 100 where it cannot say).
fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The fields of `/proc/PID/stat` after the command name: `[0]` is the
/// state, `[1]` the parent, `[11]`/`[12]` utime/stime, `[13]`/`[14]` the
/// reaped children's.
fn stat(pid: u32) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(
        rest.split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

fn own_ticks(pid: u32) -> Option<u64> {
    let s = stat(pid)?;
    Some(s.get(11)? + s.get(12)?)
}

/// The PostgreSQL server on this machine behind a URL.
pub struct Server {
    postmaster: u32,
}

impl Server {
    /// Finds the postmaster as the parent of the backend serving a
    /// connection of its own; `None` when that process is not readable here.
    pub fn find(url: &str) -> Option<Server> {
        let pid = crate::query_i64(url, "SELECT pg_backend_pid()::bigint").ok()? as u32;
        let postmaster = *stat(pid)?.get(1)? as u32;
        let cmd = std::fs::read(format!("/proc/{postmaster}/cmdline")).ok()?;
        String::from_utf8_lossy(&cmd)
            .contains("postgres")
            .then_some(Server { postmaster })
    }

    fn children(&self) -> HashMap<u32, u64> {
        let mut out = HashMap::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return out;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some(s) = stat(pid)
                && s.get(1).copied() == Some(u64::from(self.postmaster))
            {
                out.insert(pid, s[11] + s[12]);
            }
        }
        out
    }
}

/// CPU ticks at one instant.
pub struct Sample {
    workers: HashMap<u32, u64>,
    children: HashMap<u32, u64>,
    /// The postmaster's own ticks, and its reaped children's.
    postmaster: (u64, u64),
}

pub fn sample(server: Option<&Server>, workers: &[u32]) -> Sample {
    let workers = workers
        .iter()
        .map(|&p| (p, own_ticks(p).unwrap_or(0)))
        .collect();
    let (children, postmaster) = match server {
        Some(s) => {
            let st = stat(s.postmaster).unwrap_or_default();
            let at = |i: usize| st.get(i).copied().unwrap_or(0);
            (s.children(), (at(11) + at(12), at(13) + at(14)))
        }
        None => (HashMap::new(), (0, 0)),
    };
    Sample {
        workers,
        children,
        postmaster,
    }
}

/// CPU seconds spent in a window, by whom.
#[derive(Clone, Copy, Default, Debug)]
pub struct Split {
    pub workers: f64,
    /// The server processes serving the workers' connections.
    pub backends: f64,
    /// The server's own processes: autovacuum, checkpointer, walwriter, …
    pub other: f64,
    /// Client backends serving someone else (nothing on a server of the
    /// benchmark's own).
    pub foreign: f64,
}

/// The local TCP ports of `pid`'s sockets.
fn ports(pid: u32) -> HashSet<u16> {
    let mut inodes = HashSet::new();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path())
                && let Some(inode) = target
                    .to_str()
                    .and_then(|t| t.strip_prefix("socket:["))
                    .and_then(|t| t.strip_suffix(']'))
            {
                inodes.insert(inode.to_owned());
            }
        }
    }
    let mut out = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9
                && inodes.contains(f[9])
                && let Some(port) = f[1].rsplit(':').next()
                && let Ok(port) = u16::from_str_radix(port, 16)
            {
                out.insert(port);
            }
        }
    }
    out
}

/// The client port a backend's process title names (`… 127.0.0.1(PORT)
/// state`), if it is a client backend.
fn client_port(pid: u32) -> Option<u16> {
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let title = String::from_utf8_lossy(&cmd);
    let open = title.find('(')?;
    let close = open + title[open..].find(')')?;
    title[open + 1..close].parse().ok()
}

/// What `before` to `after` cost, in CPU seconds, and the pids of the
/// server processes serving `workers` (classified now, while the workers'
/// connections are open).
pub fn split(before: &Sample, after: &Sample, workers: &[u32]) -> (Split, Vec<u32>) {
    let hz = ticks_per_second();
    let delta = |b: Option<&u64>, a: u64| a.saturating_sub(b.copied().unwrap_or(0));
    let mut s = Split::default();
    for (pid, &a) in &after.workers {
        s.workers += delta(before.workers.get(pid), a) as f64;
    }
    let mine: HashSet<u16> = workers.iter().flat_map(|&p| ports(p)).collect();
    let mut serving = Vec::new();
    for (&pid, &a) in &after.children {
        // A process new in the window counts from zero.
        let d = delta(before.children.get(&pid), a) as f64;
        match client_port(pid) {
            Some(port) if mine.contains(&port) => {
                s.backends += d;
                serving.push(pid);
            }
            Some(_) => s.foreign += d,
            None => s.other += d,
        }
    }
    s.other += (after.postmaster.0.saturating_sub(before.postmaster.0)
        + after.postmaster.1.saturating_sub(before.postmaster.1)) as f64;
    s.workers /= hz;
    s.backends /= hz;
    s.other /= hz;
    s.foreign /= hz;
    (s, serving)
}

/// Waits (at most `bound`) until the processes `pids` are gone, so that what
/// they count on exit (their statistics) is in.
pub fn wait_gone(pids: &[u32], bound: Duration) -> Result<()> {
    let start = Instant::now();
    while pids
        .iter()
        .any(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
    {
        if start.elapsed() > bound {
            return Err("server processes outlived their clients".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
