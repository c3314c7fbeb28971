//! dejavu record counts every traced call exactly as strace does: per syscall, the call
//! and error counts of `dejavu summary --json` equal `strace -f -c` on the same program.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tmp")
}

#[test]
fn a_c_tour_of_every_call_family_with_threads_fork_and_exec_counts_like_strace() {
    require!("strace");
    let prog = common::c_workload("syscall_tour");
    let d = tmp();
    let p = prog.to_str().unwrap();
    common::assert_counts_match_strace(&[p, d.path().to_str().unwrap()], d.path());
}

#[test]
fn a_hundred_forked_children_are_all_followed() {
    require!("strace");
    let prog = common::c_workload("forks");
    let d = tmp();
    common::assert_counts_match_strace(&[prog.to_str().unwrap(), "100"], d.path());
    // And the process tree has all of them, each with its exit code.
    let trace = d.path().join("t.dvt");
    let out = common::record(&trace, &[prog.to_str().unwrap(), "100"], d.path());
    assert!(out.status.success());
    let v = common::summary_json(&trace);
    let procs = v["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), 101, "root + 100 children");
    let mut codes: Vec<i64> = procs
        .iter()
        .skip(1)
        .map(|p| p["exit"].as_i64().unwrap_or(-1))
        .collect();
    codes.sort();
    assert_eq!(codes, (0..100).collect::<Vec<i64>>());
}

#[test]
fn every_thread_of_a_multithreaded_program_is_traced() {
    require!("strace");
    let prog = common::c_workload("threads");
    let d = tmp();
    common::assert_counts_match_strace(&[prog.to_str().unwrap(), "8", "500"], d.path());
    let trace = d.path().join("t.dvt");
    assert!(
        common::record(&trace, &[prog.to_str().unwrap(), "8", "500"], d.path())
            .status
            .success()
    );
    let v = common::summary_json(&trace);
    let stat_calls: u64 = ["stat", "newfstatat", "statx"]
        .iter()
        .map(|n| v["syscalls"][n]["calls"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        stat_calls >= 4000,
        "8 threads x 500 stats, got {stat_calls}"
    );
    let tmp_path = v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == "/tmp")
        .expect("/tmp in paths");
    assert_eq!(tmp_path["calls"].as_u64(), Some(4000));
}

#[test]
fn coreutils_count_like_strace() {
    require!("strace");
    let d = tmp();
    let dir = d.path();
    std::fs::write(dir.join("src.txt"), "some bytes\n".repeat(100)).unwrap();
    let fresh = |d: &std::path::Path| {
        let _ = std::fs::remove_file(d.join("dst.txt"));
        let _ = std::fs::remove_dir_all(d.join("a"));
    };
    for cmd in [
        vec!["ls", "-l", "/usr/bin"],
        vec!["cp", "src.txt", "dst.txt"],
        vec!["mkdir", "-p", "a/b/c/d"],
        vec!["cat", "src.txt"],
    ] {
        common::assert_counts_match_strace_with(&cmd, dir, fresh);
    }
}

#[test]
fn python_counts_like_strace() {
    require!("strace");
    require!("python3");
    let d = tmp();
    // The interpreter itself: `python3` may be a shim script (pyenv) whose shell pipes
    // make the number of read calls depend on timing, which no tracer controls.
    let py = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let py = String::from_utf8(py.stdout).unwrap().trim().to_string();
    common::assert_counts_match_strace_with(
        &[
            py.as_str(),
            "-c",
            "import os\nfor i in range(50): os.stat('/')\nopen('x','w').write('hi')",
        ],
        d.path(),
        |d| {
            let _ = std::fs::remove_file(d.join("x"));
        },
    );
}

#[test]
fn node_counts_like_strace() {
    require!("strace");
    require!("node");
    let d = tmp();
    common::assert_counts_match_strace(
        &["node", "-e", "const fs=require('fs'); for (let i=0;i<50;i++) fs.statSync('/'); fs.writeFileSync('x','hi')"],
        d.path(),
    );
}

#[test]
fn paths_are_absolute_and_relative_calls_resolve_against_the_right_directory() {
    let prog = common::c_workload("syscall_tour");
    let d = tmp();
    let dir = d.path().canonicalize().unwrap();
    let trace = dir.join("t.dvt");
    let out = common::record(
        &trace,
        &[prog.to_str().unwrap(), dir.to_str().unwrap()],
        &dir,
    );
    assert!(out.status.success());
    let v = common::summary_json(&trace);
    let paths: Vec<String> = v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect();
    let has = |p: &Path| paths.iter().any(|x| x == p.to_str().unwrap());
    // openat(dirfd, "rel.txt") resolves against the directory descriptor.
    assert!(has(&dir.join("sub/rel.txt")), "{paths:?}");
    // stat("../a.txt") after chdir(sub) resolves against the new cwd (`..` kept).
    assert!(has(&dir.join("sub/../a.txt")), "{paths:?}");
    // connect() to a unix socket path names it.
    assert!(has(&dir.join("nosock")), "{paths:?}");
    for p in &paths {
        assert!(
            p.starts_with('/')
                || p.starts_with("pipe:")
                || p.starts_with("socket:")
                || p.starts_with("anon_inode:"),
            "{p}"
        );
    }
}
