//! Stopping cleanly (docs/cli.md, "Signals"): signals meant for the program reach it and
//! never kill dejavu; a program that exits leaving processes running does not hang the
//! recording; a second SIGTERM stops it; the trace reaches the file while the program is
//! quiet. Under the backend `DEJAVU_BACKEND` picks (scripts/test runs both).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn ebpf() -> bool {
    std::env::var("DEJAVU_BACKEND").as_deref() == Ok("ebpf")
}

/// `dejavu record -o TRACE -- cmd` with its stderr in `err`, the signals these tests
/// send at their default action (a test harness may have started us with some ignored,
/// and an ignored signal is rightly left ignored).
fn start(trace: &Path, err: &Path, cmd: &[&str], cwd: &Path) -> Child {
    let mut c = Command::new(common::dejavu());
    c.arg("record")
        .arg("-o")
        .arg(trace)
        .arg("--")
        .args(cmd)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap());
    // SAFETY: only signal(2) between fork and exec.
    unsafe {
        c.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    c.spawn().unwrap()
}

/// Waits until `f` holds (checked every 20 ms), at most `secs` seconds.
fn wait_for(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Waits for `c` to end, at most `secs` seconds (then kills it and fails).
fn wait_exit(c: &mut Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let mut st = None;
    wait_for(secs, || {
        st = c.try_wait().unwrap();
        st.is_some()
    });
    match st {
        Some(s) => s,
        None => {
            let _ = c.kill();
            panic!("{what}: dejavu did not end within {secs} s");
        }
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill(2) of a pid this test started.
    unsafe { libc::kill(pid, sig) };
}

/// The pid in "... (pid N)" after `name` in `text`.
fn pid_after(text: &str, name: &str) -> Option<i32> {
    let at = text.find(name)? + name.len();
    let rest = &text[at..];
    let p = rest.find("(pid ")? + 5;
    rest[p..].split(')').next()?.parse().ok()
}

/// The processes below `pid` (children of each of its threads, recursively).
fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for t in std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let c = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for k in c.split_whitespace().filter_map(|x| x.parse::<i32>().ok()) {
                out.push(k);
                todo.push(k);
            }
        }
    }
    out
}

