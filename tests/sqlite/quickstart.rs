//! The quickstart: runs, resumes, and `--fresh` deletes only what it made.

use super::*;

#[test]
fn the_quickstart_runs_to_completion_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let qs = dir.path().join("qs");
    let o = sluice(&[
        "quickstart",
        "--dir",
        qs.to_str().unwrap(),
        "--seconds",
        "2",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for expected in [
        "inventory.customers      r  1000",
        "inventory.products       r  200",
        "inventory.customers      u  ",
    ] {
        assert!(err.contains(expected), "{expected} in:\n{err}");
    }
    assert!(
        out.contains("\"op\": \"u\""),
        "the console shows customer updates"
    );
    // ... and nothing else: no other table's events, no tombstones.
    let shown: Vec<Json> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Json>()
        .map(Result::unwrap)
        .collect();
    assert!(!shown.is_empty());
    for e in &shown {
        let value = if e["value"].is_object() {
            &e["value"]
        } else {
            e
        };
        let op = value["op"].as_str().or(value["payload"]["op"].as_str());
        assert!(
            matches!(op, Some("u" | "d")),
            "the console shows only customer updates and deletes: {e}"
        );
        let table =
            (value["source"]["table"].as_str()).or(value["payload"]["source"]["table"].as_str());
        assert_eq!(table, Some("customers"), "only customers': {e}");
    }
    let events: Vec<Json> = std::fs::read_to_string(qs.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let count = |topic: &str, op: &str| {
        events
            .iter()
            .filter(|e| e["topic"] == topic && e["value"]["op"] == op)
            .count()
    };
    assert_eq!(count("inventory.customers", "r"), 1000);
    assert_eq!(count("inventory.products", "r"), 200);
    assert!(count("inventory.orders", "r") >= 3000);
    assert!(count("inventory.orders", "c") > 0);
    // Streamed changes carry the time they were made (the trigger's clock), before they were read.
    for e in events.iter().filter(|e| e["value"]["op"] == "u") {
        let made = e["value"]["source"]["ts_ms"].as_i64().unwrap();
        assert!(
            made > 1_700_000_000_000 && made <= e["value"]["ts_ms"].as_i64().unwrap(),
            "{e}"
        );
    }
    // Masked, hashed, truncated on the way.
    let customer = events
        .iter()
        .find(|e| e["topic"] == "inventory.customers")
        .unwrap();
    assert_eq!(customer["value"]["after"]["phone"], "********");
    assert_eq!(
        customer["value"]["after"]["email"].as_str().unwrap().len(),
        64
    );
    let product = events
        .iter()
        .find(|e| e["topic"] == "inventory.products")
        .unwrap();
    assert_eq!(
        product["value"]["after"]["description"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        24
    );

    // Again: it resumes, no second snapshot.
    let o = sluice(&[
        "quickstart",
        "--dir",
        qs.to_str().unwrap(),
        "--seconds",
        "1",
    ]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("resuming"), "{err}");
    assert!(
        !err.contains(" r  "),
        "no snapshot rows the second time:\n{err}"
    );
}

/// `--fresh` deletes only a directory the quickstart made: one that holds anything else is
/// left whole, with one line saying why.
#[test]
fn quickstart_fresh_never_deletes_a_directory_it_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious.txt"), "mine").unwrap();
    let o = sluice(&[
        "quickstart",
        "--dir",
        dir.path().to_str().unwrap(),
        "--fresh",
        "--seconds",
        "1",
    ]);
    let (_, err) = text(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("was not made by the quickstart"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("precious.txt")).unwrap(),
        "mine"
    );
    // Its own directory: made with the marker, and --fresh starts it over.
    let qs = dir.path().join("qs");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "quickstart",
            "--dir",
            qs.to_str().unwrap(),
            "--seconds",
            "1",
        ];
        args.extend_from_slice(extra);
        sluice(&args)
    };
    assert!(run(&[]).status.success());
    assert!(qs.join(".sluice-quickstart").is_file());
    let o = run(&["--fresh"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("resuming"), "{err}");
}
