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

/// The scratch directory tmpfiles_dirty.c and tmpfiles_clean.c make their unnamed files in.
fn scratch(d: &tempfile::TempDir) -> std::path::PathBuf {
    d.path().canonicalize().unwrap().join("scratch")
}

#[test]
fn a_directory_stat_after_each_unnamed_file_made_in_it_is_a_repeated_lookup() {
    let prog = common::c_workload_at(
        &common::repo().join("tests/workloads/detectors/repeated-lookup/tmpfiles_dirty.c"),
    );
    let (f, d) = findings("repeated-lookup", &[prog.to_str().unwrap()]);
    let dir = scratch(&d);
    let hit = f
        .iter()
        .find(|f| f.paths.iter().any(|p| Path::new(p) == dir))
        .unwrap_or_else(|| panic!("no repeated-lookup of {}: {f:#?}", dir.display()));
    assert_eq!((hit.calls, hit.redundant_calls), (30, 29), "{hit:#?}");
    // The files' own calls (fstat) are not the directory's, and not lookups of one file.
    assert!(
        !f.iter()
            .any(|f| f.paths.iter().any(|p| p.ends_with(" (deleted)"))),
        "{f:#?}"
    );
    // Their byte-at-a-time writes are named after the files, as /proc names them.
    let (w, d) = findings("small-writes", &[prog.to_str().unwrap()]);
    let prefix = format!("{}/#", scratch(&d).display());
    let hit = w
        .iter()
        .find(|f| !f.paths.is_empty())
        .unwrap_or_else(|| panic!("no small-writes: {w:#?}"));
    assert!(
        hit.paths
            .iter()
            .all(|p| p.starts_with(&prefix) && p.ends_with(" (deleted)")),
        "{hit:#?}"
    );
}

#[test]
fn unnamed_files_made_in_a_directory_stat_once_are_quiet() {
    let prog = common::c_workload_at(
        &common::repo().join("tests/workloads/detectors/repeated-lookup/tmpfiles_clean.c"),
    );
    let (f, _d) = findings("repeated-lookup", &[prog.to_str().unwrap()]);
    assert!(f.is_empty(), "{f:#?}");
}

/// gnulib's fts (du, find) climbs back up a deep tree with `openat(fd, "..")`: each
/// directory is still named by its own path, never `DIR/../OTHER` (which grew with each
/// climb, one directory under many names, so that its lookups were counted apart).
#[test]
fn du_climbing_back_up_with_dotdot_names_each_directory_by_its_path() {
    require!("du");
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap().join("tree");
    for branch in 0..3 {
        let mut p = root.clone();
        for depth in 0..8 {
            p = p.join(format!("d{branch}{depth}"));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("f"), b"x").unwrap();
        }
    }
    let trace = d.path().join("t.dvt");
    let (st, err) = common::record_quiet(&trace, &["du", "-s", root.to_str().unwrap()], d.path());
    assert!(st.success(), "{err}");
    let lines = common::export(&trace);
    let under: Vec<String> = lines
        .iter()
        .filter_map(|l| l["path"].as_str())
        .filter(|p| p.starts_with(root.to_str().unwrap()))
        .map(str::to_string)
        .collect();
    // fts went back up with ".." (it keeps few descriptors of the directories above): the
    // tree's root is opened again, which only a climb does.
    let root_opens = lines
        .iter()
        .filter(|l| l["sys"] == "openat" && l["path"].as_str() == root.to_str())
        .count();
    assert!(
        root_opens > 1,
        "no climb back up seen ({} paths)",
        under.len()
    );
    let dotdot: Vec<&String> = under
        .iter()
        .filter(|p| p.split('/').any(|c| c == ".."))
        .take(5)
        .collect();
    assert!(dotdot.is_empty(), "{dotdot:?}");
    // Every directory of the tree is named, by its path.
    for branch in 0..3 {
        let deepest = (0..8).fold(root.clone(), |p, i| p.join(format!("d{branch}{i}")));
        assert!(
            under.iter().any(|p| Path::new(p) == deepest),
            "{deepest:?} in {under:?}"
        );
    }
}
