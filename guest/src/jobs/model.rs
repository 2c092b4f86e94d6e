//! What a bulk job is, as plain values: its action, its state, its counts,
//! and the row that keeps it with where its count and its run stand. Which
//! transitions a job makes is decided here, on the row alone, so the rules
//! are unit-tested without storage. This module never reads storage.

#[allow(unused_imports)]
use crate::prelude::*;

use serde::{Deserialize, Serialize};

use crate::model::{TaskChanges, Timestamp};
use crate::search::TaskFilter;

/// How many failures, and how many skips, a job keeps with their reasons.
pub const KEPT_MISSES: usize = 16;

/// Whom an `assign` job hands each task to (WIT `job-assign`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobAssign {
    pub to: String,
    pub roles: Vec<String>,
    pub override_roles: bool,
}

/// What a job does to each task (WIT `job-action`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobAction {
    Release,
    Assign(JobAssign),
    Update(TaskChanges),
    Escalate,
    Withdraw,
}

/// WIT `job-state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    Counting,
    Running,
    Cancelled,
    Done,
}

/// A task a job did not change, and why (WIT `job-failure`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFailure {
    pub id: String,
    pub reason: String,
}

/// A job as the WIT shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub id: String,
    pub filter: TaskFilter,
    pub action: JobAction,
    pub by: Option<String>,
    pub state: JobState,
    pub total: u64,
    pub done: u64,
    pub skipped: u64,
    pub failed: u64,
    pub last_failures: Vec<JobFailure>,
    pub last_skipped: Vec<JobFailure>,
    pub created_at: Timestamp,
}

/// A job's row: the job, the filter its set is found by (the job's, bound
/// to tasks created at or before its start), and where its count and its
/// run stand. Chunks `taken..written` are still to run (or to drop, once
/// cancelled); `index` is the next id's place in chunk `taken`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRow {
    pub job: Job,
    pub frozen: TaskFilter,
    /// The count's search cursor; `None` before the first stretch.
    pub cursor: Option<String>,
    pub written: u64,
    pub taken: u64,
    pub index: u32,
}

/// What became of one task of a job's set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Skipped(String),
    Failed(String),
}

impl JobState {
    pub fn name(self) -> &'static str {
        match self {
            JobState::Counting => "counting",
            JobState::Running => "running",
            JobState::Cancelled => "cancelled",
            JobState::Done => "done",
        }
    }
}

impl JobAction {
    pub fn name(&self) -> &'static str {
        match self {
            JobAction::Release => "release",
            JobAction::Assign(_) => "assign",
            JobAction::Update(_) => "update",
            JobAction::Escalate => "escalate",
            JobAction::Withdraw => "withdraw",
        }
    }
}

/// Keeps the last [`KEPT_MISSES`] of a list, oldest first.
fn keep_last(list: &mut Vec<JobFailure>, miss: JobFailure) {
    list.push(miss);
    if list.len() > KEPT_MISSES {
        let extra = list.len() - KEPT_MISSES;
        list.drain(..extra);
    }
}

impl JobRow {
    /// A new job, counting from the start of its set.
    pub fn new(job: Job, frozen: TaskFilter) -> JobRow {
        JobRow {
            job,
            frozen,
            cursor: None,
            written: 0,
            taken: 0,
            index: 0,
        }
    }

    /// Whether recorded chunks are still to run or drop.
    pub fn chunks_left(&self) -> bool {
        self.taken < self.written
    }

    /// Whether a sweeper still has work for it: it counts, runs, or was
    /// cancelled with chunks still to drop.
    pub fn runnable(&self) -> bool {
        match self.job.state {
            JobState::Counting | JobState::Running => true,
            JobState::Cancelled => self.chunks_left(),
            JobState::Done => false,
        }
    }

    /// A counted stretch: `found` more ids (in a chunk of their own, when
    /// any), and the count's cursor, `None` once the set is all found.
    pub fn counted(&mut self, found: usize, next: Option<String>) {
        if found > 0 {
            self.written += 1;
            self.job.total += found as u64;
        }
        self.cursor = next;
        if self.cursor.is_none() {
            self.job.state = JobState::Running;
            self.finish_if_empty();
        }
    }

