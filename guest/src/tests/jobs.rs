//! Bulk jobs: the input rules, a set frozen at the start, counting in
//! chunks, each task changed once through its verb with its history naming
//! the job (however the steps are interrupted), skips and failures with
//! their reasons, cancelling, and what `runnable-jobs` lists.

use super::*;
use crate::changes;
use crate::jobs::{self, Job, JobAction, JobAssign, JobState};
use crate::model::{Guard, TaskChanges};
use crate::search::TaskFilter;
use crate::tasks;

fn open_state() -> TaskFilter {
    TaskFilter {
        states: vec![TaskState::Open],
        ..TaskFilter::default()
    }
}

/// `n` open tasks `t00000`…, created at 1000 + i, offered to role `a`.
fn store_of(n: u32) -> MemKv {
    let mut kv = MemKv::new();
    for i in 0..n {
        open(
            &mut kv,
            task(&format!("t{i:05}"))
                .roles(&["a"])
                .created(1_000 + i64::from(i)),
        );
    }
    kv
}

fn start(kv: &mut MemKv, id: &str, filter: TaskFilter, action: JobAction) -> Job {
    kv.call(|kv| jobs::start(kv, id, &filter, &action, Some("mgr"), 1_000_000))
        .expect("starts")
}

fn step(kv: &mut MemKv, id: &str) -> Job {
    kv.call(|kv| jobs::step(kv, id)).expect("steps")
}

/// Steps the job until it has no work left; answers it and the steps taken.
fn run(kv: &mut MemKv, id: &str) -> (Job, u32) {
    let mut steps = 0;
    loop {
        let job = step(kv, id);
        steps += 1;
        if !matches!(job.state, JobState::Counting | JobState::Running) {
            return (job, steps);
        }
        assert!(steps < 100_000, "the job ends");
    }
}

/// How many of the task's history entries name `job`.
fn changes_by(kv: &mut MemKv, task: &str, job: &str) -> usize {
    changes::history(kv, task, None, 1000)
        .expect("history")
        .iter()
        .filter(|e| e.job.as_deref() == Some(job))
        .count()
}

#[test]
fn bad_input_is_refused_naming_the_field_and_writes_nothing() {
    let mut kv = store_of(1);
    start(&mut kv, "taken", open_state(), JobAction::Escalate);
    let long = "x".repeat(257);
    let cases: Vec<(&str, TaskFilter, JobAction, Option<&str>, &str)> = vec![
        ("", open_state(), JobAction::Escalate, None, "id is empty"),
        (&long, open_state(), JobAction::Escalate, None, "id is 257"),
        (
            "taken",
            open_state(),
            JobAction::Escalate,
            None,
            "id: a job",
        ),
        (
            "j",
            TaskFilter {
                kinds: (0..33).map(|i| format!("k{i}")).collect(),
                ..TaskFilter::default()
            },
            JobAction::Escalate,
            None,
            "filter.kinds",
        ),
        (
            "j",
            TaskFilter {
                created_after: Some(10),
                created_before: Some(5),
                ..TaskFilter::default()
            },
            JobAction::Escalate,
            None,
            "filter.created-after",
        ),
        (
            "j",
            open_state(),
            JobAction::Assign(JobAssign {
                to: String::new(),
                roles: vec![],
                override_roles: false,
            }),
            None,
            "action.assign.to",
        ),
        (
            "j",
            open_state(),
            JobAction::Update(TaskChanges::default()),
            None,
            "changes name no field",
        ),
        (
            "j",
            open_state(),
            JobAction::Escalate,
            Some(""),
            "by is empty",
        ),
    ];
    for (id, filter, action, by, says) in cases {
        let e = fails_cleanly(&mut kv, |kv| {
            jobs::start(kv, id, &filter, &action, by, 1_000_000)
        });
        let why = invalid_reason(e);
        assert!(why.contains(says), "{why:?} should say {says:?}");
    }
    let e = fails_cleanly(&mut kv, |kv| jobs::step(kv, "nope"));
    assert_eq!(e, StoreError::NotFound("nope".into()));
    let e = fails_cleanly(&mut kv, |kv| jobs::cancel(kv, "nope"));
    assert_eq!(e, StoreError::NotFound("nope".into()));
    assert_eq!(jobs::get(&mut kv, "nope"), Ok(None));
}

