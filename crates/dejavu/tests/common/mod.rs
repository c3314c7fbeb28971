//! Helpers shared by the integration tests: build the C workloads, run dejavu and strace
//! on the same program, and read what each counted.
#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The dejavu binary under test.
pub fn dejavu() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dejavu"))
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// Whether a tool is on PATH; tests that need it print why they skip.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What scripts/setup installs (or the machine is required to have): on CI a test may
/// not skip for want of one of these.
pub const PROVIDED_BY_SETUP: &[&str] = &[
    "cc",
    "gcc",
    "make",
    "strace",
    "python3",
    "node",
    "setpriv",
    "script",
    "rsync",
    "go",
    "duckdb",
    "jsonschema",
    "chromium",
];

/// Records that the calling test skips, and why: a line on stderr (cargo test shows it only
/// with --nocapture) and one in the file `$DEJAVU_SKIP_LOG` names, which scripts/test
/// prints with a count at the end. On CI (`CI=true`), a skip for want of something
/// scripts/setup provides (`needs`, in [`PROVIDED_BY_SETUP`]) is a failure instead: the
/// test would otherwise be reported as passed without having run.
pub fn skip(needs: &str, why: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("SKIP: {why}");
    if std::env::var("CI").is_ok_and(|v| v == "true") && PROVIDED_BY_SETUP.contains(&needs) {
        panic!("{test} would skip on CI ({why}), but scripts/setup provides {needs}");
    }
    if let Some(log) = std::env::var_os("DEJAVU_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
        {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}

/// A test that ran something again because its first result could be noise says so:
/// on stderr and in `$DEJAVU_RETRY_LOG`, which scripts/test lists at the end.
pub fn note_retry(what: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("RETRY: {what}");
    if let Some(log) = std::env::var_os("DEJAVU_RETRY_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
        {
            let first = what.lines().next().unwrap_or("");
            let _ = writeln!(f, "{test}: {first}");
            for l in what.lines().skip(1) {
                let _ = writeln!(f, "    {l}");
            }
        }
    }
}

/// Skips the calling test (see [`skip`]) when `tool` is missing.
#[macro_export]
macro_rules! require {
    ($tool:expr) => {
        if !common::have($tool) {
            common::skip($tool, &format!("{} is not installed", $tool));
            return;
        }
    };
}

fn build_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
}

/// Compiles tests/workloads/c/NAME.c (once per test binary) and returns the executable.
pub fn c_workload(name: &str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<BTreeMap<String, PathBuf>>> = OnceLock::new();
    let m = BUILT.get_or_init(Default::default);
    let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = m.get(name) {
        return p.clone();
    }
    let src = repo().join("tests/workloads/c").join(format!("{name}.c"));
    let out = build_dir().join(name);
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc runs");
    assert!(st.success(), "compiling {}", src.display());
    m.insert(name.to_string(), out.clone());
    out
}

/// Compiles the C file at `src` (once per test binary) and returns the executable.
pub fn c_workload_at(src: &Path) -> PathBuf {
    let name = src.to_string_lossy().replace('/', "_");
    static BUILT: OnceLock<std::sync::Mutex<BTreeMap<String, PathBuf>>> = OnceLock::new();
    let m = BUILT.get_or_init(Default::default);
    let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = m.get(&name) {
        return p.clone();
    }
    let out = build_dir().join(&name);
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&out)
        .arg(src)
        .status()
        .expect("gcc runs");
    assert!(st.success(), "compiling {}", src.display());
    m.insert(name, out.clone());
    out
}

/// The traced set as strace names it (strace 6.1 does not know fchmodat2). strace counts
/// every mmap, anonymous ones included: `assert_counts_match_strace_with` compares mmap
/// apart.
pub const STRACE_SET: &str = "mmap,open,openat,openat2,creat,close,close_range,read,pread64,readv,preadv,preadv2,write,\
pwrite64,writev,pwritev,pwritev2,lseek,stat,lstat,fstat,newfstatat,statx,access,faccessat,faccessat2,readlink,\
readlinkat,getdents64,mkdir,mkdirat,rmdir,unlink,unlinkat,rename,renameat,renameat2,link,linkat,symlink,symlinkat,\
chmod,fchmod,fchmodat,chown,fchown,lchown,fchownat,truncate,ftruncate,fsync,fdatasync,sync_file_range,dup,dup2,\
dup3,fcntl,pipe,pipe2,socket,accept,accept4,connect,sendfile,copy_file_range,splice,utimensat,chdir,fchdir,execve,\
execveat,memfd_create,io_uring_setup,io_uring_enter";

