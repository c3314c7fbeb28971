//! The trace's Mapping records (format 2.1), written by the backend of the test pass
//! ($DEJAVU_BACKEND: ptrace or ebpf): the program, ld.so and libc are mapped with the build
//! ids `readelf -n` reads from those files; a library loaded with dlopen is mapped, and
//! unmapped after its dlclose; a process that exits at once still has its mappings; a
//! forked child inherits them without new records; `--stacks off` writes none.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

#[macro_use]
mod common;

use common::{c_workload, dejavu, repo};
use dejavu_trace::{Mapping, MappingKind, Record, TraceReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A Mapping record with its strings resolved.
#[derive(Debug, Clone)]
struct M {
    pid: u32,
    kind: MappingKind,
    start: u64,
    end: u64,
    path: Option<String>,
    build_id: Option<String>,
    file: Option<(u64, u64)>,
}

struct Trace {
    /// Every record, mappings resolved, in order (other records as their Debug text's
    /// first word).
    seq: Vec<Result<M, Record>>,
    /// (pid, program) of each exec.
    execs: Vec<(u32, String)>,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Trace {
    fn maps(&self) -> Vec<&M> {
        self.seq.iter().filter_map(|r| r.as_ref().ok()).collect()
    }

    /// The pid of the (last) exec of `exe`.
    fn exec_pid(&self, exe: &Path) -> u32 {
        let want = exe.to_string_lossy();
        self.execs
            .iter()
            .filter(|(_, e)| *e == want)
            .map(|(pid, _)| *pid)
            .next_back()
            .unwrap_or_else(|| panic!("an exec of {want} in {:?}", self.execs))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `readelf -n FILE`'s build id.
fn readelf_build_id(file: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(file)
        .output()
        .expect("readelf runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build id in {}: {text}", file.display()))
        .trim()
        .to_string()
}

fn record(cmd: &[&str], stacks: bool) -> Trace {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.dvt");
    let mut c = Command::new(dejavu());
    c.arg("record").arg("-o").arg(&path);
    if !stacks {
        c.args(["--stacks", "off"]);
    }
    let out = c
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .output()
        .expect("dejavu runs");
    assert!(
        out.status.success(),
        "dejavu record {cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(r.version(), (2, 1));
    let mut raw = Vec::new();
    while let Some(rec) = r.next_record().expect("trace reads") {
        raw.push(rec);
    }
    let text = |id: Option<dejavu_trace::StrId>| id.map(|i| r.str(i).to_vec());
    let execs = raw
        .iter()
        .filter_map(|x| match x {
            Record::Exec(e) => Some((e.pid, String::from_utf8_lossy(r.str(e.exe)).into_owned())),
            _ => None,
        })
        .collect();
    let seq = raw
        .into_iter()
        .map(|rec| match rec {
            Record::Mapping(m) => {
                let Mapping {
                    pid,
                    kind,
                    start,
                    path,
                    file,
                    build_id,
                    ..
                } = m;
                Ok(M {
                    pid,
                    kind,
                    start,
                    end: m.end(),
                    path: text(path).map(|p| String::from_utf8_lossy(&p).into_owned()),
                    build_id: text(build_id).map(|b| hex(&b)),
                    file,
                })
            }
            other => Err(other),
        })
        .collect();
    Trace {
        seq,
        execs,
        path,
        _dir: dir,
    }
}

/// The real path of the libc the fixture runs with (as /proc names it).
fn libc_path(maps: &[&M]) -> String {
    maps.iter()
        .filter_map(|m| m.path.as_deref())
        .find(|p| p.contains("/libc.so"))
        .unwrap_or_else(|| panic!("libc among {maps:#?}"))
        .to_string()
}

/// Each of the process's Map records names a file with its identity, and none repeats
/// (no two equal maps of one process without an exec or unmap between them).
fn check_common(t: &Trace, pid: u32) {
    let mut live: Vec<&M> = Vec::new();
    for x in &t.seq {
        match x {
            Ok(m) if m.pid == pid && m.kind == MappingKind::Map => {
                assert!(m.file.is_some(), "{m:?}");
                assert!(m.end > m.start && m.start % 4096 == 0, "{m:?}");
                assert!(
                    !live
                        .iter()
                        .any(|l| l.start == m.start && l.end == m.end && l.path == m.path),
                    "written twice: {m:?}"
                );
                live.push(m);
            }
            Ok(m) if m.pid == pid => live.retain(|l| l.end <= m.start || l.start >= m.end),
            Err(Record::Exec(e)) if e.pid == pid => live.clear(),
            _ => {}
        }
    }
}

#[test]
fn the_program_libc_and_a_dlopened_library_are_mapped_with_their_build_ids_and_unmapped() {
    let exe = c_workload("mappings");
    let lib = tempfile::tempdir().unwrap();
    let so = lib.path().join("libplugin.so");
    let st = Command::new("gcc")
        .args(["-g", "-O2", "-shared", "-fPIC", "-Wl,--build-id", "-o"])
        .arg(&so)
        .arg(repo().join("tests/workloads/stacks/plugin.c"))
        .status()
        .unwrap();
    assert!(st.success());
    let so = so.canonicalize().unwrap();
    let target = repo().join("Cargo.toml");
    let t = record(
        &[
            exe.to_str().unwrap(),
            so.to_str().unwrap(),
            target.to_str().unwrap(),
        ],
        true,
    );
    let exe = exe.canonicalize().unwrap();
    let pid = t.exec_pid(&exe);
    let maps: Vec<&M> = t.maps().into_iter().filter(|m| m.pid == pid).collect();
    let of = |path: &str| -> Vec<&M> {
        maps.iter()
            .copied()
            .filter(|m| m.kind == MappingKind::Map && m.path.as_deref() == Some(path))
            .collect()
    };
    // The program, libc and the library, each with the build id readelf reads.
    let libc = libc_path(&maps);
    for file in [
        exe.to_string_lossy().into_owned(),
        libc.clone(),
        so.to_string_lossy().into_owned(),
    ] {
        let m = of(&file);
        assert!(!m.is_empty(), "{file} mapped: {maps:#?}");
        let want = readelf_build_id(Path::new(&file));
        for m in m {
            assert_eq!(m.build_id.as_deref(), Some(&*want), "{file}: {m:?}");
        }
    }
    assert!(
        maps.iter()
            .any(|m| m.path.as_deref().is_some_and(|p| p.contains("/ld-linux"))),
        "the interpreter: {maps:#?}"
    );
    // The program's code is mapped right after its exec, before any call of it.
    let exec_at = t
        .seq
        .iter()
        .position(|x| matches!(x, Err(Record::Exec(e)) if e.pid == pid))
        .unwrap();
    assert!(
        matches!(&t.seq[exec_at + 1], Ok(m) if m.pid == pid && m.path.as_deref() == Some(&*exe.to_string_lossy())),
        "{:?}",
        &t.seq[exec_at..exec_at + 3]
    );
    // dlclose unmapped the library's code: an unmap covering it, after its map.
    let so_map = of(&so.to_string_lossy())[0].clone();
    let map_at = t
        .seq
        .iter()
        .position(|x| matches!(x, Ok(m) if m.pid == pid && m.start == so_map.start && m.kind == MappingKind::Map))
        .unwrap();
    let unmap = t.seq[map_at..]
        .iter()
        .filter_map(|x| x.as_ref().ok())
        .find(|m| {
            m.pid == pid
                && m.kind == MappingKind::Unmap
                && m.start <= so_map.start
                && m.end >= so_map.end
        });
    assert!(unmap.is_some(), "the library unmapped: {maps:#?}");
    check_common(&t, pid);

    // Surfaced: the JSON Lines export and the summary.
    let out = Command::new(dejavu())
        .args(["export", "--format", "jsonl"])
        .arg(&t.path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let want = readelf_build_id(Path::new(&libc));
    assert!(
        text.lines().any(|l| l.starts_with(r#"{"type":"mapping""#)
            && l.contains(&format!(r#""build_id":"{want}""#))),
        "{text}"
    );
    assert!(text.lines().any(|l| l.contains(r#""kind":"unmap""#)));
    let sum = common::summary_json(&t.path);
    assert!(sum["mappings"]["mapped"].as_u64().unwrap() >= 4, "{sum}");
    assert!(sum["mappings"]["unmapped"].as_u64().unwrap() >= 1, "{sum}");
}

#[test]
fn a_process_that_exits_at_once_still_has_its_mappings_and_a_forked_child_adds_none() {
    let exe = c_workload("mappings");
    let t = record(&[exe.to_str().unwrap()], true);
    let exe = exe.canonicalize().unwrap();
    let pid = t.exec_pid(&exe);
    let maps: Vec<&M> = t.maps().into_iter().filter(|m| m.pid == pid).collect();
    let libc = libc_path(&maps);
    assert!(maps
        .iter()
        .any(|m| m.path.as_deref() == Some(&*exe.to_string_lossy()) && m.build_id.is_some()));
    assert!(maps
        .iter()
        .any(|m| m.build_id.as_deref() == Some(&*readelf_build_id(Path::new(&libc)))));
    check_common(&t, pid);

    // A fork copies its parent's mappings: the child (no exec) has no records of its own.
    let t = record(&[exe.to_str().unwrap(), "fork"], true);
    let pid = t.exec_pid(&exe);
    let child = t
        .seq
        .iter()
        .find_map(|x| match x {
            Err(Record::Spawn(s)) if s.parent_pid == pid && s.pid != pid => Some(s.pid),
            _ => None,
        })
        .expect("the child");
    assert!(t.maps().iter().any(|m| m.pid == pid));
    assert!(!t.maps().iter().any(|m| m.pid == child), "{:#?}", t.maps());
}

#[test]
fn without_native_stacks_no_mappings_are_written() {
    let exe = c_workload("mappings");
    let t = record(&[exe.to_str().unwrap()], false);
    assert!(t.maps().is_empty(), "{:#?}", t.maps());
}

/// A stripped program's frames are module+offset only: the pprof profile's mapping table
/// names each module with the build id its Mapping records carry, which `go tool pprof`
/// shows (and a symbolizer would fetch the build's debug info by).
#[test]
fn a_pprof_profile_names_each_module_with_its_recorded_build_id() {
    require!("go");
    let exe = c_workload("mappings");
    let d = tempfile::tempdir().unwrap();
    let stripped = d.path().canonicalize().unwrap().join("mappings-stripped");
    let st = Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success());
    let so = d.path().canonicalize().unwrap().join("libplugin.so");
    let st = Command::new("gcc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(repo().join("tests/workloads/stacks/plugin.c"))
        .status()
        .unwrap();
    assert!(st.success());
    let target = repo().join("Cargo.toml");
    let t = record(
        &[
            stripped.to_str().unwrap(),
            so.to_str().unwrap(),
            target.to_str().unwrap(),
        ],
        true,
    );
    let profile = d.path().join("p.pb.gz");
    let out = Command::new(dejavu())
        .args(["report", "--format", "pprof"])
        .arg(&t.path)
        .stdout(std::fs::File::create(&profile).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(&profile)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mappings = &text[text.find("Mappings").expect("a mapping table")..];
    let line_of = |p: &Path| {
        let p = p.to_string_lossy();
        mappings
            .lines()
            .find(|l| l.split_whitespace().nth(2) == Some(&*p))
            .unwrap_or_else(|| panic!("{p} in {mappings}"))
            .to_string()
    };
    // The stripped program is the main binary (first), with its build id and no names.
    let main = line_of(&stripped);
    assert!(main.starts_with("1: "), "{mappings}");
    assert!(main.contains(&readelf_build_id(&stripped)), "{main}");
    assert!(!main.contains("[FN]"), "{main}");
    let libc = libc_path(&t.maps());
    assert!(line_of(Path::new(&libc)).contains(&readelf_build_id(Path::new(&libc))));
}
