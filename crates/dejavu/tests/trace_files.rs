//! Traces cut off by kill -9 stay readable up to their last complete block; damaged or
//! foreign files give an error naming the byte offset, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::Duration;

fn summary(trace: &std::path::Path) -> std::process::Output {
    Command::new(common::dejavu())
        .arg("summary")
        .arg(trace)
        .output()
        .unwrap()
}

#[test]
fn a_recording_killed_with_sigkill_is_readable_up_to_its_last_block() {
    let prog = common::c_workload("threads");
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    // Enough stats to run long past the kill under either tracer (10,000,000 ran out
    // within the 4.5 s this test waits on a machine where an eBPF-recorded stat takes
    // ~0.4 us; the program is killed at the end in any case).
    let mut dv = Command::new(common::dejavu())
        .args(["record", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(["1", "1000000000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let program = children(dv.id());
    assert_eq!(program.len(), 1, "dejavu runs the program: {program:?}");
    dv.kill().unwrap(); // SIGKILL
    dv.wait().unwrap();
    // docs/cli.md: under ptrace the kernel kills the program with its tracer
    // (PTRACE_O_EXITKILL); under eBPF it runs on, unrecorded. Either way the test leaves
    // nothing running.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{}/stat", program[0]))
            .is_ok_and(|s| !s.contains(") Z "))
    };
    let mut gone = false;
    for _ in 0..100 {
        if !alive() {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if !gone {
        unsafe { libc::kill(program[0] as i32, libc::SIGKILL) };
    }
    match std::env::var("DEJAVU_BACKEND").as_deref() {
        Ok("ptrace") => assert!(gone, "the program dies with a SIGKILLed ptrace recording"),
        Ok("ebpf") => assert!(
            !gone,
            "the program runs on after an eBPF recording is killed"
        ),
        _ => {}
    }
    let out = summary(&trace);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("cut off") || err.contains("no end marker"),
        "{err}"
    );
    let v = common::summary_json(&trace);
    let calls = v["syscalls"]["newfstatat"]["calls"].as_u64().unwrap_or(0)
        + v["syscalls"]["stat"]["calls"].as_u64().unwrap_or(0);
    assert!(
        calls > 1000,
        "the blocks written before the kill are there: {calls} stats"
    );
    assert!(
        v["truncated"].is_object(),
        "summary --json says the trace is incomplete: {}",
        v["truncated"]
    );
}

/// The children of `pid` (each of its threads').
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let c = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    out
}

#[test]
fn a_damaged_trace_is_an_error_that_names_the_offset() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let (st, _) = common::record_quiet(&trace, &["ls", "/"], d.path());
    assert!(st.success());
    let mut bytes = std::fs::read(&trace).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&trace, &bytes).unwrap();
    let out = summary(&trace);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("corrupt trace at byte offset"), "{err}");
}

#[test]
fn a_file_that_is_not_a_trace_is_named_as_such() {
    let out = summary(std::path::Path::new("/bin/sh"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("not a dejavu trace") && err.contains("offset 0"),
        "{err}"
    );
    let out = summary(std::path::Path::new("/nonexistent.dvt"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("No such file"));
}

#[test]
fn export_to_a_closed_pipe_is_not_an_error() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let (st, _) = common::record_quiet(&trace, &["ls", "-l", "/usr/bin"], d.path());
    assert!(st.success());
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' export '{}' | head -n 1",
            common::dejavu().display(),
            trace.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("{\"type\":\"meta\""));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_trace_is_readable_by_its_owner_only_even_over_an_older_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.dvt");
    let old = dir.path().join("old.dvt");
    std::fs::write(&old, b"an older, world-readable file").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    for t in [&fresh, &old] {
        let (st, err) = common::record_quiet(t, &["true"], dir.path());
        assert!(st.success(), "{err}");
        let mode = std::fs::metadata(t).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", t.display());
    }
}

