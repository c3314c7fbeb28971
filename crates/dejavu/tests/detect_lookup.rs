//! repeated-lookup and negative-probe on real programs: each dirty fixture yields its
//! finding with exact counts, each clean twin (and each trap) stays quiet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use dejavu_detect::{analyze, Config, Finding};
use std::path::Path;

fn fixture(rel: &str) -> String {
    common::repo()
        .join("tests/workloads/detectors")
        .join(rel)
        .to_str()
        .unwrap()
        .to_string()
}

/// Records `cmd` in a fresh directory (passed as its last argument) and returns the
/// findings of `detector`.
fn findings(detector: &str, cmd: &[&str]) -> (Vec<Finding>, tempfile::TempDir) {
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let trace = work.join("t.dvt");
    let mut full: Vec<&str> = cmd.to_vec();
    let w = work.to_str().unwrap().to_string();
    full.push(&w);
    let (st, err) = common::record_quiet(&trace, &full, &work);
    assert!(st.success(), "{cmd:?}: {err}");
    let mut r = dejavu_trace::TraceReader::open(&trace).unwrap();
    let a = analyze(&mut r, &Config::default(), |_| {}).unwrap();
    (
        a.findings
            .into_iter()
            .filter(|f| f.detector == detector)
            .collect(),
        d,
    )
}

#[test]
fn node_stat_per_request_is_a_repeated_lookup() {
    require!("node");
    let (f, d) = findings(
        "repeated-lookup",
        &["node", &fixture("repeated-lookup/dirty.js")],
    );
    let config = d.path().canonicalize().unwrap().join("config.json");
    let mine: Vec<_> = f
        .iter()
        .filter(|f| f.paths == vec![config.to_str().unwrap().to_string()])
        .collect();
    assert_eq!(mine.len(), 1, "{f:#?}");
    assert_eq!((mine[0].calls, mine[0].redundant_calls), (100, 99));
    assert!(mine[0].command.contains("dirty.js"));
    let cache = mine[0].cache.clone().unwrap();
    assert!(cache.safe && cache.saved_calls == 99);
}

#[test]
fn node_stat_cached_once_is_quiet() {
    require!("node");
    let (f, d) = findings(
        "repeated-lookup",
        &["node", &fixture("repeated-lookup/clean.js")],
    );
    let config = d.path().canonicalize().unwrap().join("config.json");
    assert!(
        !f.iter()
            .any(|f| f.paths.iter().any(|p| Path::new(p) == config)),
        "{f:#?}"
    );
}

#[test]
fn a_stat_after_each_real_change_is_not_a_repeated_lookup() {
    let prog = common::c_workload_at(
        &common::repo().join("tests/workloads/detectors/repeated-lookup/stat_after_change.c"),
    );
    let (f, d) = findings("repeated-lookup", &[prog.to_str().unwrap()]);
    let log = d.path().canonicalize().unwrap().join("grows.log");
    assert!(
        !f.iter()
            .any(|f| f.paths.iter().any(|p| Path::new(p) == log)),
        "{f:#?}"
    );
}

#[test]
fn python_exists_per_request_is_a_negative_probe() {
    require!("python3");
    let (f, d) = findings(
        "negative-probe",
        &["python3", &fixture("negative-probe/dirty.py")],
    );
    let missing = d.path().canonicalize().unwrap().join("override.json");
    let mine: Vec<_> = f
        .iter()
        .filter(|f| f.paths == vec![missing.to_str().unwrap().to_string()])
        .collect();
    assert_eq!(mine.len(), 1, "{f:#?}");
    assert_eq!((mine[0].calls, mine[0].redundant_calls), (100, 99));
    assert!(mine[0].hazards.iter().any(|h| h.contains("cached failure")));
}

#[test]
fn python_exists_checked_once_is_quiet() {
    require!("python3");
    let (f, d) = findings(
        "negative-probe",
        &["python3", &fixture("negative-probe/clean.py")],
    );
    let missing = d.path().canonicalize().unwrap().join("override.json");
    assert!(
        !f.iter()
            .any(|f| f.paths.iter().any(|p| Path::new(p) == missing)),
        "{f:#?}"
    );
}

#[test]
fn one_lstat_per_distinct_file_like_git_status_is_not_a_repeated_lookup() {
    let prog = common::c_workload_at(
        &common::repo().join("tests/workloads/detectors/repeated-lookup/status_scan.c"),
    );
    let (f, d) = findings("repeated-lookup", &[prog.to_str().unwrap()]);
    let dir = d.path().canonicalize().unwrap();
    // Not even grouped into a pattern: none of the scanned files was asked about twice.
    assert!(
        !f.iter().any(|f| f
            .paths
            .iter()
            .chain(f.top_paths.iter().map(|p| &p.path))
            .any(|p| Path::new(p).starts_with(&dir))),
        "{f:#?}"
    );
}