#[test]
fn a_filter_matching_nothing_is_a_job_of_nothing_done_at_once() {
    let mut kv = store_of(3);
    let job = start(
        &mut kv,
        "j",
        TaskFilter {
            run: Some("no-such-run".into()),
            ..TaskFilter::default()
        },
        JobAction::Withdraw,
    );
    assert_eq!(job.state, JobState::Counting);
    assert_eq!(jobs::runnable(&mut kv, 10), Ok(vec!["j".to_owned()]));
    let (job, steps) = run(&mut kv, "j");
    assert_eq!(
        (job.state, job.total, job.done, steps),
        (JobState::Done, 0, 0, 1)
    );
    assert_eq!(jobs::runnable(&mut kv, 10), Ok(vec![]));
    // A range wholly after the start holds no task of the job at all.
    let late = start(
        &mut kv,
        "late",
        TaskFilter {
            created_after: Some(2_000_000),
            ..TaskFilter::default()
        },
        JobAction::Withdraw,
    );
    assert_eq!((late.state, late.total), (JobState::Done, 0));
    assert_eq!(jobs::runnable(&mut kv, 10), Ok(vec![]));
    // A finished job answers as it stands, and keeps its id.
    assert_eq!(step(&mut kv, "j"), job);
    assert_healthy(&mut kv);
}

#[test]
fn a_job_changes_each_task_of_its_set_once_through_its_verb() {
    let n = jobs::CHUNK * 2 + 10;
    let mut kv = store_of(n);
    // Not the job's: another state, and one created after the start.
    tasks::claim(&mut kv, "t00003", "bob", &names(&["a"]), None, None).expect("claims");
    open(&mut kv, task("later").roles(&["a"]).created(2_000_000));
    start(&mut kv, "esc", open_state(), JobAction::Escalate);
    let (job, steps) = run(&mut kv, "esc");
    let matching = u64::from(n) - 1;
    assert_eq!(job.state, JobState::Done);
    assert_eq!(
        (job.total, job.done, job.skipped, job.failed),
        (matching, matching, 0, 0)
    );
    // Three counting stretches (two full chunks and a last one), then a
    // step per task.
    assert_eq!(u64::from(steps), 3 + matching);
    for i in 0..n {
        let id = format!("t{i:05}");
        let (state, by_job) = (stored(&mut kv, &id).state, changes_by(&mut kv, &id, "esc"));
        if i == 3 {
            assert_eq!((state, by_job), (TaskState::Claimed, 0));
        } else {
            assert_eq!((state, by_job), (TaskState::Escalated, 1), "{id}");
        }
    }
    assert_eq!(stored(&mut kv, "later").state, TaskState::Open);
    assert_eq!(jobs::get(&mut kv, "esc"), Ok(Some(job)));
    assert_healthy(&mut kv);
}

#[test]
fn interrupted_at_any_step_a_job_changes_every_task_exactly_once() {
    let n = jobs::CHUNK + 20;
    let mut kv = store_of(n);
    start(
        &mut kv,
        "up",
        open_state(),
        JobAction::Update(TaskChanges {
            priority: Some(Priority::High),
            ..TaskChanges::default()
        }),
    );
    // The store as it stood before every step.
    let mut snapshots = vec![kv.clone()];
    loop {
        let job = step(&mut kv, "up");
        snapshots.push(kv.clone());
        if job.state == JobState::Done {
            break;
        }
    }
    let last = snapshots.len() - 1;
    // Resume from every snapshot near a chunk's edge and from a spread of
    // the others: a crash loses at most the step in flight, which the
    // resumed job takes again.
    for (at, snapshot) in snapshots.into_iter().enumerate() {
        let near_edge = at < 5 || (at + 5 > last) || (250..270).contains(&at);
        if !near_edge && at % 17 != 0 {
            continue;
        }
        let mut resumed = snapshot;
        let (job, _) = run(&mut resumed, "up");
        let all = u64::from(n);
        assert_eq!(
            (job.total, job.done, job.skipped, job.failed),
            (all, all, 0, 0),
            "from {at}"
        );
        for i in 0..n {
            let id = format!("t{i:05}");
            assert_eq!(changes_by(&mut resumed, &id, "up"), 1, "{id} from {at}");
            assert_eq!(stored(&mut resumed, &id).priority, Priority::High);
        }
        assert_eq!(jobs::runnable(&mut resumed, 10), Ok(vec![]));
        assert_healthy(&mut resumed);
    }
}

