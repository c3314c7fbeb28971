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

// ---- who may be recorded under eBPF (docs/ebpf-backend.md, "Who may be recorded")

/// A copy of dejavu that user 65534 can run, in a directory it can write to, with the
/// eBPF capabilities as file capabilities (the setcap the advice gives). None (after one
/// skip line) when this cannot be set up here.
fn capped_dejavu(d: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if unsafe { libc::geteuid() } != 0 || !common::have("setpriv") || !common::have("setcap") {
        common::skip(
            "root",
            "needs root, setpriv and setcap to run dejavu as another user with file capabilities",
        );
        return None;
    }
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    let bin = d.join("dejavu");
    std::fs::copy(common::dejavu(), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    if std::env::var("DEJAVU_BACKEND").as_deref() == Ok("ebpf") {
        let st = Command::new("setcap")
            .args(["cap_bpf,cap_perfmon+ep"])
            .arg(&bin)
            .status()
            .unwrap();
        assert!(st.success(), "setcap");
    }
    Some(bin)
}

/// `bin ARGS` as user 65534 (nobody), in `d`.
fn as_nobody(bin: &std::path::Path, args: &[&str], d: &std::path::Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin)
        .args(args)
        .current_dir(d);
    c
}

fn backend() -> &'static str {
    if std::env::var("DEJAVU_BACKEND").as_deref() == Ok("ebpf") {
        "ebpf"
    } else {
        "ptrace"
    }
}

#[test]
fn with_the_ebpf_capabilities_a_user_still_records_only_their_own_processes() {
    let d = tempfile::tempdir().unwrap();
    let Some(bin) = capped_dejavu(d.path()) else {
        return;
    };
    // root's process: refused, before anything is written.
    let mut roots = Command::new("sleep").arg("30").spawn().unwrap();
    let trace = d.path().join("root.dvt");
    let out = as_nobody(
        &bin,
        &[
            "record",
            "--backend",
            backend(),
            "-o",
            trace.to_str().unwrap(),
            "-p",
            &roots.id().to_string(),
        ],
        d.path(),
    )
    .output()
    .unwrap();
    let _ = roots.kill();
    let _ = roots.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{err}");
    assert!(!trace.exists(), "{err}");
    if backend() == "ebpf" {
        assert!(err.contains("needs the permission to ptrace it"), "{err}");
    }
    // Its own process: recorded until SIGINT. The cache directory is not used by a dejavu
    // that runs with capabilities its user lacks (the user could write it): nothing appears
    // in a cache directory the user owns and names (eBPF pass, where the binary is capped).
    let cache = d.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let mut mine = as_nobody(
        std::path::Path::new("/bin/sh"),
        &["-c", "while :; do ls / > /dev/null; sleep 0.1; done"],
        d.path(),
    )
    .spawn()
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let trace = d.path().join("mine.dvt");
    let dv = as_nobody(
        &bin,
        &[
            "record",
            "--backend",
            backend(),
            "-o",
            trace.to_str().unwrap(),
            "-p",
            &mine.id().to_string(),
        ],
        d.path(),
    )
    .env("DEJAVU_CACHE_DIR", &cache)
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    unsafe { libc::kill(dv.id() as i32, libc::SIGINT) };
    let out = dv.wait_with_output().unwrap();
    let _ = mine.kill();
    let _ = mine.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v = common::summary_json(&trace);
    assert!(
        v["syscalls"]["openat"]["calls"].as_u64().unwrap_or(0) > 0,
        "its ls runs are recorded: {v}"
    );
    let cached: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    if backend() == "ebpf" {
        // The capped binary: nothing, not even the names of code addresses.
        assert!(cached.is_empty(), "{cached:?}");
    } else {
        // Not capped (ptrace needs no capability): the user's own dejavu may keep the
        // names of code addresses in the user's own cache (no relocations: no eBPF).
        assert!(cached.iter().all(|n| n == "names"), "{cached:?}");
    }
}

#[test]
fn a_set_user_id_program_started_under_dejavu_is_not_recorded_for_a_user_who_could_not_ptrace_it() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let Some(bin) = capped_dejavu(d.path()) else {
        return;
    };
    // A set-user-ID root program that opens /etc/shadow (which only root can).
    let suid = d.path().join("reads_shadow");
    std::fs::copy(common::c_workload("reads_shadow"), &suid).unwrap();
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let trace = d.path().join("t.dvt");
    let out = as_nobody(
        &bin,
        &[
            "record",
            "--backend",
            backend(),
            "-o",
            trace.to_str().unwrap(),
            "--",
            suid.to_str().unwrap(),
        ],
        d.path(),
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let export = Command::new(common::dejavu())
        .args(["export", "--format", "jsonl"])
        .arg(&trace)
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&export.stdout);
    assert!(export.status.success());
    if backend() == "ebpf" {
        // It ran with its privileges (all 20 opens worked) and none of its calls is in the
        // trace of the user who could not have traced it; dejavu said so.
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(err.contains("not recorded"), "{err}");
        assert!(!events.contains("/etc/shadow"), "{err}");
    } else {
        // ptrace: the kernel does not honour set-user-ID for a traced process, so it runs
        // as the user, and its opens fail.
        assert_eq!(out.status.code(), Some(1), "{err}");
        let shadow: Vec<&str> = events
            .lines()
            .filter(|l| l.contains("\"path\":\"/etc/shadow\""))
            .collect();
        assert_eq!(shadow.len(), 20, "its 20 failed opens are recorded");
        assert!(
            shadow.iter().all(|l| l.contains("\"ret\":-13")),
            "each failed with EACCES: {shadow:?}"
        );
    }
}
