//! Search, counts and saved views over real HTTP: what each credential
//! sees (a reviewer never a task it may not), paging by sealed cursors,
//! views made, changed and removed at their revisions by operators only,
//! and bad input refused naming the field, with nothing changed.

use serde_json::{Value, json};

use crate::harness::checked_call as call;
use crate::harness::{Reply, Service, each_backend, new_task, reply};

fn search(svc: &Service, who: &str, body: Value) -> Reply {
    call(svc, "POST", "/v1/search", "/v1/search", who, Some(body))
}

fn count(svc: &Service, who: &str, body: Value) -> Reply {
    call(
        svc,
        "POST",
        "/v1/search/count",
        "/v1/search/count",
        who,
        Some(body),
    )
}

/// The ids of a page, in its order.
fn ids(page: &Value) -> Vec<String> {
    page["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// Every id a search finds, page after page of `limit`.
fn walk(svc: &Service, who: &str, mut body: Value, limit: u32) -> Vec<String> {
    body["limit"] = json!(limit);
    let mut all = Vec::new();
    for _ in 0..100 {
        let page = search(svc, who, body.clone());
        let page = page.expect_ok();
        all.extend(ids(page));
        match page["next"].as_str() {
            Some(next) => body["after"] = json!(next),
            None => return all,
        }
    }
    panic!("the walk never ended: {all:?}");
}

/// Acme's tasks, each a different case of what a reviewer may see:
///
/// | id | roles | state | alice sees it |
/// | --- | --- | --- | --- |
/// | f-1, f-2 | finance | open | yes (may take) |
/// | f-held | finance | claimed by alice | yes (holds) |
/// | f-bob | finance | claimed by bob | no |
/// | f-excl | finance, excludes alice | open | no |
/// | l-1 | legal | open | no |
/// | any-1 | none | open | yes (offered to anyone) |
/// | f-done | finance | completed | no |
fn seed(svc: &Service) {
    let open = |id: &str, f: &dyn Fn(&mut Value)| {
        let mut t = new_task(id);
        f(&mut t);
        svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
            .expect_ok();
    };
    open("f-1", &|t| {
        t["created_at"] = json!(1000);
        t["due_at"] = json!(9000);
    });
    open("f-2", &|t| {
        t["created_at"] = json!(2000);
        t["priority"] = json!("urgent");
        t["kind"] = json!("pay");
    });
    open("f-held", &|t| t["created_at"] = json!(3000));
    open("f-bob", &|t| t["created_at"] = json!(4000));
    open("f-excl", &|t| {
        t["created_at"] = json!(5000);
        t["excluded_actors"] = json!(["alice"]);
    });
    open("l-1", &|t| {
        t["created_at"] = json!(6000);
        t["candidate_roles"] = json!(["legal"]);
        t["case"] = json!("case-2");
    });
    open("any-1", &|t| {
        t["created_at"] = json!(7000);
        t["candidate_roles"] = json!([]);
    });
    open("f-done", &|t| t["created_at"] = json!(8000));
    svc.call("POST", "/v1/tasks/f-held/claim", Some("alice"), None)
        .expect_ok();
    svc.call("POST", "/v1/tasks/f-bob/claim", Some("bob"), None)
        .expect_ok();
    svc.call(
        "POST",
        "/v1/tasks/f-done/settle",
        Some("sam"),
        Some(json!({"settlement": "completed"})),
    )
    .expect_ok();
    // Another tenant's task, which nobody in acme may ever see.
    let mut g = new_task("g-1");
    g["candidate_roles"] = json!([]);
    svc.call("POST", "/v1/tasks", Some("gina"), Some(g))
        .expect_ok();
}

const EVERY_ACME_TASK: [&str; 8] = [
    "f-1", "f-2", "f-held", "f-bob", "f-excl", "l-1", "any-1", "f-done",
];
const ALICE_SEES: [&str; 4] = ["f-1", "f-2", "f-held", "any-1"];

#[test]
fn an_operator_searches_the_tenant_and_a_reviewer_only_what_it_may_see() {
    each_backend(|svc| {
        seed(svc);
        let by_created = json!({"sort": {"key": "created_at"}});
        for who in ["olga", "sam"] {
            assert_eq!(
                walk(svc, who, by_created.clone(), 3),
                EVERY_ACME_TASK,
                "{who}"
            );
        }
        // Alice, whatever the page size, sees what she holds or may take.
        for limit in [1, 2, 1000] {
            assert_eq!(walk(svc, "alice", by_created.clone(), limit), ALICE_SEES);
        }
        // Carol (legal) sees the legal task and the one offered to anyone.
        assert_eq!(walk(svc, "carol", by_created.clone(), 2), ["l-1", "any-1"]);
        // Globex sees only its own.
        assert_eq!(walk(svc, "gina", by_created.clone(), 10), ["g-1"]);
        assert_eq!(walk(svc, "gus", by_created.clone(), 10), ["g-1"]);

        // A filter narrows; the descending order reverses.
        let open_desc = json!({
            "filter": {"states": ["open"]},
            "sort": {"key": "created_at", "descending": true},
        });
        assert_eq!(
            walk(svc, "olga", open_desc.clone(), 2),
            ["any-1", "l-1", "f-excl", "f-2", "f-1"]
        );
        assert_eq!(walk(svc, "alice", open_desc, 2), ["any-1", "f-2", "f-1"]);
        let held = json!({"filter": {"assignee": {"actor": "bob"}}, "sort": {"key": "created_at"}});
        assert_eq!(walk(svc, "olga", held.clone(), 5), ["f-bob"]);
        assert!(
            walk(svc, "alice", held, 5).is_empty(),
            "bob's task is not alice's to see"
        );
        let nobody = json!({"filter": {"assignee": "nobody", "kinds": ["approve"]}, "sort": {"key": "created_at"}});
        assert_eq!(
            walk(svc, "olga", nobody, 5),
            ["f-1", "f-excl", "l-1", "any-1", "f-done"],
            "a task settled without a holder was held by nobody"
        );
        let queue = search(svc, "olga", json!({"filter": {"states": ["open"]}}));
        assert_eq!(
            ids(queue.expect_ok())[0],
            "f-2",
            "urgent first in the queue's order"
        );
        let due =
            json!({"filter": {"due_before": 9000, "due_after": 5000}, "sort": {"key": "due_at"}});
        assert_eq!(
            walk(svc, "olga", due, 10),
            ["f-2", "f-held", "f-bob", "f-excl", "l-1", "any-1", "f-done"]
        );
        let page = search(svc, "olga", json!({"filter": {"case": "case-2"}}));
        let page = page.expect_ok();
        assert_eq!(ids(page), ["l-1"]);
        assert_eq!(page["budget_spent"], false);
        assert!(page["index"].is_string());

        // An operator may search as a reviewer, and sees what she would.
        let as_alice = json!({
            "sort": {"key": "created_at"},
            "viewer": {"actor": "alice", "roles": ["finance"]},
        });
        assert_eq!(walk(svc, "olga", as_alice, 10), ALICE_SEES);
        // A reviewer may not search as anyone else, nor with roles it lacks.
        for viewer in [
            json!({"actor": "bob", "roles": ["finance"]}),
            json!({"actor": "alice", "roles": ["legal"]}),
        ] {
            search(svc, "alice", json!({"viewer": viewer}))
                .expect_problem(403, "acting-as-another");
        }

        // Counts, with the same eyes.
        let n = |who: &str, body: Value| {
            let r = count(svc, who, body);
            let a = r.expect_ok().clone();
            assert_eq!(a["exact"], true, "{a}");
            a["count"].as_u64().expect("a count")
        };
        assert_eq!(n("olga", json!({})), 8);
        assert_eq!(n("olga", json!({"filter": {"states": ["open"]}})), 5);
        let counters = count(
            svc,
            "olga",
            json!({"filter": {"states": ["open", "claimed"]}}),
        );
        assert_eq!(counters.expect_ok()["index"], "counters");
        assert_eq!(n("alice", json!({})), 4);
        assert_eq!(n("alice", json!({"filter": {"states": ["open"]}})), 3);
        assert_eq!(n("carol", json!({})), 2);
        assert_eq!(n("bob", json!({"filter": {"states": ["claimed"]}})), 1);
        assert_eq!(n("gina", json!({})), 1);
    });
}

#[test]
fn a_cursor_is_refused_for_another_search_viewer_or_tenant() {
    each_backend(|svc| {
        seed(svc);
        let first = search(
            svc,
            "olga",
            json!({"limit": 1, "sort": {"key": "created_at"}}),
        );
        let next = first.expect_ok()["next"]
            .as_str()
            .expect("a next")
            .to_owned();
        // The same search goes on.
        let again = search(
            svc,
            "olga",
            json!({"limit": 1, "sort": {"key": "created_at"}, "after": next}),
        );
        assert_eq!(ids(again.expect_ok()), ["f-2"]);
        let refused = |who: &str, body: Value| {
            let r = search(svc, who, body);
            r.expect_problem(400, "invalid");
            assert_eq!(r.body["field"], "after", "{r:#?}");
        };
        // Another filter, another sort: the component's digest refuses it.
        refused(
            "olga",
            json!({"limit": 1, "sort": {"key": "created_at"}, "filter": {"states": ["open"]}, "after": next}),
        );
        refused(
            "olga",
            json!({"limit": 1, "sort": {"key": "created_at", "descending": true}, "after": next}),
        );
        // Another viewer in the same tenant.
        refused(
            "alice",
            json!({"limit": 1, "sort": {"key": "created_at"}, "after": next}),
        );
        // Another tenant, with the very same body: the seal does not open.
        refused(
            "gina",
            json!({"limit": 1, "sort": {"key": "created_at"}, "after": next}),
        );
        // A count's cursor is not a search's, and a made-up one is nothing.
        let c = count(svc, "olga", json!({"after": next}));
        c.expect_problem(400, "invalid");
        assert_eq!(c.body["field"], "after");
        refused("olga", json!({"after": "x".repeat(2870)}));
        // Nor does one changed by a character, of the right length.
        let mut forged = next.clone().into_bytes();
        let last = forged.len() - 1;
        forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
        let forged = String::from_utf8(forged).expect("base64 is ASCII");
        refused(
            "olga",
            json!({"limit": 1, "sort": {"key": "created_at"}, "after": forged}),
        );
        // Alice's own cursor does not open for bob, of the same roles.
        let mine = search(svc, "alice", json!({"limit": 1}));
        let mine = mine.expect_ok()["next"]
            .as_str()
            .expect("a next")
            .to_owned();
        refused("bob", json!({"limit": 1, "after": mine}));
    });
}

/// An `invalid` problem naming `field`.
#[track_caller]
fn names_field(r: &Reply, field: &str) {
    r.expect_problem(400, "invalid");
    assert_eq!(r.body["field"], field, "{r:#?}");
}

#[test]
fn bad_search_input_is_refused_naming_the_field_and_changes_nothing() {
    each_backend(|svc| {
        seed(svc);
        let before = svc.snapshot();
        for (body, field) in [
            (json!({"filter": {"colour": "red"}}), "filter.colour"),
            (json!({"filtre": {}}), "filtre"),
            (json!({"sort": {"key": "colour"}}), "sort.key"),
            (
                json!({"sort": {"key": "due_at", "order": "up"}}),
                "sort.order",
            ),
            (
                json!({"filter": {"due_after": 9000, "due_before": 5000}}),
                "filter.due_after",
            ),
            (
                json!({"filter": {"created_after": 10, "created_before": 10}}),
                "filter.created_after",
            ),
            (json!({"limit": 0}), "limit"),
            (json!({"limit": 1001}), "limit"),
            (
                json!({"filter": {"assignee": "everybody"}}),
                "filter.assignee",
            ),
            (
                json!({"filter": {"states": ["sleeping"]}}),
                "filter.states[0]",
            ),
            (json!({"filter": {"role": ""}}), "filter.role"),
            (json!({"filter": {"due_before": -1}}), "filter.due_before"),
        ] {
            let r = search(svc, "olga", body.clone());
            names_field(&r, field);
            let r = search(svc, "alice", body.clone());
            names_field(&r, field);
        }
        for (body, field) in [
            (json!({"filter": {"colour": "red"}}), "filter.colour"),
            (json!({"sort": {"key": "due_at"}}), "sort"),
            (
                json!({"filter": {"due_after": 9000, "due_before": 5000}}),
                "filter.due_after",
            ),
        ] {
            let r = count(svc, "olga", body);
            names_field(&r, field);
        }
        let after = svc.snapshot();
        assert_eq!(before, after, "a refused search changed the store");
    });
}

fn view_path(name: &str) -> String {
    format!("/v1/views/{name}")
}

fn put_view(svc: &Service, who: &str, name: &str, body: Value, if_match: Option<&str>) -> Reply {
    let mut req = svc
        .client
        .put(svc.url(&view_path(name)))
        .bearer_auth(svc.tokens.get(who))
        .json(&body);
    if let Some(m) = if_match {
        req = req.header("if-match", m);
    }
    let r = reply(req.send().expect("the server answers"));
    svc.conforms("PUT", "/v1/views/{name}", &r);
    r
}

fn delete_view(svc: &Service, who: &str, name: &str, if_match: Option<&str>) -> Reply {
    let mut req = svc
        .client
        .delete(svc.url(&view_path(name)))
        .bearer_auth(svc.tokens.get(who));
    if let Some(m) = if_match {
        req = req.header("if-match", m);
    }
    let r = reply(req.send().expect("the server answers"));
    svc.conforms("DELETE", "/v1/views/{name}", &r);
    r
}

fn etag(r: &Reply) -> String {
    r.headers["etag"].to_str().expect("an ETag").to_owned()
}

#[test]
fn operators_keep_views_at_their_revisions_and_everyone_reads_them() {
    each_backend(|svc| {
        seed(svc);
        let legal =
            json!({"filter": {"role": "legal", "states": ["open"]}, "sort": {"key": "due_at"}});
        let made = put_view(svc, "olga", "Legal, open", legal.clone(), None);
        let v = made.expect_ok().clone();
        assert_eq!(v["revision"], 1);
        assert_eq!(v["by"], "olga");
        assert_eq!(v["filter"]["role"], "legal");
        assert_eq!(v["sort"], json!({"key": "due_at", "descending": false}));
        assert_eq!(etag(&made), "\"1\"");

        // Made again without a revision: the name is in use.
        let twice = put_view(svc, "olga", "Legal, open", legal.clone(), None);
        names_field(&twice, "name");
        // Reviewers and services read; only operators write.
        for who in ["alice", "sam", "olga", "carol"] {
            let got = call(
                svc,
                "GET",
                "/v1/views/{name}",
                "/v1/views/Legal,%20open",
                who,
                None,
            );
            assert_eq!(got.expect_ok()["revision"], 1, "{who}");
            assert_eq!(etag(&got), "\"1\"");
            let all = call(svc, "GET", "/v1/views", "/v1/views", who, None);
            assert_eq!(all.expect_ok()["views"][0]["name"], "Legal, open");
        }
        for who in ["alice", "sam"] {
            put_view(svc, who, "mine", json!({}), None).expect_problem(403, "forbidden");
            delete_view(svc, who, "Legal, open", None).expect_problem(403, "forbidden");
        }
        // Another tenant has no such view.
        call(
            svc,
            "GET",
            "/v1/views/{name}",
            "/v1/views/Legal,%20open",
            "gina",
            None,
        )
        .expect_problem(404, "not-found");
        let theirs = call(svc, "GET", "/v1/views", "/v1/views", "gus", None);
        assert_eq!(theirs.expect_ok()["views"], json!([]));

        // Changed at its revision; a stale revision is 412 with the current.
        let mine = json!({"filter": {"assignee": "nobody"}, "sort": {"key": "created_at", "descending": true}});
        let changed = put_view(svc, "olga", "Legal, open", mine.clone(), Some("\"1\""));
        assert_eq!(changed.expect_ok()["revision"], 2);
        assert_eq!(changed.body["filter"]["assignee"], "nobody");
        let stale = put_view(svc, "olga", "Legal, open", legal.clone(), Some("\"1\""));
        stale.expect_problem(412, "stale");
        assert_eq!(stale.body["revision"], 2);
        assert_eq!(etag(&stale), "\"2\"");
        put_view(svc, "olga", "nope", legal.clone(), Some("\"1\""))
            .expect_problem(404, "not-found");
        delete_view(svc, "olga", "Legal, open", Some("\"1\"")).expect_problem(412, "stale");

        // Paged by name, a sealed cursor bound to the tenant.
        for name in ["b", "c", "d"] {
            put_view(svc, "olga", name, json!({}), None).expect_ok();
        }
        let first = call(svc, "GET", "/v1/views", "/v1/views?limit=2", "alice", None);
        let first = first.expect_ok().clone();
        let next = first["next"].as_str().expect("a next").to_owned();
        let rest = call(
            svc,
            "GET",
            "/v1/views",
            &format!("/v1/views?limit=2&after={next}"),
            "alice",
            None,
        );
        let names: Vec<&str> = first["views"]
            .as_array()
            .into_iter()
            .chain(rest.expect_ok()["views"].as_array())
            .flatten()
            .map(|v| v["name"].as_str().expect("a name"))
            .collect();
        assert_eq!(names, ["Legal, open", "b", "c", "d"]);
        let theirs = call(
            svc,
            "GET",
            "/v1/views",
            &format!("/v1/views?limit=2&after={next}"),
            "gus",
            None,
        );
        theirs.expect_problem(400, "invalid");

        // A view's count and search, as the reviewer sees them.
        let nobody = json!({"filter": {"assignee": "nobody"}});
        assert_eq!(count(svc, "alice", nobody.clone()).expect_ok()["count"], 3);
        assert_eq!(count(svc, "olga", nobody).expect_ok()["count"], 6);

        // Removed: at its revision, or unguarded; then it is gone.
        delete_view(svc, "olga", "Legal, open", Some("\"2\"")).expect_ok();
        delete_view(svc, "olga", "Legal, open", None).expect_problem(404, "not-found");
        delete_view(svc, "olga", "b", None).expect_ok();
        call(svc, "GET", "/v1/views/{name}", "/v1/views/b", "alice", None)
            .expect_problem(404, "not-found");
    });
}

#[test]
fn bad_view_input_is_refused_naming_the_field_and_changes_nothing() {
    each_backend(|svc| {
        put_view(svc, "olga", "kept", json!({}), None).expect_ok();
        let before = svc.snapshot();
        for (name, body, field) in [
            ("v", json!({"filter": {"colour": 1}}), "filter.colour"),
            ("v", json!({"sort": {"key": "colour"}}), "sort.key"),
            ("v", json!({"name": "other"}), "name"),
            (
                "v",
                json!({"filter": {"due_after": 9, "due_before": 9}}),
                "filter.due_after",
            ),
            (&"x".repeat(129), json!({}), "name"),
            ("kept", json!({}), "name"),
        ] {
            let r = put_view(svc, "olga", name, body, None);
            names_field(&r, field);
        }
        put_view(svc, "olga", "kept", json!({}), Some("3")).expect_problem(400, "invalid");
        let after = svc.snapshot();
        assert_eq!(before, after, "a refused view changed the store");
    });
}

/// A task whose id is a word the search routes use is still a task: the
/// routes sit beside `/v1/tasks/{id}`, never under it.
#[test]
fn a_task_may_be_named_search_or_count() {
    each_backend(|svc| {
        for id in ["search", "count"] {
            svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task(id)))
                .expect_ok();
            let got = svc.call("GET", &format!("/v1/tasks/{id}"), Some("olga"), None);
            assert_eq!(got.expect_ok()["id"], id);
        }
    });
}