#[test]
fn a_task_that_moved_is_skipped_and_a_refusal_is_a_failure_with_reasons() {
    let mut kv = MemKv::new();
    open(&mut kv, task("a").roles(&["clerk"]).created(1));
    open(&mut kv, task("b").roles(&["clerk"]).created(2));
    open(
        &mut kv,
        task("c").roles(&["clerk"]).excluding(&["carol"]).created(3),
    );
    open(&mut kv, task("d").roles(&["clerk"]).created(4));
    let assign = JobAction::Assign(JobAssign {
        to: "carol".into(),
        roles: names(&["clerk"]),
        override_roles: false,
    });
    start(&mut kv, "as", open_state(), assign);
    assert_eq!(step(&mut kv, "as").state, JobState::Running);
    // After the count, b is claimed: no longer open, so skipped.
    tasks::claim(&mut kv, "b", "bob", &names(&["clerk"]), None, None).expect("claims");
    let (job, _) = run(&mut kv, "as");
    assert_eq!((job.total, job.done, job.skipped, job.failed), (4, 2, 1, 1));
    assert_eq!(job.last_skipped.len(), 1);
    assert_eq!(job.last_skipped[0].id, "b");
    assert!(
        job.last_skipped[0]
            .reason
            .contains("its state is now claimed"),
        "{:?}",
        job.last_skipped[0]
    );
    assert_eq!(job.last_failures.len(), 1);
    assert_eq!(job.last_failures[0].id, "c");
    assert!(
        job.last_failures[0].reason.contains("carol is excluded"),
        "{:?}",
        job.last_failures[0]
    );
    for (id, holder, by_job) in [
        ("a", "carol", 1),
        ("b", "bob", 0),
        ("c", "", 0),
        ("d", "carol", 1),
    ] {
        let t = stored(&mut kv, id);
        assert_eq!(t.assignee.as_deref().unwrap_or(""), holder, "{id}");
        assert_eq!(changes_by(&mut kv, id, "as"), by_job, "{id}");
    }
    // The job's `by` is the change's actor.
    let e = changes::history(&mut kv, "a", None, 100)
        .expect("history")
        .pop()
        .expect("an entry");
    assert_eq!(
        (e.verb.as_str(), e.actor.as_deref()),
        ("assign", Some("mgr"))
    );
    assert_healthy(&mut kv);
}

#[test]
fn an_action_that_changes_nothing_is_a_skip_not_a_change() {
    let mut kv = store_of(3);
    tasks::claim(&mut kv, "t00001", "bob", &names(&["a"]), None, None).expect("claims");
    // Release every pending task: only the claimed one changes.
    start(
        &mut kv,
        "rel",
        TaskFilter {
            states: vec![TaskState::Open, TaskState::Claimed],
            ..TaskFilter::default()
        },
        JobAction::Release,
    );
    let (job, _) = run(&mut kv, "rel");
    assert_eq!((job.total, job.done, job.skipped), (3, 1, 2));
    assert!(job.last_skipped[0].reason.contains("changes nothing"));
    let t = stored(&mut kv, "t00001");
    assert_eq!((t.state, t.assignee), (TaskState::Open, None));
    assert_eq!(changes_by(&mut kv, "t00001", "rel"), 1);
    // Withdraw: settled by the service, in the job's name.
    start(&mut kv, "wd", TaskFilter::default(), JobAction::Withdraw);
    let (job, _) = run(&mut kv, "wd");
    assert_eq!((job.total, job.done), (3, 3));
    for i in 0..3 {
        let id = format!("t{i:05}");
        assert_eq!(stored(&mut kv, &id).state, TaskState::Withdrawn);
        assert_eq!(changes_by(&mut kv, &id, "wd"), 1);
    }
    // Withdrawing settled tasks changes nothing.
    start(&mut kv, "again", TaskFilter::default(), JobAction::Withdraw);
    let (job, _) = run(&mut kv, "again");
    assert_eq!((job.total, job.done, job.skipped), (3, 0, 3));
    assert_healthy(&mut kv);
}

