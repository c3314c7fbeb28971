//! `dejavu import strace`: a strace log becomes a trace with the same counts as a live
//! recording of the same program; lines it cannot parse are listed and counted as lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

#[test]
fn an_imported_strace_log_counts_like_a_live_recording() {
    require!("strace");
    let prog = common::c_workload("syscall_tour");
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let log = d.path().join("tour.strace");
    let st = Command::new("strace")
        .args(["-f", "-tt", "-T", "-y", "-o"])
        .arg(&log)
        .arg(&prog)
        .arg(&work)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let imported = d.path().join("imported.dvt");
    let out = Command::new(common::dejavu())
        .args(["import", "strace", "-o"])
        .arg(&imported)
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let live = d.path().join("live.dvt");
    let (st, err) = common::record_quiet(
        &live,
        &[prog.to_str().unwrap(), work.to_str().unwrap()],
        d.path(),
    );
    assert!(st.success(), "{err}");
    // The same program, the same calls: equal per-syscall counts (strace's stdout was
    // /dev/null and ours too, so even the write paths agree).
    assert_eq!(
        common::dejavu_counts(&imported),
        common::dejavu_counts(&live)
    );
    let v = common::summary_json(&imported);
    assert_eq!(v["backend"], "strace-import");
    assert_eq!(
        v["processes"].as_array().unwrap().len(),
        2,
        "the tour forks one child"
    );
}

#[test]
fn unparsable_lines_are_listed_with_line_numbers_and_counted_as_lost() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("x.strace");
    std::fs::write(
        &log,
        "100 12:00:00.000001 openat(AT_FDCWD</tmp>, \"a\", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000010>\n\
         this is not strace output\n\
         100 12:00:00.000050 stat(\"/tmp\", {st_mode=S_IFDIR|01777, st_size=4096, ...}) = 0 <0.000005>\n\
         100 12:00:00.000090 +++ exited with 0 +++\n",
    )
    .unwrap();
    let trace = d.path().join("x.dvt");
    let out = Command::new(common::dejavu())
        .args(["import", "strace", "-o"])
        .arg(&trace)
        .arg(&log)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("x.strace:2:"), "{err}");
    let v = common::summary_json(&trace);
    assert_eq!(v["lost_events"].as_u64(), Some(1));
    assert_eq!(v["syscalls"]["openat"]["errors"].as_u64(), Some(1));
    assert_eq!(
        v["paths"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["path"] == "/tmp/a")
            .count(),
        1
    );
}

#[test]
fn a_missing_log_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(common::dejavu())
        .args(["import", "strace", "-o"])
        .arg(d.path().join("x.dvt"))
        .arg("/nonexistent.strace")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.strace"));
}
