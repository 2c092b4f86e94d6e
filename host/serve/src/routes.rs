//! The route table: every API operation's method, path, WIT verb and the
//! scopes allowed to call it, read from the OpenAPI document the handlers'
//! annotations generate. A handler declares its route and its scopes once,
//! in its `#[utoipa::path]` (the scopes as the `bearer` requirement's role
//! names); the router, the document and authorization all come from that
//! declaration, so a route cannot exist without deciding who may call it,
//! and an operation that names no scope admits nobody. It must never decide
//! anything about a request's contents; the handlers check actor and time.

use std::sync::OnceLock;

use axum::http::Method;
use utoipa::openapi::OpenApi;

use crate::auth::Scope;

/// One API operation. `verb` is its WIT function's name, which is also its
/// OpenAPI `operationId`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The HTTP method.
    pub method: String,
    /// The path, with `{id}`-style parameters.
    pub path: String,
    /// The WIT function it calls.
    pub verb: String,
    /// The scopes that may call it.
    pub scopes: Vec<Scope>,
}

impl Route {
    /// Whether a credential of `scope` may call it.
    pub fn allows(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// The name of the security scheme every operation names its scopes under.
pub const SCHEME: &str = "bearer";

/// The operations a document declares, with the scopes each names.
/// Unknown scope names are dropped, so a misspelt one admits nobody.
pub fn table(doc: &OpenApi) -> Vec<Route> {
    let mut out = Vec::new();
    for (path, item) in &doc.paths.paths {
        let ops = [
            ("GET", &item.get),
            ("POST", &item.post),
            ("PUT", &item.put),
            ("DELETE", &item.delete),
            ("PATCH", &item.patch),
        ];
        for (method, op) in ops {
            let Some(op) = op else { continue };
            let mut scopes = Vec::new();
            for requirement in op.security.iter().flatten() {
                let json = serde_json::to_value(requirement).unwrap_or_default();
                for name in json[SCHEME].as_array().into_iter().flatten() {
                    if let Some(s) = name.as_str().and_then(Scope::parse)
                        && !scopes.contains(&s)
                    {
                        scopes.push(s);
                    }
                }
            }
            out.push(Route {
                method: method.to_owned(),
                path: path.clone(),
                verb: op.operation_id.clone().unwrap_or_default(),
                scopes,
            });
        }
    }
    out
}

/// Every API route, from the served document.
pub fn routes() -> &'static [Route] {
    static TABLE: OnceLock<Vec<Route>> = OnceLock::new();
    TABLE.get_or_init(|| table(&crate::server::openapi()))
}

/// The operation a matched path and method name, if it is an API route. A
/// `HEAD` is its `GET`, answered without a body.
pub fn find(method: &Method, path: &str) -> Option<&'static Route> {
    let method = if method == Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    routes()
        .iter()
        .find(|r| r.path == path && r.method == method)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_appears_once_each_verb_once_and_each_names_its_scopes() {
        let all = routes();
        assert!(all.len() >= 26, "{} routes", all.len());
        for (i, r) in all.iter().enumerate() {
            for s in &all[..i] {
                assert!(
                    !(s.path == r.path && s.method == r.method),
                    "{} {} twice",
                    r.method,
                    r.path
                );
                assert_ne!(s.verb, r.verb, "{} has two routes", r.verb);
            }
            assert!(!r.scopes.is_empty(), "nobody may call {}", r.verb);
            assert!(
                !r.verb.is_empty(),
                "{} {} has no operationId",
                r.method,
                r.path
            );
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
            let r = routes().iter().find(|r| r.verb == verb).expect(verb);
            assert!(!r.allows(Scope::Reviewer), "{verb}");
        }
        for r in routes() {
            assert!(r.allows(Scope::Operator), "{}", r.verb);
        }
    }

    #[test]
    fn a_misspelt_scope_admits_nobody() {
        let doc: OpenApi = serde_json::from_value(serde_json::json!({
            "openapi": "3.1.0",
            "info": {"title": "t", "version": "1"},
            "paths": {"/x": {"get": {
                "operationId": "x",
                "responses": {},
                "security": [{"bearer": ["operater"]}]
            }}}
        }))
        .expect("a document");
        let t = table(&doc);
        assert_eq!(t.len(), 1);
        assert!(t[0].scopes.is_empty());
    }

    #[test]
    fn head_is_answered_as_get() {
        let r = find(&Method::HEAD, "/v1/queue").expect("the queue route");
        assert_eq!(r.verb, "queue");
        assert!(find(&Method::HEAD, "/v1/tasks").is_none(), "open is a POST");
    }
}
