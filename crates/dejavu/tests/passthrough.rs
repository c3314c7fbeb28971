//! The traced program must not notice dejavu: its exit status, signal death, stdin,
//! stdout, environment, working directory and signals pass through unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn record_cmd(trace: &std::path::Path) -> Command {
    let mut c = Command::new(common::dejavu());
    c.arg("record").arg("-o").arg(trace).arg("--");
    default_signals(&mut c);
    c
}

/// Starts `c` with the default action for the signals these tests send, whatever the test
/// harness was started with (a script's background job ignores SIGINT and SIGQUIT, and an
/// ignored signal is rightly passed on to the program ignored).
fn default_signals(c: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only signal(2) between fork and exec.
    unsafe {
        c.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
}

#[test]
fn exit_codes_pass_through() {
    let prog = common::c_workload("signals");
    let d = tempfile::tempdir().unwrap();
    for code in [0, 1, 3, 42, 255] {
        let st = record_cmd(&d.path().join("t.dvt"))
            .arg(&prog)
            .args(["exit", &code.to_string()])
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(code));
    }
}

#[test]
fn a_signal_death_exits_128_plus_the_signal_like_a_shell() {
    let prog = common::c_workload("signals");
    let d = tempfile::tempdir().unwrap();
    for sig in [libc::SIGTERM, libc::SIGKILL, libc::SIGSEGV, libc::SIGABRT] {
        let trace = d.path().join("t.dvt");
        let out = record_cmd(&trace)
            .arg(&prog)
            .args(["kill", &sig.to_string()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(128 + sig), "signal {sig}");
        // The trace records the death too.
        let v = common::summary_json(&trace);
        assert_eq!(v["processes"][0]["exit"].as_i64(), Some(128 + sig as i64));
    }
}

#[test]
fn the_programs_own_signal_handlers_run() {
    let prog = common::c_workload("signals");
    let d = tempfile::tempdir().unwrap();
    let st = record_cmd(&d.path().join("t.dvt"))
        .arg(&prog)
        .arg("handler")
        .status()
        .unwrap();
    assert_eq!(
        st.code(),
        Some(7),
        "the SIGUSR1 handler ran exactly as untraced"
    );
}

#[test]
fn sigstop_and_sigcont_are_the_programs_not_the_tracers() {
    let prog = common::c_workload("signals");
    let d = tempfile::tempdir().unwrap();
    let st = record_cmd(&d.path().join("t.dvt"))
        .arg(&prog)
        .arg("stopcont")
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
}

#[test]
fn stdin_and_stdout_pass_through() {
    let d = tempfile::tempdir().unwrap();
    let mut child = record_cmd(&d.path().join("t.dvt"))
        .args(["tr", "a-z", "A-Z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello through dejavu\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"HELLO THROUGH DEJAVU\n");
}

#[test]
fn environment_and_working_directory_are_untouched() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().canonicalize().unwrap();
    let out = record_cmd(&dir.join("t.dvt"))
        .args(["sh", "-c", "echo \"$DEJAVU_TEST_VAR\"; pwd"])
        .env("DEJAVU_TEST_VAR", "a value with spaces")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, format!("a value with spaces\n{}\n", dir.display()));
}

#[test]
fn resource_limits_are_the_programs_own() {
    // The eBPF backend raises RLIMIT_MEMLOCK to load its maps on kernels before 5.11 and
    // puts it back before the program starts: the program sees the limits it would have.
    let d = tempfile::tempdir().unwrap();
    let script = "ulimit -l; ulimit -Hl; ulimit -n; ulimit -s";
    let native = Command::new("sh").args(["-c", script]).output().unwrap();
    let out = record_cmd(&d.path().join("t.dvt"))
        .args(["sh", "-c", script])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&native.stdout)
    );
}

#[test]
fn sigpipe_has_its_default_action_in_the_program() {
    // Rust ignores SIGPIPE in dejavu itself; the program must get the default back,
    // or `yes | head` would never end under dejavu.
    let d = tempfile::tempdir().unwrap();
    let out = record_cmd(&d.path().join("t.dvt"))
        .args(["sh", "-c", "yes | head -n 3"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"y\ny\ny\n");
}

#[test]
fn a_program_that_ignores_sigint_survives_a_sigint_sent_to_dejavu() {
    let prog = common::c_workload("signals");
    let d = tempfile::tempdir().unwrap();
    let stop = d.path().join("stop");
    let mut child = record_cmd(&d.path().join("t.dvt"))
        .arg(&prog)
        .arg("ignore-int")
        .arg(&stop)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    // A SIGINT from another process (not the terminal) is forwarded to the program,
    // which ignores it: both keep running.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "dejavu must not exit on a forwarded SIGINT"
    );
    std::fs::write(&stop, "").unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    let v = common::summary_json(&d.path().join("t.dvt"));
    assert_eq!(v["processes"][0]["exit"].as_i64(), Some(0));
}

