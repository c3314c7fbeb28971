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
    let calls = common::total_calls(&trace);
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

#[test]
fn pprof_is_read_by_go_tool_pprof_with_syscalls_and_redundant_syscalls_by_stack() {
    require!("go");
    require!("node");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let trace = work.join("t.dvt");
    let script = common::repo().join("tests/workloads/detectors/ensure-dir/dirty.js");
    let (st, err) = common::record_quiet(&trace, &["node", script.to_str().unwrap()], &work);
    assert!(st.success(), "{err}");
    let profile = work.join("t.pb.gz");
    let out = Command::new(common::dejavu())
        .args(["report", "--format", "pprof"])
        .arg(&trace)
        .stdout(std::fs::File::create(&profile).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gz = std::fs::read(&profile).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzipped");
    let top = |index: &str| {
        let out = Command::new("go")
            .args([
                "tool",
                "pprof",
                "-top",
                "-nodecount=200",
                &format!("-sample_index={index}"),
            ])
            .arg(&profile)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let total = |text: &str| -> u64 {
        let at = text.find("Total samples = ").expect("a total line") + "Total samples = ".len();
        text[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let calls = common::total_calls(&trace);
    let all = top("syscalls");
    assert_eq!(total(&all), calls, "{all}");
    assert!(all.contains("[mkdir]"), "{all}");
    let report = Command::new(common::dejavu())
        .args(["report", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&report.stdout).unwrap();
    let redundant = top("redundant_syscalls");
    assert_eq!(
        total(&redundant),
        v["redundant_calls"].as_u64().unwrap(),
        "{redundant}"
    );
    // The JavaScript function that made the calls is in the profile's stacks.
    assert!(redundant.contains("appendRecord"), "{redundant}");
    let time = top("syscall_time");
    assert!(time.contains("Type: syscall_time"), "{time}");
}

/// The Python with DuckDB that scripts/setup prepares (target/test-venv), if any.
fn duckdb_python() -> Option<std::path::PathBuf> {
    let py = common::repo().join("target/test-venv/bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(py)
}

#[test]
fn parquet_export_is_read_back_by_duckdb_with_one_row_per_syscall() {
    let Some(py) = duckdb_python() else {
        common::skip(
            "duckdb",
            "no DuckDB in target/test-venv (scripts/setup creates it)",
        );
        return;
    };
    let prog = common::c_workload("syscall_tour");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("w");
    std::fs::create_dir(&work).unwrap();
    let trace = d.path().join("t.dvt");
    let (st, err) = common::record_quiet_with(
        &trace,
        &["--stacks", "off"],
        &[prog.to_str().unwrap(), work.to_str().unwrap()],
        d.path(),
    );
    assert!(st.success(), "{err}");
    let file = d.path().join("t.parquet");
    let out = Command::new(common::dejavu())
        .args(["export", "--format", "parquet", "-o"])
        .arg(&file)
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let query = format!(
        "import duckdb, json\n\
         f = {:?}\n\
         rows = duckdb.sql(f\"select count(*) from '{{f}}'\").fetchall()[0][0]\n\
         per = dict(duckdb.sql(f\"select syscall, count(*) from '{{f}}' group by 1\").fetchall())\n\
         errs = duckdb.sql(f\"select count(*) from '{{f}}' where ret < 0 and errno is null\").fetchall()[0][0]\n\
         cols = [c[0] for c in duckdb.sql(f\"describe select * from '{{f}}'\").fetchall()]\n\
         print(json.dumps({{'rows': rows, 'per': per, 'errs_without_name': errs, 'cols': cols}}))\n",
        file.to_str().unwrap()
    );
    let out = Command::new(&py).args(["-c", &query]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = common::summary_json(&trace);
    let calls = common::total_calls(&trace);
    assert_eq!(v["rows"].as_u64(), Some(calls), "one row per syscall: {v}");
    for (name, s) in summary["syscalls"].as_object().unwrap() {
        assert_eq!(v["per"][name], s["calls"], "{name}: {v}");
    }
    assert_eq!(
        v["errs_without_name"], 0,
        "every failed call has its errno name"
    );
    let cols: Vec<&str> = v["cols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for c in [
        "ts_ns", "dur_ns", "pid", "tid", "syscall", "ret", "errno", "fd", "path", "stat_ino",
    ] {
        assert!(cols.contains(&c), "{c} in {cols:?}");
    }
}
