//! The route table: every API operation's method, path, WIT verb and the
//! scopes allowed to call it. Authorization reads it and a test holds the
//! OpenAPI document and the WIT's verb list to it, so a route cannot be
//! added without deciding who may call it. It must never decide anything
//! about a request's contents; the handlers check actor and time.

use axum::http::Method;

use crate::auth::Scope;

/// One API operation. `verb` is its WIT function's name, which is also its
/// OpenAPI `operationId`.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub verb: &'static str,
    pub scopes: &'static [Scope],
}

const R: Scope = Scope::Reviewer;
const S: Scope = Scope::Service;
const O: Scope = Scope::Operator;

/// Reviewer verbs: a reviewer acts as itself; an operator on anyone's
/// behalf.
const PEOPLE: &[Scope] = &[R, O];
/// Workflow and integration verbs.
const SYSTEMS: &[Scope] = &[S, O];
const EVERYONE: &[Scope] = &[R, S, O];
const OPERATORS: &[Scope] = &[O];

macro_rules! route {
    ($method:literal $path:literal $verb:literal $scopes:expr) => {
        Route {
            method: $method,
            path: $path,
            verb: $verb,
            scopes: $scopes,
        }
    };
}

/// The URL space under `/v1` leaves room for what comes later: server-side
/// sweeps (`/v1/sweeps`), a timer long-poll (`wait` on `claim-due`), an
/// event stream (`/v1/events`) and a reviewer inbox page (`/inbox`).
pub const ROUTES: &[Route] = &[
    route!("POST" "/v1/tasks" "open" SYSTEMS),
    route!("GET" "/v1/tasks/{id}" "get" EVERYONE),
    route!("POST" "/v1/tasks/{id}/claim" "claim" PEOPLE),
    route!("POST" "/v1/tasks/{id}/release" "release" PEOPLE),
    route!("POST" "/v1/tasks/{id}/take-over" "take-over" OPERATORS),
    route!("POST" "/v1/tasks/{id}/renew" "renew" PEOPLE),
    route!("POST" "/v1/tasks/{id}/settle" "settle" EVERYONE),
    route!("POST" "/v1/tasks/{id}/escalate" "escalate" SYSTEMS),
    route!("GET" "/v1/queue" "queue" PEOPLE),
    route!("POST" "/v1/queue/claim-next" "claim-next" PEOPLE),
    route!("GET" "/v1/cases/{case}/tasks" "for-case" EVERYONE),
    route!("GET" "/v1/overdue" "overdue" SYSTEMS),
    route!("POST" "/v1/reclaim-lapsed" "reclaim-lapsed" SYSTEMS),
    route!("POST" "/v1/runs/{run}/withdraw" "withdraw-run" SYSTEMS),
    route!("POST" "/v1/runs/{run}/seal" "seal" SYSTEMS),
    route!("GET" "/v1/runs/{run}" "is-sealed" SYSTEMS),
    route!("POST" "/v1/timers" "arm" SYSTEMS),
    route!("POST" "/v1/timers/claim-due" "claim-due" SYSTEMS),
    route!("DELETE" "/v1/runs/{run}/timers/{effect}" "disarm" SYSTEMS),
    route!("DELETE" "/v1/runs/{run}/timers" "disarm-run" SYSTEMS),
    route!("GET" "/v1/stats/open-count" "open-count" OPERATORS),
    route!("GET" "/v1/stats/pending-count" "pending-count" OPERATORS),
    route!("GET" "/v1/stats/leased-count" "leased-count" OPERATORS),
    route!("GET" "/v1/stats/next-due" "next-due" OPERATORS),
    route!("GET" "/v1/stats/next-lease-end" "next-lease-end" OPERATORS),
    route!("GET" "/v1/check" "check" OPERATORS),
    route!("GET" "/v1/tasks/{id}/history" "history" EVERYONE),
    route!("GET" "/v1/events" "feed" SYSTEMS),
    route!("POST" "/v1/events/trim" "trim" OPERATORS),
];

/// The operation a matched path and method name, if it is an API route.
pub fn find(method: &Method, path: &str) -> Option<&'static Route> {
    ROUTES
        .iter()
        .find(|r| r.path == path && r.method == method.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_appears_once_and_each_verb_once() {
        for (i, r) in ROUTES.iter().enumerate() {
            for s in &ROUTES[..i] {
                assert!(
                    !(s.path == r.path && s.method == r.method),
                    "{} {} twice",
                    r.method,
                    r.path
                );
                assert_ne!(s.verb, r.verb, "{} has two routes", r.verb);
            }
            assert!(!r.scopes.is_empty(), "nobody may call {}", r.verb);
        }
    }

    #[test]
    fn a_reviewer_reaches_no_system_or_operator_only_verb() {
        for verb in [
            "open",
            "escalate",
            "take-over",
            "check",
            "arm",
            "claim-due",
            "seal",
            "withdraw-run",
            "reclaim-lapsed",
            "overdue",
            "open-count",
        ] {
            let r = ROUTES.iter().find(|r| r.verb == verb).expect(verb);
            assert!(!r.scopes.contains(&Scope::Reviewer), "{verb}");
        }
        for r in ROUTES {
            assert!(r.scopes.contains(&Scope::Operator), "{}", r.verb);
        }
    }
}
