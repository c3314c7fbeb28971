//! Every finding points at the line of code that made the calls: the first call site of
//! each dirty fixture's finding is the exact file:line of the offending call, in C (built
//! with -g), Rust, Node.js and Python.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The 1-based line of `file` that contains `marker`.
fn line_of(file: &Path, marker: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .position(|l| l.contains(marker))
        .expect("marker in fixture") as u64
        + 1
}

/// `dejavu run` with the JSON report in a file; returns the report.
fn run_report(cmd: &[&str], dir: &Path) -> Value {
    run_report_with(&[], cmd, dir)
}

/// `run_report` with extra `dejavu run` flags.
fn run_report_with(flags: &[&str], cmd: &[&str], dir: &Path) -> Value {
    let report = dir.join("report.json");
    let st = Command::new(common::dejavu())
        .args(["run", "--json", "--min-calls", "5"])
        .args(flags)
        .arg("--report-file")
        .arg(&report)
        .arg("--")
        .args(cmd)
        .current_dir(dir)
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "{cmd:?}");
    serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap()
}

/// The first call site of the first finding of `detector` on a path ending in `path_end`.
fn first_callsite(report: &Value, detector: &str, path_end: &str) -> Value {
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["detector"] == detector
                && f["paths"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p.as_str().unwrap().ends_with(path_end))
        })
        .unwrap_or_else(|| panic!("no {detector} finding on {path_end}: {report:#}"));
    f["callsites"][0].clone()
}

/// Asserts that call site `c` is at the line of `src` marked by `marker`, in a file whose
/// path ends with `file_end`.
fn assert_at(c: &Value, file_end: &str, src: &Path, marker: &str) {
    let file = c["file"].as_str().unwrap_or_default();
    assert!(file.ends_with(file_end), "want {file_end}: {c:#}");
    assert_eq!(c["line"].as_u64(), Some(line_of(src, marker)), "{c:#}");
}

/// Compiles `src` with `compiler` and `flags` into `out`.
fn compile(compiler: &str, flags: &[&str], src: &Path, out: &Path) {
    let st = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(src)
        .status()
        .unwrap();
    assert!(st.success(), "{compiler} {}", src.display());
}

fn fixture(rel: &str) -> PathBuf {
    common::repo().join("tests/workloads").join(rel)
}

#[test]
fn c_built_with_debug_info_points_at_the_stat_line() {
    let src = fixture("stacks/stat_site.c");
    let d = tempfile::tempdir().unwrap();
    let exe = d.path().join("stat_site");
    compile("gcc", &["-g", "-O2"], &src, &exe);
    std::fs::write(d.path().join("app.conf"), "x").unwrap();
    // DWARF unwinding (no frame pointers at -O2) is the ptrace backend's; eBPF's frame-
    // pointer stacks are tested in tests/ebpf.rs.
    let r = run_report_with(
        &["--backend", "ptrace"],
        &[exe.to_str().unwrap(), "app.conf", "50"],
        d.path(),
    );
    let c = first_callsite(&r, "repeated-lookup", "/app.conf");
    assert_eq!(c["function"], "probe_config", "{c:#}");
    assert_at(&c, "stat_site.c", &src, "STAT_LINE");
    assert_eq!(c["redundant_calls"].as_u64(), Some(49));
}

#[test]
fn rust_points_at_the_metadata_line() {
    require!("rustc");
    let src = fixture("stacks/stat_site.rs");
    let d = tempfile::tempdir().unwrap();
    let exe = d.path().join("stat_site_rs");
    compile("rustc", &["-g"], &src, &exe);
    std::fs::write(d.path().join("app.conf"), "x").unwrap();
    let r = run_report_with(
        &["--backend", "ptrace"],
        &[exe.to_str().unwrap(), "app.conf", "50"],
        d.path(),
    );
    let c = first_callsite(&r, "repeated-lookup", "/app.conf");
    let function = c["function"].as_str().unwrap();
    assert!(function.contains("probe_config"), "{c:#}");
    assert_at(&c, "stat_site.rs", &src, "STAT_LINE");
}

#[test]
fn node_points_at_the_javascript_line() {
    require!("node");
    let src = fixture("detectors/repeated-lookup/dirty.js");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().canonicalize().unwrap();
    let cmd = ["node", src.to_str().unwrap(), dir.to_str().unwrap()];
    let c = first_callsite(&run_report(&cmd, &dir), "repeated-lookup", "/config.json");
    assert_eq!(c["file"].as_str(), src.to_str(), "{c:#}");
    assert_at(&c, "dirty.js", &src, "fs.statSync(config)");
    assert_eq!(c["redundant_calls"].as_u64(), Some(99));
}

#[test]
fn python_points_at_the_python_line_not_the_standard_library() {
    require!("python3");
    let py = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let py = String::from_utf8(py.stdout).unwrap().trim().to_string();
    let src = fixture("detectors/negative-probe/dirty.py");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().canonicalize().unwrap();
    let cmd = [py.as_str(), src.to_str().unwrap(), dir.to_str().unwrap()];
    let c = first_callsite(&run_report(&cmd, &dir), "negative-probe", "/override.json");
    // os.path.exists calls os.stat inside genericpath.py; the site is the caller's line.
    assert_eq!(c["file"].as_str(), src.to_str(), "{c:#}");
    assert_at(&c, "dirty.py", &src, "os.path.exists(override)");
    assert_eq!(c["function"], "<module>", "{c:#}");
}

/// A process started per event from C names the line that started it, whichever way it was
/// started: posix_spawn (whose child runs on a stack of its own: a few frames of libc's,
/// none of the program's), fork then exec in the child, vfork then exec, system(). The
/// exec's site is the parent's stack at the fork or clone (vfork: the child's at its exec,
/// on the same stack), under both backends. The clean twin (the tool run
/// once, its answer kept) has no repeated-exec finding.
#[test]
fn c_a_process_per_event_names_the_line_that_started_it() {
    let src = fixture("stacks/spawn_site.c");
    let d = tempfile::tempdir().unwrap();
    let exe = d.path().join("spawn_site");
    compile("gcc", &["-g", "-O2"], &src, &exe);
    let exe = exe.to_str().unwrap();
    for (mode, path_end, function, marker) in [
        ("spawn", "/true", "tool_version_spawn", "SPAWN_LINE"),
        ("fork", "/true", "tool_version_fork", "FORK_LINE"),
        // Its child runs on its stack: the exec's own stack, at the call's entry.
        ("vfork", "/true", "tool_version_vfork", "VFORK_EXEC_LINE"),
        ("system", "/sh", "tool_version_system", "SYSTEM_LINE"),
    ] {
        let r = run_report(&[exe, mode, "12"], d.path());
        // Running the tool per event is the program's doing; what the tool (a system
        // program: `sh -c` for system()) repeats inside is the tool's.
        for f in r["findings"].as_array().unwrap() {
            let tool = f["program"] != "spawn_site";
            assert_eq!(f["owner"] == "tool", tool, "{mode}: {f:#}");
        }
        let c = first_callsite(&r, "repeated-exec", path_end);
        assert_eq!(c["function"], function, "{mode}: {c:#}");
        assert_at(&c, "spawn_site.c", &src, marker);
        assert_eq!(c["redundant_calls"].as_u64(), Some(11), "{mode}: {c:#}");
    }
    let r = run_report(&[exe, "once", "12"], d.path());
    let execs: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["detector"] == "repeated-exec")
        .collect();
    assert!(execs.is_empty(), "{execs:#?}");
}
