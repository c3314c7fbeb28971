//! `dejavu report`, `dejavu run` and `dejavu explain` end to end: real programs recorded
//! with ptrace, then reported on, as a user would run them (docs/cli.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// Every detector id in DESIGN.md's table: ids are stable, their texts are not.
const IDS: [&str; 13] = [
    "repeated-lookup",
    "negative-probe",
    "ensure-dir",
    "check-then-act",
    "open-close-churn",
    "small-writes",
    "reread-unchanged",
    "self-inflicted-lookup",
    "repeated-output",
    "no-reader",
    "fsync-per-op",
    "repeated-exec",
    "sync-io-main-thread",
];

fn dejavu() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dejavu"));
    // The tests decide about colour themselves. cargo test sets LD_LIBRARY_PATH to its
    // build directories, and the dynamic loader's probes along it are real negative-probe
    // findings: keep the recorded programs as a user would run them.
    c.env_remove("NO_COLOR")
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null());
    c
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// tests/workloads/report/stat_loop.c, compiled once per test binary.
fn stat_loop() -> &'static Path {
    static BUILT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &BUILT
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let exe = dir.path().join("stat_loop");
            let st = Command::new("gcc")
                .args(["-O1", "-g", "-o"])
                .arg(&exe)
                .arg(repo().join("tests/workloads/report/stat_loop.c"))
                .status()
                .expect("gcc runs");
            assert!(st.success(), "compiling stat_loop.c");
            (dir, exe)
        })
        .1
}

/// A directory with `app.conf` in it, and the stat_loop command that stats it 100 times.
struct Workload {
    dir: tempfile::TempDir,
    conf: PathBuf,
}

impl Workload {
    fn new() -> Workload {
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = dir.path().join("app.conf");
        std::fs::write(&conf, "port = 8080\n").expect("write app.conf");
        Workload { dir, conf }
    }

