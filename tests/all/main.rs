//! Every integration test, in one binary so the suite links once. Each module
//! drives the real component through the real host on a real store: a redb
//! file, or with `LEASEHOLD_TEST_BACKEND=postgres` a PostgreSQL schema (see
//! `leasehold_tests::TestDb`). `crash` and `redb_files` are about redb files
//! and run on redb only; `postgres` is about PostgreSQL only.

mod changes;
mod component;
mod concurrency;
mod conformance;
mod consistency;
mod crash;
mod isolation;
mod jobs;
mod leases;
mod persistence;
mod postgres;
mod power_loss;
mod queue;
mod redb_files;
mod reuse;
mod runs;
mod sandbox;
mod search;
mod smoke;
mod soak;
mod sweeper;
mod tasks;
mod timers;
mod validation;
mod worker;
