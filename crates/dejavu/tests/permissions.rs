//! When ptrace is refused, dejavu says why and how to allow it, exits 77 (EX_NOPERM),
//! and leaves no empty trace behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

#[test]
fn a_seccomp_profile_that_blocks_ptrace_gives_advice_and_exit_77() {
    let wrapper = common::c_workload("noptrace");
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let out = Command::new(&wrapper)
        .arg(common::dejavu())
        .args(["record", "--backend", "ptrace", "-o"])
        .arg(&trace)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{err}");
    assert!(err.contains("tracing is not permitted here"), "{err}");
    assert!(err.contains("--cap-add=SYS_PTRACE"), "{err}");
    assert!(!trace.exists());
}

#[test]
fn attaching_to_another_users_process_without_privilege_names_the_owner() {
    if unsafe { libc::geteuid() } != 0 || !common::have("setpriv") {
        common::skip(
            "root",
            "needs root and setpriv to run dejavu as an unprivileged user",
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.dvt");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(common::dejavu())
        .args(["record", "--backend", "ptrace", "-o"])
        .arg(&trace)
        .args(["-p", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{err}");
    assert!(err.contains("process 1 belongs to uid 0"), "{err}");
    assert!(!trace.exists());
}
