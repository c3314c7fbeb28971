//! A finding is one fix, in the program's own code first (issue 9): real programs recorded
//! (under the backend `DEJAVU_BACKEND` picks), then `dejavu report --json` and the terminal
//! report read as a user would: one finding per call site across paths and processes, the
//! per-call sequence, whose code made the calls, the program's line, launchers and
//! start-up folded, and keys that stay the same from run to run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixture(rel: &str) -> PathBuf {
    common::repo().join("tests/workloads/findings").join(rel)
}

/// The 1-based line of `marker` in a fixture.
fn line_of(rel: &str, marker: &str) -> u64 {
    let text = std::fs::read_to_string(fixture(rel)).unwrap();
    text.lines().position(|l| l.contains(marker)).unwrap() as u64 + 1
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().expect("tool runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Records `cmd` in `cwd` into `cwd/NAME.dvt`.
fn record(cwd: &Path, name: &str, cmd: &[&str]) -> PathBuf {
    let trace = cwd.join(format!("{name}.dvt"));
    let (st, err) = common::record_quiet(&trace, cmd, cwd);
    assert!(st.success(), "{cmd:?}: {err}");
    trace
}

/// `dejavu report --json [flags] TRACE`.
fn report_json(trace: &Path, flags: &[&str]) -> Value {
    let out = Command::new(common::dejavu())
        .arg("report")
        .arg("--json")
        .args(flags)
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The terminal report, as a user sees it (no colour, 100 columns).
fn report_text(trace: &Path, flags: &[&str]) -> String {
    let out = Command::new(common::dejavu())
        .args(["report", "--color", "never"])
        .args(flags)
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn findings(v: &Value) -> Vec<Value> {
    v["findings"].as_array().cloned().unwrap_or_default()
}

fn by_detector(v: &Value, detector: &str) -> Vec<Value> {
    findings(v)
        .into_iter()
        .filter(|f| f["detector"] == detector)
        .collect()
}

/// A directory with host/f00.txt .. host/f39.txt, as probe_loop expects.
fn probe_data(dir: &Path) {
    std::fs::create_dir_all(dir.join("host")).unwrap();
    for i in 0..40 {
        std::fs::write(dir.join(format!("host/f{i:02}.txt")), format!("{i}\n")).unwrap();
    }
}

fn build_probe_loop(dir: &Path) -> PathBuf {
    let exe = dir.join("probe_loop");
    run_ok(
        Command::new("gcc")
            .args(["-O2", "-g", "-fno-omit-frame-pointer", "-o"])
            .arg(&exe)
            .arg(fixture("probe_loop.c")),
    );
    exe
}

#[test]
fn forty_paths_probed_per_call_are_one_finding_at_the_function_with_its_sequence() {
    require!("gcc");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let exe = build_probe_loop(&work);
    let data = work.join("data");
    probe_data(&data);
    // The program waits 300 ms before exiting: the eBPF backend names frames after the fact.
    let trace = record(
        &work,
        "dirty",
        &[exe.to_str().unwrap(), data.to_str().unwrap(), "30", "300"],
    );
    let v = report_json(&trace, &[]);
    let mine = |d: &str| -> Vec<Value> {
        by_detector(&v, d)
            .into_iter()
            .filter(|f| f["program"] == "probe_loop" && f["owner"] == "own")
            .collect()
    };
    let lookups = mine("repeated-lookup");
    assert_eq!(
        lookups.len(),
        1,
        "one finding for the 40 paths: {lookups:#?}"
    );
    let f = &lookups[0];
    // stat and lstat of host/NAME, rounds 2..30: 2 x 40 x 29.
    assert_eq!(f["redundant_calls"], 2 * 40 * 29);
    assert_eq!(f["path_count"], 40);
    assert_eq!(f["owner"], "own");
    assert_eq!(f["program"], "probe_loop");
    let host = data.join("host").to_str().unwrap().to_string();
    assert_eq!(f["paths"][0], format!("{host}/*.txt"));
    // One site per line of the function: the stat and the lstat of host/NAME, half of
    // the calls each.
    let mut lines: Vec<(u64, f64)> = f["callsites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["function"], "path_filestat_get", "{c:#}");
            (c["line"].as_u64().unwrap(), c["share"].as_f64().unwrap())
        })
        .collect();
    lines.sort_by_key(|l| l.0);
    assert_eq!(
        lines,
        [
            (line_of("probe_loop.c", "HOST_LINE"), 0.5),
            (line_of("probe_loop.c", "LSTAT_LINE"), 0.5)
        ],
        "{f:#}"
    );
    assert!(
        f["key"].as_str().unwrap().ends_with(
            "|repeated-lookup|own|path_filestat_get@"
                .to_string()
                .as_str()
        ) || f["key"]
            .as_str()
            .unwrap()
            .contains("|repeated-lookup|own|path_filestat_get@"),
        "{}",
        f["key"]
    );
    // The negative probe of guest/NAME: one finding too, at the same function.
    let probes = mine("negative-probe");
    assert_eq!(probes.len(), 1, "{probes:#?}");
    assert_eq!(probes[0]["redundant_calls"], 40 * 29);
    assert_eq!(probes[0]["callsites"][0]["function"], "path_filestat_get");
    // The sequence each call makes.
    let q = &f["sequence"];
    assert_eq!(q["function"], "path_filestat_get");
    assert_eq!(q["calls"], 3);
    assert_eq!(q["iterations"], 40 * 30);
    assert_eq!(
        q["steps"],
        serde_json::json!([
            format!("stat {}/guest/* -> ENOENT", data.display()),
            format!("stat {host}/*"),
            format!("lstat {host}/*"),
        ])
    );
    // 29 of 30 rounds repeat all three calls.
    assert_eq!(q["redundant"], 2.9);
    let text = report_text(&trace, &[]);
    assert!(
        text.contains("loop:")
            && text.contains("per call of path_filestat_get: 3 file calls, 2.9 redundant"),
        "{text}"
    );

    // The clean twin: one round, nothing repeated.
    let clean = work.join("clean");
    probe_data(&clean);
    let trace = record(
        &work,
        "clean",
        &[exe.to_str().unwrap(), clean.to_str().unwrap(), "1", "300"],
    );
    let v = report_json(&trace, &[]);
    assert!(
        findings(&v)
            .iter()
            .all(|f| f["program"] != "probe_loop" || f["owner"] != "own"),
        "{:#?}",
        findings(&v)
    );
}

#[test]
fn a_python_scripts_own_stat_ranks_first_and_start_up_is_one_line() {
    require!("python3");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let script = fixture("stat_loop.py");
    let target = work.join("app.conf");
    std::fs::write(&target, "x=1\n").unwrap();
    let trace = record(
        &work,
        "dirty",
        &[
            "python3",
            script.to_str().unwrap(),
            target.to_str().unwrap(),
            "100",
        ],
    );
    let v = report_json(&trace, &[]);
    let all = findings(&v);
    let first = &all[0];
    assert_eq!(first["owner"], "own", "{first:#}");
    assert_eq!(first["program"], "stat_loop.py");
    assert_eq!(first["detector"], "repeated-lookup");
    assert_eq!(first["paths"][0], target.to_str().unwrap());
    assert_eq!(first["redundant_calls"], 99);
    let line = line_of("stat_loop.py", "STAT_LINE");
    assert_eq!(first["callsites"][0]["function"], "check_config");
    assert_eq!(first["callsites"][0]["line"], line);
    // Nothing else of the program's own: the interpreter's start-up is the runtime's.
    assert_eq!(
        all.iter().filter(|f| f["owner"] == "own").count(),
        1,
        "{:#?}",
        all.iter()
            .filter(|f| f["owner"] == "own")
            .collect::<Vec<_>>()
    );
    let text = report_text(&trace, &[]);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            let w: Vec<&str> = l.split_whitespace().take(2).collect();
            w.len() == 2 && w[0].parse::<u32>().is_ok() && ["low", "medium", "high"].contains(&w[1])
        })
        .collect();
    assert_eq!(
        rows.len(),
        1,
        "only the program's own finding is a row: {text}"
    );
    if all.iter().any(|f| f["owner"] == "runtime") {
        // The folded part's own line ("runtime start-up and loaders: 330 redundant calls in
        // 8 findings ..."), not the headline, whose wrapping can also start a line with
        // these words (it did under a longer checkout path).
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("runtime start-up and loaders:")
                    && l.contains(" redundant calls in "))
                .count(),
            1,
            "{text}"
        );
    }
    // --all lists the runtime's findings as rows too.
    let every = report_text(&trace, &["--all"]);
    assert!(!every.contains("--all shows them"), "{every}");

    // The clean twin: one stat, no finding of the program's own.
    let trace = record(
        &work,
        "clean",
        &[
            "python3",
            script.to_str().unwrap(),
            target.to_str().unwrap(),
            "1",
        ],
    );
    let v = report_json(&trace, &[]);
    assert!(
        findings(&v).iter().all(|f| f["owner"] != "own"),
        "{:#?}",
        findings(&v)
    );
}

