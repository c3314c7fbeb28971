//! `dejavu record -p PID` attaches to a running process and all its threads; SIGINT
//! detaches and the process keeps running as if nothing happened.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

fn proc_state(pid: u32) -> char {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    s.rsplit_once(')')
        .and_then(|(_, r)| r.trim_start().chars().next())
        .unwrap_or('?')
}

/// Waits for the trace's header: it is written once dejavu is recording, its signal
/// handlers long installed (not a fixed time, which a loaded machine may exceed).
fn wait_recording(trace: &std::path::Path) {
    let t = std::time::Instant::now();
    while std::fs::metadata(trace).map_or(true, |m| m.len() == 0) {
        assert!(t.elapsed().as_secs() < 30, "dejavu did not start recording");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn attach_records_and_ctrl_c_detaches_leaving_the_process_running() {
    let prog = common::c_workload("attach_target");
    let d = tempfile::tempdir().unwrap();
    let watched = d.path().join("watched");
    std::fs::write(&watched, "x").unwrap();
    let stop = d.path().join("stop");
    let mut target = Command::new(&prog)
        .arg(&watched)
        .arg(&stop)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid: u32 = line.trim().parse().unwrap();
    assert_eq!(pid, target.id());

    let trace = d.path().join("t.dvt");
    let dv = Command::new(common::dejavu())
        .args(["record", "-o"])
        .arg(&trace)
        .args(["-p", &pid.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_recording(&trace);
    std::thread::sleep(Duration::from_millis(500));
    unsafe { libc::kill(dv.id() as i32, libc::SIGINT) };
    let res = dv.wait_with_output().unwrap();
    assert_eq!(
        res.status.code(),
        Some(0),
        "detach is a success: {}",
        String::from_utf8_lossy(&res.stderr)
    );

    // The process is running again, not left stopped.
    std::thread::sleep(Duration::from_millis(100));
    let st = proc_state(pid);
    assert!(st == 'S' || st == 'R', "process state after detach: {st}");

    // It keeps doing its work and ends normally.
    std::fs::write(&stop, "").unwrap();
    let status = target.wait().unwrap();
    assert!(status.success());
    line.clear();
    out.read_line(&mut line).unwrap();
    let loops: u64 = line.trim().parse().unwrap();
    assert!(loops > 10);

    // What was recorded while attached: the stats of the watched file, by this pid.
    let v = common::summary_json(&trace);
    let watched_stats = v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"].as_str() == watched.to_str())
        .map(|p| p["calls"].as_u64().unwrap_or(0))
        .unwrap_or(0);
    assert!(
        watched_stats >= 5,
        "about 50 stats in 500 ms, got {watched_stats}"
    );
    assert_eq!(v["processes"][0]["pid"].as_u64(), Some(pid as u64));
    assert!(v["processes"][0]["argv"][0]
        .as_str()
        .unwrap()
        .ends_with("attach_target"));
    // Its code as it was when attached (stacks are on by default): the program, ld.so and
    // libc, from /proc/PID/maps (trace-format.md, "Mapping block"). The eBPF backend
    // records an attached process without stacks, so without mappings.
    let mapped = v["mappings"]["mapped"].as_u64().unwrap();
    if std::env::var("DEJAVU_BACKEND").as_deref() == Ok("ebpf") {
        assert_eq!(mapped, 0, "{}", v["mappings"]);
    } else {
        assert!(mapped >= 3, "{}", v["mappings"]);
        assert_eq!(v["mappings"]["with_build_id"].as_u64(), Some(mapped));
    }
}

#[test]
fn attaching_to_a_missing_pid_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(common::dejavu())
        .args(["record", "-o"])
        .arg(d.path().join("t.dvt"))
        .args(["-p", "999999999"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such process: 999999999"));
}

#[test]
fn sigint_detaches_even_when_dejavu_was_started_with_it_ignored() {
    // `dejavu record -p PID & ...; kill -INT $!` in a script: a non-interactive shell starts
    // background jobs with SIGINT ignored. Attached, dejavu catches it all the same.
    use std::os::unix::process::CommandExt;
    let mut target = Command::new("sleep").arg("30").spawn().unwrap();
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let mut cmd = Command::new(common::dejavu());
    cmd.args(["record", "-o"])
        .arg(&trace)
        .args(["-p", &target.id().to_string()])
        .stderr(Stdio::piped());
    // SAFETY: only signal(2) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        });
    }
    let dv = cmd.spawn().unwrap();
    wait_recording(&trace);
    unsafe { libc::kill(dv.id() as i32, libc::SIGINT) };
    let res = dv.wait_with_output().unwrap();
    let alive = proc_state(target.id());
    let _ = target.kill();
    let _ = target.wait();
    assert_eq!(
        res.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    assert!(alive == 'S' || alive == 'R', "target after detach: {alive}");
}

#[test]
fn a_zombie_or_an_already_traced_process_is_named_as_such() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    // A zombie: a child that exited, whose parent (sh, busy in sleep) has not waited.
    let mut parent = Command::new("sh")
        .args(["-c", "sh -c 'exit 0' & exec sleep 20"])
        .spawn()
        .unwrap();
    let mut zombie = None;
    for _ in 0..250 {
        let c = std::fs::read_to_string(format!(
            "/proc/{}/task/{}/children",
            parent.id(),
            parent.id()
        ))
        .unwrap_or_default();
        zombie = c
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .find(|&p| proc_state(p) == 'Z');
        if zombie.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let zombie = zombie.expect("a zombie child");
    let out = Command::new(common::dejavu())
        .args(["record", "-o"])
        .arg(&trace)
        .args(["-p", &zombie.to_string()])
        .output()
        .unwrap();
    let _ = parent.kill();
    let _ = parent.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is a zombie"), "{err}");
    assert!(!err.contains("container"), "no container advice: {err}");

    // Already traced (by strace): ptrace allows one tracer; eBPF needs none.
    if std::env::var("DEJAVU_BACKEND").as_deref() != Ok("ptrace") || !common::have("strace") {
        return;
    }
    let mut target = Command::new("sleep").arg("20").spawn().unwrap();
    let mut strace = Command::new("strace")
        .args(["-o", "/dev/null", "-p", &target.id().to_string()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let traced = (0..250).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        std::fs::read_to_string(format!("/proc/{}/status", target.id())).is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("TracerPid:") && l.trim() != "TracerPid:\t0")
        })
    });
    assert!(traced, "strace attached");
    let out = Command::new(common::dejavu())
        .args(["record", "-o"])
        .arg(&trace)
        .args(["-p", &target.id().to_string()])
        .output()
        .unwrap();
    let _ = strace.kill();
    let _ = strace.wait();
    let _ = target.kill();
    let _ = target.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is already traced by process"), "{err}");
    assert!(err.contains("strace"), "names the tracer: {err}");
}
