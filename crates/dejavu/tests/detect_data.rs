//! Detectors on real programs (tests/workloads/detectors/<id>/): reread-unchanged (a
//! config read per request; whole files mapped twice), self-inflicted-lookup,
//! repeated-output, repeated-exec, sync-io-main-thread, the read side of open-close-churn,
//! negative-probe's failures other than ENOENT, check-then-act's directory probe and
//! ensure-dir's Python idiom. Each dirty fixture, recorded with `dejavu record`, yields its
//! finding with the counts the program implies, and each clean twin stays quiet for that
//! detector. Real tools when installed: rsync -a, git log -p. The mmap cases also run
//! from strace logs (`dejavu import strace`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use dejavu_detect::{analyze, Config, Finding};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn dejavu() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dejavu"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

fn fixture(detector: &str, file: &str) -> String {
    let p = repo()
        .join("tests/workloads/detectors")
        .join(detector)
        .join(file);
    p.to_str().expect("utf-8 path").to_string()
}

/// The full path of `tool` on PATH, if it is there.
fn which(tool: &str) -> Option<PathBuf> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && p.starts_with('/')).then(|| PathBuf::from(p))
}

/// Skips the calling test (saying why) when `$e` is None.
macro_rules! require {
    ($e:expr, $what:expr) => {
        match $e {
            Some(v) => v,
            None => {
                common::skip($what, &format!("{} is not installed", $what));
                return;
            }
        }
    };
}

/// The real Python interpreter: `python3` may be a pyenv shim (a bash script that runs
/// more programs, each with execs and file reads of its own); the fixtures' traces should
/// hold only the fixture.
fn python() -> Option<PathBuf> {
    which("python3")?;
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && p.is_absolute()).then_some(p)
}

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

    fn file(&self, name: &str) -> String {
        self.path.join(name).to_str().expect("utf-8").to_string()
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path.join(name), text).expect("write fixture input");
    }

    fn trace(&self) -> PathBuf {
        self.path.join("t.dvt")
    }
}

/// `dejavu record -o WORK/t.dvt -- cmd` in `work`, with `env` added; asserts success.
/// Without cargo's LD_LIBRARY_PATH: the loader would probe its directories for every
/// library (a negative-probe of the test harness's making).
fn record(work: &Work, cmd: &[&str], env: &[(&str, &str)]) {
    let out = Command::new(dejavu())
        .arg("record")
        .arg("-o")
        .arg(work.trace())
        .arg("--")
        .args(cmd)
        .current_dir(&work.path)
        .env_remove("LD_LIBRARY_PATH")
        .envs(env.iter().copied())
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

/// The findings of `detector` in the recorded trace, default settings.
fn findings(work: &Work, detector: &str) -> Vec<Finding> {
    let mut r = dejavu_trace::TraceReader::open(&work.trace()).expect("trace opens");
    let a = analyze(&mut r, &Config::default(), |_| {}).expect("analysis");
    a.findings
        .into_iter()
        .filter(|f| f.detector == detector)
        .collect()
}

/// The findings of `detector` with every threshold at its lowest (one redundant call is
/// enough): what a clean twin must not have.
fn all_findings(work: &Work, detector: &str) -> Vec<Finding> {
    let mut r = dejavu_trace::TraceReader::open(&work.trace()).expect("trace opens");
    let cfg = Config {
        min_calls: 1,
        ..Config::default()
    };
    let a = analyze(&mut r, &cfg, |_| {}).expect("analysis");
    a.findings
        .into_iter()
        .filter(|f| f.detector == detector)
        .collect()
}

/// The backend that recorded the trace ("ptrace", "ebpf", "strace-import").
fn backend(work: &Work) -> String {
    let r = dejavu_trace::TraceReader::open(&work.trace()).expect("trace opens");
    r.meta().backend.clone()
}

/// Whether the trace's native call sites can be asserted on. The ptrace backend unwinds
/// with DWARF CFI at every stop; the eBPF backend walks frame pointers (which -O1 code
/// omits) and names frames only while the process is alive, which a fixture that lives a
/// few milliseconds is not (docs/ebpf-backend.md): its findings may have no call site.
fn native_sites(work: &Work) -> bool {
    DEJAVU_STACKS_ON && backend(work) == "ptrace"
}

/// A finding's call sites as (function, file name, line, redundant calls).
fn sites(f: &Finding) -> Vec<(String, String, u32, u64)> {
    f.callsites
        .iter()
        .map(|c| {
            let file = Path::new(&c.file)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (c.function.clone(), file, c.line, c.redundant_calls)
        })
        .collect()
}

/// The findings of one fix: exactly one where native call sites are named (ptrace). The
/// eBPF backend names a process's native frames only while it lives, so a short program
/// may have call sites for its first calls and none for the rest: its calls then split
/// between the finding at the site and one by path pattern, and only their sums are the
/// fix's (each path's calls stay in one of them).
fn one_fix<'a>(w: &Work, f: &'a [Finding], pred: impl Fn(&Finding) -> bool) -> Vec<&'a Finding> {
    let mine: Vec<&Finding> = f.iter().filter(|f| pred(f)).collect();
    let most = if native_sites(w) { 1 } else { 2 };
    assert!(!mine.is_empty() && mine.len() <= most, "{f:#?}");
    mine
}

/// (calls, redundant calls, distinct paths) of a fix's findings.
fn totals(f: &[&Finding]) -> (u64, u64, u64) {
    (
        f.iter().map(|f| f.calls).sum(),
        f.iter().map(|f| f.redundant_calls).sum(),
        f.iter().map(|f| f.path_count).sum(),
    )
}

/// A finding's loop: what one run is, the function, the redundant calls per run, the steps.
fn loop_of(f: &Finding) -> Option<(&'static str, String, f64, Vec<String>)> {
    let q = f.sequence.as_ref()?;
    Some((q.per, q.function.clone(), q.redundant, q.steps.clone()))
}

/// Stacks are recorded by default (`dejavu record` without `--stacks off`).
const DEJAVU_STACKS_ON: bool = true;

fn on_path<'a>(f: &'a [Finding], path: &str) -> Vec<&'a Finding> {
    f.iter().filter(|f| f.paths == [path]).collect()
}

// ---- reread-unchanged (Python) ------------------------------------------------------

const CONFIG: &str = "{\"greeting\": \"hello\", \"limits\": [1, 2, 3]}\n";