/// A tenant laid out before search (here: its build mark taken away behind
/// the stopped server, as an upgraded database has none) answers search
/// and count with 503 `index-building` and `Retry-After`, never a storage
/// failure; the server's sweeper builds the index, and then it answers.
#[test]
fn a_tenant_whose_index_is_being_built_answers_503_until_the_sweeper_builds_it() {
    each_backend(|svc| {
        // Due never, so that the sweeper turned on below finds nothing to
        // do to them but index them.
        for id in ["t-1", "t-2"] {
            let mut t = new_task(id);
            t["due_at"] = Value::Null;
            svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
                .expect_ok();
        }
        svc.stop();
        crate::upgrade::raw_set(
            &svc.store,
            leasehold_guest::schema::search_built().as_bytes(),
            None,
        );
        svc.restart();
        for (path, who) in [("/v1/search", "olga"), ("/v1/search/count", "alice")] {
            let r = call(svc, "POST", path, path, who, Some(json!({})));
            r.expect_problem(503, "index-building");
            assert_eq!(r.headers["retry-after"], "1", "{r:#?}");
            assert!(
                r.body["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("search index is being built")),
                "{r:#?}"
            );
        }
        // Views do not wait for the index.
        call(svc, "GET", "/v1/views", "/v1/views", "alice", None).expect_ok();

        svc.stop();
        svc.set_options(leasehold_serve::Options {
            sweep: true,
            ..crate::harness::test_options()
        });
        svc.restart();
        // The sweeper acts at once; wait for it (a condition, not a time).
        let by_created = json!({"sort": {"key": "created_at"}});
        let mut last = None;
        crate::keeping_time::eventually("the sweeper to build the index", || {
            let r = svc.call("POST", "/v1/search", Some("olga"), Some(by_created.clone()));
            if r.status != 200 {
                r.expect_problem(503, "index-building");
            }
            let done = r.status == 200;
            last = Some(r);
            done
        });
        let r = last.expect("an answer");
        assert_eq!(ids(&r.body), ["t-1", "t-2"]);
        assert_eq!(count(svc, "alice", json!({})).expect_ok()["count"], 2);
    });
}
