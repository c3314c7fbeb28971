//! The eBPF backend's own behaviour. (The rest of the suite runs against it too:
//! scripts/test runs every integration test a second time with DEJAVU_BACKEND=ebpf, so the
//! strace comparisons and every detector fixture's exact counts hold for both backends.)
//! Each test here skips, saying why, where eBPF cannot run (no root, no BTF, built
//! without clang).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Whether `dejavu record --backend ebpf` works here; prints why not.
fn ebpf_works() -> bool {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(common::dejavu())
        .args(["record", "--backend", "ebpf", "-o"])
        .arg(d.path().join("t.dvt"))
        .args(["--", "true"])
        .output()
        .unwrap();
    if out.status.code() == Some(77) {
        let err = String::from_utf8_lossy(&out.stderr);
        common::skip(
            "ebpf",
            &format!(
                "eBPF is not available here: {}",
                err.lines().next().unwrap_or("")
            ),
        );
        return false;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

macro_rules! require_ebpf {
    () => {
        if !ebpf_works() {
            return;
        }
    };
}

fn record(backend: &str, flags: &[&str], cmd: &[&str], cwd: &Path) -> (std::path::PathBuf, String) {
    let trace = cwd.join(format!("{backend}.dvt"));
    let out = Command::new(common::dejavu())
        .args(["record", "--backend", backend])
        .args(flags)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .args(cmd)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{backend} {cmd:?}: {err}");
    (trace, err)
}

/// (detector, paths, calls, redundant calls) of every finding, sorted.
fn findings(trace: &Path) -> Vec<(String, String, u64, u64)> {
    let out = Command::new(common::dejavu())
        .args(["report", "--json", "--all"])
        .arg(trace)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut f: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["detector"].as_str().unwrap().to_string(),
                f["paths"].to_string(),
                f["calls"].as_u64().unwrap(),
                f["redundant_calls"].as_u64().unwrap(),
            )
        })
        .collect();
    f.sort();
    f
}

#[test]
fn both_backends_record_the_same_calls_and_findings() {
    require_ebpf!();
    require!("python3");
    let fixtures = common::repo().join("tests/workloads/detectors");
    let c = common::c_workload_at(&fixtures.join("open-close-churn/dirty.c"));
    let py = fixtures.join("check-then-act/dirty.py");
    // The interpreter itself, not a version manager's shim script (whose shell pipelines
    // read a varying number of times).
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap().trim().to_string();
    let cases: Vec<Vec<String>> = vec![
        vec![c.to_string_lossy().into_owned()],
        vec![python, py.to_string_lossy().into_owned()],
    ];
    for cmd in cases {
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let mut per_backend = Vec::new();
        for backend in ["ptrace", "ebpf"] {
            let d = tempfile::tempdir().unwrap();
            let (trace, _) = record(backend, &["--stacks", "off"], &cmd, d.path());
            // Paths differ between the two scratch directories: compare below it.
            let found: Vec<_> = findings(&trace)
                .into_iter()
                .map(|(det, paths, calls, red)| {
                    let paths = paths.replace(&d.path().to_string_lossy().into_owned(), "$D");
                    (det, paths, calls, red)
                })
                .collect();
            per_backend.push((common::dejavu_counts(&trace), found));
        }
        assert_eq!(
            per_backend[0].0, per_backend[1].0,
            "{cmd:?}: per-syscall counts"
        );
        assert_eq!(per_backend[0].1, per_backend[1].1, "{cmd:?}: findings");
        assert!(
            !per_backend[0].1.is_empty(),
            "{cmd:?}: the dirty fixture has findings"
        );
    }
}

#[test]
fn the_trace_says_which_backend_recorded_it() {
    require_ebpf!();
    let d = tempfile::tempdir().unwrap();
    let (trace, _) = record("ebpf", &[], &["true"], d.path());
    let v = common::summary_json(&trace);
    assert_eq!(v["backend"], "ebpf", "{v:#}");
}

