//! Bulk jobs through the real component on the real store (redb, or
//! PostgreSQL with `LEASEHOLD_TEST_BACKEND=postgres`): a job counts its set,
//! changes each task of it once through the task verb its action names,
//! with the task's history naming the job, skips what moved, records what
//! a verb refused, and leaves the store consistent; bad input is refused
//! as the contract says; and the jobs duty, added to a sweeper, runs a job
//! to its end.

use std::time::{Duration, Instant};

use leasehold_host::{
    Error, JobAction, JobAssign, JobState, Priority, StepJobs, StoreError, Sweeper, SweeperOptions,
    TaskChanges, TaskFilter, TaskState, Tenant, standard_duties,
};
use leasehold_tests::*;

fn open_only() -> TaskFilter {
    TaskFilter {
        states: vec![TaskState::Open],
        ..TaskFilter::default()
    }
}

/// Steps job `id` until it has no work left.
fn run(t: &Tenant, id: &str) -> leasehold_host::Job {
    for _ in 0..10_000 {
        let job = t.step_job(id).expect("step-job");
        if !matches!(job.state, JobState::Counting | JobState::Running) {
            return job;
        }
    }
    panic!("job {id} does not end");
}

fn by_job(t: &Tenant, task: &str, job: &str) -> usize {
    t.history(task, None, 1000)
        .expect("history")
        .iter()
        .filter(|e| e.job.as_deref() == Some(job))
        .count()
}

#[test]
fn a_job_changes_each_task_of_its_set_once_and_its_history_names_it() {
    let (t, _db) = temp_tenant();
    for i in 0..40 {
        t.open(&task(&format!("t{i:02}"), 10 + i).roles(&["clerk"]))
            .expect("open");
    }
    for i in [3, 17] {
        t.claim(&format!("t{i:02}"), "bob", &["clerk"], None)
            .expect("claim");
    }
    let started = t
        .start_job(
            "raise",
            &open_only(),
            &JobAction::Update(TaskChanges {
                priority: Some(Priority::Urgent),
                ..TaskChanges::default()
            }),
            Some("mgr"),
            1_000,
        )
        .expect("start-job");
    assert_eq!((started.state, started.total), (JobState::Counting, 0));
    assert_eq!(t.runnable_jobs(10).expect("runnable"), ["raise"]);
    // Counted; then t05 is claimed before its turn: skipped.
    assert_eq!(t.step_job("raise").expect("step").state, JobState::Running);
    t.claim("t05", "bob", &["clerk"], None).expect("claim");
    let job = run(&t, "raise");
    assert_eq!(
        (job.state, job.total, job.done, job.skipped, job.failed),
        (JobState::Done, 38, 37, 1, 0)
    );
    assert_eq!(job.last_skipped[0].id, "t05");
    for i in 0..40 {
        let id = format!("t{i:02}");
        let changed = usize::from(![3, 5, 17].contains(&i));
        assert_eq!(by_job(&t, &id, "raise"), changed, "{id}");
        let urgent = t.get(&id).expect("get").expect("there").priority == Priority::Urgent;
        assert_eq!(urgent, changed == 1, "{id}");
    }
    assert_eq!(t.get_job("raise").expect("get-job"), Some(job.clone()));
    assert_eq!(t.list_jobs(10, None).expect("list-jobs"), [job]);
    assert!(t.runnable_jobs(10).expect("runnable").is_empty());
    assert_consistent(&t);
}

#[test]
fn a_refusal_is_a_failure_and_cancel_stops_a_job() {
    let (t, _db) = temp_tenant();
    t.open(&task("a", 10).roles(&["clerk"])).expect("open");
    t.open(&task("b", 11).roles(&["clerk"]).excluding(&["carol"]))
        .expect("open");
    t.open(&task("c", 12).roles(&["clerk"])).expect("open");
    let assign = JobAction::Assign(JobAssign {
        to: "carol".into(),
        roles: vec!["clerk".into()],
        override_roles: false,
    });
    t.start_job("give", &open_only(), &assign, None, 1_000)
        .expect("start-job");
    let job = run(&t, "give");
    assert_eq!((job.done, job.failed), (2, 1));
    assert_eq!(job.last_failures[0].id, "b");
    assert!(job.last_failures[0].reason.contains("excluded"), "{job:?}");
    assert_eq!(by_job(&t, "b", "give"), 0);
    // Cancelled after its count: it changes nothing more.
    t.start_job(
        "back",
        &TaskFilter::default(),
        &JobAction::Release,
        None,
        1_000,
    )
    .expect("start-job");
    t.step_job("back").expect("count");
    let cancelled = t.cancel_job("back").expect("cancel-job");
    assert_eq!((cancelled.state, cancelled.done), (JobState::Cancelled, 0));
    assert_eq!(run(&t, "back").done, 0);
    assert_eq!(
        t.get("a").expect("get").expect("there").assignee.as_deref(),
        Some("carol")
    );
    assert!(t.runnable_jobs(10).expect("runnable").is_empty());
    assert_consistent(&t);
}

#[test]
fn bad_input_is_refused_as_the_contract_says() {
    let (t, _db) = temp_tenant();
    t.start_job("j", &TaskFilter::default(), &JobAction::Escalate, None, 5)
        .expect("start-job");
    for (id, action) in [
        ("", JobAction::Escalate),
        ("j", JobAction::Escalate),
        ("k", JobAction::Update(TaskChanges::default())),
    ] {
        match t.start_job(id, &TaskFilter::default(), &action, None, 5) {
            Err(Error::Store(StoreError::Invalid(_))) => {}
            other => panic!("start-job {id:?} answered {other:?}"),
        }
    }
    assert!(matches!(
        t.step_job("nope"),
        Err(Error::Store(StoreError::NotFound(_)))
    ));
    assert_eq!(t.get_job("nope").expect("get-job"), None);
    // A filter matching nothing: a job of nothing, done after its count.
    let job = run(&t, "j");
    assert_eq!((job.state, job.total), (JobState::Done, 0));
    assert_consistent(&t);
}

#[test]
fn the_jobs_duty_steps_a_job_to_its_end_with_no_call_from_anyone() {
    let db = TestDb::new();
    let engine = db.engine();
    let t = engine.tenant("swept").expect("tenant");
    for i in 0..30 {
        t.open(&task(&format!("t{i:02}"), 10 + i)).expect("open");
    }
    let options = SweeperOptions {
        calls_per_turn: 4,
        ..SweeperOptions::default()
    };
    let mut duties = standard_duties(&options);
    duties.push(Box::new(StepJobs::default()));
    let sweeper =
        Sweeper::start_with(&engine, Vec::<String>::new(), options, duties).expect("sweeper");
    t.start_job("esc", &open_only(), &JobAction::Escalate, None, 1_000)
        .expect("start-job");
    let deadline = Instant::now() + Duration::from_secs(60);
    while t.get_job("esc").expect("get-job").expect("there").state != JobState::Done {
        assert!(Instant::now() < deadline, "the job did not end in a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A count, then a step per task.
    assert_eq!(sweeper.counted("job-steps"), 31);
    assert_eq!(sweeper.stats().errors, 0);
    drop(sweeper);
    for i in 0..30 {
        let id = format!("t{i:02}");
        assert_eq!(by_job(&t, &id, "esc"), 1, "{id}");
    }
    assert!(t.runnable_jobs(10).expect("runnable").is_empty());
    assert_consistent(&t);
}