#[test]
fn a_program_that_leaves_a_process_running_ends_the_recording_at_the_first_sigint() {
    let d = tempfile::tempdir().unwrap();
    let (trace, err) = (d.path().join("t.dvt"), d.path().join("err"));
    let mut dv = start(
        &trace,
        &err,
        &["sh", "-c", "(exec sleep 1000) & exit 3"],
        d.path(),
    );
    let said = |e: &Path| std::fs::read_to_string(e).unwrap_or_default();
    // After a second, dejavu names what the program left running and how to stop.
    assert!(
        wait_for(15, || said(&err).contains("left running")),
        "{}",
        said(&err)
    );
    let text = said(&err);
    let orphan = pid_after(&text, "sleep 1000").unwrap_or_else(|| panic!("{text}"));
    assert!(text.contains("Ctrl-C"), "{text}");
    kill(dv.id() as i32, libc::SIGINT);
    let st = wait_exit(&mut dv, 15, "SIGINT after the program exited");
    assert_eq!(
        st.code(),
        Some(3),
        "the program's exit status: {}",
        said(&err)
    );
    // The trace is whole: its end block, the program's exit and the orphan's exec.
    let out = Command::new(common::dejavu())
        .args(["summary", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["truncated"].is_null(), "{v}");
    assert_eq!(v["processes"].as_array().unwrap().len(), 2, "{v}");
    // ptrace cannot let a process go (its seccomp filter stays): it ended it; eBPF
    // leaves it running.
    if ebpf() {
        assert!(alive(orphan), "eBPF leaves it running");
        kill(orphan, libc::SIGKILL);
    } else {
        assert!(wait_for(5, || !alive(orphan)), "ptrace ends it");
    }
    assert!(said(&err).contains("stopped recording"), "{}", said(&err));
}

#[test]
fn sigusr1_sigusr2_and_sigalrm_reach_the_program_and_never_kill_dejavu() {
    let d = tempfile::tempdir().unwrap();
    let (trace, err) = (d.path().join("t.dvt"), d.path().join("err"));
    let script = "trap 'echo > usr1' USR1; trap 'echo > usr2' USR2; trap 'echo > alrm' ALRM; \
                  echo > ready; i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); \
                  [ -e usr1 ] && [ -e usr2 ] && [ -e alrm ] && exit 5; done; exit 9";
    let mut dv = start(&trace, &err, &["sh", "-c", script], d.path());
    assert!(wait_for(15, || d.path().join("ready").exists()));
    for sig in [libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM] {
        kill(dv.id() as i32, sig);
    }
    let st = wait_exit(&mut dv, 20, "USR1, USR2, ALRM");
    assert_eq!(
        st.code(),
        Some(5),
        "the program got all three and dejavu passed its status through: {}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    // Each delivery is in the trace as the program's signal.
    let v = common::summary_json(&trace);
    assert!(v["truncated"].is_null(), "{v}");
}

#[test]
fn a_second_sigterm_soon_after_the_first_stops_the_recording() {
    let d = tempfile::tempdir().unwrap();
    let (trace, err) = (d.path().join("t.dvt"), d.path().join("err"));
    // The program ignores SIGTERM: the first one is forwarded and changes nothing.
    let mut dv = start(
        &trace,
        &err,
        &["sh", "-c", "trap '' TERM; echo > ready; sleep 60"],
        d.path(),
    );
    assert!(wait_for(15, || d.path().join("ready").exists()));
    let program = descendants(dv.id() as i32);
    assert!(!program.is_empty());
    kill(dv.id() as i32, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        dv.try_wait().unwrap().is_none(),
        "one SIGTERM is the program's"
    );
    kill(dv.id() as i32, libc::SIGTERM);
    let st = wait_exit(&mut dv, 15, "a second SIGTERM");
    let text = std::fs::read_to_string(&err).unwrap();
    assert!(text.contains("a second SIGTERM"), "{text}");
    let v = common::summary_json(&trace);
    assert!(v["truncated"].is_null(), "the trace is whole: {v}");
    if ebpf() {
        // The program runs on, unrecorded; dejavu exits as an interrupted command.
        assert_eq!(st.code(), Some(128 + libc::SIGTERM), "{text}");
        assert!(program.iter().any(|&p| alive(p)), "{text}");
    } else {
        // ptrace ends it (it cannot run on untraced).
        assert_eq!(st.code(), Some(128 + libc::SIGKILL), "{text}");
        assert!(wait_for(5, || program.iter().all(|&p| !alive(p))));
    }
    for p in program {
        kill(p, libc::SIGKILL);
    }
}

#[test]
fn the_trace_reaches_the_file_while_the_program_is_quiet() {
    let d = tempfile::tempdir().unwrap();
    let (trace, err) = (d.path().join("t.dvt"), d.path().join("err"));
    let mut dv = start(
        &trace,
        &err,
        &[
            "sh",
            "-c",
            "ls / > /dev/null; ls /usr > /dev/null; echo > ready; sleep 60",
        ],
        d.path(),
    );
    assert!(wait_for(15, || d.path().join("ready").exists()));
    // Nothing happens from here on; the blocks must be in the file within about a
    // second all the same. A copy of the file is read while dejavu still records.
    let copy = d.path().join("copy.dvt");
    let mut calls = 0;
    wait_for(5, || {
        std::fs::copy(&trace, &copy).unwrap();
        let out = Command::new(common::dejavu())
            .args(["summary", "--json"])
            .arg(&copy)
            .output()
            .unwrap();
        calls = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|v| {
                v["syscalls"]["getdents64"]["calls"]
                    .as_u64()
                    .or(v["syscalls"]["getdents"]["calls"].as_u64())
            })
            .unwrap_or(0);
        calls >= 2
    });
    let program = descendants(dv.id() as i32);
    let _ = dv.kill();
    let _ = dv.wait();
    for p in program {
        kill(p, libc::SIGKILL);
    }
    assert!(
        calls >= 2,
        "both ls listings are in the file while the program sleeps: {calls} getdents"
    );
}