#[test]
fn frame_pointer_stacks_name_the_c_line_of_the_call() {
    require_ebpf!();
    let src = common::repo().join("tests/workloads/stacks/stat_site.c");
    let d = tempfile::tempdir().unwrap();
    let exe = d.path().join("stat_site");
    let st = Command::new("gcc")
        .args(["-g", "-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(d.path().join("app.conf"), "x").unwrap();
    // The stacks are symbolized when dejavu reads them, after the fact: the program must
    // still be running then (a third argument makes it wait before exiting).
    let report = d.path().join("r.json");
    let st = Command::new(common::dejavu())
        .args([
            "run",
            "--backend",
            "ebpf",
            "--json",
            "--min-calls",
            "5",
            "--report-file",
        ])
        .arg(&report)
        .arg("--")
        .args([exe.to_str().unwrap(), "app.conf", "50", "2000"])
        .current_dir(d.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let v: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["detector"] == "repeated-lookup")
        .unwrap_or_else(|| panic!("{v:#}"));
    let c = &f["callsites"][0];
    let line = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .position(|l| l.contains("STAT_LINE"))
        .unwrap() as u64
        + 1;
    assert_eq!(c["function"], "probe_config", "{c:#}");
    assert_eq!(c["line"].as_u64(), Some(line), "{c:#}");
}

/// The tests that flood a ring buffer (a small one on purpose, a reader made slow, a long
/// loop of calls with stacks) run one at a time: two of them side by side on 2 CPUs starve
/// each other's drainer, whose promptness is what `a_reader_that_falls_behind_loses_nothing_up_to_the_backlog_limit`
/// counts on (a CI run lost 425 records there with a 2 MiB ring beside these).
static FLOOD: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_full_ring_buffer_is_counted_and_reported_never_silent() {
    require_ebpf!();
    let _alone = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    let src = common::repo().join("tests/workloads/stacks/stat_site.c");
    let prog = common::c_workload_at(&src);
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("f"), "x").unwrap();
    // 4 KiB holds a dozen records; the reader polls every 10 ms: a 200,000-stat loop must
    // overflow it.
    let (trace, err) = record(
        "ebpf",
        &["--buffer-size", "4K", "--stacks", "off"],
        &[prog.to_str().unwrap(), "f", "200000"],
        d.path(),
    );
    assert!(
        err.contains("records were lost because the kernel's ring buffer was full"),
        "{err}"
    );
    assert!(err.contains("--buffer-size"), "{err}");
    let v = common::summary_json(&trace);
    let lost = v["lost_events"].as_u64().unwrap();
    let stats = v["syscalls"]["newfstatat"]["calls"].as_u64().unwrap_or(0);
    assert!(lost > 0, "{v:#}");
    // Every call is either recorded or counted as lost.
    assert!(stats + lost >= 200_000, "{stats} recorded + {lost} lost");
}

#[test]
fn a_bad_buffer_size_is_a_usage_error() {
    for bad in ["0", "12Q", "3G", "abc"] {
        let out = Command::new(common::dejavu())
            .args([
                "record",
                "--backend",
                "ebpf",
                "--buffer-size",
                bad,
                "-o",
                "/dev/null",
            ])
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--buffer-size"), "{bad}: {err}");
    }
}

#[test]
fn auto_says_which_backend_it_chose() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(common::dejavu())
        .args(["record", "--backend", "auto", "-o"])
        .arg(d.path().join("t.dvt"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("recording with eBPF") || err.contains("recording with ptrace"),
        "{err}"
    );
}

#[test]
fn without_privilege_ebpf_names_what_is_missing_and_auto_falls_back() {
    if unsafe { libc::geteuid() } != 0 || !common::have("setpriv") {
        common::skip(
            "root",
            "needs root and setpriv to run dejavu as an unprivileged user",
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let as_nobody = |backend: &str| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(common::dejavu())
            .args(["record", "--backend", backend, "-o"])
            .arg(d.path().join(format!("{backend}.dvt")))
            .args(["--", "true"])
            .output()
            .unwrap()
    };
    let out = as_nobody("ebpf");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{err}");
    assert!(
        err.contains("CAP_BPF") && err.contains("CAP_PERFMON"),
        "{err}"
    );
    assert!(err.contains("--backend ptrace"), "{err}");
    assert!(!d.path().join("ebpf.dvt").exists());
    let out = as_nobody("auto");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("recording with ptrace"), "{err}");
}

#[test]
fn a_call_in_progress_when_attaching_is_recorded_and_marked_without_a_duration() {
    require_ebpf!();
    use std::io::Write;
    // A shell blocked in read(0) on a pipe when dejavu attaches.
    let mut target = Command::new("sh")
        .args(["-c", "read line; cat /dev/null"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let dv = Command::new(common::dejavu())
        .args(["record", "--backend", "ebpf", "-o"])
        .arg(&trace)
        .args(["-p", &target.id().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The trace's header is written once the programs are attached and the process is
    // followed: wait for it (not for a fixed time, which a loaded machine may exceed).
    let t = std::time::Instant::now();
    while std::fs::metadata(&trace).map_or(true, |m| m.len() == 0) {
        assert!(t.elapsed().as_secs() < 30, "dejavu did not start recording");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    target.stdin.take().unwrap().write_all(b"x\n").unwrap();
    assert!(target.wait().unwrap().success());
    // The recording ends with the last traced process.
    let out = dv.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let export = Command::new(common::dejavu())
        .args(["export", "--format", "jsonl"])
        .arg(&trace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&export.stdout);
    let first_read = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["sys"] == "read" && v["fd"] == 0)
        .unwrap_or_else(|| panic!("no read of stdin: {text}"));
    assert_eq!(first_read["dur"], 0, "{first_read}");
    assert!(
        first_read["ev"]
            .as_array()
            .is_some_and(|e| e.iter().any(|f| f == "no_duration")),
        "{first_read}"
    );
    // What came after the attach has its entry, hence its duration.
    assert!(text.contains("\"path\":\"/dev/null\""), "{text}");
}

#[test]
fn lost_events_count_the_programs_events_not_the_agents_reports() {
    // With a ring buffer too small to keep up, records are lost. The trace's lost
    // count must be the program's events only: recorded + lost = what a large buffer
    // records. (The agent reports three messages per iteration here, ENTER, FD and EXIT;
    // counted in, they would about double the loss.)
    if !ebpf_works() || !common::have("python3") {
        return;
    }
    let _alone = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("oc.py");
    std::fs::write(
        &script,
        "import os\nfor i in range(5000):\n    os.close(os.open('/etc/hostname', os.O_RDONLY))\n",
    )
    .unwrap();
    let total = |buffer: &str, env: &[(&str, &str)]| -> (u64, u64, String) {
        let trace = d.path().join(format!("t{buffer}.dvt"));
        let out = Command::new(common::dejavu())
            .args(["record", "--backend", "ebpf", "--buffer-size", buffer, "-o"])
            .arg(&trace)
            .args(["--", "python3"])
            .arg(&script)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
        let v = common::summary_json(&trace);
        let recorded: u64 = v["syscalls"]
            .as_object()
            .unwrap()
            .values()
            .map(|s| s["calls"].as_u64().unwrap_or(0))
            .sum();
        (
            recorded,
            v["lost_events"].as_u64().unwrap_or(0),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (all, none_lost, _) = total("16M", &[]);
    assert_eq!(none_lost, 0);
    // A reader that stalls 20 ms at every batch, with no backlog in memory: the one page
    // fills while it sleeps, whatever the machine's speed. (Without the stall, how much a
    // page loses depends on how fast the reader is scheduled: a CI run lost 803 of 20,234,
    // less than the twentieth asked below.)
    let (recorded, lost, err) = total(
        "4096",
        &[
            ("DEJAVU_EBPF_READER_DELAY_MS", "20"),
            ("DEJAVU_EBPF_BACKLOG_MIB", "0"),
        ],
    );
    assert!(
        lost > all / 20,
        "the small buffer loses a good part: {recorded} + {lost} of {all}"
    );
    // Lost records also count forks, execs and exits (a few dozen here), which the
    // syscall total leaves out: hence the margin, far below the agents' 15,000 reports.
    let sum = recorded + lost;
    assert!(
        sum >= all * 95 / 100 && sum <= all * 105 / 100,
        "recorded {recorded} + lost {lost} = {sum}, against {all} with a large buffer: {err}"
    );
}

/// A reader that falls behind (a stall at every batch, as a loaded machine or a module
/// symbolized for the first time gives) loses nothing: the drainer thread takes the
/// records out of the kernel's ring buffer as they come and keeps them in memory until the
/// reader gets to them. Past the backlog's limit, records wait in the kernel, whose buffer
/// then fills: those are counted as lost and said.
#[test]
fn a_reader_that_falls_behind_loses_nothing_up_to_the_backlog_limit() {
    if !ebpf_works() || !common::have("python3") {
        return;
    }
    let _alone = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("target.txt");
    std::fs::write(&target, "x").unwrap();
    let script = d.path().join("oc.py");
    std::fs::write(
        &script,
        "import os, sys\nfor i in range(10000):\n    os.close(os.open(sys.argv[1], os.O_RDONLY))\n",
    )
    .unwrap();
    let run = |name: &str, ring: &str, env: &[(&str, &str)]| -> (u64, u64, String) {
        let trace = d.path().join(format!("{name}.dvt"));
        let out = Command::new(common::dejavu())
            .args(["record", "--backend", "ebpf", "--buffer-size", ring, "-o"])
            .arg(&trace)
            .args(["--", "python3"])
            .arg(&script)
            .arg(&target)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        let mut r = dejavu_trace::TraceReader::open(&trace).unwrap();
        let want = target.to_string_lossy().into_owned();
        // Its opens and closes (a close names the path of the descriptor it closed).
        let mut opens = 0;
        while let Some(rec) = r.next_record().unwrap() {
            if let dejavu_trace::Record::Syscall(s) = rec {
                if s.path.is_some_and(|p| r.str(p) == want.as_bytes()) {
                    opens += 1;
                }
            }
        }
        let lost = common::summary_json(&trace)["lost_events"]
            .as_u64()
            .unwrap_or(0);
        (opens, lost, err)
    };
    // 20 ms at every batch: without the drainer the ring buffer fills many times over while
    // the reader sleeps. The reader is too slow to mark the places the agent names, so every
    // call also sends an 8 KiB copy of its stack: ~200 MB in all, ~200 MB a second. With an
    // 8 MiB ring and no backlog in memory (DEJAVU_EBPF_BACKLOG_MIB=0) 6,820 of the records
    // are lost (checked); with the drainer, none. (8 MiB, not 2: the drainer must be
    // scheduled within what the ring holds, and a CI run lost 425 records with 2 MiB beside
    // the other tests on 2 CPUs; 256 KiB loses ~200 on a quiet machine.)
    let (opens, lost, err) = run("slow", "8M", &[("DEJAVU_EBPF_READER_DELAY_MS", "20")]);
    assert_eq!((opens, lost), (20000, 0), "{err}");
    // With the backlog held to 2 MiB, the same reader does lose records, counted and said.
    let (opens, lost, err) = run(
        "capped",
        "1M",
        &[
            ("DEJAVU_EBPF_READER_DELAY_MS", "20"),
            ("DEJAVU_EBPF_BACKLOG_MIB", "2"),
        ],
    );
    // (Which records are lost depends on when the reader stalls: the count is what is
    // certain.)
    assert!(lost > 0, "{opens} calls, none lost: {err}");
    assert!(err.contains("fell 2 MiB behind"), "{err}");
    assert!(err.contains("records were lost"), "{err}");
}

/// In a process with a language agent, a place whose calls the agent names stops getting
/// native stacks (the kernel skips them), while a call the agent does not name keeps its
/// native stack: here os.stat of one file (named at the script's line) and ctypes' call of
/// libc's stat of another (no Python wrapper: only native frames say where it comes from),
/// in one loop.
#[test]
fn an_agents_named_calls_skip_native_stacks_and_the_others_keep_theirs() {
    if !ebpf_works() || !common::have("python3") {
        return;
    }
    let _alone = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("target.txt");
    std::fs::write(&target, "x").unwrap();
    let other = d.path().join("other.txt");
    std::fs::write(&other, "y").unwrap();
    let script = d.path().join("mixed.py");
    std::fs::write(
        &script,
        "import ctypes, ctypes.util, os, sys\n\
         libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)\n\
         buf = ctypes.create_string_buffer(256)\n\
         p = sys.argv[2].encode()\n\
         for i in range(30000):\n\
         \x20   os.stat(sys.argv[1])  # NAMED\n\
         \x20   libc.stat(p, buf)\n",
    )
    .unwrap();
    // A large ring buffer: this test is about which calls get which stacks, not about a
    // loaded machine (a_reader_that_falls_behind_loses_nothing_up_to_the_backlog_limit).
    let out = Command::new(common::dejavu())
        .args(["record", "--backend", "ebpf", "--buffer-size", "64M", "-o"])
        .arg(d.path().join("t.dvt"))
        .arg("--")
        .arg("python3")
        .arg(&script)
        .arg(&target)
        .arg(&other)
        .env("DEJAVU_NATIVE_STATS", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let mut r = dejavu_trace::TraceReader::open(&d.path().join("t.dvt")).unwrap();
    let files = [
        target.to_string_lossy().into_owned(),
        other.to_string_lossy().into_owned(),
    ];
    let (mut named, mut native, mut none) = (0, 0, Vec::new());
    while let Some(rec) = r.next_record().unwrap() {
        let dejavu_trace::Record::Syscall(s) = rec else {
            continue;
        };
        let path = s
            .path
            .map(|p| String::from_utf8_lossy(r.str(p)).into_owned());
        if !path.as_ref().is_some_and(|p| files.contains(p)) {
            continue;
        }
        let frames = s.stack.map(|id| r.stack(id).to_vec()).unwrap_or_default();
        let python_line = frames.iter().any(|f| {
            f.kind == dejavu_trace::FrameKind::Python
                && f.file.is_some_and(|x| r.str(x).ends_with(b"mixed.py"))
        });
        if python_line {
            named += 1;
        } else if frames
            .iter()
            .any(|f| f.kind == dejavu_trace::FrameKind::Native)
        {
            native += 1;
        } else {
            none.push(s.sys);
        }
    }
    // Each of the 60,000 calls has its site: the 30,000 os.stat the script's line, the 30,000
    // ctypes calls a native stack.
    assert_eq!(
        (named, native),
        (30000, 30000),
        "without a stack: {none:?}\n{err}"
    );
    // The kernel left the named ones to the agent: os.stat's calls to its STICKY (the
    // kernel half reads it), the others to their place's mark.
    let line = err
        .lines()
        .find(|l| l.contains("eBPF stacks:"))
        .unwrap_or_else(|| panic!("{err}"));
    let left = left_to_agents(&err);
    let (_, sticky, misses) = sticky_stats(&err);
    assert!(left + sticky >= 29000, "{line}");
    assert_eq!(misses, 0, "{line}");
}

/// The calls the kernel half's stack statistics line says were left to the agents for
/// their place's mark.
fn left_to_agents(err: &str) -> u64 {
    err.lines()
        .find(|l| l.contains("eBPF stacks:"))
        .and_then(|l| l.split(", ").find(|p| p.contains("left to the agents")))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"))
}

/// The same code on another thread's stack is the same stack: the kernel half keeps, beside
/// each place's entry (its address space, instruction and stack pointer), one keyed by the
/// stack pointer's offset in its page and checked with the stack addresses among its words
/// as distances from the stack pointer (a goroutine's or a thread's stack, docs/ebpf-
/// backend.md, "Stacks of other threads and goroutines"). Eight threads, all alive, take
/// turns calling stat from one function; the first has its stack unwound and stored while
/// it pauses: the seven after it send no copy (without the relative entries each sent one
/// per call until its own place was stored: 350 more copies than one thread's run; the
/// bound allows for the start-up's copies, which vary by up to ~50 between runs), and
/// every call's stack still names the function and the thread's.
#[test]
fn the_same_code_on_another_threads_stack_sends_no_copy_of_it() {
    require_ebpf!();
    let _alone = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    let prog = common::c_workload("thread_turns");
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("target.txt");
    std::fs::write(&target, "x").unwrap();
    let run = |threads: u32| -> (u64, Vec<Vec<String>>) {
        let trace = d.path().join(format!("t{threads}.dvt"));
        let n = threads.to_string();
        let cmd = [
            prog.as_os_str(),
            target.as_os_str(),
            n.as_ref(),
            "50".as_ref(),
            "300".as_ref(),
        ];
        let err = record_with_stats(&trace, &[], &cmd);
        let copies = sticky_stats(&err).0;
        let (r, stacks) = stacks_on(&trace, &target);
        let calls = stacks
            .iter()
            .map(|frames| {
                frames
                    .iter()
                    .map(|f| {
                        f.function
                            .map(|x| String::from_utf8_lossy(r.str(x)).into_owned())
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .collect();
        (copies, calls)
    };
    let (one, calls) = run(1);
    assert_eq!(calls.len(), 50);
    let (eight, calls) = run(8);
    assert_eq!(calls.len(), 400);
    for names in &calls {
        let at = |f: &str| names.iter().position(|n| n == f);
        assert!(
            matches!((at("probe"), at("run")), (Some(p), Some(r)) if p < r),
            "a call's stack names probe, then run: {names:?}"
        );
    }
    // The copies of the process's start (the loader, the threads' creation) vary with how
    // soon the reader answers their places: on a slow, loaded machine (a nested VM, the
    // whole suite running) the one-thread run sent 119-168 and the eight-thread run 168,
    // both built the same. The threads' calls without the relative entries: 350 more.
    assert!(
        eight <= one + 100,
        "the threads after the first sent copies of their stacks: {eight} copies against \
         {one} with one thread"
    );
}

/// `dejavu record --backend ebpf FLAGS -o TRACE -- CMD` with the kernel half's stack
/// statistics (DEJAVU_NATIVE_STATS): its stderr, once it succeeded.
fn record_with_stats(trace: &Path, flags: &[&str], cmd: &[&std::ffi::OsStr]) -> String {
    record_with_stats_env(trace, flags, cmd, &[])
}

/// `record_with_stats` with these environment variables set too.
fn record_with_stats_env(
    trace: &Path,
    flags: &[&str],
    cmd: &[&std::ffi::OsStr],
    env: &[(&str, &std::ffi::OsStr)],
) -> String {
    let out = Command::new(common::dejavu())
        .args(["record", "--backend", "ebpf"])
        .args(flags)
        .arg("-o")
        .arg(trace)
        .arg("--")
        .args(cmd)
        .env("DEJAVU_NATIVE_STATS", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

/// The number before `key` in the statistics line (DEJAVU_NATIVE_STATS) of `err` that
/// holds `line_key` (`eBPF stacks:`, the kernel half's; `native stacks:`, the unwinder's).
fn stat_of(err: &str, line_key: &str, key: &str) -> u64 {
    let line = err
        .lines()
        .find(|l| l.contains(line_key))
        .unwrap_or_else(|| panic!("{err}"));
    line.split([',', ';', '('])
        .find(|p| p.contains(key))
        .and_then(|p| p.split_whitespace().find_map(|w| w.parse().ok()))
        .unwrap_or_else(|| panic!("no {key:?} in {line}"))
}

/// The numbers of the kernel half's stack statistics line (DEJAVU_NATIVE_STATS): the
/// copies unwound, the calls left to an agent's STICKY and those of them not named.
fn sticky_stats(err: &str) -> (u64, u64, u64) {
    let num = |key: &str| stat_of(err, "eBPF stacks:", key);
    (
        num("copies unwound"),
        num("to an agent's STICKY"),
        num("of them not named)"),
    )
}

/// The stacks of the calls of `trace` on `path`, in order.
fn stacks_on(
    trace: &Path,
    path: &Path,
) -> (
    dejavu_trace::TraceReader<std::fs::File>,
    Vec<Vec<dejavu_trace::Frame>>,
) {
    let want = path.to_string_lossy().into_owned();
    let mut r = dejavu_trace::TraceReader::open(trace).unwrap();
    let mut calls = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        let dejavu_trace::Record::Syscall(s) = rec else {
            continue;
        };
        if s.path.map(|p| r.str(p).to_vec()) != Some(want.as_bytes().to_vec()) {
            continue;
        }
        calls.push(s.stack.map(|id| r.stack(id).to_vec()).unwrap_or_default());
    }
    (r, calls)
}

/// An agent's repeated call is said once (a STICKY message: this thread's calls on this
/// path are this line's), and the kernel half reads those messages: the calls they name
/// go without a native stack from the first one on, instead of sending a copy of their
/// stack each until the reader has marked their place (thousands of 8 KiB copies per
/// loop before). It follows user space's rule exactly: a call on the same path of
/// another kind (here libc's access through ctypes, after os.stat's STICKY) is not the
/// STICKY's, keeps its native stack, and is not given the Python line. Both Python
/// threads have their own STICKY; Node.js's statSync loop is the other agent's.
#[test]
fn an_agents_sticky_calls_send_no_stack_copies_and_other_calls_on_the_path_keep_theirs() {
    if !ebpf_works() || !common::have("python3") || !common::have("node") {
        return;
    }
    let _alone = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    const N: u64 = 20000;
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("target.txt");
    std::fs::write(&target, "x").unwrap();
    let script = d.path().join("sticky.py");
    std::fs::write(
        &script,
        format!(
            "import ctypes, ctypes.util, os, sys, threading\n\
             libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)\n\
             p = sys.argv[1].encode()\n\
             def loop():\n\
             \x20   for i in range({N}):\n\
             \x20       os.stat(sys.argv[1])  # NAMED\n\
             \x20       libc.access(p, 0)\n\
             loop()\n\
             t = threading.Thread(target=loop)\n\
             t.start()\n\
             t.join()\n"
        ),
    )
    .unwrap();
    let js = d.path().join("sticky.js");
    std::fs::write(
        &js,
        format!(
            "const fs = require('fs');\n\
             for (let i = 0; i < {N}; i++) fs.statSync(process.argv[2]); // NAMED\n"
        ),
    )
    .unwrap();
    let want = target.to_string_lossy().into_owned();
    let run = |name: &str, cmd: &[&Path]| -> (PathBuf, String) {
        let trace = d.path().join(format!("{name}.dvt"));
        let mut argv: Vec<&std::ffi::OsStr> = cmd.iter().map(|p| p.as_os_str()).collect();
        argv.push(target.as_os_str());
        let err = record_with_stats(&trace, &["--buffer-size", "64M"], &argv);
        (trace, err)
    };
    // Per system call on the target: (named at the script's line, native frames only,
    // neither).
    let tally = |trace: &Path, file: &str| {
        let mut r = dejavu_trace::TraceReader::open(trace).unwrap();
        let mut t: std::collections::BTreeMap<String, (u64, u64, u64)> = Default::default();
        while let Some(rec) = r.next_record().unwrap() {
            let dejavu_trace::Record::Syscall(s) = rec else {
                continue;
            };
            if s.path.is_none_or(|p| r.str(p) != want.as_bytes()) {
                continue;
            }
            let frames = s.stack.map(|id| r.stack(id).to_vec()).unwrap_or_default();
            let e = t.entry(format!("{:?}", s.sys)).or_default();
            if frames
                .iter()
                .any(|f| f.file.is_some_and(|x| r.str(x).ends_with(file.as_bytes())))
            {
                e.0 += 1;
            } else if frames
                .iter()
                .any(|f| f.kind == dejavu_trace::FrameKind::Native)
            {
                e.1 += 1;
            } else {
                e.2 += 1;
            }
        }
        t
    };

    let python = PathBuf::from("python3");
    let (trace, err) = run("py", &[&python, &script]);
    let t = tally(&trace, "sticky.py");
    let stats = t.get("Newfstatat").copied().unwrap_or_default();
    assert_eq!(stats, (2 * N, 0, 0), "os.stat: {t:?}\n{err}");
    // libc's access on the same path: native frames, never the Python line.
    let access: Vec<_> = t
        .iter()
        .filter(|(k, _)| k.contains("ccess"))
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(access, vec![(0, 2 * N, 0)], "access: {t:?}\n{err}");
    // The os.stat calls went without a stack: for their STICKY until user space had
    // marked their place, then for the mark. (The access calls send copies: ctypes' calls
    // through libffi leave different words on the stack each time.)
    let (_, sticky, misses) = sticky_stats(&err);
    let left = left_to_agents(&err);
    assert_eq!(misses, 0, "{err}");
    assert!(sticky > 0 && sticky + left >= 2 * N - 10, "{err}");

    let node = PathBuf::from("node");
    let (trace, err) = run("js", &[&node, &js]);
    let t = tally(&trace, "sticky.js");
    let stats = t.get("Statx").copied().unwrap_or_default();
    assert_eq!(stats, (N, 0, 0), "statSync: {t:?}\n{err}");
    let (copies, sticky, misses) = sticky_stats(&err);
    let left = left_to_agents(&err);
    assert_eq!(misses, 0, "{err}");
    assert!(sticky > 0 && sticky + left >= N - 10, "{err}");
    // None of the loop's: the start-up's (~40 on a quiet machine; more when the reader is
    // slow to cache a module loader's places, as on a loaded CI machine). Without the
    // kernel reading STICKY, the loop's calls sent one each until the reader had marked
    // their place: 1,598 to 20,037 per run (3 runs).
    assert!(copies < 500, "{err}");
}

/// The tids the trace at `trace` saw start (spawn) and end (exit).
fn spawned_and_ended(trace: &Path) -> (Vec<u64>, Vec<u64>) {
    let (mut spawned, mut ended) = (Vec::new(), Vec::new());
    for v in common::export(trace) {
        match v["type"].as_str() {
            Some("spawn") => spawned.push(v["tid"].as_u64().unwrap()),
            Some("exit") => ended.push(v["tid"].as_u64().unwrap()),
            _ => {}
        }
    }
    (spawned, ended)
}

/// The threads of a process that ends end together, on several CPUs: one of them may reach
/// its exit tracepoint after a sibling took the process out of the traced set (dejavu.bpf.c,
/// `dying`). Every thread's end is recorded all the same, and nothing is said to be lost.
/// A Rust link is such a process (rust-lld's threads): before, about 4 builds in 10 lost a
/// thread's end here, with a warning; ten builds, every time from scratch.
#[test]
fn every_thread_of_a_process_that_ends_has_its_end_recorded() {
    require_ebpf!();
    if !common::have("cargo") {
        common::skip("cargo", "cargo is not installed");
        return;
    }
    // Ten builds keep both CPUs busy: not beside the tests that count on a prompt drainer
    // (one of them, the_same_code_on_another_threads_stack_sends_no_copy_of_it, saw a
    // thread send copies of its stack beside these builds once in five runs).
    let _alone = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let krate = d.path().canonicalize().unwrap().join("k");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"k\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(krate.join("src/main.rs"), "fn main() {}\n").unwrap();
    for run in 0..10 {
        let _ = std::fs::remove_dir_all(krate.join("target"));
        let (trace, err) = record("ebpf", &[], &["cargo", "build", "-q", "--offline"], &krate);
        assert!(!err.contains("without their end"), "run {run}: {err}");
        let (spawned, ended) = spawned_and_ended(&trace);
        let missing: Vec<_> = spawned.iter().filter(|t| !ended.contains(t)).collect();
        assert!(spawned.len() > 3, "run {run}: {spawned:?}");
        assert!(
            missing.is_empty(),
            "run {run}: no end for {missing:?} ({err})"
        );
    }
}

/// A native stack that runs through JIT code (Node.js's, here all of it: --always-sparkplug)
/// has no shape to remember what its unwind depended on by, and each copy of one was tried
/// again word by word (a Node.js test run's 8,800 copies took 270,000 unwinds, most of
/// dejavu's CPU time). Now such a stack depends on every word its unwind read, found
/// without a second unwind: fewer tries than copies, and the calls still have their stacks.
#[test]
fn a_stack_through_jit_code_is_not_tried_word_by_word() {
    require_ebpf!();
    if !common::have("node") {
        common::skip("node", "node is not installed");
        return;
    }
    let _alone = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let mods = d.path().join("mods");
    std::fs::create_dir(&mods).unwrap();
    let script = common::repo().join("tests/workloads/agents/jit_requires.js");
    let trace = d.path().join("t.dvt");
    let cmd = [
        "node".as_ref(),
        "--always-sparkplug".as_ref(),
        script.as_os_str(),
        mods.as_os_str(),
        "600".as_ref(),
    ];
    let err = record_with_stats(&trace, &[], &cmd);
    let copies = sticky_stats(&err).0;
    let tries = stat_of(&err, "native stacks:", "unwinds to find");
    let jit = stat_of(&err, "native stacks:", "copies through JIT code");
    assert!(jit >= 1, "no copy through JIT code: {err}");
    assert!(
        tries < copies,
        "{tries} unwinds to find what {copies} copies depended on: {err}"
    );
    // The loader's stats of the modules (outside the agent's wrappers) keep their stacks.
    let mut r = dejavu_trace::TraceReader::open(&trace).unwrap();
    let (mut stats, mut with_stack) = (0, 0);
    let dir = mods.to_string_lossy().into_owned();
    while let Some(rec) = r.next_record().unwrap() {
        let dejavu_trace::Record::Syscall(s) = rec else {
            continue;
        };
        let on_mod = s
            .path
            .is_some_and(|p| String::from_utf8_lossy(r.str(p)).starts_with(&dir));
        if on_mod
            && matches!(
                s.sys,
                dejavu_trace::Sys::Statx | dejavu_trace::Sys::Newfstatat
            )
        {
            stats += 1;
            with_stack += u32::from(s.stack.is_some_and(|id| !r.stack(id).is_empty()));
        }
    }
    assert!(stats >= 600, "{stats} stats of the modules");
    assert_eq!(with_stack, stats, "every stat of a module has its stack");
}

/// A helper called from two lines of a loop has one place (instruction and stack pointer)
/// for two stacks that take turns. The kernel's cache held one stack per place, so each
/// line's stack replaced the other's and most calls sent a copy of their stack (thousands
/// of entries stored for 40,000 calls). Now an entry holds both: a few entries, and every
/// call names its own line, in turn.
#[test]
fn two_stacks_taking_turns_at_one_place_are_both_kept() {
    require_ebpf!();
    let _alone = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    let prog = common::c_workload("two_lines");
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("target.txt");
    std::fs::write(&target, "x").unwrap();
    let trace = d.path().join("t.dvt");
    let err = record_with_stats(
        &trace,
        &[],
        &[prog.as_os_str(), target.as_os_str(), "20000".as_ref()],
    );
    let stored = stat_of(&err, "eBPF stacks:", "cached in the kernel");
    assert!(
        stored <= 200,
        "entries stored for one place's two stacks: {err}"
    );
    assert_two_lines_in_turn(&trace, &target, 40000);
}

/// Every one of the `calls` stats of tests/workloads/c/two_lines.c on `target` in `trace`
/// names its line of main, A and B in turn.
fn assert_two_lines_in_turn(trace: &Path, target: &Path, calls: usize) {
    let src = common::repo().join("tests/workloads/c/two_lines.c");
    let text = std::fs::read_to_string(&src).unwrap();
    let line_of = |tag: &str| {
        text.lines()
            .position(|l| l.contains(tag))
            .map(|i| i as u32 + 1)
            .unwrap()
    };
    let (a, b) = (line_of("@line A"), line_of("@line B"));
    let (r, stacks) = stacks_on(trace, target);
    let lines: Vec<Option<u32>> = stacks
        .iter()
        .map(|frames| {
            frames
                .iter()
                .find(|f| f.function.is_some_and(|x| r.str(x) == b"main"))
                .map(|f| f.line)
        })
        .collect();
    assert_eq!(lines.len(), calls);
    for (i, l) in lines.iter().enumerate() {
        let want = if i % 2 == 0 { a } else { b };
        assert_eq!(*l, Some(want), "call {i} names line {l:?}, not {want}");
    }
}

/// A BPF filesystem of the test's own (unmounted when dropped), for the kept programs'
/// slots (DEJAVU_BPF_KEEP): the tests keep nothing in the machine's /sys/fs/bpf.
struct OwnBpffs(tempfile::TempDir);

impl OwnBpffs {
    fn mount() -> Option<OwnBpffs> {
        let d = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(d.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(OwnBpffs(d)),
            Ok(o) => {
                common::skip(
                    "bpffs",
                    &format!(
                        "a BPF filesystem cannot be mounted here: {}",
                        String::from_utf8_lossy(&o.stderr).trim()
                    ),
                );
                None
            }
            Err(e) => {
                common::skip("bpffs", &format!("mount: {e}"));
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// The slot directories kept there.
    fn slots(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.path().join("dejavu"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect()
    }

    /// `dejavu record -v --backend ebpf -o TRACE -- CMD` keeping its programs here, with
    /// the eBPF statistics lines; its standard error.
    fn record(&self, trace: &Path, cmd: &[&std::ffi::OsStr]) -> String {
        let keep = [("DEJAVU_BPF_KEEP", self.path().as_os_str())];
        record_with_stats_env(trace, &["-v"], cmd, &keep)
    }
}

impl Drop for OwnBpffs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.path()).status();
    }
}

const STORED: &str = "programs loaded and kept for the next recordings";
const REUSED: &str = "programs kept loaded by an earlier recording";

/// A recording keeps what it loaded (docs/ebpf-backend.md, "Kept loaded"), and the next
/// one starts from it as from a new load: the kernel's stack cache of the first run (whose
/// entries the second run's process, at the same places, would find) is emptied, so every
/// call of the second run still names its own line.
#[test]
fn kept_programs_serve_the_next_recording_as_a_new_load_would() {
    require_ebpf!();
    let Some(fs) = OwnBpffs::mount() else {
        return;
    };
    let prog = common::c_workload("two_lines");
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("target.txt");
    std::fs::write(&target, "x").unwrap();
    let cmd = [prog.as_os_str(), target.as_os_str(), "2000".as_ref()];
    let t1 = d.path().join("1.dvt");
    let err = fs.record(&t1, &cmd);
    assert!(err.contains(STORED), "{err}");
    assert_eq!(fs.slots().len(), 1, "{err}");
    assert!(
        stat_of(&err, "eBPF stacks:", "cached in the kernel") > 0,
        "the first run left entries in the kernel's stack cache: {err}"
    );
    assert_two_lines_in_turn(&t1, &target, 4000);
    for run in 2..4 {
        let t = d.path().join(format!("{run}.dvt"));
        let err = fs.record(&t, &cmd);
        assert!(err.contains(REUSED), "run {run}: {err}");
        assert!(
            stat_of(&err, "eBPF stacks:", "copies unwound") > 0,
            "run {run} unwound its own copies, none answered by the last run's entries: {err}"
        );
        assert_two_lines_in_turn(&t, &target, 4000);
    }
    // Without stacks, the rings' sizes differ: a slot of its own.
    let t = d.path().join("off.dvt");
    let true_ = ["true".as_ref()];
    let keep = [("DEJAVU_BPF_KEEP", fs.path().as_os_str())];
    let err = record_with_stats_env(&t, &["-v", "--stacks", "off"], &true_, &keep);
    assert!(err.contains(STORED), "{err}");
    assert_eq!(fs.slots().len(), 2);
    // Keeping off: nothing kept, nothing used.
    let off = [("DEJAVU_BPF_KEEP", "off".as_ref())];
    let err = record_with_stats_env(&t, &["-v"], &true_, &off);
    assert!(
        err.lines().any(|l| l.ends_with("; programs loaded")),
        "{err}"
    );
    assert_eq!(fs.slots().len(), 2);
}

/// A recording killed while its program runs leaves that program's process in the kept
/// maps (followed, in the middle of a call), and the program goes on. The next recording
/// resets every map before it attaches: the orphan's calls are not in its trace.
#[test]
fn a_killed_recordings_program_is_not_followed_by_the_next_recording() {
    require_ebpf!();
    let Some(fs) = OwnBpffs::mount() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let stop = d.path().join("stop");
    let started = d.path().join("started");
    let t1 = d.path().join("1.dvt");
    // At most ~20 s, until the test says stop; `started` once it runs.
    let script = format!(
        ": > '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 2000 ]; do cat /dev/null; sleep 0.01; i=$((i+1)); done",
        started.display(),
        stop.display()
    );
    let mut dv = Command::new(common::dejavu())
        .args(["record", "--backend", "ebpf", "-o"])
        .arg(&t1)
        .args(["--", "sh", "-c", &script])
        .env("DEJAVU_BPF_KEEP", fs.path())
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    // Killed once the program runs (killed before, the program dies with it).
    while !started.exists() || std::fs::metadata(&t1).map_or(true, |m| m.len() == 0) {
        assert!(t.elapsed().as_secs() < 30, "dejavu did not start recording");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    dv.kill().unwrap();
    dv.wait().unwrap();
    // Long enough for the orphan to make calls meanwhile (one every ~10 ms).
    let t2 = d.path().join("2.dvt");
    let err = fs.record(&t2, &["sleep".as_ref(), "0.3".as_ref()]);
    std::fs::write(&stop, "").unwrap();
    assert!(err.contains(REUSED), "{err}");
    assert!(!err.contains("tasks whose start was not seen"), "{err}");
    let paths: Vec<String> = common::export(&t2)
        .iter()
        .filter_map(|v| v["path"].as_str().map(str::to_owned))
        .collect();
    assert!(
        !paths.iter().any(|p| p == "/dev/null"),
        "the killed recording's program was recorded: {paths:?}"
    );
    let procs = common::summary_json(&t2)["processes"].clone();
    assert_eq!(procs.as_array().map(Vec::len), Some(1), "{procs}");
}
