//! The route table: every API operation's method, path, WIT verb and the
//! scopes allowed to call it, read from the OpenAPI document the handlers'
//! annotations generate. A handler declares its route and its scopes once,
//! in its `#[utoipa::path]` (the scopes as the `bearer` requirement's role
//! names); the router, the document and authorization all come from that
//! declaration, so a route cannot exist without deciding who may call it,
//! and an operation that names no scope admits nobody. It must never decide
//! anything about a request's contents; the handlers check actor and time.

use axum::http::Method;
use utoipa::openapi::OpenApi;

use crate::principal::Scope;

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

/// The operation a matched path and method name in `table`, if it is an
/// API route. A `HEAD` is its `GET`, answered without a body.
pub fn find<'a>(table: &'a [Route], method: &Method, path: &str) -> Option<&'a Route> {
    let method = if method == Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    table.iter().find(|r| r.path == path && r.method == method)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let route = |method: &str, path: &str| Route {
            method: method.to_owned(),
            path: path.to_owned(),
            verb: format!("{method} {path}"),
            scopes: vec![Scope::Operator],
        };
        let t = [route("GET", "/v1/queue"), route("POST", "/v1/tasks")];
        let r = find(&t, &Method::HEAD, "/v1/queue").expect("the queue route");
        assert_eq!(r.verb, "GET /v1/queue");
        assert!(
            find(&t, &Method::HEAD, "/v1/tasks").is_none(),
            "open is a POST"
        );
    }
}