#[test]
fn a_shim_that_execs_the_real_program_is_a_launcher_and_the_program_comes_first() {
    require!("python3");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let target = work.join("app.conf");
    std::fs::write(&target, "x=1\n").unwrap();
    let shim = fixture("shim.sh");
    let script = fixture("stat_loop.py");
    let trace = record(
        &work,
        "shim",
        &[
            shim.to_str().unwrap(),
            "python3",
            script.to_str().unwrap(),
            target.to_str().unwrap(),
            "100",
        ],
    );
    let v = report_json(&trace, &["--min-calls", "1"]);
    let all = findings(&v);
    assert_eq!(all[0]["program"], "stat_loop.py", "{all:#?}");
    assert_eq!(all[0]["owner"], "own");
    // The shim's own probing is there, as a launcher's.
    let shim_findings: Vec<&Value> = all.iter().filter(|f| f["program"] == "shim.sh").collect();
    assert!(!shim_findings.is_empty(), "{all:#?}");
    assert!(
        shim_findings.iter().all(|f| f["owner"] == "launcher"),
        "{shim_findings:#?}"
    );
    let text = report_text(&trace, &["--min-calls", "1"]);
    assert!(text.contains("launchers: "), "{text}");
}

#[test]
fn a_fetched_crates_cargo_build_script_is_the_dependencys_code_a_workspace_ones_own() {
    // cargo runs a package's build script (target/debug/build/<crate>-<hash>/
    // build-script-build) in the package's directory: for a crate it fetched, its copy in
    // the registry. What that script repeats is the crate's to fix, not the program's.
    // probe_loop stands in for the script; a shell changes directory and execs it, as
    // cargo's child does.
    require!("gcc");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let data = work.join("data");
    probe_data(&data);
    let built = build_probe_loop(&work);
    let build = work.join("proj/target/debug/build/dep-0123456789abcdef");
    std::fs::create_dir_all(&build).unwrap();
    let script = build.join("build-script-build");
    std::fs::copy(&built, &script).unwrap();
    let fetched = work.join("cargo_home/registry/src/index.crates.io-1949cf8c6b5b557f/dep-1.0.0");
    let own = work.join("proj");
    std::fs::create_dir_all(&fetched).unwrap();
    for (name, dir, owner) in [("fetched", &fetched, "dependency"), ("own", &own, "own")] {
        let trace = record(
            &work,
            name,
            &[
                "sh",
                "-c",
                "cd \"$1\" && exec \"$2\" \"$3\" 10 300",
                "sh",
                dir.to_str().unwrap(),
                script.to_str().unwrap(),
                data.to_str().unwrap(),
            ],
        );
        let v = report_json(&trace, &[]);
        let lookups: Vec<Value> = by_detector(&v, "repeated-lookup")
            .into_iter()
            .filter(|f| f["program"] == "build-script-build")
            .collect();
        assert_eq!(lookups.len(), 1, "{name}: {v:#}");
        assert_eq!(lookups[0]["owner"], owner, "{name}: {:#}", lookups[0]);
    }
}

