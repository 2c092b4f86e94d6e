//! The servers of a kill test (`schedules_crash`, `webhooks_crash`): each
//! a `leasehold serve` on one database with the test's flags, killed with
//! SIGKILL and started again by the test, and the address of one that is
//! up for each call. It only starts, kills and names servers.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use super::{Served, serve};

pub struct Fleet {
    dir: PathBuf,
    db: PathBuf,
    /// `--tokens FILE` and the test's own flags.
    args: Vec<String>,
    servers: Mutex<Vec<Option<Served>>>,
    bases: Mutex<Vec<Option<String>>>,
}

impl Fleet {
    /// `servers` places for servers on `db`, none started.
    pub fn new(
        dir: &std::path::Path,
        db: &std::path::Path,
        tokens: &str,
        flags: &[&str],
        servers: usize,
    ) -> Fleet {
        let mut args = vec!["--tokens".to_owned(), tokens.to_owned()];
        args.extend(flags.iter().map(|f| (*f).to_owned()));
        Fleet {
            dir: dir.to_owned(),
            db: db.to_owned(),
            args,
            servers: Mutex::new((0..servers).map(|_| None).collect()),
            bases: Mutex::new(vec![None; servers]),
        }
    }

    pub fn start(&self, i: usize) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let s = serve(&self.dir, &self.db, &args);
        self.bases.lock().expect("bases")[i] = Some(s.base.clone());
        self.servers.lock().expect("servers")[i] = Some(s);
    }

    pub fn kill(&self, i: usize) {
        self.bases.lock().expect("bases")[i] = None;
        if let Some(mut s) = self.servers.lock().expect("servers")[i].take() {
            s.child.kill().expect("SIGKILL");
            s.child.wait().expect("reaped");
        }
    }

    /// A live server's address, chosen by `pick` among those up; waits
    /// while none is (a lone redb server being started again).
    pub fn base(&self, pick: usize) -> String {
        loop {
            let up: Vec<String> = self
                .bases
                .lock()
                .expect("bases")
                .iter()
                .flatten()
                .cloned()
                .collect();
            if !up.is_empty() {
                return up[pick % up.len()].clone();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