#[test]
fn a_trace_to_a_fifo_or_a_device_is_written_as_it_is_never_truncated_or_chmod_ed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // A FIFO (what `-o >(zstd > t.zst)` gives): the trace streams through it.
    let fifo = dir.path().join("t.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let copy = dir.path().join("copy.dvt");
    let reader = {
        let (fifo, copy) = (fifo.clone(), copy.clone());
        std::thread::spawn(move || {
            let mut from = std::fs::File::open(fifo).unwrap();
            let mut to = std::fs::File::create(copy).unwrap();
            std::io::copy(&mut from, &mut to).unwrap()
        })
    };
    let (st, err) = common::record_quiet(&fifo, &["ls", "/"], dir.path());
    assert!(st.success(), "{err}");
    reader.join().unwrap();
    let v = common::summary_json(&copy);
    assert!(v["syscalls"].as_object().is_some_and(|m| !m.is_empty()));
    let mode = std::fs::metadata(&fifo).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "the FIFO's mode is left alone");
    // A device like /dev/null (a private node of it, so a bug cannot take the real one
    // away): the recording succeeds and the node keeps its mode.
    if unsafe { libc::geteuid() } != 0 {
        common::skip("root", "making a device node needs root");
        return;
    }
    let null = dir.path().join("null");
    let c = std::ffi::CString::new(null.to_str().unwrap()).unwrap();
    let dev = libc::makedev(1, 3);
    assert_eq!(
        unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, dev) },
        0
    );
    std::fs::set_permissions(&null, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (st, err) = common::record_quiet(&null, &["true"], dir.path());
    assert!(st.success(), "{err}");
    let mode = std::fs::metadata(&null).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666, "a device's mode is left alone");
}

#[test]
fn a_trace_to_standard_output_is_refused_not_written_to_a_file_named_dash() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["record", "-o", "-", "--", "true"][..],
        &["import", "strace", "-o", "-", "/dev/null"][..],
    ] {
        let out = Command::new(common::dejavu())
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not to standard output"), "{err}");
        assert!(
            !dir.path().join("-").exists(),
            "{args:?} created a file named -"
        );
    }
}

#[test]
fn a_second_recording_to_a_trace_being_written_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("same.dvt");
    let mut first = Command::new(common::dejavu())
        .args(["record", "-o"])
        .arg(&t)
        .args(["--", "sleep", "2"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The file exists (and is locked) once the first recording has started writing.
    for _ in 0..100 {
        if std::fs::metadata(&t).is_ok_and(|m| m.len() > 0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = Command::new(common::dejavu())
        .args(["record", "-o"])
        .arg(&t)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(125), "{err}");
    assert!(err.contains("being written by another recording"), "{err}");
    assert!(first.wait().unwrap().success());
    let out = summary(&t);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("sleep 2"),
        "the first recording's trace is whole"
    );
}

/// `sh -c SCRIPT` with `redirect` (e.g. `>&-`) applied to it, natively or under
/// `dejavu record`; returns what it wrote to stderr.
fn stderr_of(script: &str, redirect: &str, dejavu: Option<&std::path::Path>) -> String {
    let inner = match dejavu {
        Some(t) => format!("exec \"$0\" record -o \"$1\" -- sh -c '{script}' {redirect}",)
            .replace("\"$1\"", &format!("'{}'", t.display())),
        None => format!("exec sh -c '{script}' {redirect}"),
    };
    let out = Command::new("sh")
        .arg("-c")
        .arg(inner)
        .arg(common::dejavu())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("rc="))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_closed_stdin_stdout_or_stderr_stays_closed_for_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.dvt");
    for (script, redirect) in [
        ("echo hi; echo rc=$? >&2", ">&-"),
        ("read x; echo rc=$? >&2", "<&-"),
        (
            "ls /proc/self/fd/2 >/dev/null 2>&1; echo rc=$? >&3",
            "3>&2 2>&-",
        ),
    ] {
        let native = stderr_of(script, redirect, None);
        assert!(native.starts_with("rc="), "{script}: {native}");
        assert_eq!(
            stderr_of(script, redirect, Some(&t)),
            native,
            "{script} {redirect}"
        );
    }
}

#[test]
fn a_full_disk_keeps_the_programs_exit_status_and_counts_what_was_not_written() {
    if unsafe { libc::geteuid() } != 0 {
        common::skip("root", "mounting a small tmpfs needs root");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let d = tempfile::tempdir().unwrap();
    let small = d.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(st.success(), "mount a 64 KiB tmpfs");
    let _unmount = Unmount(small.clone());
    let trace = small.join("t.dvt");
    let (st, err) = common::record_quiet(
        &trace,
        &[
            "sh",
            "-c",
            "for i in $(seq 1 200); do ls / > /dev/null; done; exit 4",
        ],
        d.path(),
    );
    assert_eq!(
        st.code(),
        Some(4),
        "the program's status, not dejavu's: {err}"
    );
    let lost: u64 = err
        .split("; ")
        .find_map(|p| p.strip_suffix(" events were not written\n"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the count of what is missing: {err}"));
    assert!(lost > 500, "{err}");
    // What fit is readable, and says it was cut off.
    let out = summary(&trace);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