#[test]
fn reread_unchanged_python_rereads_config_per_request() {
    let py = require!(python(), "python3");
    let w = Work::new();
    w.write("config.json", CONFIG);
    record(
        &w,
        &[
            py.to_str().unwrap_or("python3"),
            &fixture("reread-unchanged", "dirty.py"),
            "100",
        ],
        &[],
    );
    let f = findings(&w, "reread-unchanged");
    let mine = on_path(&f, &w.file("config.json"));
    assert_eq!(mine.len(), 1, "{f:#?}");
    let m = mine[0];
    assert!(m.command.contains("dirty.py"), "{}", m.command);
    // 100 full reads, each the same cycle of calls (open, fstat, ..., read, read, close):
    // 99 of them redundant, all their calls counted.
    assert_eq!(m.calls % 100, 0, "{m:#?}");
    let per_read = m.calls / 100;
    assert!(
        per_read >= 4,
        "open, read, read to EOF, close at least: {m:#?}"
    );
    assert_eq!(m.redundant_calls, 99 * per_read, "{m:#?}");
    let cache = m.cache.clone().expect("a cache verdict");
    assert_eq!((cache.stale_answers, cache.safe), (0, true));
}

#[test]
fn reread_unchanged_python_caching_the_config_is_quiet() {
    let py = require!(python(), "python3");
    let w = Work::new();
    w.write("config.json", CONFIG);
    record(
        &w,
        &[
            py.to_str().unwrap_or("python3"),
            &fixture("reread-unchanged", "clean.py"),
            "100",
        ],
        &[],
    );
    // Now that file-backed mmap is recorded, the runtime has one of its own: glibc maps
    // /etc/ld.so.cache in full again for each dlopen after start-up (Python's extension
    // modules), owned by ld.so. (Without a call site to tell them apart, the eBPF
    // recording's finding also holds the interpreter's listings of site-packages.)
    // Nothing of the fixture's.
    let f: Vec<Finding> = findings(&w, "reread-unchanged")
        .into_iter()
        .filter(|f| {
            f.owner != dejavu_detect::Owner::Runtime
                || f.paths.iter().any(|p| p.ends_with("config.json"))
        })
        .collect();
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn reread_unchanged_a_rewrite_by_another_program_makes_caching_unsafe() {
    let py = require!(python(), "python3");
    let w = Work::new();
    w.write("config.json", CONFIG);
    let mut child = Command::new(dejavu())
        .arg("record")
        .arg("-o")
        .arg(w.trace())
        .arg("--")
        .arg(&py)
        .args([&fixture("reread-unchanged", "dirty.py"), "20", "10"])
        .current_dir(&w.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dejavu runs");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line)
        .expect("the program says it paused");
    assert_eq!(line.trim(), "paused");
    // Another program, not traced, rewrites the file between request 10 and 11.
    let st = Command::new("sh")
        .arg("-c")
        .arg("printf '{\"greeting\": \"hello again\", \"limits\": [1]}\\n' > config.json")
        .current_dir(&w.path)
        .status()
        .expect("sh runs");
    assert!(st.success());
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("resume the program");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).ok();
    let o = child.wait_with_output().expect("dejavu ends");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = findings(&w, "reread-unchanged");
    let mine = on_path(&f, &w.file("config.json"));
    assert_eq!(mine.len(), 1, "{f:#?}");
    let m = mine[0];
    // 20 full reads: the first of each identity establishes, the rest (9 + 9) repeat.
    assert_eq!(m.calls % 20, 0, "{m:#?}");
    assert_eq!(m.redundant_calls, 18 * (m.calls / 20), "{m:#?}");
    let cache = m.cache.clone().expect("a cache verdict");
    assert_eq!((cache.stale_answers, cache.safe), (1, false), "{m:#?}");
    assert!(m.hazards.iter().any(|h| h.contains("unsafe")), "{m:#?}");
}

// ---- self-inflicted-lookup (C) ------------------------------------------------------

/// Compiles a fixture's C file into `work`.
fn gcc(work: &Work, detector: &str, name: &str) -> Option<String> {
    which("gcc")?;
    let out = work.file(name);
    let st = Command::new("gcc")
        .args([
            "-O1",
            "-g",
            "-o",
            &out,
            &fixture(detector, &format!("{name}.c")),
        ])
        .status()
        .expect("gcc runs");
    assert!(st.success(), "compiling {name}.c");
    Some(out)
}

#[test]
fn self_inflicted_lookup_fstat_after_each_append() {
    let w = Work::new();
    let prog = require!(gcc(&w, "self-inflicted-lookup", "dirty"), "gcc");
    let log = w.file("out.log");
    record(&w, &[&prog, &log, "100"], &[]);
    let f = findings(&w, "self-inflicted-lookup");
    let mine = on_path(&f, &log);
    assert_eq!(mine.len(), 1, "{f:#?}");
    // 100 fstats: the first establishes the size, the other 99 follow from the appends;
    // 98 of them are asked for another append (the last one, after the last, is not).
    assert_eq!(
        (mine[0].calls, mine[0].redundant_calls),
        (100, 98),
        "{f:#?}"
    );
    assert!(mine[0].command.contains("dirty"), "{}", mine[0].command);
}

#[test]
fn self_inflicted_lookup_counting_the_size_is_quiet() {
    let w = Work::new();
    let prog = require!(gcc(&w, "self-inflicted-lookup", "clean"), "gcc");
    let log = w.file("out.log");
    record(&w, &[&prog, &log, "100"], &[]);
    let f = findings(&w, "self-inflicted-lookup");
    assert!(f.is_empty(), "{f:#?}");
}

// ---- repeated-output (Node.js) -------------------------------------------------------

#[test]
fn repeated_output_the_same_warning_per_message() {
    let node = require!(which("node"), "node");
    let w = Work::new();
    record(
        &w,
        &[
            node.to_str().unwrap_or("node"),
            &fixture("repeated-output", "dirty.js"),
            "100",
        ],
        &[],
    );
    let f = findings(&w, "repeated-output");
    assert_eq!(f.len(), 1, "{f:#?}");
    let m = &f[0];
    // One line per message, each with its own timestamp: 100 occurrences, 99 repeats.
    assert_eq!((m.calls, m.redundant_calls), (100, 99), "{m:#?}");
    assert!(m.command.contains("dirty.js"), "{}", m.command);
    assert!(m.paths[0].starts_with("pipe:"), "stderr is a pipe: {m:#?}");
    let ex = m.example.clone().unwrap_or_default();
    assert!(
        ex.contains("[WARN] bypassing socket.io authentication") && ex.starts_with("20"),
        "the first occurrence, timestamp and all: {ex}"
    );
}

#[test]
fn repeated_output_warning_once_is_quiet() {
    let node = require!(which("node"), "node");
    let w = Work::new();
    record(
        &w,
        &[
            node.to_str().unwrap_or("node"),
            &fixture("repeated-output", "clean.js"),
            "100",
        ],
        &[],
    );
    let f = findings(&w, "repeated-output");
    assert!(f.is_empty(), "{f:#?}");
}

/// The one finding of repeated-output on `path` (a file the program logged to).
fn output_to<'a>(f: &'a [Finding], path: &str) -> &'a Finding {
    let mine: Vec<_> = f
        .iter()
        .filter(|f| f.paths.iter().any(|p| p == path))
        .collect();
    assert_eq!(mine.len(), 1, "one finding on {path}: {f:#?}");
    mine[0]
}

