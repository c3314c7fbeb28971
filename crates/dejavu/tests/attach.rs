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