#[test]
fn a_sigterm_at_any_moment_of_start_up_ends_the_program() {
    // Sent while dejavu loads, forks, and the program is between fork and exec (where
    // it once ran a copy of dejavu's handler and the signal was lost: `sleep` then ran
    // its 30 s and exited 0). Whatever the moment, the run ends by the signal: dejavu
    // dies of it before it catches signals, or forwards it.
    let d = tempfile::tempdir().unwrap();
    for delay_ms in (0..=150).step_by(5) {
        let mut child = record_cmd(&d.path().join("t.dvt"))
            .args(["sleep", "30"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let st = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(
            st.code() == Some(128 + libc::SIGTERM) || st.signal() == Some(libc::SIGTERM),
            "SIGTERM after {delay_ms} ms: {st:?}"
        );
    }
}

/// The processes whose command line holds `marker`, with their state letter (`T`:
/// stopped).
fn marked(marker: &str) -> Vec<(i32, char)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmd).contains(marker) {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, r)| r.chars().next())
            .unwrap_or('?');
        out.push((pid, state));
    }
    out
}

#[test]
fn dejavu_killed_during_start_up_leaves_no_program_stopped_for_good() {
    // The program waits, stopped, between fork and exec until dejavu's capture is ready.
    // SIGKILLed meanwhile (a CI job's timeout), dejavu can never continue it: it stayed
    // stopped for good, holding the pipes it inherited (a `cargo test | grep` never
    // ended). Now the kernel kills it with dejavu; once it runs, it outlives dejavu.
    let d = tempfile::tempdir().unwrap();
    let marker = format!("dejavu-start-kill-{}", std::process::id());
    let mut stopped = Vec::new();
    for delay_ms in (0..=60).step_by(2) {
        let mut child = record_cmd(&d.path().join("t.dvt"))
            .args(["sh", "-c", "sleep 5", &marker])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        // The kernel's SIGKILL of an orphan is at once; a stopped process stays.
        std::thread::sleep(Duration::from_millis(100));
        for (pid, state) in marked(&marker) {
            if state == 'T' {
                stopped.push((delay_ms, pid));
            }
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    assert!(
        stopped.is_empty(),
        "programs left stopped by a killed dejavu (delay ms, pid): {stopped:?}"
    );
}

#[test]
fn a_signal_ignored_when_dejavu_starts_stays_ignored_in_the_program() {
    // `nohup dejavu record -- prog`: prog must inherit SIGHUP ignored, as without dejavu.
    use std::os::unix::process::CommandExt;
    let d = tempfile::tempdir().unwrap();
    let mut cmd = record_cmd(&d.path().join("t.dvt"));
    cmd.args(["grep", "^SigIgn:", "/proc/self/status"]);
    // SAFETY: only signal(2) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8_lossy(&out.stdout);
    let mask = u64::from_str_radix(line.trim().trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_ne!(
        mask & (1 << (libc::SIGHUP - 1)),
        0,
        "SIGHUP ignored: {line}"
    );
    assert_eq!(mask & (1 << (libc::SIGTERM - 1)), 0, "SIGTERM not: {line}");
}

#[test]
fn sigterm_to_dejavu_reaches_the_program() {
    let d = tempfile::tempdir().unwrap();
    let mut child = record_cmd(&d.path().join("t.dvt"))
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert_eq!(
        st.code(),
        Some(128 + libc::SIGTERM),
        "sleep died of the forwarded SIGTERM"
    );
    assert!(t.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_missing_command_exits_127_and_a_non_executable_one_126() {
    let d = tempfile::tempdir().unwrap();
    let out = record_cmd(&d.path().join("t.dvt"))
        .arg("no-such-command-xyz")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command not found: no-such-command-xyz"));
    let f = d.path().join("not-exec");
    std::fs::write(&f, "#!/bin/sh\n").unwrap();
    let out = record_cmd(&d.path().join("t.dvt"))
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(126),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn record_without_a_command_is_a_usage_error() {
    let out = Command::new(common::dejavu())
        .arg("record")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pid"));
}

/// Runs `cmd` in a new pseudo-terminal (util-linux `script`), feeding it `input`
/// after `delay`; returns what the terminal showed and `cmd`'s exit status.
///
/// `script` runs `$SHELL -c`; the command is `exec`ed so that no shell sits in the
/// terminal's foreground process group: a ^C there would reach the shell too, and what a
/// shell does with it is the shell's business (dash dies of it, bash waits for its child),
/// not what these tests are about. `script -e` exits with the command's status.
fn in_terminal(cmd: &str, delay: Duration, input: &[u8]) -> (String, Option<i32>) {
    let mut script = Command::new("script");
    script
        .args(["-qec", &format!("exec {cmd}"), "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    default_signals(&mut script);
    let mut child = script.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(delay);
    stdin.write_all(input).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

fn signal_records(trace: &std::path::Path, sig: &str) -> usize {
    let out = Command::new(common::dejavu())
        .arg("export")
        .arg(trace)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.starts_with("{\"type\":\"signal\"") && l.contains(&format!("\"name\":\"{sig}\""))
        })
        .count()
}

#[test]
fn a_terminal_passes_through_and_what_is_written_to_it_is_kept() {
    require!("script");
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let (shown, _) = in_terminal(
        &format!(
            "'{}' record -o '{}' -- sh -c 'test -t 0 && test -t 1 && echo on-a-tty'",
            common::dejavu().display(),
            trace.display()
        ),
        Duration::from_millis(0),
        b"",
    );
    assert!(shown.contains("on-a-tty"), "{shown:?}");
    let out = Command::new(common::dejavu())
        .arg("export")
        .arg(&trace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"payload\":\"on-a-tty\\n\""),
        "the bytes written to the terminal are kept"
    );
}

#[test]
fn ctrl_c_in_a_terminal_reaches_the_program_exactly_once() {
    require!("script");
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let (shown, status) = in_terminal(
        &format!(
            "'{}' record -o '{}' -- sleep 20",
            common::dejavu().display(),
            trace.display()
        ),
        Duration::from_millis(1500),
        b"\x03",
    );
    assert_eq!(status, Some(130), "{shown:?}");
    assert_eq!(
        signal_records(&trace, "SIGINT"),
        1,
        "delivered once, not forwarded a second time"
    );
}

#[test]
fn ctrl_c_to_a_program_that_ignores_it_leaves_both_running() {
    require!("script");
    let prog = common::c_workload("signals");
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let stop = d.path().join("stop");
    let stopper = stop.clone();
    // Let the program go on for a while after the ^C, then tell it to finish.
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2500));
        std::fs::write(stopper, "").unwrap();
    });
    let (shown, status) = in_terminal(
        &format!(
            "'{}' record -o '{}' -- '{}' ignore-int '{}'",
            common::dejavu().display(),
            trace.display(),
            prog.display(),
            stop.display()
        ),
        Duration::from_millis(1500),
        b"\x03",
    );
    t.join().unwrap();
    assert!(shown.contains("ready"), "{shown:?}");
    assert_eq!(status, Some(0), "{shown:?}");
    assert_eq!(signal_records(&trace, "SIGINT"), 1);
}

#[test]
fn cpu_placement_is_invisible_to_the_program() {
    require!("python3");
    // The real interpreter (python3 may be a shim script that would run first).
    let py = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let py = String::from_utf8(py.stdout).unwrap().trim().to_string();
    // A hot stat loop (dejavu pins it next to the tracer), then the affinity as the
    // program, a new thread and a forked child see it, then another hot loop.
    let script = "import os, threading\n\
        for i in range(30000): os.stat('/')\n\
        a = len(os.sched_getaffinity(0))\n\
        res = []\n\
        t = threading.Thread(target=lambda: res.append(len(os.sched_getaffinity(0)))); t.start(); t.join()\n\
        pid = os.fork()\n\
        if pid == 0:\n    print('child', len(os.sched_getaffinity(0)), flush=True); os._exit(0)\n\
        os.waitpid(pid, 0)\n\
        for i in range(30000): os.stat('/')\n\
        print(a, res[0], len(os.sched_getaffinity(0)))\n";
    let native = Command::new(&py).args(["-c", script]).output().unwrap();
    let d = tempfile::tempdir().unwrap();
    let traced = Command::new(common::dejavu())
        // CPU placement is the ptrace backend's.
        .args(["record", "--backend", "ptrace", "-v", "-o"])
        .arg(d.path().join("t.dvt"))
        .arg("--")
        .args([py.as_str(), "-c", script])
        .output()
        .unwrap();
    assert!(traced.status.success());
    assert_eq!(
        String::from_utf8_lossy(&traced.stdout),
        String::from_utf8_lossy(&native.stdout)
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus > 1 {
        let err = String::from_utf8_lossy(&traced.stderr);
        assert!(
            err.contains("shared the tracer's CPU"),
            "the hot loop was pinned: {err}"
        );
    }
}
