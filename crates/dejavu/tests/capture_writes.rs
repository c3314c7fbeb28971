//! What the capture backends record of writes and mappings, on a real program
//! (tests/workloads/c/writes.c) under whichever backend `DEJAVU_BACKEND` picks
//! (scripts/test runs this once with ptrace, once with eBPF): every write's fingerprint,
//! the payload rule (standard streams whatever they are, log files, not data files),
//! `--no-payload`, and file-backed mmap without anonymous memory. Counts and bytes only,
//! never times.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use dejavu_trace::mask::fingerprint;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A fresh directory, canonical (as the traced program sees its paths).
fn workdir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().canonicalize().unwrap();
    (d, p)
}

/// `dejavu record FLAGS -o DIR/t.dvt -- writes ARGS` with the program's stderr going to
/// `stderr` (a regular file) when given; returns the trace.
fn record(dir: &Path, flags: &[&str], args: &[&str], stderr: Option<std::fs::File>) -> PathBuf {
    let prog = common::c_workload("writes");
    let trace = dir.join("t.dvt");
    let out = Command::new(common::dejavu())
        .arg("record")
        .args(["--stacks", "off"])
        .args(flags)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr.map_or(Stdio::null(), Stdio::from))
        .status()
        .unwrap();
    assert!(out.success(), "dejavu record {args:?}: {out}");
    trace
}

/// The syscall lines of `sys` (any of them) on `path`.
fn calls_on<'a>(lines: &'a [Value], sys: &[&str], path: &Path) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| {
            l["type"] == "syscall"
                && sys.iter().any(|s| l["sys"] == *s)
                && l["path"] == path.to_str().unwrap()
        })
        .collect()
}

/// A call's fingerprint, which the export prints as 16 hex digits.
fn fp(call: &Value) -> Option<u64> {
    let s = call["fingerprint"].as_str()?;
    assert_eq!(s.len(), 16, "{call}");
    Some(u64::from_str_radix(s, 16).unwrap())
}

const WARNING: &str = "warning: disk almost full\n";

#[test]
fn the_same_line_to_stderr_redirected_to_a_file_has_a_fingerprint_and_its_payload_every_time() {
    let (_d, dir) = workdir();
    let err = dir.join("run.txt");
    let trace = record(
        &dir,
        &[],
        &["same", "50"],
        Some(std::fs::File::create(&err).unwrap()),
    );
    let lines = common::export(&trace);
    let w = calls_on(&lines, &["write"], &err);
    assert_eq!(w.len(), 50, "{w:#?}");
    for c in &w {
        assert_eq!(c["fd"], 2);
        // Descriptor 2 keeps its bytes although it is a regular file, not a log by name.
        assert_eq!(c["payload"], WARNING, "{c}");
        assert_eq!(fp(c), Some(fingerprint(WARNING.as_bytes())), "{c}");
    }
    assert!(dejavu_trace::mask::is_message(fp(w[0]).unwrap()));
    // The program's stderr is untouched. (dejavu's own word on the backend it chose, with
    // `--backend auto`, goes to the same file before the program starts.)
    let text = std::fs::read_to_string(&err).unwrap();
    let ours = text
        .lines()
        .take_while(|l| l.starts_with("dejavu: "))
        .count();
    let theirs: String = text.lines().skip(ours).map(|l| format!("{l}\n")).collect();
    assert_eq!(theirs, WARNING.repeat(50), "{text}");
}

#[test]
fn a_data_file_gets_fingerprints_without_payloads_and_a_log_file_keeps_them() {
    let (_d, dir) = workdir();
    let data = dir.join("table.csv");
    let trace = record(&dir, &[], &["data", data.to_str().unwrap()], None);
    let lines = common::export(&trace);
    let w = calls_on(&lines, &["write"], &data);
    assert_eq!(w.len(), 1, "{w:#?}");
    assert_eq!(fp(w[0]), Some(fingerprint(b"row 1,2,3\n")));
    assert!(w[0].get("payload").is_none(), "{}", w[0]);

    // The same write to a file named like a log.
    let log = dir.join("app.log");
    let trace = record(&dir, &[], &["data", log.to_str().unwrap()], None);
    let lines = common::export(&trace);
    let w = calls_on(&lines, &["write"], &log);
    assert_eq!(w.len(), 1, "{w:#?}");
    assert_eq!(fp(w[0]), Some(fingerprint(b"row 1,2,3\n")));
    assert_eq!(w[0]["payload"], "row 1,2,3\n");
}

