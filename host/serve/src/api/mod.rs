//! The API under `/v1`, one module per resource: each holds its handlers
//! (one per WIT verb, named by `leasehold_host::Verb`, each turning its
//! request into engine calls as the caller's credential allows, and the
//! answer into JSON), its request and answer bodies, and its `router()`,
//! whose `#[utoipa::path]` registrations are the OpenAPI document's entries
//! and the route table authorization reads. This file only merges them;
//! nothing below imports it. Adding an operation touches its resource's
//! file (docs/architecture.md, "Where to add a verb").

mod admin;
mod changes;
mod job_action;
pub(crate) mod jobs;
mod kinds;
mod queue;
mod runs;
mod schedule_spec;
pub(crate) mod schedules;
mod search;
mod stats;
pub(crate) mod subscriptions;
mod sweeps;
mod task_life;
mod tasks;
mod timer_moves;
mod timers;
mod views;
mod worker;

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

#[cfg(test)]
pub use admin::WHOAMI;
#[cfg(test)]
pub use subscriptions::RESUME;

/// Every API route, each registered with its OpenAPI entry.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(tasks::router())
        .merge(task_life::router())
        .merge(kinds::router())
        .merge(queue::router())
        .merge(worker::router())
        .merge(sweeps::router())
        .merge(runs::router())
        .merge(timers::router())
        .merge(timer_moves::router())
        .merge(schedules::router())
        .merge(subscriptions::router())
        .merge(stats::router())
        .merge(admin::router())
        .merge(changes::router())
        .merge(search::router())
        .merge(views::router())
        .merge(jobs::router())
}
