//! Acceptance tests against real strace output: for a program, the per-syscall counts of
//! calls and errors that `strace -c` reports must equal the counts of syscall records in
//! the imported trace of that program's `strace -f -tt -T -y` (or `-ff`, `-yy -v -ttt`,
//! stderr `[pid N]` ...) log. Programs: a C program compiled here (tests/prog.c),
//! `ls -l /`, python3 and node. Each test is skipped, with the reason printed, when the
//! tool it needs (strace able to trace, gcc, python3, node) is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_strace::{import_files, ImportOptions, ImportReport};
use dejavu_trace::{ev, Record, Sys, TraceReader};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a test cannot run here, or None.
fn missing(tool: &str, args: &[&str]) -> Option<String> {
    match Command::new(tool)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("`{tool} {}` failed ({s})", args.join(" "))),
        Err(e) => Some(format!("`{tool}` is not available: {e}")),
    }
}

/// Says that the calling test skips, as crates/dejavu/tests/common's `skip` does: on
/// stderr, in `$DEJAVU_SKIP_LOG` for scripts/test's count, and as a failure on CI
/// (`CI=true`), where scripts/setup provides strace, gcc, python3 and node.
fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("SKIP: {why}");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test} would skip on CI ({why}), but scripts/setup provides it");
    }
    if let Some(log) = std::env::var_os("DEJAVU_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
        {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}

/// strace must exist and be allowed to trace (containers may forbid ptrace).
fn skip_without_strace() -> bool {
    if let Some(why) = missing("strace", &["-o", "/dev/null", "true"]) {
        skip(&why);
        return true;
    }
    false
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success() || out.status.code().is_some(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compiles tests/prog.c into `dir`; None (after printing why) without gcc.
fn build_prog(dir: &Path) -> Option<PathBuf> {
    if let Some(why) = missing("gcc", &["--version"]) {
        skip(&why);
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/prog.c");
    let exe = dir.join("prog");
    let out = Command::new("gcc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

/// Per-syscall (calls, errors) from a `-c`/`-C` summary table in `text`.
fn summary_counts(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("% time") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with('-') {
            continue;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), true) = (w.last(), w.len() >= 5) else {
            continue;
        };
        if *name == "total" {
            break;
        }
        let calls: u64 = w[3].parse().expect("calls column");
        let errors: u64 = if w.len() == 6 {
            w[4].parse().expect("errors column")
        } else {
            0
        };
        out.insert(name.to_string(), (calls, errors));
    }
    assert!(!out.is_empty(), "no summary table found in:\n{text}");
    out
}

/// Imports `logs` and counts syscall records per name: (calls, errors), leaving out the
/// calls that never returned (strace -c counts a call when it returns).
fn import_counts(logs: &[PathBuf]) -> (BTreeMap<String, (u64, u64)>, ImportReport) {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("t.dvt");
    let file = std::fs::File::create(&trace).expect("create trace");
    let report = import_files(logs, &ImportOptions::default(), file).expect("import");
    let mut r = TraceReader::open(&trace).expect("read back");
    assert_eq!(r.meta().backend, "strace-import");
    let mut counts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    while let Some(rec) = r.next_record().expect("record") {
        if let Record::Syscall(s) = rec {
            if s.ev & ev::UNFINISHED != 0 {
                continue;
            }
            let e = counts.entry(s.sys.name().to_string()).or_default();
            e.0 += 1;
            e.1 += s.is_error() as u64;
        }
    }
    assert!(r.end().is_some(), "the trace has no end block");
    (counts, report)
}

/// Asserts that both count maps agree on every syscall dejavu traces, and that the
/// comparison covered at least `min_calls` calls.
fn assert_same_counts(
    what: &str,
    expected: &BTreeMap<String, (u64, u64)>,
    got: &BTreeMap<String, (u64, u64)>,
    report: &ImportReport,
    min_calls: u64,
) {
    let mut diffs = Vec::new();
    let mut total = 0;
    for sys in Sys::ALL {
        let e = expected.get(sys.name()).copied().unwrap_or_default();
        let g = got.get(sys.name()).copied().unwrap_or_default();
        if *sys == Sys::Mmap {
            // strace -c counts every mmap; dejavu keeps file-backed ones (the dejavu
            // crate's import_cli test compares them exactly with a live recording).
            if g.0 > e.0 || g.1 > e.1 {
                diffs.push(format!("mmap: strace -c {e:?}, imported more: {g:?}"));
            }
            continue;
        }
        total += e.0;
        if e != g {
            diffs.push(format!(
                "{}: strace -c {:?}, imported {:?}",
                sys.name(),
                e,
                g
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "{what}: counts differ (calls, errors):\n{}\nunparsed: {:?}",
        diffs.join("\n"),
        report.unparsed.iter().take(10).collect::<Vec<_>>()
    );
    assert!(
        total >= min_calls,
        "{what}: only {total} traced calls compared"
    );
    assert!(
        report.unparsed.is_empty(),
        "{what}: unparsed lines: {:?}",
        report.unparsed
    );
}

/// `strace -f -c PROGRAM` in one run, `strace OPTIONS -o log PROGRAM` in another.
fn compare_separate_runs(
    what: &str,
    program: &[&str],
    workdir: &Path,
    strace_opts: &[&str],
    min_calls: u64,
    min_files: usize,
) {
    let sum = workdir.join("summary.txt");
    run(Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(&sum)
        .args(program)
        .stdout(Stdio::null()));
    let expected = summary_counts(&std::fs::read_to_string(&sum).expect("summary"));
    let log = workdir.join("log");
    run(Command::new("strace")
        .args(strace_opts)
        .arg("-o")
        .arg(&log)
        .args(program)
        .stdout(Stdio::null()));
    let logs: Vec<PathBuf> = if strace_opts.contains(&"-ff") {
        let mut v: Vec<PathBuf> = std::fs::read_dir(workdir)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("log."))
            })
            .collect();
        v.sort();
        assert!(v.len() >= min_files, "-ff wrote {} files", v.len());
        v
    } else {
        vec![log]
    };
    let (got, report) = import_counts(&logs);
    assert_same_counts(what, &expected, &got, &report, min_calls);
}

/// `strace -C OPTIONS` (summary and log in one run, so even programs whose calls vary
/// from run to run compare exactly); the summary at the end of the log is skipped by the
/// importer and read by the test.
fn compare_same_run(
    what: &str,
    program: &[&str],
    workdir: &Path,
    strace_opts: &[&str],
    min_calls: u64,
) {
    let log = workdir.join("log");
    run(Command::new("strace")
        .arg("-C")
        .args(strace_opts)
        .arg("-o")
        .arg(&log)
        .args(program)
        .stdout(Stdio::null()));
    let text = String::from_utf8_lossy(&std::fs::read(&log).expect("log")).into_owned();
    let expected = summary_counts(&text);
    let (got, report) = import_counts(&[log]);
    assert!(
        report.summary_lines > 0,
        "the summary table was not recognised"
    );
    assert_same_counts(what, &expected, &got, &report, min_calls);
}

#[test]
fn c_program_counts_match_strace_c() {
    if skip_without_strace() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(prog) = build_prog(dir.path()) else {
        return;
    };
    let work = dir.path().join("w1");
    std::fs::create_dir(&work).expect("mkdir");
    let prog = prog.to_str().expect("utf-8 path");
    let work_s = work.to_str().expect("utf-8 path");
    compare_separate_runs(
        "prog -f -tt -T -y",
        &[prog, work_s],
        &work,
        &["-f", "-tt", "-T", "-y"],
        100,
        1,
    );
}

#[test]
fn c_program_ff_counts_match_strace_c() {
    if skip_without_strace() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(prog) = build_prog(dir.path()) else {
        return;
    };
    let work = dir.path().join("w2");
    std::fs::create_dir(&work).expect("mkdir");
    let prog = prog.to_str().expect("utf-8 path");
    let work_s = work.to_str().expect("utf-8 path");
    compare_separate_runs(
        "prog -ff -tt -T -y",
        &[prog, work_s],
        &work,
        &["-ff", "-tt", "-T", "-y"],
        100,
        4,
    );
}

#[test]
fn c_program_other_formats_match_strace_c() {
    if skip_without_strace() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(prog) = build_prog(dir.path()) else {
        return;
    };
    let prog = prog.to_str().expect("utf-8 path");
    let variants: &[(&str, &[&str])] = &[
        ("-yy -v -ttt -xx", &["-f", "-ttt", "-T", "-yy", "-v", "-xx"]),
        ("no -y, -t, -x", &["-f", "-t", "-x"]),
        ("no timestamps", &["-f", "-s", "4"]),
        ("-r -T -y", &["-f", "-r", "-T", "-y"]),
        ("-X raw", &["-f", "-X", "raw", "-tt", "-y"]),
        ("-X verbose", &["-f", "-X", "verbose", "-tt", "-y"]),
    ];
    let mut variants = variants.to_vec();
    // -Y (pids with their command names) is new in strace 5.x.
    if missing("strace", &["-Y", "-o", "/dev/null", "true"]).is_none() {
        variants.push(("-Y", &["-f", "-Y", "-tt", "-T", "-y"]));
    }
    // -k needs a strace built with stack tracing.
    if missing("strace", &["-k", "-o", "/dev/null", "true"]).is_none() {
        variants.push(("-n -i -k", &["-f", "-n", "-i", "-k", "-tt", "-y"]));
    } else {
        variants.push(("-n -i", &["-f", "-n", "-i", "-tt", "-y"]));
    }
    for (i, (what, opts)) in variants.iter().enumerate() {
        let work = dir.path().join(format!("v{i}"));
        std::fs::create_dir(&work).expect("mkdir");
        let work_s = work.to_str().expect("utf-8 path");
        // "signals" adds an interrupted, restarted read (ERESTARTSYS), which is timing
        // dependent: fine in a same-run comparison.
        compare_same_run(what, &[prog, work_s, "signals"], &work, opts, 100);
    }
}

#[test]
fn stderr_pid_prefix_form_matches_strace_c() {
    if skip_without_strace() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(prog) = build_prog(dir.path()) else {
        return;
    };
    let work = dir.path().join("w");
    std::fs::create_dir(&work).expect("mkdir");
    // Without -o, strace writes to stderr and marks lines `[pid N]` only while several
    // tasks are traced.
    let out = Command::new("strace")
        .args(["-f", "-C", "-tt", "-T", "-y"])
        .arg(&prog)
        .arg(&work)
        .stdout(Stdio::null())
        .output()
        .expect("strace");
    let log = dir.path().join("stderr.log");
    std::fs::write(&log, &out.stderr).expect("write log");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        text.contains("[pid "),
        "no [pid N] prefixes in stderr output"
    );
    let expected = summary_counts(&text);
    let (got, report) = import_counts(&[log]);
    assert_same_counts("stderr form", &expected, &got, &report, 100);
}

#[test]
fn ls_counts_match_strace_c() {
    if skip_without_strace() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    compare_separate_runs(
        "ls -l / -f",
        &["ls", "-l", "/"],
        dir.path(),
        &["-f", "-tt", "-T", "-y"],
        20,
        1,
    );
    let dir = tempfile::tempdir().expect("tempdir");
    compare_separate_runs(
        "ls -l / -ff",
        &["ls", "-l", "/"],
        dir.path(),
        &["-ff", "-tt", "-T", "-y"],
        20,
        1,
    );
}

#[test]
fn python_counts_match_strace_c() {
    if skip_without_strace() {
        return;
    }
    if let Some(why) = missing("python3", &["-c", "pass"]) {
        skip(&why);
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = ["python3", "-c", "import os; os.stat(\"/\")"];
    compare_same_run("python3", &prog, dir.path(), &["-f", "-tt", "-T", "-y"], 20);
}

#[test]
fn node_counts_match_strace_c() {
    if skip_without_strace() {
        return;
    }
    if let Some(why) = missing("node", &["-e", "0"]) {
        skip(&why);
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = ["node", "-e", "require(\"fs\").statSync(\"/\")"];
    compare_same_run("node", &prog, dir.path(), &["-f", "-tt", "-T", "-y"], 20);
}

/// Field-level check on real output: what the C program does (tests/prog.c) and what the
/// file system says must come out of the imported trace.
#[test]
fn c_program_fields_match_the_program_and_the_file_system() {
    use dejavu_trace::{ExitStatus, StrId, Syscall};
    use std::os::unix::fs::MetadataExt;
    if skip_without_strace() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(prog) = build_prog(dir.path()) else {
        return;
    };
    let work = dir.path().join("w").to_path_buf();
    std::fs::create_dir(&work).expect("mkdir");
    let work = work.canonicalize().expect("canonical");
    let w = work.to_str().expect("utf-8 path").to_string();
    let log = dir.path().join("log");
    run(Command::new("strace")
        .args(["-f", "-tt", "-T", "-yy", "-v", "-o"])
        .arg(&log)
        .arg(&prog)
        .arg(&work)
        .stdout(Stdio::null()));
    let trace = dir.path().join("t.dvt");
    let file = std::fs::File::create(&trace).expect("create");
    let report = import_files(&[log], &ImportOptions::default(), file).expect("import");
    assert!(report.unparsed.is_empty(), "{:?}", report.unparsed);
    let mut r = TraceReader::open(&trace).expect("open");
    let mut recs = Vec::new();
    while let Some(rec) = r.next_record().expect("record") {
        recs.push(rec);
    }
    let text = |id: Option<StrId>| id.map(|i| r.strings().lossy(i).into_owned());
    let calls: Vec<Syscall> = recs
        .iter()
        .filter_map(|x| {
            if let Record::Syscall(s) = x {
                Some(*s)
            } else {
                None
            }
        })
        .collect();
    let with = |sys: Sys, path: &str| -> Vec<Syscall> {
        calls
            .iter()
            .filter(|s| s.sys == sys && text(s.path).as_deref() == Some(path))
            .copied()
            .collect()
    };

    // Three stats of /etc/passwd (glibc's stat is newfstatat), answers equal to lstat(2).
    let md = std::fs::metadata("/etc/passwd").expect("metadata");
    let st = with(Sys::Newfstatat, "/etc/passwd");
    assert!(st.len() >= 3, "{st:?}");
    let answer = r.stat(st[0].stat.expect("stat answer"));
    assert_eq!(
        (answer.dev, answer.ino, answer.size),
        (md.dev(), md.ino(), md.size() as i64)
    );
    assert_eq!(
        (answer.mode, answer.nlink, answer.uid),
        (md.mode(), md.nlink(), md.uid())
    );
    assert_eq!(
        answer.mtime_ns,
        md.mtime() * 1_000_000_000 + md.mtime_nsec()
    );
    assert_eq!(st[0].ev & ev::STAT_PARTIAL, 0);

    // Relative paths resolved against the working directory the program chdir'd to.
    assert_eq!(
        with(Sys::Newfstatat, &format!("{w}/does-not-exist"))[0].ret,
        -2
    );
    assert_eq!(with(Sys::Newfstatat, &format!("{w}/sub/../sub/x")).len(), 1);
    assert_eq!(with(Sys::Access, &format!("{w}/missing"))[0].ret, -2);
    let o = with(Sys::Openat, &format!("{w}/sub/file.txt"));
    assert_eq!((o[0].flags, o[0].mode), (0o1 | 0o100 | 0o1000, 0o644));
    let mk = with(Sys::Mkdir, &format!("{w}/sub"));
    assert_eq!(mk.iter().map(|s| s.ret).collect::<Vec<_>>(), vec![0, -17]);
    let rl = with(Sys::Readlink, &format!("{w}/sub/link"));
    assert_eq!(text(rl[0].path2).as_deref(), Some("file.txt"));
    // After fchdir into sub.
    assert!(!with(Sys::Newfstatat, &format!("{w}/sub/file.txt")).is_empty());

    // Payloads: /dev/null and the O_APPEND log, not the regular file.
    // stdout is /dev/null too: the program's final "done\n" goes there.
    let null: Vec<Option<String>> = with(Sys::Write, "/dev/null")
        .iter()
        .map(|s| text(s.payload))
        .collect();
    let discarded = Some("discarded\n".to_string());
    assert_eq!(
        null,
        vec![
            discarded.clone(),
            discarded.clone(),
            discarded.clone(),
            discarded,
            Some("done\n".into())
        ]
    );
    let logw = with(Sys::Write, &format!("{w}/sub/log"));
    assert_eq!(logw.len(), 3);
    assert!(logw
        .iter()
        .all(|s| text(s.payload).as_deref() == Some("log line \"quoted\"\t\\\u{1}\n")));
    assert!(with(Sys::Write, &format!("{w}/sub/file.txt"))
        .iter()
        .all(|s| s.payload.is_none()));

    // The process tree: one thread, three children, one exec.
    let spawns: Vec<_> = recs
        .iter()
        .filter_map(|x| {
            if let Record::Spawn(s) = x {
                Some(*s)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(spawns.iter().filter(|s| s.is_thread()).count(), 1);
    assert_eq!(spawns.iter().filter(|s| !s.is_thread()).count(), 3);
    let execs: Vec<_> = recs
        .iter()
        .filter_map(|x| {
            if let Record::Exec(e) = x {
                Some(*e)
            } else {
                None
            }
        })
        .collect();
    let child_exec = execs
        .iter()
        .find(|e| r.strings().get(e.exe) == b"/bin/true")
        .expect("exec of /bin/true");
    assert_eq!(r.strings().get(child_exec.argv), b"true\0--dejavu-arg");
    let exits: Vec<ExitStatus> = recs
        .iter()
        .filter_map(|x| {
            if let Record::Exit(e) = x {
                Some(e.status)
            } else {
                None
            }
        })
        .collect();
    assert!(exits.contains(&ExitStatus::Code(3)));
    assert!(exits.contains(&ExitStatus::Signal {
        signal: 9,
        core: false
    }));
    assert_eq!(r.end().expect("end").exit, Some(ExitStatus::Code(0)));
}