/// (calls, errors) per syscall.
pub type Counts = BTreeMap<String, (u64, u64)>;

/// Runs `cmd` under `strace -f -c` limited to the traced set; returns its counts. The
/// program gets the same stdio as under `record_quiet` (null, null, a file): a program's
/// calls depend on what its descriptors are (lseek on a pipe fails, on /dev/null not).
pub fn strace_counts(cmd: &[&str], cwd: &Path) -> Counts {
    let out = tempfile::NamedTempFile::new().expect("tmp");
    let err = tempfile::tempfile().expect("tmp");
    let st = Command::new("strace")
        .args(["-f", "-c", "-e", &format!("trace={STRACE_SET}"), "-o"])
        .arg(out.path())
        .arg("--")
        .args(cmd)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .status()
        .expect("strace runs");
    assert!(st.success(), "strace {cmd:?} failed: {st}");
    parse_strace_c(&std::fs::read_to_string(out.path()).expect("strace output"))
}

/// Parses the table of `strace -c`.
pub fn parse_strace_c(text: &str) -> Counts {
    let mut m = Counts::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || !f[0].chars().next().is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        let name = *f.last().unwrap_or(&"");
        if name == "total" {
            continue;
        }
        let calls: u64 = f[3].parse().unwrap_or(0);
        let errors: u64 = if f.len() == 6 {
            f[4].parse().unwrap_or(0)
        } else {
            0
        };
        m.insert(name.to_string(), (calls, errors));
    }
    m
}

/// Runs `dejavu record -o TRACE -- cmd`; returns the output of dejavu.
pub fn record(trace: &Path, cmd: &[&str], cwd: &Path) -> Output {
    Command::new(dejavu())
        .arg("record")
        .arg("-o")
        .arg(trace)
        .arg("--")
        .args(cmd)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("dejavu runs")
}

/// `dejavu record` with the stdio `strace_counts` gives the program; returns dejavu's
/// exit status and its stderr.
pub fn record_quiet(trace: &Path, cmd: &[&str], cwd: &Path) -> (std::process::ExitStatus, String) {
    record_quiet_with(trace, &[], cmd, cwd)
}

/// `record_quiet` with extra `dejavu record` flags.
pub fn record_quiet_with(
    trace: &Path,
    flags: &[&str],
    cmd: &[&str],
    cwd: &Path,
) -> (std::process::ExitStatus, String) {
    use std::io::{Read, Seek};
    let mut err = tempfile::tempfile().expect("tmp");
    let st = Command::new(dejavu())
        .arg("record")
        .args(flags)
        .arg("-o")
        .arg(trace)
        .arg("--")
        .args(cmd)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err.try_clone().expect("dup"))
        .status()
        .expect("dejavu runs");
    let mut text = String::new();
    err.rewind().ok();
    err.read_to_string(&mut text).ok();
    (st, text)
}

