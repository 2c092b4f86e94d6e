//! The service's integration tests, over real HTTP on loopback on real
//! storage: one binary, one module per topic.

mod apart;
mod authz;
mod backups;
mod bad_input;
mod crowd;
mod decisions;
mod events;
mod front_door;
mod harness;
mod jobs;
mod keep_alive;
mod keeping_time;
mod load;
mod openapi;
mod ops;
mod pages;
mod reminders;
mod routes;
mod sandbox;
mod schedules;
mod search;
mod subscriptions;
mod task_life;
mod timer_moves;
mod upgrade;
mod worker;
