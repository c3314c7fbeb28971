//! `dejavu whatif` on real programs recorded under the backend `DEJAVU_BACKEND` picks:
//! the seed-like twins of tests/workloads/whatif (a stat cache over a file a second
//! process rewrites, or the process itself; a TTL; an ensure-once flag over a directory
//! another process removes), keep-open on open-close-churn's open/pwrite/close loop, every
//! dirty twin's findings replayed under their own fix (the replay removes what the finding
//! says), and bad policy strings as usage errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A fresh working directory (canonical, as the traced program sees it).
struct Work {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Work {
    fn new() -> Work {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().canonicalize().expect("canonical tempdir");
        Work { _dir: dir, path }
    }

    fn p(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }

    fn trace(&self) -> PathBuf {
        self.path.join("t.dvt")
    }
}

fn workload(rel: &str) -> PathBuf {
    common::repo().join("tests/workloads").join(rel)
}

/// Records `cmd` in `work` (without cargo's LD_LIBRARY_PATH, whose directories the loader
/// would probe); asserts that the program and the recording succeeded.
fn record(work: &Work, cmd: &[&str]) {
    let out = Command::new(common::dejavu())
        .arg("record")
        .arg("-o")
        .arg(work.trace())
        .arg("--")
        .args(cmd)
        .current_dir(&work.path)
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .output()
        .expect("dejavu runs");
    assert!(
        out.status.success(),
        "dejavu record {cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn whatif(trace: &Path, args: &[&str]) -> Output {
    Command::new(common::dejavu())
        .arg("whatif")
        .arg(trace)
        .args(args)
        .output()
        .expect("dejavu whatif runs")
}

/// `dejavu whatif --json TRACE ARGS`, parsed; asserts success.
fn whatif_json(trace: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = whatif(trace, &all);
    assert!(
        out.status.success(),
        "whatif {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("whatif --json is JSON")
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The line of `src` that contains `marker` (1-based).
fn line_of(src: &Path, marker: &str) -> usize {
    std::fs::read_to_string(src)
        .expect("source")
        .lines()
        .position(|l| l.contains(marker))
        .expect("marker in source")
        + 1
}

fn stat_rewrite(work: &Work, args: &[&str]) {
    let exe = common::c_workload_at(&workload("whatif/stat_rewrite.c"));
    let mut cmd = vec![exe.to_str().unwrap()];
    cmd.extend_from_slice(args);
    record(work, &cmd);
}

#[test]
fn a_stat_cache_invalidated_on_write_is_unsafe_when_a_second_process_rewrites_the_file() {
    require!("gcc");
    let w = Work::new();
    stat_rewrite(&w, &[w.p(), "other"]);
    let glob = format!("stat:{}/**", w.p());
    let j = whatif_json(&w.trace(), &["--cache", &glob, "--invalidate", "on-write"]);
    let o = &j["outcomes"][0];
    // Three stats fill the cache and hit twice; after the rewrite, three more hits, each
    // serving the old size.
    assert_eq!(
        (
            n(&o["calls_before"]),
            n(&o["removed_calls"]),
            n(&o["stale_answers"])
        ),
        (6, 5, 3),
        "{o:#}"
    );
    assert_eq!(o["verdict"], "unsafe");
    let cause = &o["stale_examples"][0]["cause"];
    assert_eq!(cause["kind"], "other_process", "{cause:#}");
    assert_eq!(cause["call"], "write");
    assert!(
        cause["command"].as_str().unwrap().contains("--rewrite"),
        "{cause:#}"
    );
    assert_ne!(n(&cause["pid"]), n(&o["stale_examples"][0]["pid"]));
    assert!(o["verdict_text"]
        .as_str()
        .unwrap()
        .contains("another traced process"));
    // The terminal report names the external write too.
    let text = whatif(&w.trace(), &["--cache", &glob]);
    // Lines are wrapped: compare words.
    let text = String::from_utf8_lossy(&text.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(text.contains("verdict: unsafe"), "{text}");
    assert!(
        text.contains(&format!("pid {}", n(&cause["pid"]))),
        "{text}"
    );
}

#[test]
fn the_same_rewrite_by_the_process_itself_is_safe_with_invalidation_at_its_line() {
    require!("gcc");
    let w = Work::new();
    stat_rewrite(&w, &[w.p(), "self"]);
    let glob = format!("stat:{}/**", w.p());
    let j = whatif_json(&w.trace(), &["--cache", &glob, "--invalidate", "on-write"]);
    let o = &j["outcomes"][0];
    assert_eq!(
        (n(&o["removed_calls"]), n(&o["stale_answers"])),
        (4, 0),
        "{o:#}"
    );
    assert_eq!(o["verdict"], "safe_with_invalidation");
    let line = line_of(
        &workload("whatif/stat_rewrite.c"),
        "the write a cache must see",
    );
    let points = o["invalidation_points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{points:#?}");
    let at = points[0]["at"].as_str().unwrap();
    assert!(
        at.starts_with("write at rewrite@") && at.ends_with(&format!("stat_rewrite.c:{line}")),
        "{at}"
    );
    // Never invalidating, the same trace is unsafe: the program's own write made it stale.
    let j = whatif_json(&w.trace(), &["--cache", &glob, "--invalidate", "never"]);
    let o = &j["outcomes"][0];
    assert_eq!((n(&o["removed_calls"]), n(&o["stale_answers"])), (5, 3));
    assert_eq!(o["stale_examples"][0]["cause"]["kind"], "own_change");
}

#[test]
fn a_ttl_serves_stale_answers_only_until_it_expires() {
    require!("gcc");
    let w = Work::new();
    // Three stats, the external rewrite, three stats at once, 1.5 s of sleep, three more.
    // The TTL (500 ms) is far from both gaps: the rewrite comes within milliseconds of the
    // first stat, the last group 1.5 s later.
    stat_rewrite(&w, &[w.p(), "other", "1500"]);
    let glob = format!("stat:{}/**", w.p());
    let j = whatif_json(&w.trace(), &["--cache", &glob, "--ttl", "500ms"]);
    let o = &j["outcomes"][0];
    assert!(o["policy"].as_str().unwrap().ends_with("--ttl 500ms"));
    // Filled by the first stat: 2 hits, then 3 stale hits, then expired: filled again by
    // the first of the last three, 2 fresh hits.
    assert_eq!(
        (
            n(&o["calls_before"]),
            n(&o["removed_calls"]),
            n(&o["stale_answers"])
        ),
        (9, 7, 3),
        "{o:#}"
    );
    let j = whatif_json(&w.trace(), &["--cache", &glob]);
    let o = &j["outcomes"][0];
    assert_eq!(
        (n(&o["removed_calls"]), n(&o["stale_answers"])),
        (8, 6),
        "without a TTL the old answer is served to the end"
    );
}

#[test]
fn keep_open_on_an_open_pwrite_close_loop_saves_the_opens_and_closes_and_puts_the_bytes_at_risk() {
    require!("gcc");
    let w = Work::new();
    let exe = common::c_workload_at(&workload("detectors/open-close-churn/dirty.c"));
    let file = format!("{}/tiles.bin", w.p());
    record(&w, &[exe.to_str().unwrap(), &file, "50"]);
    let glob = format!("{}/*.bin", w.p());
    let j = whatif_json(&w.trace(), &["--keep-open", &glob, "--flush", "on-exit"]);
    let o = &j["outcomes"][0];
    // 50 opens and 50 closes; one of each is left.
    assert_eq!(
        (
            n(&o["calls_before"]),
            n(&o["calls_after"]),
            n(&o["removed_calls"])
        ),
        (100, 2, 98),
        "{o:#}"
    );
    let risk = &o["keep_open"];
    // 50 pwrites of 8 bytes, all buffered until the process exits.
    assert_eq!(
        (n(&risk["bytes_at_risk"]), n(&risk["records_at_risk"])),
        (400, 50)
    );
    assert_eq!(risk["worst_path"], file.as_str());
    // Each pwrite starts where the last ended: a buffer would merge the 50 into one write.
    assert_eq!(
        (n(&risk["writes_before"]), n(&risk["writes_after"])),
        (50, 1)
    );
    assert_eq!(o["verdict"], "safe");
    let rows = o["by_syscall"].as_array().unwrap();
    let openat = rows
        .iter()
        .find(|r| r["name"] == "openat")
        .expect("openat row");
    assert_eq!(n(&openat["before"]) - n(&openat["after"]), 49);
    // Written through at once, nothing is at risk.
    let j = whatif_json(&w.trace(), &["--keep-open", &glob, "--flush", "each-write"]);
    assert_eq!(n(&j["outcomes"][0]["keep_open"]["bytes_at_risk"]), 0);
}

#[test]
fn ensure_dir_once_reports_the_moment_another_process_removed_the_directory() {
    require!("gcc");
    let w = Work::new();
    let exe = common::c_workload_at(&workload("whatif/ensure_dir_removed.c"));
    record(&w, &[exe.to_str().unwrap(), w.p()]);
    let j = whatif_json(&w.trace(), &["--ensure-dir-once", "**/chats"]);
    let o = &j["outcomes"][0];
    // Ten records of stat + mkdir: the flag, set by the first mkdir, removes both calls of
    // the nine others; in the sixth, the stat found the directory missing and mkdir created
    // it again: two answers the flag got wrong.
    assert_eq!(
        (
            n(&o["calls_before"]),
            n(&o["removed_calls"]),
            n(&o["stale_answers"])
        ),
        (20, 18, 2),
        "{o:#}"
    );
    assert_eq!(n(&o["moments_total"]), 1);
    let m = &o["moments"][0];
    assert_eq!(m["call"], "rmdir");
    assert!(m["path"].as_str().unwrap().ends_with("/chats"));
    assert_eq!(o["stale_examples"][0]["cause"]["kind"], "other_process");
    assert_eq!(n(&o["stale_examples"][0]["cause"]["pid"]), n(&m["pid"]));
    assert_eq!(o["verdict"], "unsafe");
    // The finding's own fix is the same flag, and its count agrees.
    let j = whatif_json(&w.trace(), &[]);
    let o = &j["outcomes"][0];
    assert_eq!(o["finding"]["detector"], "ensure-dir");
    assert_eq!(n(&o["finding"]["redundant_calls"]), 16);
    assert_eq!(n(&o["removed_calls"]) - n(&o["stale_answers"]), 16);
}

/// The real Python interpreter (python3 may be a pyenv shim that runs more programs).
fn python() -> Option<String> {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && p.starts_with('/')).then_some(p)
}

#[test]
fn every_dirty_twins_findings_replayed_under_their_own_fix_save_what_they_say() {
    require!("gcc");
    let py = python();
    let node = common::have("node");
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    let c = |rel: &str| -> String {
        common::c_workload_at(&workload(&format!("detectors/{rel}.c")))
            .to_str()
            .unwrap()
            .to_string()
    };
    for (rel, args) in [
        ("check-then-act/dir_probe_dirty", vec![]),
        ("fsync-per-op/dirty", vec!["journal.log"]),
        ("negative-probe/failures_dirty", vec![]),
        ("no-reader/dirty", vec![]),
        ("open-close-churn/dirty", vec!["tiles.bin", "100"]),
        ("open-close-churn/dir_reopen_dirty", vec![]),
        ("open-close-churn/urandom_dirty", vec![]),
        ("repeated-output/log_dirty", vec!["log.txt"]),
        ("reread-unchanged/mmap_dirty", vec![]),
        ("self-inflicted-lookup/dirty", vec!["out.log"]),
        ("repeated-lookup/stat_after_change", vec!["."]),
    ] {
        let mut cmd = vec![c(rel)];
        cmd.extend(args.iter().map(|s| s.to_string()));
        cases.push((rel.to_string(), cmd));
    }
    match &py {
        Some(py) => {
            for (rel, args) in [
                ("detectors/check-then-act/dirty.py", vec![]),
                ("detectors/ensure-dir/makedirs_dirty.py", vec![]),
                ("detectors/negative-probe/dirty.py", vec!["."]),
                ("detectors/repeated-exec/dirty.py", vec![]),
                ("detectors/repeated-output/log_dirty.py", vec!["app.log"]),
                ("detectors/repeated-output/filter_dirty.py", vec!["1000"]),
                ("detectors/reread-unchanged/dirty.py", vec![]),
                ("detectors/small-writes/dirty.py", vec![]),
                ("agents/logging_dirty.py", vec!["."]),
                ("agents/spawns_dirty.py", vec![]),
            ] {
                let mut cmd = vec![py.clone(), workload(rel).to_str().unwrap().to_string()];
                cmd.extend(args.iter().map(|s| s.to_string()));
                cases.push((rel.to_string(), cmd));
            }
        }
        None => common::skip("python3", "python3 is not installed: Python twins left out"),
    }
    if node {
        for (rel, args) in [
            ("detectors/ensure-dir/dirty.js", vec![]),
            ("detectors/repeated-lookup/dirty.js", vec!["."]),
            ("detectors/repeated-output/dirty.js", vec![]),
            ("detectors/sync-io-main-thread/dirty.js", vec![]),
            ("agents/console_dirty.js", vec![]),
            ("agents/spawns_dirty.js", vec![]),
        ] {
            let mut cmd = vec![
                "node".to_string(),
                workload(rel).to_str().unwrap().to_string(),
            ];
            cmd.extend(args.iter().map(|s| s.to_string()));
            cases.push((rel.to_string(), cmd));
        }
    } else {
        common::skip("node", "node is not installed: Node.js twins left out");
    }
    // A real tool: git log -p reads the repository (nothing written), probing for
    // .gitattributes in every directory of the diff.
    if common::have("git") {
        let repo = common::repo();
        cases.push((
            "git log -p".to_string(),
            vec![
                "git".to_string(),
                "-C".to_string(),
                repo.to_str().unwrap().to_string(),
                "log".to_string(),
                "-p".to_string(),
                "-n".to_string(),
                "20".to_string(),
            ],
        ));
    }
    let mut replayed: std::collections::BTreeMap<String, u64> = Default::default();
    let mut report = String::new();
    for (rel, cmd) in &cases {
        let w = Work::new();
        // Inputs some twins read per request.
        std::fs::write(
            w.path.join("config.json"),
            "{\"greeting\": \"hello\", \"port\": 8080}\n",
        )
        .unwrap();
        std::fs::write(w.path.join("data.txt"), "some data\n").unwrap();
        let cmd: Vec<String> = cmd
            .iter()
            .map(|a| {
                if a == "." {
                    w.p().to_string()
                } else {
                    a.clone()
                }
            })
            .collect();
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        record(&w, &cmd);
        let j = whatif_json(&w.trace(), &[]);
        for o in j["outcomes"].as_array().unwrap() {
            let f = &o["finding"];
            let says = n(&f["redundant_calls"]);
            // repeated-output's fix is counted by line and repeated-exec's by run, as their
            // findings count.
            let saves = match (o.get("lines"), o.get("execs")) {
                (Some(l), _) => n(&l["removed"]),
                (_, Some(x)) => n(&x["removed"]),
                _ => n(&o["removed_calls"]) - n(&o["stale_answers"]),
            };
            report += &format!(
                "{rel}: finding {} {} says {says}, its fix replayed removes {saves}\n",
                f["number"], f["detector"]
            );
            if f["detector"] == "self-inflicted-lookup" {
                // The kept size also answers the lookup after the last write, which the
                // finding does not count (docs/whatif.md, --track-size): one per file.
                assert!(saves >= says && saves - says <= 1, "{rel}: {o:#}");
            } else {
                assert_eq!(saves, says, "{rel}: {o:#}");
            }
            *replayed
                .entry(f["detector"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    eprintln!("{report}");
    // Each modelled detector's fix was replayed on some twin (C twins always run).
    for d in [
        "negative-probe",
        "open-close-churn",
        "repeated-lookup",
        "reread-unchanged",
        "no-reader",
        "fsync-per-op",
        "small-writes",
        "check-then-act",
        "self-inflicted-lookup",
        "repeated-output",
    ] {
        assert!(replayed.contains_key(d), "{d} not replayed:\n{report}");
    }
    if node || py.is_some() {
        assert!(replayed.contains_key("ensure-dir"), "{report}");
        assert!(replayed.contains_key("repeated-exec"), "{report}");
    }
    // repeated-exec's clean twin (the version asked once): nothing to replay.
    if let Some(py) = &py {
        let w = Work::new();
        let script = workload("detectors/repeated-exec/clean.py");
        record(&w, &[py.as_str(), script.to_str().unwrap()]);
        let j = whatif_json(&w.trace(), &[]);
        assert!(
            !j.to_string().contains("\"repeated-exec\""),
            "repeated-exec/clean.py: {j:#}"
        );
    }
}

#[test]
fn bad_policy_strings_are_usage_errors_that_show_the_accepted_syntax() {
    // Policies are read before the trace: no recording needed.
    let t = Path::new("/nonexistent/t.dvt");
    for (args, flag) in [
        (vec!["--cache", "open:/x/**"], "--cache"),
        (vec!["--cache", "/srv/**"], "--cache"),
        (vec!["--cache", "stat:/srv/["], "--cache"),
        (
            vec!["--cache", "stat", "--invalidate", "sometimes"],
            "--invalidate",
        ),
        (vec!["--cache", "stat", "--ttl", "5"], "--ttl"),
        (vec!["--keep-open", "/x", "--flush", "never"], "--flush"),
        (vec!["--cache", "stat", "--flush", "on-exit"], "--flush"),
        (vec!["--keep-open", "/x", "--ttl", "2s"], "--ttl"),
        (vec!["--ttl", "0s"], "--ttl"),
        (vec!["--ensure-dir-once", ""], "--ensure-dir-once"),
        (vec!["--skip-unread", ""], "--skip-unread"),
        (vec!["--batch-syncs", "/db/["], "--batch-syncs"),
        (vec!["--batch-writes", ""], "--batch-writes"),
        (vec!["--skip-checks", "/x/[a"], "--skip-checks"),
        (vec!["--track-size", ""], "--track-size"),
    ] {
        let out = whatif(t, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(err.contains("accepted policies:"), "{args:?}: {err}");
        assert!(err.contains("--keep-open GLOB"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "stdout carries reports only");
    }
    // A trace that cannot be read is 1, as for every command that reads traces.
    let out = whatif(t, &["--cache", "stat"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn finding_n_replays_that_findings_fix_only_and_a_number_out_of_range_is_a_usage_error() {
    require!("gcc");
    let w = Work::new();
    let exe = common::c_workload_at(&workload("detectors/open-close-churn/dirty.c"));
    record(&w, &[exe.to_str().unwrap(), "tiles.bin", "20"]);
    let j = whatif_json(&w.trace(), &["--finding", "1"]);
    let outs = j["outcomes"].as_array().unwrap();
    assert_eq!(outs.len(), 1);
    assert_eq!(n(&outs[0]["finding"]["number"]), 1);
    assert_eq!(outs[0]["finding"]["detector"], "open-close-churn");
    assert_eq!(n(&outs[0]["removed_calls"]), 38);
    let out = whatif(&w.trace(), &["--finding", "7"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--finding 7") && err.contains("1 finding"),
        "{err}"
    );
}

#[test]
fn the_help_explains_every_policy_flag() {
    let out = Command::new(common::dejavu())
        .args(["whatif", "--help"])
        .output()
        .expect("dejavu runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--cache <CALLS[:GLOB]>",
        "--negative-cache <GLOB>",
        "--invalidate <WHEN>",
        "--ttl <DURATION>",
        "--keep-open <GLOB>",
        "--flush <WHEN>",
        "--ensure-dir-once <GLOB>",
        "--log-once[=<GLOB>]",
        "--skip-unread <GLOB>",
        "--batch-syncs <GLOB>",
        "--batch-writes <GLOB>",
        "--skip-checks <GLOB>",
        "--track-size <GLOB>",
        "--finding <N>",
        "--json",
        "docs/whatif.md",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[test]
fn log_once_on_a_daemon_logging_the_same_notice_per_job_keeps_one_line_of_each() {
    require!("gcc");
    let w = Work::new();
    let exe = common::c_workload_at(&workload("detectors/repeated-output/log_dirty.c"));
    let log = format!("{}/worker.txt", w.p());
    record(&w, &[exe.to_str().unwrap(), &log, "50"]);
    // fopen("w"): not an append-mode file, so only a glob makes it an output; without
    // one, the only output is the sum printed on stdout.
    let j = whatif_json(&w.trace(), &["--log-once"]);
    let o = &j["outcomes"][0];
    assert_eq!(
        (n(&o["calls_before"]), n(&o["removed_calls"])),
        (1, 0),
        "{o:#}"
    );
    let glob = format!("--log-once={}/*.txt", w.p());
    let j = whatif_json(&w.trace(), &[&glob]);
    let o = &j["outcomes"][0];
    // 50 notices and the summary line, one write each: 49 notices go.
    assert_eq!(
        (n(&o["calls_before"]), n(&o["removed_calls"])),
        (51, 49),
        "{o:#}"
    );
    assert_eq!(o["verdict"], "safe");
}

#[test]
fn without_a_policy_ttl_and_invalidate_change_each_findings_own_fix() {
    require!("gcc");
    let w = Work::new();
    let exe = common::c_workload_at(&workload("detectors/negative-probe/failures_dirty.c"));
    record(&w, &[exe.to_str().unwrap()]);
    let own = whatif_json(&w.trace(), &[]);
    let o = &own["outcomes"][0];
    assert_eq!(o["finding"]["detector"], "negative-probe");
    let says = n(&o["finding"]["redundant_calls"]);
    assert_eq!(n(&o["removed_calls"]), says);
    // Entries that expire after 1 ns answer nothing: every call is asked again.
    let j = whatif_json(&w.trace(), &["--ttl", "1ns"]);
    let o = &j["outcomes"][0];
    assert!(o["policy"].as_str().unwrap().contains("--ttl 1ns"), "{o:#}");
    assert_eq!(n(&o["removed_calls"]), 0, "{o:#}");
    // Never invalidating removes at least as much as invalidating on the directory.
    let j = whatif_json(&w.trace(), &["--invalidate", "never"]);
    assert!(n(&j["outcomes"][0]["removed_calls"]) >= says);
}

/// Records a C twin of tests/workloads/detectors in a fresh directory.
fn c_twin(rel: &str, args: &[&str]) -> Work {
    let w = Work::new();
    let exe = common::c_workload_at(&workload(&format!("detectors/{rel}.c")));
    let mut cmd = vec![exe.to_str().unwrap()];
    cmd.extend_from_slice(args);
    record(&w, &cmd);
    w
}

#[test]
fn the_write_side_fixes_say_what_they_put_at_risk_and_clean_twins_have_nothing_to_replay() {
    require!("gcc");
    // no-reader's dirty twin: 200 writes to /dev/null, all dropped by its own fix, their
    // bytes what a reader that needed them would miss.
    let w = c_twin("no-reader/dirty", &[]);
    let j = whatif_json(&w.trace(), &[]);
    let o = &j["outcomes"][0];
    assert_eq!(o["finding"]["detector"], "no-reader", "{j:#}");
    assert_eq!(o["kind"], "skip-unread");
    assert_eq!(n(&o["removed_calls"]), n(&o["finding"]["redundant_calls"]));
    assert_eq!(n(&o["at_risk"]["records"]), n(&o["removed_calls"]));
    assert!(n(&o["at_risk"]["bytes"]) > 0);
    assert!(
        o["hazards"][0].as_str().unwrap().contains("deliberate"),
        "{o:#}"
    );
    // fsync-per-op's: one sync per batch; the bytes the dropped syncs had made durable.
    let w = c_twin("fsync-per-op/dirty", &["journal.log"]);
    let j = whatif_json(&w.trace(), &[]);
    let o = j["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["finding"]["detector"] == "fsync-per-op")
        .unwrap_or_else(|| panic!("no fsync-per-op outcome: {j:#}"));
    assert_eq!(o["kind"], "batch-syncs");
    let says = n(&o["finding"]["redundant_calls"]);
    assert_eq!(
        (n(&o["calls_before"]), n(&o["removed_calls"])),
        (says + 1, says),
        "{o:#}"
    );
    // Under the fix, every record but those after the last sync waits for it.
    assert_eq!(n(&o["at_risk"]["records"]), says + 1, "{o:#}");
    assert!(o["hazards"][0].as_str().unwrap().contains("group commit"));
    // small-writes' (a C logger's fprintf per field, unbuffered): each run merged into
    // one write per 64 KiB; the buffer's bytes are what a crash would lose.
    let w = c_twin("repeated-output/log_dirty", &["log.txt"]);
    let j = whatif_json(&w.trace(), &[]);
    let o = j["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["finding"]["detector"] == "small-writes")
        .unwrap_or_else(|| panic!("no small-writes outcome: {j:#}"));
    assert_eq!(o["kind"], "batch-writes");
    assert_eq!(n(&o["removed_calls"]), n(&o["finding"]["redundant_calls"]));
    assert!(n(&o["at_risk"]["records"]) > 1, "{o:#}");
    assert!(o["hazards"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h.as_str().unwrap().contains("flush the buffer on exit")));
    // Their clean twins: no finding of their detector, nothing replayed or listed for it.
    for (rel, args, detectors) in [
        ("no-reader/clean", vec![], vec!["no-reader"]),
        (
            "fsync-per-op/clean",
            vec!["journal.log"],
            vec!["fsync-per-op"],
        ),
        (
            "repeated-output/log_clean",
            vec!["log.txt"],
            vec!["small-writes", "repeated-output"],
        ),
        (
            "check-then-act/dir_probe_clean",
            vec![],
            vec!["check-then-act"],
        ),
        (
            "self-inflicted-lookup/clean",
            vec!["out.log"],
            vec!["self-inflicted-lookup"],
        ),
    ] {
        let w = c_twin(rel, &args);
        let j = whatif_json(&w.trace(), &[]);
        let all: Vec<&Value> = j["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| &o["finding"])
            .chain(j["not_replayed"].as_array().unwrap())
            .collect();
        assert!(
            all.iter()
                .all(|f| !detectors.contains(&f["detector"].as_str().unwrap())),
            "{rel}: {j:#}"
        );
    }
}

#[test]
fn finding_n_with_a_modifier_changes_its_fix_and_with_policies_replays_them_in_its_scope() {
    require!("gcc");
    let w = c_twin("negative-probe/failures_dirty", &[]);
    let own = whatif_json(&w.trace(), &["--finding", "1"]);
    let o = &own["outcomes"][0];
    assert_eq!(o["finding"]["detector"], "negative-probe", "{own:#}");
    let says = n(&o["finding"]["redundant_calls"]);
    assert_eq!(n(&o["removed_calls"]), says);
    // Finding 1's own fix with a TTL that expires at once: nothing is answered.
    let j = whatif_json(&w.trace(), &["--finding", "1", "--ttl", "1ns"]);
    let o = &j["outcomes"][0];
    assert!(o["policy"].as_str().unwrap().contains("--ttl 1ns"), "{o:#}");
    assert_eq!((n(&o["removed_calls"]), n(&o["finding"]["number"])), (0, 1));
    // A policy of its own, limited to finding 1's processes and paths: a negative cache
    // never invalidated removes at least what the finding says; it is compared with it.
    let j = whatif_json(
        &w.trace(),
        &[
            "--finding",
            "1",
            "--negative-cache",
            "/**",
            "--invalidate",
            "never",
        ],
    );
    let outs = j["outcomes"].as_array().unwrap();
    assert_eq!(outs.len(), 1);
    assert_eq!(n(&outs[0]["finding"]["number"]), 1);
    assert!(n(&outs[0]["removed_calls"]) >= says, "{j:#}");
    // A stat cache of the same paths removes nothing: the finding's calls fail.
    let j = whatif_json(&w.trace(), &["--finding", "1", "--cache", "stat"]);
    assert_eq!(n(&j["outcomes"][0]["removed_calls"]), 0, "{j:#}");
    // Combinations that make no sense are usage errors that say why.
    for (args, why) in [
        (
            vec!["--finding", "1", "--flush", "each-write"],
            "it keeps no handle open",
        ),
        (
            vec!["--finding", "1", "--keep-open", "/nowhere/*"],
            "none of the finding's paths matches",
        ),
    ] {
        let out = whatif(&w.trace(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--finding 1") && err.contains(why),
            "{args:?}: {err}"
        );
    }
}