/// `dejavu summary --json TRACE`.
pub fn summary_json(trace: &Path) -> Value {
    let out = Command::new(dejavu())
        .arg("summary")
        .arg("--json")
        .arg(trace)
        .output()
        .expect("dejavu summary runs");
    assert!(
        out.status.success(),
        "summary failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("summary --json is JSON")
}

/// All syscalls recorded in `trace`, per `dejavu summary --json`.
pub fn total_calls(trace: &Path) -> u64 {
    summary_json(trace)["syscalls"]
        .as_object()
        .expect("syscalls object")
        .values()
        .map(|s| s["calls"].as_u64().unwrap_or(0))
        .sum()
}

/// Per-syscall (calls, errors) from `dejavu summary --json`.
pub fn dejavu_counts(trace: &Path) -> Counts {
    let v = summary_json(trace);
    let mut m = Counts::new();
    for (name, s) in v["syscalls"].as_object().expect("syscalls object") {
        let calls = s["calls"].as_u64().unwrap_or(0);
        let errors = s["errors"].as_u64().unwrap_or(0);
        // strace 6.1 has no name for fchmodat2: not in its set.
        if name != "fchmodat2" {
            m.insert(name.clone(), (calls, errors));
        }
    }
    m
}

/// Records `cmd` with dejavu and with strace in `cwd`; asserts equal counts.
pub fn assert_counts_match_strace(cmd: &[&str], cwd: &Path) {
    assert_counts_match_strace_with(cmd, cwd, |_| {})
}

/// As `assert_counts_match_strace`, calling `prepare(cwd)` before each of the two runs so
/// both start from the same files.
///
/// The two counts come from two runs of the program, and a runtime's own calls can depend
/// on timing: Node.js, on a loaded machine, sometimes re-reads /proc/self/maps and opens its
/// own executable on the main thread (7 calls more, seen in 1 of 20 runs under plain strace).
/// So a pair that differs is run again, up to three pairs in all. A retry is never silent:
/// each differing pair is written to `$DEJAVU_RETRY_LOG` (scripts/test lists them at the end)
/// and to stderr. And a retry cannot hide an intermittent counting error that leans one way:
/// when two differing pairs have dejavu counting fewer (or more) of the same syscall than
/// strace both times, the test fails at once, even if a later pair would agree.
pub fn assert_counts_match_strace_with(cmd: &[&str], cwd: &Path, prepare: impl Fn(&Path)) {
    let mut diffs = Vec::new();
    // Per syscall, the sign of (dejavu - strace) calls in the pairs that differed so far.
    let mut leans: BTreeMap<String, std::cmp::Ordering> = BTreeMap::new();
    for _attempt in 0..3 {
        let dir = tempfile::tempdir().expect("tmp");
        let trace = dir.path().join("t.dvt");
        prepare(cwd);
        // Without stacks: the language agents make calls of their own (loading their
        // files), which strace's run of the program does not have.
        let (st, err) = record_quiet_with(&trace, &["--stacks", "off"], cmd, cwd);
        assert!(st.success(), "dejavu record {cmd:?}: {st}\n{err}");
        let mut ours = dejavu_counts(&trace);
        assert!(!ours.is_empty(), "{cmd:?}: nothing recorded");
        prepare(cwd);
        let mut theirs = strace_counts(cmd, cwd);
        // dejavu records file-backed mappings only; `strace -c` cannot tell them from
        // anonymous ones, so it counts more. (import_cli compares mmap exactly, against
        // strace's decoded lines.)
        let (our_mmap, their_mmap) = (ours.remove("mmap"), theirs.remove("mmap"));
        let mmap_ok = our_mmap.unwrap_or_default().0 <= their_mmap.unwrap_or_default().0;
        if ours == theirs && mmap_ok {
            return;
        }
        if !mmap_ok {
            ours.insert(
                "mmap (at most strace's)".into(),
                our_mmap.unwrap_or_default(),
            );
            theirs.insert(
                "mmap (at most strace's)".into(),
                their_mmap.unwrap_or_default(),
            );
        }
        let mut diff = String::new();
        let mut same_lean = Vec::new();
        for k in ours
            .keys()
            .chain(theirs.keys())
            .collect::<std::collections::BTreeSet<_>>()
        {
            let (a, b) = (ours.get(k), theirs.get(k));
            if a != b {
                diff.push_str(&format!("  {k}: dejavu {a:?} strace {b:?}\n"));
                let lean = a.unwrap_or(&(0, 0)).0.cmp(&b.unwrap_or(&(0, 0)).0);
                if lean != std::cmp::Ordering::Equal && leans.insert(k.clone(), lean) == Some(lean)
                {
                    same_lean.push(k.clone());
                }
            }
        }
        note_retry(&format!(
            "{cmd:?} differs from strace -f -c, run again:\n{diff}"
        ));
        diffs.push(diff);
        assert!(
            same_lean.is_empty(),
            "{cmd:?}: dejavu's count of {same_lean:?} differs from strace -f -c the same way in \
             two runs (not noise):\n{}",
            diffs.join("  --\n")
        );
    }
    panic!(
        "{cmd:?}: per-syscall (calls, errors) differ from strace -f -c in {} runs:\n{}",
        diffs.len(),
        diffs.join("  --\n")
    );
}

/// The trace's lines as `dejavu export --format jsonl` prints them.
pub fn export(trace: &Path) -> Vec<Value> {
    let out = Command::new(dejavu())
        .args(["export", "--format", "jsonl"])
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