#[test]
fn fingerprints_tell_lines_apart_but_not_numbers() {
    let (_d, dir) = workdir();
    let file = dir.join("requests.txt");
    let trace = record(&dir, &[], &["lines", file.to_str().unwrap()], None);
    let lines = common::export(&trace);
    let w = calls_on(
        &lines,
        &["write", "writev", "pwrite64", "pwritev", "pwritev2"],
        &file,
    );
    let sys: Vec<&str> = w.iter().map(|c| c["sys"].as_str().unwrap()).collect();
    assert_eq!(w.len(), 26, "{sys:?}");
    let ok = fingerprint(b"request 1 ok\n");
    let fps: Vec<u64> = w.iter().map(|c| fp(c).expect("a fingerprint")).collect();
    // request 1..20 ok: one template.
    assert!(fps[..20].iter().all(|&f| f == ok), "{fps:x?}");
    // request 7 failed: another line.
    assert_eq!(fps[20], fingerprint(b"request 7 failed\n"));
    assert_ne!(fps[20], ok);
    // The vectored and positioned writes of the same template, from all their buffers.
    assert_eq!(sys[21..24], ["writev", "pwrite64", sys[23]]);
    assert!(sys[23].starts_with("pwritev"), "{sys:?}");
    assert_eq!(fps[21..24], [ok, ok, ok]);
    // Two 1000-byte writes that differ after their first 256 bytes: the same fingerprint,
    // that of their first 256 bytes.
    let mut big = vec![b'x'; 1000];
    big[..14].copy_from_slice(b"block of text ");
    assert_eq!(fps[24], fingerprint(&big[..256]));
    assert_eq!(fps[24], fps[25]);
    // Not a log, not a standard stream: no bytes kept.
    assert!(w.iter().all(|c| c.get("payload").is_none()), "{w:#?}");
    assert_eq!(w[24]["ret"], 1000);
}

#[test]
fn no_payload_keeps_the_fingerprints() {
    let (_d, dir) = workdir();
    let err = dir.join("run.txt");
    let trace = record(
        &dir,
        &["--no-payload"],
        &["same", "50"],
        Some(std::fs::File::create(&err).unwrap()),
    );
    let lines = common::export(&trace);
    assert_eq!(lines[0]["type"], "meta");
    assert_eq!(lines[0]["payload_bytes"], 0);
    let w = calls_on(&lines, &["write"], &err);
    assert_eq!(w.len(), 50);
    for c in &w {
        assert!(c.get("payload").is_none(), "{c}");
        assert_eq!(fp(c), Some(fingerprint(WARNING.as_bytes())), "{c}");
    }
    // Nothing anywhere keeps bytes written (execve's argv is not a write).
    assert!(lines
        .iter()
        .filter(|l| l["sys"].as_str().is_some_and(|s| s.contains("write")))
        .all(|l| l.get("payload").is_none()));
}

#[test]
fn a_mapped_file_is_recorded_with_its_path_and_anonymous_memory_is_not() {
    let (_d, dir) = workdir();
    let file = dir.join("mapped.bin");
    std::fs::write(&file, vec![7u8; 8192]).unwrap();
    let trace = record(&dir, &[], &["mmap", file.to_str().unwrap()], None);
    let lines = common::export(&trace);
    let m = calls_on(&lines, &["mmap"], &file);
    assert_eq!(m.len(), 1, "{m:#?}");
    let m = m[0];
    assert!(m["ret"].as_i64().unwrap() > 0, "{m}");
    assert_eq!(m["count"], 4096);
    assert_eq!(m["offset"], 0);
    assert_eq!(m["aux"], libc::PROT_READ);
    assert_eq!(m["flags"], libc::MAP_PRIVATE);
    assert!(m["fd"].as_i64().unwrap() >= 3, "{m}");
    let ev: Vec<&str> = m["ev"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(ev.contains(&"path_from_fd"), "{m}");
    // The identity of the open file, as for the other calls on the descriptor.
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
    assert_eq!(m["stat"]["ino"], ino, "{m}");
    // Anonymous memory (with descriptor -1, or with the file's descriptor, which the
    // kernel ignores) and the failed mapping of no descriptor are not recorded; every
    // mmap the trace has maps a file.
    let all: Vec<&Value> = lines.iter().filter(|l| l["sys"] == "mmap").collect();
    assert!(all.len() > 1, "the loader's mappings of libc are files too");
    for l in &all {
        assert_ne!(l["count"], 123 * 4096, "an anonymous mapping: {l}");
        assert_eq!(
            l["flags"].as_i64().unwrap_or(0) & libc::MAP_ANONYMOUS as i64,
            0,
            "{l}"
        );
        assert!(l["fd"].as_i64().is_some_and(|fd| fd >= 0), "{l}");
    }
}

#[test]
fn an_strace_log_with_s_256_imports_the_same_fingerprints_as_a_live_recording() {
    require!("strace");
    let (_d, dir) = workdir();
    let file = dir.join("requests.txt");
    let log = dir.join("w.strace");
    let prog = common::c_workload("writes");
    let st = Command::new("strace")
        .args(["-f", "-s", "256", "-y", "-o"])
        .arg(&log)
        .arg(&prog)
        .args(["lines", file.to_str().unwrap()])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let imported = dir.join("imported.dvt");
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
    let live = record(&dir, &[], &["lines", file.to_str().unwrap()], None);
    let writes = ["write", "writev", "pwrite64", "pwritev", "pwritev2"];
    let fps = |trace: &Path| -> Vec<Option<u64>> {
        calls_on(&common::export(trace), &writes, &file)
            .into_iter()
            .map(fp)
            .collect()
    };
    let (a, b) = (fps(&imported), fps(&live));
    assert_eq!(a.len(), 26);
    assert_eq!(a, b);
}
