//! Shared helpers for the integration tests: fresh engines on temp redb files
//! and task and timer builders with sensible defaults.

use leasehold_host::{Engine, OnExpiry, Priority, Task, TaskState, Tenant, Timer, Phase};

/// An engine on a fresh redb file that lives as long as the returned guard.
pub fn temp_engine() -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = Engine::open(dir.path().join("leasehold.redb")).expect("engine opens");
    (engine, dir)
}

/// A tenant of a fresh engine on a temp file.
pub fn temp_tenant() -> (Tenant, tempfile::TempDir) {
    let (engine, dir) = temp_engine();
    (engine.tenant("acme").expect("valid tenant"), dir)
}

/// An open task with no roles, no due date, created at `created_at`.
pub fn task(id: &str, created_at: i64) -> Task {
    Task {
        id: id.to_owned(),
        run: "run-1".to_owned(),
        case: None,
        kind: "approve".to_owned(),
        justification: r#"{"why":"test"}"#.to_owned(),
        candidate_roles: Vec::new(),
        assignee: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at,
        due_at: None,
    }
}

/// Builder-style tweaks for tests.
pub trait TaskExt {
    fn roles(self, roles: &[&str]) -> Self;
    fn excluding(self, actors: &[&str]) -> Self;
    fn escalating_to(self, roles: &[&str]) -> Self;
    fn priority(self, p: Priority) -> Self;
    fn due(self, at: i64) -> Self;
    fn in_case(self, case: &str) -> Self;
    fn in_run(self, run: &str) -> Self;
}

fn owned(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

impl TaskExt for Task {
    fn roles(mut self, roles: &[&str]) -> Self {
        self.candidate_roles = owned(roles);
        self
    }
    fn excluding(mut self, actors: &[&str]) -> Self {
        self.excluded_actors = owned(actors);
        self
    }
    fn escalating_to(mut self, roles: &[&str]) -> Self {
        self.escalate_to = owned(roles);
        self
    }
    fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }
    fn due(mut self, at: i64) -> Self {
        self.due_at = Some(at);
        self
    }
    fn in_case(mut self, case: &str) -> Self {
        self.case = Some(case.to_owned());
        self
    }
    fn in_run(mut self, run: &str) -> Self {
        self.run = run.to_owned();
        self
    }
}

/// A forward timer of `run` / `effect` firing at `fire_at`.
pub fn timer(run: &str, effect: &str, fire_at: i64) -> Timer {
    Timer {
        run: run.to_owned(),
        case: None,
        effect: effect.to_owned(),
        step: 1,
        phase: Phase::Forward,
        fire_at,
    }
}
