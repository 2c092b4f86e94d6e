//! Every integration test, in one binary so the suite links once. Each module
//! drives the real component through the real host on real redb files.

mod component;
mod concurrency;
mod consistency;
mod crash;
mod isolation;
mod leases;
mod persistence;
mod postgres;
mod queue;
mod runs;
mod sandbox;
mod scenarios;
mod smoke;
mod tasks;
mod timers;
mod validation;