#[test]
fn one_line_in_each_of_cargos_test_binaries_is_one_finding_naming_every_binary() {
    // `cargo test` runs a crate's unit tests and each integration test as programs of their
    // own (target/debug/deps/<name>-<hash>), each with the crate's code compiled in: a
    // line of the crate that repeats its calls in both is one fix, one finding. probe_loop
    // stands in for both binaries.
    require!("gcc");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let data = work.join("data");
    probe_data(&data);
    let built = build_probe_loop(&work);
    let deps = work.join("crt/target/debug/deps");
    std::fs::create_dir_all(&deps).unwrap();
    let unit = deps.join("crt-2512dc0e5bd290d3");
    let integration = deps.join("integration-e60c88d6d554ab11");
    std::fs::copy(&built, &unit).unwrap();
    std::fs::copy(&built, &integration).unwrap();
    let run = |name: &str, script: &str| {
        let trace = record(
            &work,
            name,
            &[
                "sh",
                "-c",
                script,
                "sh",
                unit.to_str().unwrap(),
                integration.to_str().unwrap(),
                data.to_str().unwrap(),
            ],
        );
        let v = report_json(&trace, &[]);
        let own: Vec<Value> = by_detector(&v, "repeated-lookup")
            .into_iter()
            .filter(|f| f["owner"] == "own" && f["program"] != "sh")
            .collect();
        (own, trace)
    };
    // Dirty: both binaries (the second makes more calls: it leads).
    let (own, trace) = run("both", "\"$1\" \"$3\" 10 300; \"$2\" \"$3\" 20 300");
    assert_eq!(own.len(), 1, "one finding for both binaries: {own:#?}");
    let f = &own[0];
    // stat and lstat of 40 paths, rounds 2..10 and 2..20.
    assert_eq!(f["redundant_calls"], 2 * 40 * (9 + 19), "{f:#}");
    assert_eq!(f["program"], "integration", "{f:#}");
    assert!(
        f["command"].as_str().unwrap().contains("integration-"),
        "the process named is the program's: {f:#}"
    );
    assert_eq!(f["processes"], 2, "{f:#}");
    let programs = f["programs"].as_array().expect("programs");
    let names: Vec<(&str, u64)> = programs
        .iter()
        .map(|p| {
            (
                p["program"].as_str().unwrap(),
                p["redundant_calls"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [("integration", 2 * 40 * 19), ("crt", 2 * 40 * 9)],
        "{f:#}"
    );
    let key = f["key"].as_str().unwrap();
    assert!(
        key.starts_with("crt+integration|repeated-lookup|own|path_filestat_get@"),
        "{key}"
    );
    // The function's two lines (stat and lstat), half of the calls each.
    assert_eq!(f["callsites"][0]["function"], "path_filestat_get", "{f:#}");
    assert_eq!(f["callsites"][0]["share"], 0.5, "{f:#}");
    assert_eq!(f["callsites"][1]["share"], 0.5, "{f:#}");
    let text = report_text(&trace, &[]);
    assert!(text.contains("integration +1"), "{text}");
    assert!(
        text.contains("process: 2 programs: integration (1,520 calls), crt (720 calls)"),
        "{text}"
    );
    // Clean: one binary, one program, named without cargo's hash; no `programs`.
    let (own, _) = run("one", "\"$1\" \"$3\" 10 300");
    assert_eq!(own.len(), 1, "{own:#?}");
    assert_eq!(own[0]["program"], "crt", "{:#}", own[0]);
    assert!(own[0].get("programs").is_none(), "{:#}", own[0]);
    assert!(
        own[0]["key"]
            .as_str()
            .unwrap()
            .starts_with("crt|repeated-lookup|own|"),
        "{:#}",
        own[0]
    );
}

/// Asserts that finding `f`'s first call site is `function` at the line of the fixture
/// `rel` marked by `marker`, with all of the finding's calls.
fn assert_first_site(f: &Value, function: &str, rel: &str, marker: &str) {
    let site = &f["callsites"][0];
    assert_eq!(site["function"], function, "{f:#}");
    assert!(
        site["file"].as_str().unwrap_or_default().ends_with(rel),
        "{f:#}"
    );
    assert_eq!(site["line"], line_of(rel, marker), "{f:#}");
    assert_eq!(site["share"], 1.0, "{f:#}");
}

/// A C project of 24 files and its Makefile in `work`.
fn make_project(work: &Path) {
    let src = work.join("src");
    std::fs::create_dir(&src).unwrap();
    for i in 1..=24 {
        std::fs::write(
            src.join(format!("u{i}.c")),
            format!(
                "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
                 int f{i}(void) {{ char b[16]; snprintf(b, sizeof b, \"%d\", {i}); return (int)strlen(b); }}\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(src.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    std::fs::write(
        work.join("Makefile"),
        "SRC := $(wildcard src/*.c)\nOBJ := $(SRC:.c=.o)\napp: $(OBJ)\n\tcc -o $@ $^\n%.o: %.c\n\tcc -O2 -c $< -o $@\n",
    )
    .unwrap();
}

/// Per program (by its executable's file name), (calls, calls with a stack) in `trace`.
fn stacked_calls(trace: &Path) -> std::collections::HashMap<String, (u64, u64)> {
    let mut r = dejavu_trace::TraceReader::open(trace).unwrap();
    let mut exe: std::collections::HashMap<u32, String> = Default::default();
    let mut out: std::collections::HashMap<String, (u64, u64)> = Default::default();
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            dejavu_trace::Record::Exec(e) => {
                let path = String::from_utf8_lossy(r.str(e.exe)).into_owned();
                let name = path.rsplit('/').next().unwrap_or_default().to_string();
                exe.insert(e.pid, name);
            }
            dejavu_trace::Record::Syscall(c) => {
                let name = exe.get(&c.pid).cloned().unwrap_or_default();
                let e = out.entry(name).or_default();
                e.0 += 1;
                e.1 += u64::from(c.stack.is_some());
            }
            _ => {}
        }
    }
    out
}

/// The compilers make runs are tools: by default their calls go without native stacks
/// (the cost of a build's recording is mostly theirs), except the exec that started each
/// (its site is make's); make's own calls keep theirs; `--stacks all` takes the tools'
/// too.
#[test]
fn the_tools_make_runs_are_recorded_without_native_stacks_unless_asked() {
    require!("make");
    require!("cc");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    make_project(&work);
    let run = |name: &str, flags: &[&str]| {
        let trace = work.join(format!("{name}.dvt"));
        // (-B: everything built again, each time.)
        let (st, err) = common::record_quiet_with(&trace, flags, &["make", "-B", "-j2"], &work);
        assert!(st.success(), "{err}");
        stacked_calls(&trace)
    };
    let default = run("default", &[]);
    let all = run("all", &["--stacks", "all"]);
    let (calls, stacked) = default["make"];
    assert!(stacked * 10 >= calls * 9, "make: {stacked} of {calls}");
    let (calls, stacked) = default["cc1"];
    // At most the 25 execs (their site is where make started them), none of cc1's own.
    assert!(calls > 500 && stacked <= 25, "cc1: {stacked} of {calls}");
    let (calls, stacked) = all["cc1"];
    assert!(
        stacked * 10 >= calls * 9,
        "cc1 with --stacks all: {stacked} of {calls}"
    );
    // The findings are the same: the tools' own are the tools', either way.
    let keys = |name: &str| {
        let mut k: Vec<(String, String, String)> = findings(&report_json(
            &work.join(format!("{name}.dvt")),
            &["--min-calls", "1"],
        ))
        .iter()
        .filter(|f| f["owner"] != "tool")
        .map(|f| {
            (
                f["program"].as_str().unwrap().to_string(),
                f["detector"].as_str().unwrap().to_string(),
                f["owner"].as_str().unwrap().to_string(),
            )
        })
        .collect();
        k.sort();
        k
    };
    assert_eq!(keys("default"), keys("all"));
}

#[test]
fn make_of_24_files_gives_one_finding_per_problem_not_one_per_compiler_process() {
    require!("make");
    require!("cc");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    make_project(&work);
    let trace = record(&work, "make", &["make", "-j2"]);
    let v = report_json(&trace, &["--min-calls", "1"]);
    let all = findings(&v);
    let cc1: Vec<&Value> = all.iter().filter(|f| f["program"] == "cc1").collect();
    assert!(!cc1.is_empty(), "{all:#?}");
    // The compiler is a tool make ran: its own calls are not the build's to change (and
    // the first screen folds them into one line).
    assert!(cc1.iter().all(|f| f["owner"] == "tool"), "{cc1:#?}");
    assert!(
        report_text(&trace, &[]).contains("tools it ran: "),
        "{}",
        report_text(&trace, &[])
    );
    // No per-process copies: within a program, each (detector, site or pattern) is one
    // finding, and the compilers' findings each cover most of the 25 cc1 processes.
    let mut keys: Vec<&str> = all.iter().map(|f| f["key"].as_str().unwrap()).collect();
    let n = keys.len();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), n, "every finding has its own key");
    let biggest = cc1
        .iter()
        .max_by_key(|f| f["redundant_calls"].as_u64())
        .unwrap();
    assert!(biggest["processes"].as_u64().unwrap() >= 20, "{biggest:#}");
    // Before findings were grouped, each of the 25 compilers had its own copy of each.
    let over_10: Vec<&&Value> = cc1
        .iter()
        .filter(|f| f["redundant_calls"].as_u64().unwrap() >= 10)
        .collect();
    assert!(over_10.len() <= 12, "{over_10:#?}");
    // Few rows for the whole build: at most two per (program, detector, owner) (1.2 with
    // ptrace's stacks, 1.8 with eBPF's, which name fewer frames: bench/RESULTS.md).
    let mut problems: Vec<(String, String, String)> = all
        .iter()
        .filter(|f| f["redundant_calls"].as_u64().unwrap() >= 10)
        .map(|f| {
            (
                f["program"].as_str().unwrap().to_string(),
                f["detector"].as_str().unwrap().to_string(),
                f["owner"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let rows = problems.len();
    problems.sort();
    problems.dedup();
    assert!(
        rows as f64 <= 2.0 * problems.len() as f64,
        "{rows} findings over 10 calls for {} program/detector pairs",
        problems.len()
    );
    // repeated-exec compares argv as given: 24 different compiles are not one command run
    // 24 times.
    assert!(
        !all.iter()
            .any(|f| f["detector"] == "repeated-exec" && f["program"] == "make"),
        "{all:#?}"
    );
}

#[test]
fn a_go_functions_stat_names_the_function_not_the_runtime() {
    // Built as `go build` builds it (DWARF), without DWARF (-w: the Go toolchain's own
    // tools, most release builds) and without symbols either (-s -w, as `go test` and `go
    // run` build): Go's line table (.gopclntab) names function, file and line in the last
    // two, and its inline trees the calls the compiler inlined (os.Open into openConfig,
    // (*os.File).Close into its deferred wrapper), found without symbols from the
    // runtime's module data. Linked by the system's linker (cgo's -linkmode=external, as
    // Debian's hugo is), .text starts with C code and Go's code later: the line table's
    // offsets count from `runtime.text` (its symbol, or the module data's `text`), and
    // counting from .text had named every frame of a stripped build 0x100 bytes off
    // (main.main for openConfig's open).
    require!("go");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let target = work.join("app.conf");
    std::fs::write(&target, "x").unwrap();
    let mut builds = vec![("dwarf", ""), ("nodwarf", "-w"), ("stripped", "-s -w")];
    if common::have("gcc") {
        builds.push(("external_nodwarf", "-linkmode=external -w"));
        builds.push(("external_stripped", "-linkmode=external -s -w"));
    } else {
        common::skip(
            "gcc",
            "gcc is not installed: the externally linked Go builds left out",
        );
    }
    for (name, ldflags) in builds {
        let exe = work.join(format!("go_stat_{name}"));
        run_ok(
            Command::new("go")
                .args(["build", "-ldflags", ldflags, "-o"])
                .arg(&exe)
                .arg(".")
                .current_dir(fixture("go_stat"))
                .env("GOFLAGS", "-mod=mod")
                .env("GOCACHE", work.join("gocache"))
                .env("GOPATH", work.join("gopath")),
        );
        let trace = record(
            &work,
            name,
            &[
                exe.to_str().unwrap(),
                target.to_str().unwrap(),
                "200",
                "300",
                "close",
            ],
        );
        let v = report_json(&trace, &[]);
        let churn: Vec<Value> = by_detector(&v, "open-close-churn")
            .into_iter()
            .filter(|f| f["paths"][0] == target.to_str().unwrap())
            .collect();
        assert_eq!(churn.len(), 1, "{name}: {:#?}", findings(&v));
        let mut sites: Vec<(String, u64)> = churn[0]["callsites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let file = c["file"].as_str().unwrap_or_default();
                assert!(file.ends_with("go_stat/main.go"), "{name}: {c:#}");
                (
                    c["function"].as_str().unwrap().to_string(),
                    c["line"].as_u64().unwrap(),
                )
            })
            .collect();
        sites.sort();
        let main_go = "go_stat/main.go";
        assert_eq!(
            sites,
            [
                ("main.openConfig".to_string(), line_of(main_go, "OPEN_LINE")),
                (
                    "main.openConfig.deferwrap1".to_string(),
                    line_of(main_go, "CLOSE_LINE")
                ),
            ],
            "{name}: {:#}",
            churn[0]
        );
        let mine: Vec<Value> = by_detector(&v, "repeated-lookup")
            .into_iter()
            .filter(|f| f["paths"][0] == target.to_str().unwrap())
            .collect();
        assert_eq!(mine.len(), 1, "{name}: {:#?}", findings(&v));
        let f = &mine[0];
        assert_eq!(f["redundant_calls"], 199, "{name}");
        assert_eq!(f["owner"], "own", "{name}");
        assert_first_site(f, "main.probeConfig", "go_stat/main.go", "STAT_LINE");
    }
}

/// A Go program running a tool per event: os/exec's clone(CLONE_VM|CLONE_VFORK) wrapper
/// keeps its return address in a register, so the parent's stack in the clone stops at
/// the wrapper; the child goes on on that stack, and its exec's own stack (taken at the
/// call's entry) names the program's line. The clean twin runs the tool once.
#[test]
fn a_go_programs_process_per_event_names_the_line_that_ran_it() {
    require!("go");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let exe = work.join("go_exec");
    run_ok(
        Command::new("go")
            .args(["build", "-o"])
            .arg(&exe)
            .arg(".")
            .current_dir(fixture("go_exec"))
            .env("GOFLAGS", "-mod=mod")
            .env("GOCACHE", work.join("gocache"))
            .env("GOPATH", work.join("gopath")),
    );
    let execs = |mode: &str| {
        let trace = record(&work, mode, &[exe.to_str().unwrap(), mode, "12"]);
        by_detector(&report_json(&trace, &[]), "repeated-exec")
            .into_iter()
            .filter(|f| f["paths"][0].as_str().is_some_and(|p| p.ends_with("/true")))
            .collect::<Vec<Value>>()
    };
    let dirty = execs("each");
    assert_eq!(dirty.len(), 1, "{dirty:#?}");
    let f = &dirty[0];
    assert_eq!(f["redundant_calls"], 11, "{f:#}");
    assert_first_site(f, "main.toolVersion", "go_exec/main.go", "EXEC_LINE");
    assert!(execs("once").is_empty());
}

/// Records requests.js writing to a pipe that `dejavu record` gives it.
fn record_node(work: &Path, name: &str, script: &Path) -> PathBuf {
    let trace = work.join(format!("{name}.dvt"));
    let st = Command::new(common::dejavu())
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", "node"])
        .arg(script)
        .arg(work)
        .arg("50")
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(st.status.success());
    trace
}

#[test]
fn the_same_node_program_twice_gives_the_same_findings_and_a_diff_of_same() {
    require!("node");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let script = fixture("requests.js");
    let a = record_node(&work, "a", &script);
    let b = record_node(&work, "b", &script);
    let keys = |t: &Path| {
        let mut k: Vec<(String, u64)> = findings(&report_json(t, &["--min-calls", "1"]))
            .iter()
            .filter(|f| f["owner"] == "own")
            .map(|f| {
                (
                    f["key"].as_str().unwrap().to_string(),
                    f["redundant_calls"].as_u64().unwrap(),
                )
            })
            .collect();
        k.sort();
        k
    };
    let (ka, kb) = (keys(&a), keys(&b));
    assert!(!ka.is_empty());
    // The same keys, and the same counts but for small-writes': a pause of more than
    // gap_ms (100 ms) between two writes ends a run, and a loaded machine can stall the
    // program that long once in a while (a CI run saw 48 against 49).
    let names = |k: &[(String, u64)]| k.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ka), names(&kb), "the same findings, the same keys");
    for ((k, na), (_, nb)) in ka.iter().zip(&kb) {
        if k.contains("|small-writes|") {
            assert!(na.abs_diff(*nb) <= 2, "{k}: {na} against {nb}");
        } else {
            assert_eq!(na, nb, "{k}: {ka:#?} against {kb:#?}");
        }
    }
    // No pipe inode in any key.
    assert!(
        ka.iter()
            .all(|(k, _)| !k.contains("pipe:[") || k.contains("pipe:[*]")),
        "{ka:#?}"
    );
    let out = Command::new(common::dejavu())
        .args(["diff", "--json"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["findings"].as_array().unwrap();
    let own: Vec<&Value> = rows.iter().filter(|r| r["owner"] == "own").collect();
    assert!(!own.is_empty());
    for r in own {
        assert_eq!(r["status"], "same", "{r:#}");
    }

    // A rebuilt bundle: the same code with its lines moved. Its findings match.
    let shifted = work.join("requests.js");
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&shifted, format!("// rebuilt\n\n\n\n\n{text}")).unwrap();
    let s1 = record_node(&work, "s1", &shifted);
    std::fs::write(
        &shifted,
        format!("// rebuilt again\n\n\n\n\n\n\n\n\n\n\n\n{text}"),
    )
    .unwrap();
    let s2 = record_node(&work, "s2", &shifted);
    let out = Command::new(common::dejavu())
        .args(["diff", "--json"])
        .arg(&s1)
        .arg(&s2)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let own: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["owner"] == "own")
        .collect();
    assert!(!own.is_empty());
    for r in own {
        assert_eq!(
            r["status"], "same",
            "lines moved, the finding did not: {r:#}"
        );
    }
}

#[test]
fn a_nodejs_programs_start_up_ends_where_the_agent_says_so_the_same_in_every_run() {
    require!("node");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let script = fixture("requests.js");
    let mut counts = Vec::new();
    for i in 0..6 {
        let t = record_node(&work, &format!("run{i}"), &script);
        let v = report_json(
            &t,
            &["--min-calls", "1", "--detector", "sync-io-main-thread"],
        );
        let own: u64 = findings(&v)
            .iter()
            .filter(|f| f["program"] == "requests.js")
            .map(|f| f["redundant_calls"].as_u64().unwrap())
            .sum();
        counts.push(own);
    }
    // 50 requests after the main module ran, each a statSync and a readFileSync
    // (open, fstat, read, read, close): the main module's own writeFileSync and the
    // module loading before it are start-up.
    let (lo, hi) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
    assert!(lo >= 50 * 2, "{counts:?}");
    assert!((hi - lo) * 20 <= lo, "within 5%: {counts:?}");
}

/// A free TCP port on the loopback interface (the OS picks it; closed again at once).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` from 127.0.0.1:`port`; the response's bytes.
fn http_get(port: u16, path: &str) -> Option<Vec<u8>> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    Some(out)
}

#[test]
fn python_http_server_listing_a_directory_per_request_names_list_directory() {
    require!("python3");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let site = work.join("site");
    std::fs::create_dir(&site).unwrap();
    for i in 0..30 {
        std::fs::write(site.join(format!("report-{i:03}.txt")), "x\n").unwrap();
    }
    let port = free_port();
    let trace = work.join("http.dvt");
    let mut child = Command::new(common::dejavu())
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", "python3", "-u", "-m", "http.server"])
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--directory"])
        .arg(&site)
        .current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut up = false;
    for _ in 0..200 {
        if http_get(port, "/").is_some() {
            up = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(up, "the server never answered");
    for _ in 0..20 {
        let page = http_get(port, "/").unwrap();
        assert!(String::from_utf8_lossy(&page).contains("report-029.txt"));
    }
    // SIGINT to dejavu is forwarded: the server stops, the trace is complete.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    let v = report_json(&trace, &[]);
    let all = findings(&v);
    let listing: Vec<&Value> = all
        .iter()
        .filter(|f| f["program"] == "http.server")
        .filter(|f| {
            f["callsites"][0]["function"]
                .as_str()
                .is_some_and(|n| n.ends_with("list_directory"))
        })
        .collect();
    assert!(!listing.is_empty(), "{:#?}", findings(&v));
    let f = listing[0];
    let site_file = f["callsites"][0]["file"].as_str().unwrap();
    assert!(site_file.ends_with("http/server.py"), "{site_file}");
    // `python3 -m http.server`: http/server.py is the program's own code, although it
    // lives in the standard library.
    assert_eq!(f["owner"], "own");
    // The largest finding of all by its count. (Not by rank: findings rank by the time
    // their calls took, and under ptrace on a loaded machine one call of send_head's that
    // waited for a CPU can outweigh the listing's 1,140; CI saw that once.)
    let most = all
        .iter()
        .max_by_key(|g| g["redundant_calls"].as_u64().unwrap())
        .unwrap();
    assert_eq!(most["key"], f["key"], "the largest: {all:#?}");
    assert!(f["redundant_calls"].as_u64().unwrap() >= 30 * 19, "{f:#}");
}

#[test]
fn program_selects_the_findings_of_one_program() {
    require!("python3");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let target = work.join("app.conf");
    std::fs::write(&target, "x=1\n").unwrap();
    let trace = record(
        &work,
        "p",
        &[
            fixture("shim.sh").to_str().unwrap(),
            "python3",
            fixture("stat_loop.py").to_str().unwrap(),
            target.to_str().unwrap(),
            "100",
        ],
    );
    let v = report_json(&trace, &["--min-calls", "1", "--program", "stat_loop*"]);
    let all = findings(&v);
    assert!(!all.is_empty());
    assert!(
        all.iter().all(|f| f["program"] == "stat_loop.py"),
        "{all:#?}"
    );
    // A bad glob is a usage error naming the flag.
    let out = Command::new(common::dejavu())
        .args(["report", "--program", "[", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--program"));
}

#[test]
fn cpythons_source_look_ups_for_a_syntax_error_are_the_runtimes() {
    // At each SyntaxError, CPython opens the file the code was compiled from to show the
    // offending line: for ast.parse's source that is `<unknown>`, in the working
    // directory, which is not there. Those ENOENT opens, with only the interpreter's
    // frames on their stack (_PyErr_ProgramDecodedTextObject under the parser), were the
    // program's own negative-probe finding with no line (hypothesis's lambda-source
    // parsing ranked it first in attrs' test suite); they are the runtime's. 50 failed
    // parses, 49 repeats; the twin parses once.
    require!("python3");
    loader_lookups_are_the_runtimes("python3", "syntax_errors.py", "50", 45, 10);
}

#[test]
fn a_loops_repeated_and_failing_lookups_are_one_row() {
    // docutils' find_file_in_dirs per translator (sphinx-build): a stat of a missing file
    // then of one that exists, 60 times. Two detectors, one loop, one cache: one row, the
    // other finding shown in it (same_loop). The twin looks once.
    require!("python3");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let script = fixture("find_in_dirs.py");
    let line = line_of("find_in_dirs.py", "# the lookup");
    let at_find = |f: &&Value| {
        f["callsites"][0]["function"] == "find"
            && (f["detector"] == "negative-probe" || f["detector"] == "repeated-lookup")
    };
    let trace = record(&work, "dirty", &["python3", script.to_str().unwrap(), "60"]);
    let all = findings(&report_json(&trace, &["--min-calls", "1"]));
    let mine: Vec<&Value> = all.iter().filter(at_find).collect();
    assert_eq!(mine.len(), 2, "{mine:#?}");
    let rows: Vec<&&Value> = mine.iter().filter(|f| f["shown_in"].is_null()).collect();
    assert_eq!(rows.len(), 1, "one row for the loop: {mine:#?}");
    let row = rows[0];
    assert_eq!(row["callsites"][0]["line"], line, "{row:#}");
    assert_eq!(row["redundant_calls"], 59, "{row:#}");
    let guest = mine.iter().find(|f| !f["shown_in"].is_null()).unwrap();
    assert_eq!(guest["shown_in"], row["key"]);
    assert_eq!(guest["redundant_calls"], 59, "{guest:#}");
    assert_ne!(guest["detector"], row["detector"]);
    let also = row["also"].as_array().cloned().unwrap_or_default();
    assert!(
        also.iter()
            .any(|x| x["same_loop"] == true && x["detector"] == guest["detector"]),
        "{row:#}"
    );
    // The terminal report says it under the row.
    let out = Command::new(common::dejavu())
        .args(["report", "--min-calls", "1"])
        .arg(&trace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("59 more calls in the same runs of this function"),
        "{text}"
    );
    let trace = record(&work, "clean", &["python3", script.to_str().unwrap(), "1"]);
    let all = findings(&report_json(&trace, &["--min-calls", "1"]));
    assert!(!all.iter().any(|f| at_find(&f)), "{all:#?}");
}

/// Records `cmd FIXTURE N` for a dirty twin (N = `dirty`) and its clean twin (N = 1) of
/// repeated imports or requires of a module that is nowhere: the look-ups are the
/// runtime's (at least `more` redundant calls over the clean twin's), and fewer than
/// `named` redundant calls in either run are the program's or a library's.
fn loader_lookups_are_the_runtimes(cmd: &str, script: &str, dirty: &str, more: u64, named: u64) {
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let script = fixture(script);
    let run = |name: &str, n: &str| {
        let trace = record(&work, name, &[cmd, script.to_str().unwrap(), n]);
        findings(&report_json(&trace, &[]))
    };
    let redundant = |all: &[Value], owners: &[&str]| -> u64 {
        all.iter()
            .filter(|f| owners.iter().any(|o| f["owner"] == *o))
            .map(|f| f["redundant_calls"].as_u64().unwrap_or(0))
            .sum()
    };
    let dirty = run("dirty", dirty);
    let clean = run("clean", "1");
    let (rd, rc) = (
        redundant(&dirty, &["runtime"]),
        redundant(&clean, &["runtime"]),
    );
    assert!(
        rd >= rc + more,
        "the repeated look-ups are the runtime's: {rd} against {rc}: {dirty:#?}"
    );
    for (what, all) in [("dirty", &dirty), ("clean", &clean)] {
        let mine = redundant(all, &["own", "dependency"]);
        assert!(
            mine < named,
            "{what}: {mine} redundant calls of the program's or a library's: {all:#?}"
        );
    }
}

#[test]
fn nodes_module_loader_looking_in_the_global_folders_is_the_runtime() {
    // Node.js's loader looks for a package in every node_modules directory from the
    // script's up and in the global folders ($HOME/.node_modules, $HOME/.node_libraries,
    // $PREFIX/lib/node), through a C++ binding of its own (internalModuleStat): no fs call
    // the agent names, and the global folders have no node_modules in their path. Their
    // stats were the program's own finding, #1 and with no line (jest: /root/.node_modules
    // and /root/.node_libraries, ranked above its runtime's 17,000 rereads); they are the
    // runtime's, as the node_modules look-ups beside them. 50 requires of a package that
    // is nowhere, six folders or more looked in per require (each node_modules from the
    // fixture's directory up to /, the three global ones): 49 repeats of each; the twin
    // requires it once.
    require!("node");
    loader_lookups_are_the_runtimes("node", "require_missing.js", "50", 49 * 5, 20);
}

#[test]
fn the_import_systems_own_stats_under_the_agent_are_the_runtimes() {
    // 50 modules of one package imported one by one in main(): importlib stats the
    // package's directory at each import, through posix.stat (not the os.stat the agent
    // wraps), so the calls' stacks are CPython's C frames alone. They were the program's
    // own, with no line ("own" ranked first in `manage.py check`: zipimport's and
    // FileFinder's stats of the project's package directories). The twin imports one.
    require!("python3");
    loader_lookups_are_the_runtimes("python3", "lazy_imports.py", "50", 40, 20);
}

#[test]
fn imports_made_from_c_are_the_runtimes_not_the_library_that_called_them() {
    // A C extension or a mypyc-compiled module imports through CPython's C API: the import
    // system's look-ups of the sys.path directories have the interpreter's import
    // functions (PyImport_ImportModuleLevelObject, import_find_and_load) inside the first
    // frame that is not the interpreter's (here libffi's, under ctypes). They are the
    // runtime's, folded into its one line, as for an `import` statement; before, they were
    // a dependency's finding at libffi's ffi_call (black, compiled with mypyc: the
    // import system's stats of sys.path ranked above its own findings). 50 imports of a
    // module that is nowhere, each looking in every sys.path directory; the twin imports
    // it once. The runtime's start-up imports are in both.
    require!("python3");
    loader_lookups_are_the_runtimes("python3", "c_import.py", "50", 100, 40);
}

/// A Java program that loads its properties file per request: the row is the program's
/// own, and says why it names no line (dejavu has no JVM agent; the calls' native stacks
/// end in the JDK's libjava, which is the runtime's, not a line of a dependency or of the
/// program). Its clean twin, which loads the file once, has no such row.
#[test]
fn a_java_programs_reread_is_its_own_and_names_no_jdk_function() {
    require!("javac");
    require!("java");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let classes = work.join("classes");
    run_ok(
        Command::new("javac")
            .arg("-d")
            .arg(&classes)
            .arg(fixture("java/ReadProps.java")),
    );
    let props = work.join("app.properties");
    std::fs::write(&props, "limit=3\n").unwrap();
    let cp = classes.to_str().unwrap();
    let p = props.to_str().unwrap();
    let dirty = record(
        &work,
        "dirty",
        &["java", "-cp", cp, "ReadProps", p, "200", "dirty"],
    );
    let v = report_json(&dirty, &[]);
    let all = findings(&v);
    let row = all
        .iter()
        .find(|f| f["paths"][0] == p)
        .unwrap_or_else(|| panic!("no finding on {p}: {all:#?}"));
    assert_eq!(row["detector"], "reread-unchanged", "{row:#}");
    assert_eq!(row["owner"], "own", "{row:#}");
    assert_eq!(row["program"], "ReadProps", "named by its main class");
    assert!(
        row["redundant_calls"].as_u64().unwrap() >= 199 * 3,
        "{row:#}"
    );
    assert_eq!(
        row["callsites"].as_array().map_or(0, Vec::len),
        0,
        "{row:#}"
    );
    // No finding names the JDK's native code as a line to change.
    for f in &all {
        for c in f["callsites"].as_array().into_iter().flatten() {
            let m = c["module"].as_str().unwrap_or("");
            assert!(
                !m.ends_with("/libjava.so")
                    && !m.ends_with("/libnio.so")
                    && !m.ends_with("/libjvm.so"),
                "a JDK function named as a site: {f:#}"
            );
        }
    }
    let text = report_text(&dirty, &[]);
    assert!(
        text.contains("no line: dejavu has no agent for the JVM"),
        "{text}"
    );
    let clean = record(
        &work,
        "clean",
        &["java", "-cp", cp, "ReadProps", p, "200", "clean"],
    );
    let v = report_json(&clean, &[]);
    assert!(
        !findings(&v).iter().any(|f| f["paths"][0] == p),
        "{:#?}",
        findings(&v)
    );
}

/// A system program started through a wrapper that forks it and waits (runuser, as a
/// database server is started as its own user): the program is what the wrapper runs,
/// not the wrapper, whose PAM start-up had been the first screen while the real program's
/// rows were folded as a tool's (postgres under `runuser -u postgres`).
#[test]
fn a_program_run_through_runuser_is_the_program() {
    require!("runuser");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let conf = work.join("app.conf");
    std::fs::write(&conf, "limit=3\n").unwrap();
    let c = conf.to_str().unwrap();
    let ok = Command::new("runuser")
        .args(["-u", "root", "--", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        common::skip("root", "runuser needs root");
        return;
    }
    let mut cmd = vec!["runuser", "-u", "root", "--", "/bin/cat"];
    cmd.extend(std::iter::repeat_n(c, 30));
    let trace = record(&work, "runuser", &cmd);
    let v = report_json(&trace, &[]);
    let all = findings(&v);
    let row = all
        .iter()
        .find(|f| f["paths"][0] == c && f["detector"] == "reread-unchanged")
        .unwrap_or_else(|| panic!("no reread of {c}: {all:#?}"));
    assert_eq!(row["owner"], "own", "{row:#}");
    assert_eq!(row["program"], "cat", "{row:#}");
    assert!(
        !all.iter()
            .any(|f| f["program"] == "runuser" && f["owner"] == "own"),
        "runuser's own calls are a launcher's: {all:#?}"
    );
}

/// A Perl program (an interpreter dejavu has no agent for, as PHP and Ruby) that reads its
/// configuration per item: its row is the program's own, named by the script, names no
/// line of the interpreter's C code (it had been `perl`'s own row, unexplained), and says
/// why. Its clean twin reads the file once.
#[test]
fn a_perl_programs_reread_is_its_own_and_names_no_interpreter_function() {
    require!("perl");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let conf = work.join("app.conf");
    std::fs::write(&conf, "limit=3\n").unwrap();
    let c = conf.to_str().unwrap();
    let script = fixture("perl/read_conf.pl");
    let s = script.to_str().unwrap();
    let dirty = record(&work, "dirty", &["perl", s, c, "200", "dirty"]);
    let v = report_json(&dirty, &[]);
    let all = findings(&v);
    let row = all
        .iter()
        .find(|f| f["paths"][0] == c)
        .unwrap_or_else(|| panic!("no finding on {c}: {all:#?}"));
    assert_eq!(row["detector"], "reread-unchanged", "{row:#}");
    assert_eq!(row["owner"], "own", "{row:#}");
    assert_eq!(row["program"], "read_conf.pl", "named by its script");
    assert!(
        row["redundant_calls"].as_u64().unwrap() >= 199 * 3,
        "{row:#}"
    );
    assert_eq!(
        row["callsites"].as_array().map_or(0, Vec::len),
        0,
        "{row:#}"
    );
    let text = report_text(&dirty, &[]);
    assert!(
        text.contains("no line: dejavu has no agent for Perl"),
        "{text}"
    );
    let clean = record(&work, "clean", &["perl", s, c, "200", "clean"]);
    let v = report_json(&clean, &[]);
    assert!(
        !findings(&v).iter().any(|f| f["paths"][0] == c),
        "{:#?}",
        findings(&v)
    );
}

/// A shell script that reads its configuration per item with `cat`: its repeated-exec row
/// is the script's own, named by it, names no line of bash's C code (configure's rows had
/// been named at `make_child (bash)` and `file_status (bash)`), and says why. Its clean
/// twin runs cat once.
#[test]
fn a_shell_scripts_process_per_item_is_its_own_and_names_no_shell_function() {
    require!("bash");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let conf = work.join("app.conf");
    std::fs::write(&conf, "limit=3\n").unwrap();
    let c = conf.to_str().unwrap();
    let script = fixture("shell/read_conf.sh");
    let s = script.to_str().unwrap();
    let cat = |f: &Value| f["detector"] == "repeated-exec" && f["paths"][0] == "/usr/bin/cat";
    let dirty = record(&work, "dirty", &["bash", s, c, "30", "dirty"]);
    let v = report_json(&dirty, &[]);
    let all = findings(&v);
    let row = all
        .iter()
        .find(|f| cat(f))
        .unwrap_or_else(|| panic!("no repeated cat: {all:#?}"));
    assert_eq!(row["owner"], "own", "{row:#}");
    assert_eq!(row["program"], "read_conf.sh", "named by its script");
    assert_eq!(row["redundant_calls"].as_u64(), Some(29), "{row:#}");
    assert_eq!(
        row["callsites"].as_array().map_or(0, Vec::len),
        0,
        "{row:#}"
    );
    let text = report_text(&dirty, &[]);
    assert!(
        text.contains("no line: dejavu has no agent for shell scripts"),
        "{text}"
    );
    let clean = record(&work, "clean", &["bash", s, c, "30", "clean"]);
    let v = report_json(&clean, &[]);
    assert!(!findings(&v).iter().any(cat), "{:#?}", findings(&v));
}

/// A Python program printing lines to a file, started with PYTHONUNBUFFERED=1 (a CI
/// job's habit): each print() is two writes, and the small-writes row says the
/// environment did it. Started without, its output is buffered: no row.
#[test]
fn a_python_run_with_unbuffered_output_is_told_so() {
    require!("python3");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let script = work.join("lines.py");
    std::fs::write(
        &script,
        "import sys\nfor i in range(300):\n    print('checked', i)\n",
    )
    .unwrap();
    let run = |name: &str, unbuffered: bool| {
        let trace = work.join(format!("{name}.dvt"));
        let mut cmd = Command::new(common::dejavu());
        cmd.args(["record", "-o"])
            .arg(&trace)
            .args(["--", "sh", "-c", "exec python3 \"$0\" > out.txt"])
            .arg(&script)
            .current_dir(&work)
            .stdin(Stdio::null())
            .env_remove("PYTHONUNBUFFERED");
        if unbuffered {
            cmd.env("PYTHONUNBUFFERED", "1");
        }
        assert!(cmd.output().unwrap().status.success());
        by_detector(&report_json(&trace, &[]), "small-writes")
    };
    let f = run("unbuffered", true);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        f[0]["hazards"][0]
            .as_str()
            .unwrap()
            .contains("PYTHONUNBUFFERED=1 in its environment"),
        "{:#}",
        f[0]
    );
    assert!(run("buffered", false).is_empty());
}

/// A Python program that runs a Python child whose flags drop dejavu's agent
/// (`python3 -I`, as a build environment's hook is run): the report says so (JSON
/// `agentless`, a warning on stderr); the same child without `-I` loads the agent, and
/// nothing is said.
#[test]
fn a_python_child_that_dropped_the_agent_is_named() {
    require!("python3");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().canonicalize().unwrap();
    let child = work.join("child.py");
    std::fs::write(
        &child,
        "import os, json, email.parser, http.client\n\
         for i in range(80):\n    os.stat(__file__)\n",
    )
    .unwrap();
    for (name, flags) in [("dirty", "'-I', "), ("clean", "")] {
        let parent = work.join(format!("{name}.py"));
        std::fs::write(
            &parent,
            format!(
                "import subprocess, sys\n\
                 subprocess.run([sys.executable, {flags}{:?}], check=True)\n",
                child.to_str().unwrap()
            ),
        )
        .unwrap();
        let trace = record(&work, name, &["python3", parent.to_str().unwrap()]);
        let v = report_json(&trace, &[]);
        let agentless = v["agentless"].as_array().cloned().unwrap_or_default();
        let out = Command::new(common::dejavu())
            .arg("report")
            .arg(&trace)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if name == "dirty" {
            assert_eq!(agentless.len(), 1, "{v:#}");
            assert_eq!(agentless[0]["program"], "child.py");
            assert_eq!(agentless[0]["processes"], 1);
            assert!(
                err.contains("agent did not load in 1 process (child.py (1))"),
                "{err}"
            );
        } else {
            assert!(agentless.is_empty(), "{agentless:?}");
            assert!(!err.contains("agent did not load"), "{err}");
        }
    }
}