    /// stat_loop with `extra` arguments after the path.
    fn cmd(&self, extra: &[&str]) -> Vec<String> {
        let mut v = vec![
            stat_loop().display().to_string(),
            self.conf.display().to_string(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    /// Records 100 stats of app.conf; returns the trace.
    fn record(&self) -> PathBuf {
        let trace = self.dir.path().join("t.dvt");
        let out = dejavu()
            .arg("record")
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .args(self.cmd(&[]))
            .output()
            .expect("dejavu record runs");
        assert!(out.status.success(), "record: {}", text(&out.stderr));
        trace
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(c: &mut Command) -> Output {
    c.output().expect("dejavu runs")
}

fn report_json(trace: &Path, flags: &[&str]) -> Value {
    let out = run(dejavu().arg("report").arg("--json").args(flags).arg(trace));
    assert!(out.status.success(), "report --json: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("report --json prints JSON")
}

/// The repeated-lookup finding about `path`.
fn lookup_finding<'a>(report: &'a Value, path: &Path) -> Option<&'a Value> {
    report["findings"]
        .as_array()?
        .iter()
        .find(|f| f["detector"] == "repeated-lookup" && f["paths"][0].as_str() == path.to_str())
}

#[test]
fn list_detectors_lists_every_detector_id() {
    let out = run(dejavu().args(["report", "--list-detectors"]));
    assert!(out.status.success());
    let listed: Vec<String> = text(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert_eq!(
        listed, IDS,
        "one line per detector, in the registry's order"
    );
    for d in dejavu_detect::registry() {
        let first = d.summary.split_whitespace().next().unwrap_or("");
        assert!(text(&out.stdout).contains(first), "{}'s summary", d.id);
    }
}

#[test]
fn explain_repeated_lookup_shows_what_it_means_and_the_fix() {
    let out = run(dejavu().args(["explain", "repeated-lookup"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let flat = shown.split_whitespace().collect::<Vec<_>>().join(" ");
    let info = dejavu_detect::find_detector("repeated-lookup").expect("registered");
    for (what, s) in [
        ("summary", info.summary),
        ("fix", info.fix),
        ("hazards", info.hazards),
        ("explanation", info.explain),
    ] {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(&s), "the {what} is shown:\n{shown}");
    }
    for section in ["What it finds", "Example", "Fix", "Hazards", "Options"] {
        assert!(
            shown.contains(&format!("\n{section}\n")),
            "{section}:\n{shown}"
        );
    }
}

#[test]
fn explain_shows_a_detectors_options_with_their_defaults() {
    let Some(d) = dejavu_detect::registry()
        .iter()
        .find(|d| !d.options.is_empty())
    else {
        common::skip("", "no detector has options yet");
        return;
    };
    let out = run(dejavu().args(["explain", d.id]));
    let shown = text(&out.stdout);
    for (name, default, _) in d.options {
        assert!(
            shown.contains(&format!("{name} (default {default})")),
            "{shown}"
        );
    }
}

#[test]
fn explain_of_an_unknown_detector_is_a_usage_error_that_lists_the_ids() {
    let out = run(dejavu().args(["explain", "repeated-lookups"]));
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    for id in IDS {
        assert!(err.contains(id), "{id} is listed: {err}");
    }
}

#[test]
fn an_unknown_detector_is_a_usage_error_that_names_the_flag_and_lists_the_ids() {
    let w = Workload::new();
    let trace = w.record();
    let out = run(dejavu()
        .args(["report", "--detector", "repeated-lookup,nope"])
        .arg(&trace));
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--detector") && err.contains("`nope`"),
        "{err}"
    );
    for id in IDS {
        assert!(err.contains(id), "{id} is listed: {err}");
    }
}

#[test]
fn an_unknown_option_is_a_usage_error_that_says_what_is_valid() {
    let w = Workload::new();
    let trace = w.record();
    for (opt, expect) in [
        ("repeated-lookup.nope=3", "repeated-lookup"),
        ("nope.x=1", "the detectors are"),
        ("missing-equals", "DETECTOR.OPTION=VALUE"),
    ] {
        let out = run(dejavu().args(["report", "-O", opt]).arg(&trace));
        assert_eq!(out.status.code(), Some(2), "-O {opt}");
        let err = text(&out.stderr);
        assert!(
            err.contains("-O") && err.contains(expect),
            "-O {opt}: {err}"
        );
    }
    if let Some(d) = dejavu_detect::registry()
        .iter()
        .find(|d| !d.options.is_empty())
    {
        let opt = format!("{}.{}=lots", d.id, d.options[0].0);
        let out = run(dejavu().args(["report", "-O", &opt]).arg(&trace));
        assert_eq!(out.status.code(), Some(2), "-O {opt}");
    }
}

#[test]
fn report_json_of_100_stats_of_one_file_is_one_repeated_lookup_with_99_redundant_calls() {
    let w = Workload::new();
    let trace = w.record();
    let v = report_json(&trace, &[]);
    assert_eq!(v["version"], 2);
    let f = lookup_finding(&v, &w.conf)
        .unwrap_or_else(|| panic!("no repeated-lookup of app.conf in {v:#}"));
    assert_eq!(f["calls"], 100);
    assert_eq!(f["redundant_calls"], 99);
    assert_eq!(f["cache"]["saved_calls"], 99);
    assert_eq!(f["cache"]["safe"], true);
    // The documented shape (docs/report-format.md).
    assert!(f["pid"].as_u64().is_some_and(|p| p > 0));
    assert!(f["command"]
        .as_str()
        .is_some_and(|c| c.contains("stat_loop")));
    assert!(f["wasted_ns"].as_u64().is_some_and(|n| n > 0));
    assert!(f["fix"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(f["hazards"].is_array() && f["callsites"].is_array() && f["paths"].is_array());
    assert!(f["severity"].is_string() && f["share"].is_number() && f["rank"].is_number());
    for c in f["callsites"].as_array().into_iter().flatten() {
        assert!(c["function"].is_string() && c["file"].is_string() && c["line"].is_u64());
    }
    assert!(v["syscalls"].as_u64().is_some_and(|n| n >= 100));
    assert!(v["redundant_calls"].as_u64().is_some_and(|n| n >= 99));
    assert_eq!(v["processes"], 1);
    assert_eq!(v["lost_events"], 0);
    assert_eq!(v["truncated"], Value::Null);
    assert_eq!(v["thresholds"]["min_calls"], 10);
    let backend = v["trace"]["backend"].as_str().unwrap_or_default();
    match std::env::var("DEJAVU_BACKEND").as_deref() {
        Ok(b @ ("ptrace" | "ebpf")) => assert_eq!(backend, b),
        _ => assert!(backend == "ptrace" || backend == "ebpf", "{backend}"),
    }
    assert!(v["trace"]["command"][0]
        .as_str()
        .is_some_and(|c| c.ends_with("stat_loop")));
    assert_eq!(v["detectors"].as_array().map(Vec::len), Some(IDS.len()));
}

#[test]
fn report_in_the_terminal_format_ranks_the_finding_with_its_fix() {
    let w = Workload::new();
    let trace = w.record();
    let out = run(dejavu().arg("report").arg(&trace));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let para = shown.split("\n\n").next().unwrap_or("").replace('\n', " ");
    assert!(
        para.contains("99 of ") && para.contains("Top: repeated-lookup of"),
        "the summary counts and names the top finding:\n{shown}"
    );
    let row = shown
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u32>().is_ok())
        })
        .find(|l| l.contains("repeated-lookup") && l.contains("app.conf"))
        .unwrap_or_else(|| panic!("no row for app.conf:\n{shown}"));
    assert!(row.contains(" 100 ") && row.contains(" 99 "), "{row}");
    assert!(
        shown.contains("fix:") && shown.contains("a cache would have saved 99 calls"),
        "{shown}"
    );
    for line in shown.lines() {
        assert!(line.chars().count() <= 100, "fits 100 columns: {line:?}");
    }
}

#[test]
fn min_calls_1000_hides_the_finding_and_the_report_says_why() {
    let w = Workload::new();
    let trace = w.record();
    let v = report_json(&trace, &["--min-calls", "1000"]);
    assert!(lookup_finding(&v, &w.conf).is_none());
    assert!(v["hidden"].as_u64().is_some_and(|n| n >= 1));
    assert_eq!(v["thresholds"]["min_calls"], 1000);

    let out = run(dejavu().args(["report", "--min-calls", "1000"]).arg(&trace));
    assert!(out.status.success());
    let shown = text(&out.stdout).replace('\n', " ");
    assert!(shown.contains("no redundant work found in"), "{shown}");
    assert!(
        shown.contains("at least 1,000 redundant calls"),
        "the threshold: {shown}"
    );
    assert!(
        shown.contains("were hidden") || shown.contains("was hidden"),
        "{shown}"
    );
    assert!(shown.contains("--min-calls 1"), "how to see them: {shown}");
}

#[test]
fn skip_startup_takes_a_duration_and_refuses_a_bare_number() {
    let w = Workload::new();
    let trace = w.record();
    let v = report_json(&trace, &["--skip-startup", "1.5s"]);
    assert_eq!(v["thresholds"]["skip_startup_ns"], 1_500_000_000u64);
    assert!(
        lookup_finding(&v, &w.conf).is_none(),
        "the whole run is shorter than 1.5s: nothing counted"
    );
    let v = report_json(&trace, &["--skip-startup", "0ms"]);
    assert!(lookup_finding(&v, &w.conf).is_some());
    let out = run(dejavu().args(["report", "--skip-startup", "2"]).arg(&trace));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("needs a unit"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn detector_limits_the_analysis_to_the_detectors_named() {
    let w = Workload::new();
    let trace = w.record();
    let v = report_json(&trace, &["--detector", "negative-probe"]);
    assert_eq!(v["detectors"], serde_json::json!(["negative-probe"]));
    assert!(lookup_finding(&v, &w.conf).is_none());
}

#[test]
fn top_and_all_are_exclusive() {
    let out = run(dejavu().args(["report", "--top", "3", "--all", "x.dvt"]));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_missing_trace_is_exit_status_1_naming_the_file() {
    let out = run(dejavu().args(["report", "/nonexistent/t.dvt"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/t.dvt"));
}

#[test]
fn a_cut_off_trace_is_reported_with_a_warning_on_stderr() {
    let w = Workload::new();
    let trace = w.record();
    let bytes = std::fs::read(&trace).expect("read trace");
    let cut = w.dir.path().join("cut.dvt");
    // Drop the end block and a piece of the last data block, as a kill -9 would.
    std::fs::write(&cut, &bytes[..bytes.len() * 3 / 4]).expect("write cut trace");
    let out = run(dejavu().arg("report").arg(&cut));
    assert!(
        out.status.success(),
        "a cut-off trace is still reported: {}",
        text(&out.stderr)
    );
    let err = text(&out.stderr);
    assert!(err.contains("warning") && err.contains("cut off"), "{err}");
    assert!(
        !text(&out.stdout).contains("warning"),
        "warnings stay off stdout"
    );
}

#[test]
fn run_leaves_the_programs_stdout_and_exit_status_alone_and_reports_on_stderr() {
    let w = Workload::new();
    let out = run(dejavu().arg("run").arg("--").args(w.cmd(&["100", "3"])));
    assert_eq!(out.status.code(), Some(3), "the program's own status");
    assert_eq!(
        text(&out.stdout),
        "stat_loop: 100 stats, size 12\n",
        "stdout is the program's, untouched"
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("repeated-lookup") && err.contains("app.conf"),
        "{err}"
    );
}

#[test]
fn run_reports_on_stdout_after_the_programs_output_when_asked() {
    let w = Workload::new();
    let out = run(dejavu()
        .args(["run", "--report-to", "stdout", "--"])
        .args(w.cmd(&[])));
    assert_eq!(out.status.code(), Some(0));
    let shown = text(&out.stdout);
    assert!(shown.starts_with("stat_loop: 100 stats"), "{shown}");
    assert!(shown.contains("repeated-lookup"), "{shown}");
    assert!(!text(&out.stderr).contains("repeated-lookup"));
}

#[test]
fn run_writes_the_report_into_a_file_and_keeps_the_trace_when_asked() {
    let w = Workload::new();
    let report = w.dir.path().join("findings.json");
    let trace = w.dir.path().join("kept.dvt");
    let out = run(dejavu()
        .arg("run")
        .arg("--json")
        .arg("-o")
        .arg(&report)
        .arg("--keep-trace")
        .arg(&trace)
        .arg("--")
        .args(w.cmd(&[])));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "stat_loop: 100 stats, size 12\n");
    assert!(
        !text(&out.stderr).contains("repeated-lookup"),
        "the report is in the file"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&report).expect("report file"))
        .expect("the file holds the JSON report");
    assert_eq!(
        lookup_finding(&v, &w.conf).map(|f| f["redundant_calls"].clone()),
        Some(99.into())
    );
    // The kept trace reports the same.
    let again = report_json(&trace, &[]);
    assert_eq!(
        lookup_finding(&again, &w.conf).map(|f| f["calls"].clone()),
        Some(100.into())
    );
}

#[test]
fn run_deletes_its_temporary_trace() {
    let w = Workload::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = run(dejavu()
        .env("TMPDIR", tmp.path())
        .args(["run", "--"])
        .args(w.cmd(&[])));
    assert!(out.status.success());
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("read TMPDIR")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn run_refuses_a_report_file_that_looks_like_a_trace_before_running_anything() {
    let w = Workload::new();
    let marker = w.dir.path().join("ran");
    let out = run(dejavu()
        .args(["run", "-o", "t.dvt", "--", "touch"])
        .arg(&marker)
        .current_dir(w.dir.path()));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--keep-trace"),
        "{}",
        text(&out.stderr)
    );
    assert!(!marker.exists(), "the program was not run");
}

#[test]
fn run_checks_detectors_before_running_the_program() {
    let w = Workload::new();
    let marker = w.dir.path().join("ran");
    let out = run(dejavu()
        .args(["run", "--detector", "nope", "--", "touch"])
        .arg(&marker));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("repeated-lookup"),
        "lists the ids"
    );
    assert!(!marker.exists(), "the program was not run");
}

#[test]
fn fail_on_finding_exits_1_when_the_program_succeeded_and_there_are_findings() {
    let w = Workload::new();
    let out = run(dejavu()
        .args(["run", "--fail-on", "finding", "--"])
        .args(w.cmd(&[])));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("(--fail-on finding)"),
        "says why the status changed: {}",
        text(&out.stderr)
    );
}

#[test]
fn fail_on_finding_keeps_the_programs_own_failure() {
    let w = Workload::new();
    let out = run(dejavu()
        .args(["run", "--fail-on", "finding", "--"])
        .args(w.cmd(&["100", "5"])));
    assert_eq!(out.status.code(), Some(5));
}

#[test]
fn fail_on_finding_exits_0_when_nothing_is_over_the_thresholds() {
    let w = Workload::new();
    let out = run(dejavu()
        .args([
            "run",
            "--fail-on",
            "finding",
            "--min-calls",
            "1000000",
            "--",
        ])
        .args(w.cmd(&[])));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn run_exits_128_plus_the_signal_that_killed_the_program() {
    let w = Workload::new();
    let out = run(dejavu().args(["run", "--"]).args(w.cmd(&["100", "term"])));
    assert_eq!(out.status.code(), Some(128 + 15));
    assert!(
        text(&out.stderr).contains("repeated-lookup"),
        "still reported"
    );
}

#[test]
fn no_escape_codes_into_a_pipe_or_with_no_color() {
    let w = Workload::new();
    let trace = w.record();
    let piped = run(dejavu().arg("report").arg(&trace));
    assert!(!piped.stdout.contains(&0x1b), "not a terminal: no colour");
    let forced = run(dejavu().args(["report", "--color", "always"]).arg(&trace));
    assert!(
        forced.stdout.contains(&0x1b),
        "--color always colours even a pipe"
    );
    let json = run(dejavu()
        .args(["report", "--json", "--color", "always"])
        .arg(&trace));
    assert!(!json.stdout.contains(&0x1b), "JSON is never coloured");

    // In a terminal (util-linux `script` gives the command a pseudo-terminal).
    if Command::new("script").arg("--version").output().is_err() {
        common::skip("script", "script (util-linux) is not installed");
        return;
    }
    let in_tty = |no_color: Option<&str>| -> String {
        let mut c = Command::new("script");
        c.args(["-qec"])
            .arg(format!(
                "'{}' report '{}'",
                env!("CARGO_BIN_EXE_dejavu"),
                trace.display()
            ))
            .arg("/dev/null")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null());
        if let Some(v) = no_color {
            c.env("NO_COLOR", v);
        }
        text(&c.output().expect("script runs").stdout)
    };
    assert!(in_tty(None).contains('\x1b'), "a terminal gets colour");
    let plain = in_tty(Some("1"));
    assert!(
        plain.contains("repeated-lookup") && !plain.contains('\x1b'),
        "NO_COLOR: {plain:?}"
    );
}

#[test]
fn dejavu_report_repeats_nothing_itself() {
    // DESIGN.md: `dejavu run -- dejavu report big.dvt` must report nothing.
    let w = Workload::new();
    let trace = w.record();
    let report = w.dir.path().join("self.json");
    let out = run(dejavu()
        .arg("run")
        .arg("--json")
        .arg("-o")
        .arg(&report)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_dejavu"))
        .arg("report")
        .arg(&trace));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("JSON");
    assert_eq!(v["findings"], serde_json::json!([]), "{v:#}");
}

#[test]
fn group_by_callsite_without_stacks_says_how_to_get_them() {
    let w = Workload::new();
    let trace = w.dir.path().join("t.dvt");
    let st = dejavu()
        .args(["record", "--stacks", "off", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(stat_loop())
        .arg(&w.conf)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let out = dejavu()
        .args(["report", "--group-by", "callsite"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("No call sites") && text.contains("--stacks on"),
        "{text}"
    );
}
