//! Exports other tools read: the Chrome trace event JSON timeline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use std::process::Command;

#[test]
fn chrome_export_has_one_complete_event_per_syscall_on_named_tracks() {
    let prog = common::c_workload("forks");
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let (st, err) = common::record_quiet_with(
        &trace,
        &["--stacks", "off"],
        &[prog.to_str().unwrap()],
        d.path(),
    );
    assert!(st.success(), "{err}");
    let out = Command::new(common::dejavu())
        .args(["export", "--format", "chrome"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let events = v["traceEvents"].as_array().unwrap();
    let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    let summary = common::summary_json(&trace);
    let calls: u64 = summary["syscalls"]
        .as_object()
        .unwrap()
        .values()
        .map(|s| s["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(
        complete.len() as u64,
        calls,
        "one X event per recorded syscall"
    );
    for e in &complete {
        assert!(
            e["pid"].is_u64() && e["tid"].is_u64() && e["ts"].is_number() && e["dur"].is_number(),
            "{e}"
        );
        assert!(e["name"].is_string() && e["cat"] == "syscall");
    }
    // Every process that made calls has a name for its track.
    let pids: std::collections::BTreeSet<u64> = complete
        .iter()
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    assert!(pids.len() >= 2, "the forks workload has children: {pids:?}");
    for pid in pids {
        assert!(
            events
                .iter()
                .any(|e| e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == pid),
            "no process_name for {pid}"
        );
    }
    assert_eq!(v["displayTimeUnit"], "ns");
    // A closed pipe is not an error.
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' export --format chrome '{}' | head -c 10 >/dev/null",
            common::dejavu().display(),
            trace.display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
}
