//! The layout rules over HTTP: a task from before history answers a first
//! entry `before-history` (seq 0) from `GET /v1/tasks/{id}/history`, as the
//! OpenAPI document describes it, and a tenant a newer build moved to its
//! layout answers `newer-layout` (503), naming both layouts. The store is
//! edited behind the stopped server, as an earlier or a newer build would
//! have left it.

use leasehold_guest::schema;
use serde_json::json;

use crate::harness::{Service, Store, each_backend, new_task};

const TENANT: &str = "acme";

/// Sets or (with `None`) deletes one key of the tenant, behind the server.
pub(crate) fn raw_set(store: &Store, key: &[u8], value: Option<&[u8]>) {
    match store {
        Store::Redb { path, .. } => {
            let mut full = leasehold_host::tenant_prefix(TENANT).expect("tenant prefix");
            full.extend_from_slice(key);
            leasehold_tests::raw_write(path, |t| {
                match value {
                    Some(v) => drop(t.insert(full.as_slice(), v).expect("insert")),
                    None => drop(t.remove(full.as_slice()).expect("remove")),
                };
            });
        }
        Store::Postgres(schema) => {
            let mut c = schema.client();
            match value {
                Some(v) => c.execute(
                    "INSERT INTO leasehold_kv (tenant, key, value) VALUES ($1, $2, $3) \
                     ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value",
                    &[&TENANT, &key, &v],
                ),
                None => c.execute(
                    "DELETE FROM leasehold_kv WHERE tenant = $1 AND key = $2",
                    &[&TENANT, &key],
                ),
            }
            .expect("raw write");
        }
    }
}

/// The tenant's layout mark.
fn mark(svc: &Service) -> String {
    let raw = svc.store.raw();
    let v = raw
        .get(&(TENANT.to_owned(), schema::layout().into_bytes()))
        .expect("a mark");
    String::from_utf8(v.clone()).expect("ASCII")
}

fn history(svc: &Service, id: &str) -> crate::harness::Reply {
    let path = format!("/v1/tasks/{id}/history");
    let r = svc.call("GET", &path, Some("sam"), None);
    svc.conforms("GET", "/v1/tasks/{id}/history", &r);
    r
}

#[test]
fn a_task_from_before_history_says_so_and_a_newer_layout_is_refused_by_name() {
    each_backend(|svc| {
        svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("t-1")))
            .expect_ok();
        svc.stop();
        // As an earlier build (layout 5) left it: the row, no record.
        let shards = mark(svc).split('/').nth(1).expect("a count").to_owned();
        let beside = schema::Shards::new(shards.parse().expect("a count")).expect("shards");
        let record = [
            schema::task_log(beside, "t-1"),
            schema::history(beside, "t-1"),
            schema::feed(),
        ];
        let keys: Vec<Vec<u8>> = svc
            .store
            .raw()
            .into_keys()
            .filter(|(t, k)| t == TENANT && record.iter().any(|p| k.starts_with(p.as_bytes())))
            .map(|(_, k)| k)
            .collect();
        assert!(!keys.is_empty());
        for k in keys {
            raw_set(&svc.store, &k, None);
        }
        let old = format!("5/{shards}");
        raw_set(
            &svc.store,
            schema::layout().as_bytes(),
            Some(old.as_bytes()),
        );
        svc.restart();

        let r = history(svc, "t-1");
        let entries = r.expect_ok()["entries"].clone();
        assert_eq!(entries.as_array().map(Vec::len), Some(1), "{entries}");
        assert_eq!(entries[0]["seq"], 0);
        assert_eq!(entries[0]["verb"], "before-history");
        assert_eq!(entries[0]["before"], json!(null));
        assert_eq!(entries[0]["after"], "open");
        assert_eq!(entries[0]["at"], 1000, "the task's creation");
        svc.call(
            "POST",
            "/v1/tasks/t-1/claim",
            Some("alice"),
            Some(json!({})),
        )
        .expect_ok();
        let entries = history(svc, "t-1").expect_ok()["entries"].clone();
        let steps: Vec<(u64, &str)> = entries
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| {
                (
                    e["seq"].as_u64().expect("seq"),
                    e["verb"].as_str().expect("verb"),
                )
            })
            .collect();
        assert_eq!(steps, [(0, "before-history"), (1, "claim")]);
        let check = svc.call("GET", "/v1/check", Some("olga"), None);
        assert_eq!(check.expect_ok()["discrepancies"], json!([]));
        svc.stop();
        assert_eq!(
            mark(svc),
            format!("{}/{shards}/from-5", schema::LAYOUT_VERSION)
        );

        // As a newer build leaves it: refused by name, reads and writes.
        let newer = format!("{}/{shards}", schema::LAYOUT_VERSION + 1);
        raw_set(
            &svc.store,
            schema::layout().as_bytes(),
            Some(newer.as_bytes()),
        );
        svc.restart();
        let before = {
            let r = history(svc, "t-1");
            r.expect_problem(503, "newer-layout");
            r.body["detail"].as_str().expect("detail").to_owned()
        };
        assert!(
            before.contains(&format!("layout {}", schema::LAYOUT_VERSION + 1))
                && before.contains(&format!("writes layout {}", schema::LAYOUT_VERSION)),
            "{before}"
        );
        let r = svc.call(
            "POST",
            "/v1/tasks/t-1/release",
            Some("alice"),
            Some(json!({})),
        );
        svc.conforms("POST", "/v1/tasks/{id}/release", &r);
        r.expect_problem(503, "newer-layout");
        svc.stop();
        assert_eq!(mark(svc), newer, "a refusal moved the mark");
    });
}