#[test]
fn repeated_output_the_same_warning_with_stderr_to_a_file() {
    // `node dirty.js 2> server.err.txt`: the way services log, to a regular file that is
    // neither O_APPEND nor named like a log. stderr is a log wherever it goes.
    let node = require!(which("node"), "node");
    let w = Work::new();
    let err = w.file("server-stderr.txt");
    record(
        &w,
        &[
            "sh",
            "-c",
            "exec \"$0\" \"$1\" 100 2>\"$2\"",
            node.to_str().unwrap_or("node"),
            &fixture("repeated-output", "dirty.js"),
            &err,
        ],
        &[],
    );
    let f = findings(&w, "repeated-output");
    let m = output_to(&f, &err);
    assert_eq!((m.calls, m.redundant_calls), (100, 99), "{m:#?}");
    assert_eq!(
        m.stream.as_deref(),
        Some(&*format!("stderr -> {err}")),
        "{m:#?}"
    );
    let ex = m.example.clone().unwrap_or_default();
    assert!(
        ex.contains("[WARN] bypassing socket.io authentication"),
        "{ex}"
    );
}

#[test]
fn repeated_output_warning_once_with_stderr_to_a_file_is_quiet() {
    let node = require!(which("node"), "node");
    let w = Work::new();
    let err = w.file("server-stderr.txt");
    record(
        &w,
        &[
            "sh",
            "-c",
            "exec \"$0\" \"$1\" 100 2>\"$2\"",
            node.to_str().unwrap_or("node"),
            &fixture("repeated-output", "clean.js"),
            &err,
        ],
        &[],
    );
    let f = findings(&w, "repeated-output");
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn repeated_output_python_logging_to_a_file_opened_with_mode_w() {
    // logging.basicConfig(filename="app.log", filemode="w"): no O_APPEND, one write per
    // record, each stamped with the time.
    let py = require!(python(), "python3");
    let w = Work::new();
    let log = w.file("app.log");
    record(
        &w,
        &[
            py.to_str().unwrap(),
            &fixture("repeated-output", "log_dirty.py"),
            &log,
            "200",
        ],
        &[],
    );
    let f = findings(&w, "repeated-output");
    let m = output_to(&f, &log);
    // 200 requests, one warning each; the closing "handled 200 requests" is said once.
    assert_eq!((m.calls, m.redundant_calls), (200, 199), "{m:#?}");
    let ex = m.example.clone().unwrap_or_default();
    assert!(ex.contains("WARNING orders: no cache configured"), "{ex}");
    assert!(m.command.contains("log_dirty.py"), "{}", m.command);
}

#[test]
fn repeated_output_python_logging_once_is_quiet() {
    let py = require!(python(), "python3");
    let w = Work::new();
    let log = w.file("app.log");
    record(
        &w,
        &[
            py.to_str().unwrap(),
            &fixture("repeated-output", "log_clean.py"),
            &log,
            "200",
        ],
        &[],
    );
    let f = findings(&w, "repeated-output");
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn repeated_output_c_fprintf_fflush_to_a_log_opened_with_fopen_w() {
    let w = Work::new();
    let prog = require!(gcc(&w, "repeated-output", "log_dirty"), "gcc");
    let log = w.file("app.log");
    record(&w, &[&prog, &log, "200"], &[]);
    let f = findings(&w, "repeated-output");
    let m = output_to(&f, &log);
    assert_eq!((m.calls, m.redundant_calls), (200, 199), "{m:#?}");
    let ex = m.example.clone().unwrap_or_default();
    assert!(ex.contains("spool directory not set"), "{ex}");
}

#[test]
fn repeated_output_c_logging_once_is_quiet() {
    let w = Work::new();
    let prog = require!(gcc(&w, "repeated-output", "log_clean"), "gcc");
    let log = w.file("app.log");
    record(&w, &[&prog, &log, "200"], &[]);
    let f = findings(&w, "repeated-output");
    assert!(f.is_empty(), "{f:#?}");
}

/// Runs a filter fixture with stdout to `out.csv` in `w`.
fn filter(w: &Work, py: &Path, name: &str) -> String {
    let out = w.file("out.csv");
    record(
        w,
        &[
            "sh",
            "-c",
            "exec \"$0\" \"$1\" 10000 >\"$2\"",
            py.to_str().unwrap(),
            &fixture("repeated-output", name),
            &out,
        ],
        &[],
    );
    out
}

#[test]
fn repeated_output_a_filter_streaming_rows_to_stdout_is_quiet() {
    // 10,000 rows (many of them identical) to stdout: the program's product, not a log.
    let py = require!(python(), "python3");
    let w = Work::new();
    filter(&w, &py, "filter_clean.py");
    let f = findings(&w, "repeated-output");
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn repeated_output_a_warning_per_row_among_the_rows_is_found() {
    let py = require!(python(), "python3");
    let w = Work::new();
    let out = filter(&w, &py, "filter_dirty.py");
    let f = findings(&w, "repeated-output");
    let m = output_to(&f, &out);
    assert_eq!((m.calls, m.redundant_calls), (10000, 9999), "{m:#?}");
    let ex = m.example.clone().unwrap_or_default();
    assert!(
        ex.contains("warning: the amount column has no currency"),
        "{ex}"
    );
}

// ---- repeated-exec (Python) ----------------------------------------------------------

/// PATH for the program: two directories without git, then git's own.
fn exec_path(w: &Work, git: &Path) -> String {
    let dir = git.parent().and_then(Path::to_str).unwrap_or("/usr/bin");
    format!("{}:{}:{dir}", w.file("nobin1"), w.file("nobin2"))
}

#[test]
fn repeated_exec_git_version_per_item() {
    let py = require!(python(), "python3");
    let git = require!(which("git"), "git");
    let w = Work::new();
    let path = exec_path(&w, &git);
    record(
        &w,
        &[
            py.to_str().unwrap_or("python3"),
            &fixture("repeated-exec", "dirty.py"),
            "50",
        ],
        &[("PATH", &path)],
    );
    let f = findings(&w, "repeated-exec");
    let git_path = git.to_str().unwrap_or("/usr/bin/git");
    let runs = on_path(&f, git_path);
    assert_eq!(runs.len(), 1, "{f:#?}");
    assert_eq!((runs[0].calls, runs[0].redundant_calls), (50, 49), "{f:#?}");
    assert_eq!(runs[0].example.as_deref(), Some("git --version"));
    assert!(runs[0].command.contains("dirty.py"), "{}", runs[0].command);
    // subprocess tries execve in each PATH directory before git's, per spawn.
    let probes: Vec<_> = f
        .iter()
        .filter(|f| f.paths.iter().any(|p| p.contains("/nobin")))
        .collect();
    assert_eq!(probes.len(), 1, "{f:#?}");
    let mut paths = probes[0].paths.clone();
    paths.sort();
    assert_eq!(paths, vec![w.file("nobin1/git"), w.file("nobin2/git")]);
    assert_eq!((probes[0].calls, probes[0].redundant_calls), (100, 98));
    assert_eq!(probes[0].pid, runs[0].pid);
    assert_eq!(f.len(), 2, "{f:#?}");
}

#[test]
fn repeated_exec_git_version_once_is_quiet() {
    let py = require!(python(), "python3");
    let git = require!(which("git"), "git");
    let w = Work::new();
    let path = exec_path(&w, &git);
    record(
        &w,
        &[
            py.to_str().unwrap_or("python3"),
            &fixture("repeated-exec", "clean.py"),
            "50",
        ],
        &[("PATH", &path)],
    );
    let f = findings(&w, "repeated-exec");
    assert!(f.is_empty(), "{f:#?}");
}

// ---- sync-io-main-thread (Node.js) ---------------------------------------------------

fn sync_io_inputs(w: &Work) {
    w.write("config.json", CONFIG);
    w.write("data.txt", "some data\n");
}

#[test]
fn sync_io_main_thread_read_and_stat_sync_per_request() {
    let node = require!(which("node"), "node");
    let w = Work::new();
    sync_io_inputs(&w);
    record(
        &w,
        &[
            node.to_str().unwrap_or("node"),
            &fixture("sync-io-main-thread", "dirty.js"),
            "100",
        ],
        &[],
    );
    let f = findings(&w, "sync-io-main-thread");
    // One finding: both calls are made by the request handler, one fix.
    let mine: Vec<&Finding> = f
        .iter()
        .filter(|f| f.top_paths.iter().any(|p| p.path == w.file("data.txt")))
        .collect();
    assert_eq!(mine.len(), 1, "{f:#?}");
    let m = mine[0];
    assert!(m.command.contains("dirty.js"), "{}", m.command);
    assert_eq!(m.program, "dirty.js");
    assert_eq!(m.redundant_calls, m.calls);
    assert!(m.wasted_ns > 0);
    let count = |p: &str| {
        m.top_paths
            .iter()
            .find(|t| t.path == p)
            .map_or(0, |t| t.redundant_calls)
    };
    // statSync: one statx per request, every one on the main thread, from the event loop
    // (the server listens once the main module has run).
    assert_eq!(count(&w.file("data.txt")), 100, "{m:#?}");
    // readFileSync: open, read(s), close per request, the same number each time.
    let read = count(&w.file("config.json"));
    assert_eq!(read % 100, 0, "{m:#?}");
    assert!(read >= 3 * 100, "{m:#?}");
    assert_eq!(m.redundant_calls, 100 + read);
    if DEJAVU_STACKS_ON {
        assert!(!m.callsites.is_empty(), "{m:#?}");
    }
    // Start-up (loading dirty.js and probing package.json) is not the finding.
    assert!(
        !f.iter().any(|f| f
            .paths
            .iter()
            .any(|p| p.ends_with(".js") || p.ends_with("package.json"))),
        "{f:#?}"
    );
}

#[test]
fn sync_io_main_thread_fs_promises_is_quiet() {
    let node = require!(which("node"), "node");
    // The server with fs.promises, and the dirty server's calls in a tool that serves
    // nobody (one item per turn of the event loop, no connection accepted).
    for twin in ["clean.js", "cli.js"] {
        let w = Work::new();
        sync_io_inputs(&w);
        record(
            &w,
            &[
                node.to_str().unwrap_or("node"),
                &fixture("sync-io-main-thread", twin),
                "100",
            ],
            &[],
        );
        let f = findings(&w, "sync-io-main-thread");
        assert!(f.is_empty(), "{twin}: {f:#?}");
    }
}

// ---- open-close-churn, read side (C) --------------------------------------------------

#[test]
fn open_close_churn_urandom_opened_per_item() {
    let w = Work::new();
    let prog = require!(gcc(&w, "open-close-churn", "urandom_dirty"), "gcc");
    record(&w, &[&prog, "100"], &[]);
    let f = findings(&w, "open-close-churn");
    let mine = on_path(&f, "/dev/urandom");
    assert_eq!(mine.len(), 1, "{f:#?}");
    let m = mine[0];
    assert!(m.command.contains("urandom_dirty"), "{}", m.command);
    // 100 cycles of open, read 6 bytes, close: the open and close of 99 are redundant.
    assert_eq!((m.calls, m.redundant_calls), (200, 198), "{m:#?}");
    assert_eq!(
        m.example.as_deref(),
        Some(
            "99 of 100 read-only open/close cycles repeated, 1.0 call in between on average (read)"
        )
    );
    assert!(m.fix.contains("getrandom"), "{}", m.fix);
    if native_sites(&w) {
        // suffix() opens it (line 9) and closes it (line 12): one function, one fix, a
        // site per line.
        assert_eq!(
            sites(m),
            vec![
                ("suffix".into(), "urandom_dirty.c".into(), 9, 99),
                ("suffix".into(), "urandom_dirty.c".into(), 12, 99)
            ],
            "{m:#?}"
        );
        // Each call of suffix: open, read, close; the open and close redundant.
        let steps = [
            "open /dev/urandom",
            "read /dev/urandom",
            "close /dev/urandom",
        ];
        assert_eq!(
            loop_of(m),
            Some((
                "call",
                "suffix".into(),
                2.0,
                steps.map(String::from).to_vec()
            )),
            "{m:#?}"
        );
    }
    assert_eq!(f.len(), 1, "{f:#?}");
}

#[test]
fn open_close_churn_urandom_kept_open_is_quiet() {
    let w = Work::new();
    let prog = require!(gcc(&w, "open-close-churn", "urandom_clean"), "gcc");
    record(&w, &[&prog, "100"], &[]);
    let f = all_findings(&w, "open-close-churn");
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn open_close_churn_directory_reopened_per_entry() {
    let w = Work::new();
    let prog = require!(gcc(&w, "open-close-churn", "dir_reopen_dirty"), "gcc");
    record(&w, &[&prog, "50"], &[]);
    let f = findings(&w, "open-close-churn");
    let tree = w.file("tree");
    let mine = on_path(&f, &tree);
    assert_eq!(mine.len(), 1, "{f:#?}");
    let m = mine[0];
    // 50 cycles of open(tree, O_PATH), close: 49 repeated. The entries, each opened and
    // read once, are not churn.
    assert_eq!((m.calls, m.redundant_calls), (100, 98), "{m:#?}");
    assert_eq!(
        m.example.as_deref(),
        Some(
            "49 of 50 read-only open/close cycles repeated, open only while a name in it was \
             opened: the directory opened again for each name"
        ),
        "{m:#?}"
    );
    assert!(
        m.fix.contains("across the names resolved in it"),
        "{}",
        m.fix
    );
    if native_sites(&w) {
        assert_eq!(
            sites(m),
            vec![
                ("main".into(), "dir_reopen_dirty.c".into(), 22, 49),
                ("main".into(), "dir_reopen_dirty.c".into(), 26, 49)
            ],
            "{m:#?}"
        );
        // A loop in main, shown from its first line (22).
        let steps = vec![
            format!("open {tree}"),
            format!("open {tree}/*"),
            format!("close {tree}"),
            format!("read {tree}/*"),
            format!("close {tree}/*"),
        ];
        assert_eq!(
            loop_of(m),
            Some(("iteration", "main".into(), 2.0, steps)),
            "{m:#?}"
        );
    }
    assert_eq!(f.len(), 1, "{f:#?}");
}

#[test]
fn open_close_churn_directory_kept_open_is_quiet() {
    let w = Work::new();
    let prog = require!(gcc(&w, "open-close-churn", "dir_reopen_clean"), "gcc");
    record(&w, &[&prog, "50"], &[]);
    let f = all_findings(&w, "open-close-churn");
    assert!(f.is_empty(), "{f:#?}");
}

// ---- negative-probe: failures other than ENOENT (C) ------------------------------------

#[test]
fn negative_probe_enotdir_and_eloop_per_item() {
    let w = Work::new();
    let prog = require!(gcc(&w, "negative-probe", "failures_dirty"), "gcc");
    record(&w, &[&prog, "100"], &[]);
    let f = findings(&w, "negative-probe");
    let (settings, current) = (w.file("settings"), w.file("current"));
    let fix = one_fix(&w, &f, |f| {
        f.paths.iter().all(|p| *p == settings || *p == current)
    });
    assert_eq!(fix.len(), f.len(), "nothing else: {f:#?}");
    let mut paths: Vec<String> = fix.iter().flat_map(|f| f.paths.clone()).collect();
    paths.sort();
    assert_eq!(paths, vec![current.clone(), settings.clone()], "{fix:#?}");
    // 100 items, two failing opens each: the first of each is news, 99 + 99 repeat.
    assert_eq!(totals(&fix), (200, 198, 2), "{fix:#?}");
    let per_path: Vec<(String, u64)> = fix
        .iter()
        .flat_map(|f| f.top_paths.iter())
        .map(|t| (t.path.clone(), t.redundant_calls))
        .collect();
    assert!(per_path.contains(&(settings, 99)), "{per_path:?}");
    assert!(per_path.contains(&(current, 99)), "{per_path:?}");
    let m = fix[0];
    if fix.len() == 1 {
        assert_eq!(
            m.example.as_deref(),
            Some(
                "failed again the same way with nothing changed: 99 ENOTDIR (open), 99 ELOOP \
                 (open)"
            )
        );
    }
    for m in &fix {
        let cache = m.cache.clone().expect("a cache verdict");
        assert_eq!((cache.stale_answers, cache.safe), (0, true));
    }
    if native_sites(&w) {
        assert_eq!(
            sites(m),
            vec![
                ("main".into(), "failures_dirty.c".into(), 18, 99),
                ("main".into(), "failures_dirty.c".into(), 25, 99)
            ],
            "{m:#?}"
        );
        let steps = vec![
            format!("open {} -> ENOTDIR", w.file("settings")),
            format!("open {} -> ELOOP", w.file("current")),
        ];
        assert_eq!(
            loop_of(m),
            Some(("iteration", "main".into(), 2.0, steps)),
            "{m:#?}"
        );
    }
}

#[test]
fn negative_probe_failures_remembered_once_are_quiet() {
    let w = Work::new();
    let prog = require!(gcc(&w, "negative-probe", "failures_clean"), "gcc");
    record(&w, &[&prog, "100"], &[]);
    let f = all_findings(&w, "negative-probe");
    assert!(f.is_empty(), "{f:#?}");
}

// ---- check-then-act: the O_DIRECTORY probe (C) ------------------------------------------

#[test]
fn check_then_act_directory_probe_before_each_open() {
    let w = Work::new();
    let prog = require!(gcc(&w, "check-then-act", "dir_probe_dirty"), "gcc");
    record(&w, &[&prog, "50"], &[]);
    let f = findings(&w, "check-then-act");
    let fix = one_fix(&w, &f, |f| f.paths == [w.file("tree/*")]);
    assert_eq!(fix.len(), f.len(), "nothing else: {f:#?}");
    // One probe per file (50 files), each failing with ENOTDIR right before the file is
    // opened and fstat'ed: all 50 are redundant, and they are the finding's only calls.
    assert_eq!(totals(&fix), (50, 50, 50), "{fix:#?}");
    let m = fix[0];
    if fix.len() == 1 {
        assert_eq!(
            m.example.as_deref(),
            Some(
                "50 checks answered by the call right after them: 50 O_DIRECTORY probes \
                 failing with ENOTDIR then open and fstat of the descriptor"
            ),
            "{m:#?}"
        );
    }
    assert!(m.fix.contains("drop the O_DIRECTORY probe"), "{}", m.fix);
    assert!(
        m.hazards.iter().any(|h| h.contains("keep O_NOFOLLOW")),
        "{m:#?}"
    );
    assert!(
        m.hazards
            .iter()
            .any(|h| h.contains("the probe's other failures")),
        "{m:#?}"
    );
    if native_sites(&w) {
        assert_eq!(
            sites(m),
            vec![("open_entry".into(), "dir_probe_dirty.c".into(), 12, 50)],
            "{m:#?}"
        );
        // Each call of open_entry: the probe (redundant), then the open as a file.
        let steps = vec![
            format!("open {} -> ENOTDIR", w.file("tree/*")),
            format!("open {}", w.file("tree/*")),
        ];
        assert_eq!(
            loop_of(m),
            Some(("call", "open_entry".into(), 1.0, steps)),
            "{m:#?}"
        );
    }
}

#[test]
fn check_then_act_one_open_and_fstat_is_quiet() {
    let w = Work::new();
    let prog = require!(gcc(&w, "check-then-act", "dir_probe_clean"), "gcc");
    record(&w, &[&prog, "50"], &[]);
    let f = all_findings(&w, "check-then-act");
    assert!(f.is_empty(), "{f:#?}");
}

// ---- ensure-dir: os.path.exists + os.makedirs (Python) ---------------------------------

#[test]
fn ensure_dir_python_exists_and_makedirs_per_record() {
    let py = require!(python(), "python3");
    let w = Work::new();
    record(
        &w,
        &[
            py.to_str().unwrap_or("python3"),
            &fixture("ensure-dir", "makedirs_dirty.py"),
        ],
        &[],
    );
    let f = findings(&w, "ensure-dir");
    assert_eq!(f.len(), 1, "{f:#?}");
    let m = &f[0];
    assert_eq!(m.paths, vec![w.file("out/chats")], "{m:#?}");
    assert!(m.command.contains("makedirs_dirty.py"), "{}", m.command);
    // 100 records: the first creates out/chats; each of the other 99 makes
    // exists(d) -> stat, makedirs: stat(out), mkdir(d) -> EEXIST, stat(d). The mkdir, both
    // stats of d and the stat of its parent right before the mkdir are the idiom's (99 x 4
    // redundant); the calls add the first mkdir.
    assert_eq!((m.calls, m.redundant_calls), (397, 396), "{m:#?}");
    let ex = m.example.clone().unwrap_or_default();
    assert!(
        ex.starts_with("99 mkdir calls failed with EEXIST")
            && ex.contains("with 198 ")
            && ex.contains(" checks before them and 99 "),
        "{ex}"
    );
    let cache = m.cache.clone().expect("a cache verdict");
    assert_eq!((cache.stale_answers, cache.safe), (0, true));
    if DEJAVU_STACKS_ON {
        // Python frames come from the agent under either backend: the makedirs line (the
        // mkdir and the stat after it) and the exists line.
        assert_eq!(
            sites(m),
            vec![
                ("<module>".into(), "makedirs_dirty.py".into(), 11, 297),
                ("<module>".into(), "makedirs_dirty.py".into(), 9, 99),
            ],
            "{m:#?}"
        );
        // Each run of line 11 (os.makedirs): stat the parent, mkdir, stat d.
        let steps = vec![
            format!("stat {}", w.file("out")),
            format!("mkdir {} -> EEXIST", w.file("out/chats")),
            format!("stat {}", w.file("out/chats")),
        ];
        assert_eq!(
            loop_of(m),
            Some(("line", "<module>".into(), 3.0, steps)),
            "{m:#?}"
        );
        assert_eq!(m.sequence.as_ref().map(|q| q.line), Some(11));
    }
}

#[test]
fn ensure_dir_python_makedirs_once_is_quiet() {
    let py = require!(python(), "python3");
    let w = Work::new();
    record(
        &w,
        &[
            py.to_str().unwrap_or("python3"),
            &fixture("ensure-dir", "makedirs_clean.py"),
        ],
        &[],
    );
    let f = all_findings(&w, "ensure-dir");
    assert!(f.is_empty(), "{f:#?}");
}

// ---- ensure-dir: os.makedirs per file, EEXIST caught (pip's ensure_dir) ----------------

#[test]
fn ensure_dir_python_makedirs_per_file_takes_the_parents_stat_with_it() {
    let py = require!(python(), "python3");
    let w = Work::new();
    record(
        &w,
        &[
            py.to_str().unwrap_or("python3"),
            &fixture("ensure-dir", "makedirs_per_file_dirty.py"),
        ],
        &[],
    );
    let f = findings(&w, "ensure-dir");
    // 60 files in each of two directories: after each directory's first, every file makes
    // stat(its parent), mkdir(d) -> EEXIST. Both are the idiom's: 2 x 59 x 2 redundant,
    // the calls adding each directory's first mkdir.
    let total = |f: &[Finding]| -> (u64, u64) {
        f.iter()
            .fold((0, 0), |(c, r), m| (c + m.calls, r + m.redundant_calls))
    };
    assert_eq!(total(&f), (2 * (60 + 59), 2 * 59 * 2), "{f:#?}");
    assert!(
        f.iter().all(|m| m
            .example
            .as_deref()
            .is_some_and(|e| e.contains(" checks before them"))),
        "{f:#?}"
    );
    if DEJAVU_STACKS_ON {
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            sites(&f[0]),
            vec![(
                "ensure_dir".into(),
                "makedirs_per_file_dirty.py".into(),
                13,
                236
            )],
            "{f:#?}"
        );
        // The parents' repeated stats are the same calls: a repeated-lookup finding of
        // them is shown in the ensure-dir one, not as a row of its own.
        let mut r = dejavu_trace::TraceReader::open(&w.trace()).expect("trace opens");
        let a = analyze(&mut r, &Config::default(), |_| {}).expect("analysis");
        let rows: Vec<&Finding> = a
            .findings
            .iter()
            .filter(|g| g.shown_in.is_none() && g.paths.iter().any(|p| p.contains("/site/")))
            .collect();
        assert_eq!(rows.len(), 1, "{rows:#?}");
        assert_eq!(rows[0].detector, "ensure-dir");
        assert!(
            rows[0].also.iter().any(|x| x.detector == "repeated-lookup"),
            "{:#?}",
            rows[0]
        );
    }
}

#[test]
fn ensure_dir_python_makedirs_per_directory_once_is_quiet() {
    let py = require!(python(), "python3");
    let w = Work::new();
    record(
        &w,
        &[
            py.to_str().unwrap_or("python3"),
            &fixture("ensure-dir", "makedirs_per_file_clean.py"),
        ],
        &[],
    );
    let f = all_findings(&w, "ensure-dir");
    assert!(f.is_empty(), "{f:#?}");
}

// ---- reread-unchanged: whole-file mmap (C) ---------------------------------------------

/// Runs `cmd` in `cwd` under `strace -f -tt -T -y -v` and imports the log into WORK/t.dvt:
/// the same mmap findings from an strace log, whose opens carry no identity (fstat's does).
fn strace_record(
    work: &Work,
    cmd: &[&str],
    cwd: &Path,
    env: &[(&'static str, String)],
) -> Option<()> {
    which("strace")?;
    let log = work.path.join("run.strace");
    let st = Command::new("strace")
        .args(["-f", "-tt", "-T", "-y", "-v", "-o"])
        .arg(&log)
        .arg("--")
        .args(cmd)
        .current_dir(cwd)
        .env_remove("LD_LIBRARY_PATH")
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("strace runs");
    assert!(st.success(), "strace {cmd:?}: {st}");
    let out = Command::new(dejavu())
        .args(["import", "strace", "-o"])
        .arg(work.trace())
        .arg(&log)
        .output()
        .expect("dejavu import runs");
    assert!(
        out.status.success(),
        "dejavu import strace: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(())
}

/// mmap_dirty's finding: 50 objects, each mapped whole twice (open, fstat, mmap, close).
fn assert_mapped_twice(w: &Work) {
    let f = findings(w, "reread-unchanged");
    let fix = one_fix(w, &f, |f| f.paths == [w.file("objects/*")]);
    assert_eq!(fix.len(), f.len(), "nothing else: {f:#?}");
    // 100 full reads of 4 calls; the second read of each object is redundant.
    assert_eq!(totals(&fix), (400, 200, 50), "{fix:#?}");
    for m in &fix {
        assert!(m.command.contains("mmap_dirty"), "{}", m.command);
        let cache = m.cache.clone().expect("a cache verdict");
        assert_eq!((cache.stale_answers, cache.safe), (0, true));
    }
}

#[test]
fn reread_unchanged_each_object_mapped_whole_twice() {
    let w = Work::new();
    let prog = require!(gcc(&w, "reread-unchanged", "mmap_dirty"), "gcc");
    record(&w, &[&prog, "50"], &[]);
    assert_mapped_twice(&w);
    if native_sites(&w) {
        // map_whole() opens (line 14), fstats (17), maps (21) and closes (22): one
        // function, one fix, a site per line.
        let f = findings(&w, "reread-unchanged");
        let m = &f[0];
        assert_eq!(
            sites(m),
            vec![
                ("map_whole".into(), "mmap_dirty.c".into(), 14, 50),
                ("map_whole".into(), "mmap_dirty.c".into(), 17, 50),
                ("map_whole".into(), "mmap_dirty.c".into(), 21, 50),
                ("map_whole".into(), "mmap_dirty.c".into(), 22, 50)
            ],
            "{m:#?}"
        );
        // Called twice per object: the second call's four calls are redundant.
        let objects = w.file("objects");
        let steps = ["open", "fstat", "mmap", "close"]
            .map(|c| format!("{c} {objects}/*"))
            .to_vec();
        assert_eq!(
            loop_of(m),
            Some(("call", "map_whole".into(), 2.0, steps)),
            "{m:#?}"
        );
    }
}

#[test]
fn reread_unchanged_each_object_mapped_whole_twice_from_an_strace_log() {
    let w = Work::new();
    let prog = require!(gcc(&w, "reread-unchanged", "mmap_dirty"), "gcc");
    require!(strace_record(&w, &[&prog, "50"], &w.path, &[]), "strace");
    assert_mapped_twice(&w);
}

#[test]
fn reread_unchanged_each_object_mapped_once_is_quiet() {
    let w = Work::new();
    let prog = require!(gcc(&w, "reread-unchanged", "mmap_clean"), "gcc");
    record(&w, &[&prog, "50"], &[]);
    let f = all_findings(&w, "reread-unchanged");
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn reread_unchanged_each_object_mapped_once_from_an_strace_log_is_quiet() {
    let w = Work::new();
    let prog = require!(gcc(&w, "reread-unchanged", "mmap_clean"), "gcc");
    require!(strace_record(&w, &[&prog, "50"], &w.path, &[]), "strace");
    let f = all_findings(&w, "reread-unchanged");
    assert!(f.is_empty(), "{f:#?}");
}

// ---- rsync -a (real tool) ---------------------------------------------------------------

/// src/ with 200 files, src/sub/ with 20 and src/sub/deep/ with 20.
fn rsync_tree(w: &Work) {
    for (dir, prefix, n) in [
        ("src", "f", 200),
        ("src/sub", "s", 20),
        ("src/sub/deep", "d", 20),
    ] {
        std::fs::create_dir_all(w.path.join(dir)).expect("mkdir");
        for i in 0..n {
            w.write(
                &format!("{dir}/{prefix}{i:03}.txt"),
                &format!("{prefix} {i}\n"),
            );
        }
    }
}

#[test]
fn rsync_a_urandom_per_file_and_a_directory_probe_per_file() {
    let rsync = require!(which("rsync"), "rsync");
    let w = Work::new();
    rsync_tree(&w);
    record(
        &w,
        &[rsync.to_str().unwrap_or("rsync"), "-a", "src/", "dst/"],
        &[],
    );
    assert!(
        w.path.join("dst/sub/deep/d019.txt").exists(),
        "rsync copied"
    );
    const FILES: u64 = 240;

    // The receiver opens /dev/urandom for each file's temporary name, reads 6 bytes and
    // closes it: 240 cycles, 239 repeated.
    let churn = findings(&w, "open-close-churn");
    let urandom = on_path(&churn, "/dev/urandom");
    assert_eq!(urandom.len(), 1, "{churn:#?}");
    let u = urandom[0];
    assert!(u.command.contains("rsync -a src/ dst/"), "{}", u.command);
    assert_eq!(
        (u.calls, u.redundant_calls),
        (2 * FILES, 2 * (FILES - 1)),
        "{u:#?}"
    );
    assert!(u.fix.contains("getrandom"), "{}", u.fix);

    // The sender opens each file it sends first as a directory (O_DIRECTORY|O_NOFOLLOW:
    // ENOTDIR), then as a file, then fstats it: one redundant probe per file. With call
    // sites that is one finding; without (eBPF: no symbols, no frame pointers), one per
    // directory.
    let cta = findings(&w, "check-then-act");
    let probes: Vec<&Finding> = cta
        .iter()
        .filter(|f| {
            f.example
                .as_deref()
                .is_some_and(|e| e.contains("O_DIRECTORY probes failing with ENOTDIR"))
        })
        .collect();
    assert!(!probes.is_empty(), "{cta:#?}");
    let sum = |f: &[&Finding]| {
        (
            f.iter().map(|f| f.calls).sum::<u64>(),
            f.iter().map(|f| f.redundant_calls).sum::<u64>(),
            f.iter().map(|f| f.path_count).sum::<u64>(),
        )
    };
    assert_eq!(sum(&probes), (FILES, FILES, FILES), "{probes:#?}");
    let mut patterns: Vec<String> = probes.iter().flat_map(|f| f.paths.clone()).collect();
    patterns.sort();
    patterns.dedup();
    assert_eq!(
        patterns,
        vec![
            w.file("src/*.txt"),
            w.file("src/sub/*.txt"),
            w.file("src/sub/deep/*.txt")
        ],
        "{probes:#?}"
    );

    // The sender also reopens (O_PATH) every directory above a file it sends from a
    // subdirectory, per file: src/sub for the 40 files under it, src/sub/deep for its 20,
    // plus one each per directory listed below it (2 and 1): 42 and 21 cycles.
    let dirs: Vec<&Finding> = churn
        .iter()
        .filter(|f| {
            f.paths
                .iter()
                .all(|p| *p == w.file("src/sub") || *p == w.file("src/sub/deep"))
        })
        .collect();
    let redundant_on = |p: &str| {
        dirs.iter()
            .flat_map(|f| f.top_paths.iter())
            .filter(|t| t.path == p)
            .map(|t| t.redundant_calls)
            .sum::<u64>()
    };
    assert_eq!(redundant_on(&w.file("src/sub")), 2 * 41, "{dirs:#?}");
    assert_eq!(redundant_on(&w.file("src/sub/deep")), 2 * 20, "{dirs:#?}");
    assert_eq!(sum(&dirs).0, 2 * (42 + 21), "{dirs:#?}");
}

// ---- git log -p (real tool) --------------------------------------------------------------

/// A repository of 50 commits, its objects loose: 50 commits, 50 trees, 100 blobs (each
/// commit changes file.txt and one of f0..f4.txt).
fn git_repo(w: &Work) -> Option<PathBuf> {
    which("git")?;
    let script = "set -e
git init -q repo
cd repo
git config user.email dejavu@example.com
git config user.name dejavu
git config gc.auto 0
for i in $(seq 1 50); do
  echo \"line $i\" >> file.txt
  echo \"x $i\" > f$((i % 5)).txt
  git add -A
  git commit -q -m \"commit $i\"
done
git count-objects -v | grep -qx 'count: 200'";
    let st = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&w.path)
        .envs(git_env(w))
        .status()
        .expect("sh runs");
    assert!(st.success(), "making the repository");
    Some(w.path.join("repo"))
}

/// git's environment for the tests: no system or user configuration.
fn git_env(w: &Work) -> Vec<(&'static str, String)> {
    vec![
        ("HOME", w.path.to_string_lossy().into_owned()),
        ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ("GIT_PAGER", "cat".into()),
    ]
}

/// git log -p's finding: every tree and blob (150) is mapped whole more than once
/// (open, fstat, mmap, close each time); the first read of each is not redundant.
fn assert_objects_reread(w: &Work, repo: &Path) {
    let f = all_findings(w, "reread-unchanged");
    let objects = format!("{}/.git/objects/", repo.display());
    let mine: Vec<&Finding> = f
        .iter()
        .filter(|f| f.paths.iter().any(|p| p.starts_with(&objects)))
        .collect();
    assert!(!mine.is_empty(), "{f:#?}");
    for m in &mine {
        assert!(m.paths.iter().all(|p| p.starts_with(&objects)), "{m:#?}");
        assert!(m.command.contains("git"), "{}", m.command);
        // git fstats every object it maps: the identity is known, even from strace.
        assert!(
            !m.hazards.iter().any(|h| h.contains("no identity")),
            "{m:#?}"
        );
    }
    let calls: u64 = mine.iter().map(|m| m.calls).sum();
    let redundant: u64 = mine.iter().map(|m| m.redundant_calls).sum();
    assert_eq!(calls % 4, 0, "{mine:#?}");
    assert_eq!(redundant % 4, 0, "{mine:#?}");
    assert_eq!(calls - redundant, 4 * 150, "{mine:#?}");
    assert!(redundant >= 4 * 150, "{mine:#?}");
}

#[test]
fn git_log_p_maps_loose_objects_again() {
    let w = Work::new();
    let repo = require!(git_repo(&w), "git");
    let git = which("git").unwrap_or_else(|| PathBuf::from("git"));
    let env = git_env(&w);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    record(
        &w,
        &[git.to_str().unwrap_or("git"), "-C", "repo", "log", "-p"],
        &env,
    );
    assert_objects_reread(&w, &repo);
}

#[test]
fn git_log_p_maps_loose_objects_again_from_an_strace_log() {
    let w = Work::new();
    let repo = require!(git_repo(&w), "git");
    require!(
        strace_record(&w, &["git", "log", "-p"], &repo, &git_env(&w)),
        "strace"
    );
    assert_objects_reread(&w, &repo);
}