#[test]
fn cancel_stops_a_job_and_drops_what_it_recorded() {
    let n = jobs::CHUNK * 3;
    let mut kv = store_of(n);
    start(&mut kv, "c", open_state(), JobAction::Escalate);
    assert_eq!(jobs::runnable(&mut kv, 10), Ok(vec!["c".to_owned()]));
    for _ in 0..5 {
        step(&mut kv, "c");
    }
    let job = kv.call(|kv| jobs::cancel(kv, "c")).expect("cancels");
    // Three stretches (a search page knows when it is the last), two tasks.
    assert_eq!(
        (job.state, job.total, job.done),
        (JobState::Cancelled, u64::from(n), 2)
    );
    let job = run(&mut kv, "c").0;
    assert_eq!(job.done, 2, "no task changes after the cancel");
    assert_eq!(jobs::runnable(&mut kv, 10), Ok(vec![]));
    let left = kv
        .map
        .keys()
        .filter(|k| k.starts_with(crate::schema::job_items_all().as_bytes()))
        .count();
    assert_eq!(left, 0, "every chunk dropped");
    let escalated = (0..n)
        .filter(|i| stored(&mut kv, &format!("t{i:05}")).state == TaskState::Escalated)
        .count();
    assert_eq!(escalated, 2);
    // Cancelling a finished job answers it as it stands.
    assert_eq!(kv.call(|kv| jobs::cancel(kv, "c")), Ok(job));
    assert_healthy(&mut kv);
}

#[test]
fn jobs_list_in_id_order_and_runnable_lists_those_with_work_left() {
    let mut kv = store_of(2);
    for id in ["b", "a", "c"] {
        start(&mut kv, id, open_state(), JobAction::Escalate);
    }
    run(&mut kv, "b");
    let listed: Vec<String> = jobs::list(&mut kv, 10, None)
        .expect("lists")
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(listed, ["a", "b", "c"]);
    let after: Vec<String> = jobs::list(&mut kv, 1, Some("a"))
        .expect("lists")
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(after, ["b"]);
    assert_eq!(jobs::runnable(&mut kv, 10), Ok(names(&["a", "c"])));
    assert_eq!(jobs::runnable(&mut kv, 1), Ok(names(&["a"])));
    // The guard's job is the verbs' own rule: a job's name is a name.
    let e = tasks::escalate(
        &mut kv,
        "t00000",
        Some(&Guard {
            revision: None,
            job: Some(String::new()),
        }),
    );
    assert!(e.is_err());
}

#[test]
fn the_check_finds_a_jobs_keys_out_of_step() {
    let mut kv = store_of(jobs::CHUNK + 1);
    start(&mut kv, "j", open_state(), JobAction::Escalate);
    step(&mut kv, "j");
    step(&mut kv, "j");
    assert_healthy(&mut kv);
    let structures = |kv: &mut MemKv| -> Vec<String> {
        check::check(kv)
            .expect("checks")
            .into_iter()
            .map(|d| d.structure)
            .collect()
    };
    let mut lost_chunk = kv.clone();
    lost_chunk
        .map
        .remove(crate::schema::job_item("j", 1).as_bytes());
    assert_eq!(structures(&mut lost_chunk), ["job-item"]);
    let mut unlisted = kv.clone();
    unlisted.map.remove(crate::schema::job_run("j").as_bytes());
    assert_eq!(structures(&mut unlisted), ["job-run"]);
    let mut stray = kv.clone();
    stray
        .map
        .insert(crate::schema::job_item("gone", 0).into_bytes(), vec![]);
    stray
        .map
        .insert(crate::schema::job_run("gone").into_bytes(), vec![]);
    assert_eq!(structures(&mut stray), ["job-run", "job-item"]);
    let mut damaged = kv.clone();
    damaged
        .map
        .insert(crate::schema::job("j").into_bytes(), vec![0xff]);
    assert!(structures(&mut damaged).contains(&"job".to_owned()));
}