    /// One task taken from chunk `taken` (of `len` ids), with its outcome.
    pub fn took(&mut self, len: usize, id: &str, outcome: Outcome) {
        match outcome {
            Outcome::Done => self.job.done += 1,
            Outcome::Skipped(reason) => {
                self.job.skipped += 1;
                keep_last(
                    &mut self.job.last_skipped,
                    JobFailure {
                        id: id.to_owned(),
                        reason,
                    },
                );
            }
            Outcome::Failed(reason) => {
                self.job.failed += 1;
                keep_last(
                    &mut self.job.last_failures,
                    JobFailure {
                        id: id.to_owned(),
                        reason,
                    },
                );
            }
        }
        self.index += 1;
        if self.index as usize >= len {
            self.dropped_chunk();
        }
    }

    /// Chunk `taken` is gone (run through, or dropped).
    pub fn dropped_chunk(&mut self) {
        self.taken += 1;
        self.index = 0;
        self.finish_if_empty();
    }

    /// A running job with nothing left is done.
    fn finish_if_empty(&mut self) {
        if self.job.state == JobState::Running && !self.chunks_left() {
            self.job.state = JobState::Done;
        }
    }

    /// Stops the job; its chunks left are dropped from now on.
    pub fn cancel(&mut self) {
        if matches!(self.job.state, JobState::Counting | JobState::Running) {
            self.job.state = JobState::Cancelled;
            self.cursor = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> JobRow {
        JobRow::new(
            Job {
                id: "j".into(),
                filter: TaskFilter::default(),
                action: JobAction::Escalate,
                by: None,
                state: JobState::Counting,
                total: 0,
                done: 0,
                skipped: 0,
                failed: 0,
                last_failures: Vec::new(),
                last_skipped: Vec::new(),
                created_at: 5,
            },
            TaskFilter::default(),
        )
    }

    #[test]
    fn a_count_of_nothing_is_done_at_once() {
        let mut r = row();
        assert!(r.runnable());
        r.counted(0, Some("c".into()));
        assert_eq!((r.job.state, r.written), (JobState::Counting, 0));
        r.counted(0, None);
        assert_eq!((r.job.state, r.job.total), (JobState::Done, 0));
        assert!(!r.runnable());
    }

    #[test]
    fn a_job_runs_its_chunks_in_order_then_is_done() {
        let mut r = row();
        r.counted(2, Some("c".into()));
        r.counted(1, None);
        assert_eq!(
            (r.job.state, r.job.total, r.written),
            (JobState::Running, 3, 2)
        );
        r.took(2, "a", Outcome::Done);
        assert_eq!((r.taken, r.index), (0, 1));
        r.took(2, "b", Outcome::Skipped("moved".into()));
        assert_eq!((r.taken, r.index), (1, 0));
        assert_eq!(r.job.state, JobState::Running);
        r.took(1, "c", Outcome::Failed("refused".into()));
        assert_eq!(r.job.state, JobState::Done);
        assert_eq!((r.job.done, r.job.skipped, r.job.failed), (1, 1, 1));
        assert_eq!(r.job.last_skipped[0].id, "b");
        assert_eq!(r.job.last_failures[0].reason, "refused");
        assert!(!r.runnable());
    }

    #[test]
    fn only_the_last_misses_are_kept_oldest_first() {
        let mut r = row();
        r.counted(40, None);
        for i in 0..40 {
            r.took(40, &format!("t{i}"), Outcome::Failed(format!("r{i}")));
        }
        assert_eq!(r.job.failed, 40);
        assert_eq!(r.job.last_failures.len(), KEPT_MISSES);
        assert_eq!(r.job.last_failures[0].id, "t24");
        assert_eq!(r.job.last_failures[KEPT_MISSES - 1].id, "t39");
        assert_eq!(r.job.state, JobState::Done);
    }

    #[test]
    fn a_cancelled_job_is_runnable_until_its_chunks_are_dropped() {
        let mut r = row();
        r.counted(3, Some("c".into()));
        r.cancel();
        assert_eq!(
            (r.job.state, r.cursor.as_deref()),
            (JobState::Cancelled, None)
        );
        assert!(r.runnable());
        r.dropped_chunk();
        assert!(!r.runnable());
        assert_eq!(r.job.state, JobState::Cancelled);
        // A finished job stays as it is.
        let mut d = row();
        d.counted(0, None);
        d.cancel();
        assert_eq!(d.job.state, JobState::Done);
    }
}
