//! The agents without gaps (docs/agents.md): the calls that happen outside the wrapped fs
//! and os functions still name the program's line. A process started per event (Node.js
//! child_process, Python subprocess and os.system: the child's exec is the spawn's line,
//! which the repeated-exec finding names), a warning written per message (console.warn to
//! a pipe or to a file, logging to a file and to stderr), and a call made by a library
//! several frames deep (the program's line further out). Under the backend
//! `DEJAVU_BACKEND` picks: run these with both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use dejavu_trace::{FrameKind, Record, Sys, TraceReader};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn workload(name: &str) -> PathBuf {
    common::repo().join("tests/workloads/agents").join(name)
}

/// The 1-based line of `file` holding `@site NAME ` and the function it names.
fn site(file: &Path, name: &str) -> (u32, String) {
    let text = std::fs::read_to_string(file).unwrap();
    let marker = format!("@site {name} ");
    let (i, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(&marker))
        .unwrap_or_else(|| panic!("{marker} not in {}", file.display()));
    let function = line.split(&marker).nth(1).unwrap().trim().to_string();
    (i as u32 + 1, function)
}

/// A command with the environment the agents must load into (none inherited from the
/// test's own environment).
fn dejavu(args: &[&str], cmd: &[&str], dir: &Path) -> Command {
    let mut c = Command::new(common::dejavu());
    c.args(args)
        .arg("--")
        .args(cmd)
        .current_dir(dir)
        .env_remove("NODE_OPTIONS")
        .env_remove("PYTHONPATH")
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// `dejavu run --json` of `cmd` in `dir`, its stderr a pipe; returns the report and what
/// the program wrote to stderr.
fn run_report(cmd: &[&str], dir: &Path) -> (Value, String) {
    run_report_with(cmd, dir, |_| {})
}

/// `run_report`, with the command set up further by `setup` (its stdout, its environment).
fn run_report_with(cmd: &[&str], dir: &Path, setup: impl FnOnce(&mut Command)) -> (Value, String) {
    let report = dir.join("report.json");
    let mut c = dejavu(
        &[
            "run",
            "--json",
            "--min-calls",
            "5",
            "--report-file",
            report.to_str().unwrap(),
        ],
        cmd,
        dir,
    );
    setup(&mut c);
    let out = c.stderr(Stdio::piped()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{cmd:?}: {stderr}");
    let v = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (v, stderr)
}

/// The findings of `detector` in `report`.
fn findings<'a>(report: &'a Value, detector: &str) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["detector"] == detector)
        .collect()
}

/// Asserts that call site `c` (JSON) is the `@site name` line of `src` and its function.
fn assert_callsite(c: &Value, src: &Path, name: &str) {
    let (line, function) = site(src, name);
    assert_eq!(c["file"].as_str(), src.to_str(), "{name}: {c:#}");
    assert_eq!(c["line"].as_u64(), Some(line as u64), "{name}: {c:#}");
    assert_eq!(
        c["function"].as_str(),
        Some(function.as_str()),
        "{name}: {c:#}"
    );
}

/// The repeated-exec finding of program `path` whose command (as the finding shows it)
/// ends with `args`.
fn exec_finding<'a>(report: &'a Value, path: &str, args: &str) -> &'a Value {
    findings(report, "repeated-exec")
        .into_iter()
        .find(|f| f["paths"][0] == path && f["example"].as_str().unwrap().ends_with(args))
        .unwrap_or_else(|| panic!("no repeated-exec finding of {path} {args:?}: {report:#}"))
}

/// The repeated-lookup finding of `path` in `report` (`stderr`: the run's, for the
/// message when there is none).
fn lookup_of<'a>(report: &'a Value, path: &Path, stderr: &str) -> &'a Value {
    findings(report, "repeated-lookup")
        .into_iter()
        .find(|f| f["paths"][0] == path.to_str().unwrap())
        .unwrap_or_else(|| {
            panic!(
                "no repeated-lookup of {path:?}: {:#} {stderr}",
                report["findings"]
            )
        })
}

/// The repeated-exec findings of a program run again and again (not of the PATH searches:
/// the fixed fixtures still start two commands by name, whose PATH searches repeat).
fn repeated_programs(report: &Value) -> Vec<&Value> {
    findings(report, "repeated-exec")
        .into_iter()
        .filter(|f| !f["paths"][0].as_str().unwrap().contains(" in "))
        .collect()
}

/// The Python interpreter itself (not a version manager's shim, whose own processes
/// would only add findings of their own).
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Where `program` is on PATH (the first executable file of that name).
fn which(program: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
        .display()
        .to_string()
}

fn scratch() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().canonicalize().unwrap();
    (d, p)
}

// ---- a process per event

#[test]
fn node_a_process_per_event_names_the_child_process_line() {
    require!("node");
    require!("true");
    let (_d, dir) = scratch();
    let src = workload("spawns_dirty.js");
    let (r, _) = run_report(&["node", src.to_str().unwrap()], &dir);
    // execFileSync and spawn: the child's exec is the call's, on the main thread or not.
    let true_ = which("true");
    for (args, name) in [("true sync", "sync"), ("true async", "async")] {
        let f = exec_finding(&r, &true_, args);
        assert_eq!(f["redundant_calls"].as_u64(), Some(11), "{f:#}");
        assert_callsite(&f["callsites"][0], &src, name);
        assert_eq!(f["callsites"][0]["redundant_calls"].as_u64(), Some(11));
    }
    // exec(): /bin/sh -c '/bin/true shell', and the command the shell runs.
    for (path, args) in [
        ("/bin/sh", " -c /bin/true shell"),
        ("/bin/true", "/bin/true shell"),
    ] {
        let f = exec_finding(&r, path, args);
        assert_callsite(&f["callsites"][0], &src, "shell");
    }
    // The PATH search each spawn makes is the spawning line's too.
    let probes: Vec<&Value> = findings(&r, "repeated-exec")
        .into_iter()
        .filter(|f| f["paths"][0].as_str().unwrap().starts_with("true in "))
        .collect();
    for f in probes {
        for c in f["callsites"].as_array().unwrap() {
            assert_eq!(c["file"].as_str(), src.to_str(), "{c:#}");
        }
    }
    let (clean, _) = run_report(
        &["node", workload("spawns_clean.js").to_str().unwrap()],
        &dir,
    );
    assert!(
        repeated_programs(&clean).is_empty(),
        "{:#}",
        clean["findings"]
    );
}

#[test]
fn python_a_process_per_event_names_the_subprocess_line() {
    require!("python3");
    require!("true");
    let (_d, dir) = scratch();
    let src = workload("spawns_dirty.py");
    let py = python();
    let (r, _) = run_report(&[&py, src.to_str().unwrap()], &dir);
    let true_ = which("true");
    for (path, args, name) in [
        (true_.as_str(), "true run", "run"),
        (true_.as_str(), "true output", "output"),
        // os.system: sh -c '/bin/true system', and the command the shell runs.
        ("/bin/sh", " -c /bin/true system", "system"),
        ("/bin/true", "/bin/true system", "system"),
    ] {
        let f = exec_finding(&r, path, args);
        assert_eq!(f["redundant_calls"].as_u64(), Some(11), "{f:#}");
        assert_callsite(&f["callsites"][0], &src, name);
    }
    let (clean, _) = run_report(&[&py, workload("spawns_clean.py").to_str().unwrap()], &dir);
    assert!(
        repeated_programs(&clean).is_empty(),
        "{:#}",
        clean["findings"]
    );
}

// ---- a warning per message

/// A recorded call, as these tests look at it.
#[derive(Debug)]
struct Call {
    sys: Sys,
    fd: Option<i32>,
    /// The call's flags argument (AT_* flags of the stat family).
    flags: u64,
    path: String,
    /// (kind, function, file, line), innermost first.
    frames: Vec<(FrameKind, String, String, u32)>,
}

/// Records `cmd` in `dir` (its stderr to `err`); returns its calls.
fn record(cmd: &[&str], dir: &Path, err: &Path) -> Vec<Call> {
    let trace = dir.join("t.dvt");
    let st = dejavu(&["record", "-o", trace.to_str().unwrap()], cmd, dir)
        .stderr(std::fs::File::create(err).unwrap())
        .status()
        .unwrap();
    assert!(st.success(), "{cmd:?}");
    calls_of(&trace)
}

/// The calls of trace `trace`.
fn calls_of(trace: &Path) -> Vec<Call> {
    let mut r = TraceReader::open(trace).unwrap();
    let mut raw = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Syscall(c) = rec {
            raw.push(c);
        }
    }
    let s = |id: Option<dejavu_trace::StrId>| {
        id.map(|i| r.strings().lossy(i).into_owned())
            .unwrap_or_default()
    };
    raw.into_iter()
        .map(|c| Call {
            sys: c.sys,
            fd: c.fd,
            flags: c.flags,
            path: s(c.path),
            frames: c
                .stack
                .map(|id| {
                    r.stack(id)
                        .iter()
                        .map(|f| (f.kind, s(f.function), s(f.file), f.line))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// The innermost frame of the program's own code: not the runtime's (Node.js's `node:`
/// modules and builtins, Python's standard library and frozen modules) nor a library's
/// (node_modules, site-packages).
fn own(c: &Call) -> Option<&(FrameKind, String, String, u32)> {
    let stdlib = python_stdlib();
    c.frames.iter().find(|f| {
        let file = f.2.as_str();
        !(file.is_empty()
            || file.starts_with("node:")
            || file.starts_with("<frozen ")
            || file.contains("/node_modules/")
            || file.contains("-packages/")
            || file.starts_with(stdlib))
    })
}

/// Asked of python3 once per test binary (`own` looks at every call's frames).
fn python_stdlib() -> &'static str {
    static STDLIB: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    STDLIB.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import os; print(os.path.dirname(os.__file__))"])
            .env_remove("PYTHONPATH")
            .output()
            .unwrap();
        format!("{}/", String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// Asserts that every call in `calls` has the `@site name` line of `src` as its own frame.
fn assert_own_line(calls: &[&Call], src: &Path, name: &str, kind: FrameKind) {
    let (line, function) = site(src, name);
    assert!(!calls.is_empty(), "{name}: no calls");
    for c in calls {
        assert_eq!(
            own(c),
            Some(&(kind, function.clone(), src.display().to_string(), line)),
            "{name}: {c:?}"
        );
    }
}

#[test]
fn node_console_warn_per_message_to_a_pipe_is_a_finding_at_its_line() {
    require!("node");
    let (_d, dir) = scratch();
    let src = workload("console_dirty.js");
    let (r, stderr) = run_report(&["node", src.to_str().unwrap()], &dir);
    assert_eq!(
        stderr.matches("bypassing authentication").count(),
        50,
        "{stderr}"
    );
    let f = findings(&r, "repeated-output");
    assert_eq!(f.len(), 1, "{:#}", r["findings"]);
    assert_eq!(f[0]["redundant_calls"].as_u64(), Some(49), "{:#}", f[0]);
    assert_callsite(&f[0]["callsites"][0], &src, "warn");
    let (clean, _) = run_report(
        &["node", workload("console_clean.js").to_str().unwrap()],
        &dir,
    );
    assert!(
        findings(&clean, "repeated-output").is_empty(),
        "{:#}",
        clean["findings"]
    );
}

#[test]
fn node_a_compiled_modules_call_is_named_at_its_source_line_when_node_has_its_map() {
    // mapped/dist/app.js is compiled TypeScript as esbuild writes it (tsx, bundlers): the
    // module's code on one generated line, an inline source map. tsx turns Node.js's
    // source maps on; the agent names the call at the TypeScript line through them.
    require!("node");
    let (_d, dir) = scratch();
    let config = dir.join("config.json");
    std::fs::write(&config, "{}").unwrap();
    let src = workload("mapped/src/app.ts");
    let main = workload("mapped.js");
    let (r, _) = run_report(
        &["node", main.to_str().unwrap(), config.to_str().unwrap()],
        &dir,
    );
    let f = findings(&r, "reread-unchanged");
    assert_eq!(f.len(), 1, "{:#}", r["findings"]);
    assert_eq!(f[0]["redundant_calls"].as_u64(), Some(19 * 4), "{:#}", f[0]);
    assert_callsite(&f[0]["callsites"][0], &src, "read");
    // Without the maps (node run on the compiled file itself), the generated line: what
    // Node.js's own stack traces say then.
    let gen = workload("mapped/dist/app.js");
    let (r, _) = run_report(
        &["node", gen.to_str().unwrap(), config.to_str().unwrap()],
        &dir,
    );
    let f = findings(&r, "reread-unchanged");
    assert_eq!(f.len(), 1, "{:#}", r["findings"]);
    let c = &f[0]["callsites"][0];
    assert_eq!(c["file"].as_str(), gen.to_str(), "{c:#}");
    assert_eq!(c["line"].as_u64(), Some(2), "{c:#}");
}

#[test]
fn node_console_warn_to_a_file_carries_its_line_on_every_write() {
    require!("node");
    let (_d, dir) = scratch();
    let src = workload("console_dirty.js");
    let err = dir.join("stderr.txt");
    let calls = record(&["node", src.to_str().unwrap()], &dir, &err);
    let text = std::fs::read_to_string(&err).unwrap();
    assert_eq!(text.matches("bypassing authentication").count(), 50);
    let err = err.display().to_string();
    // Node.js writes a file synchronously (fs.writeSync), one write per message.
    let writes: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Write && c.fd == Some(2) && c.path == err)
        .collect();
    assert_eq!(writes.len(), 50, "{writes:?}");
    assert_own_line(&writes, &src, "warn", FrameKind::Js);
    // console's frames come before it.
    assert!(writes
        .iter()
        .all(|c| c.frames[0].2 == "node:internal/console/constructor"));
    // process.stdout.write (stdout is /dev/null here): its line.
    let out: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Write && c.fd == Some(1))
        .collect();
    assert_own_line(&out, &src, "stdout", FrameKind::Js);
}

/// A new pseudo-terminal: its master, its slave (both close-on-exec here: a child gets the
/// slave as a standard descriptor only) and the slave's path.
fn pty() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd, String) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: openpty writes the two descriptors and at most a path's bytes into `name`.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            name.as_mut_ptr(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    for fd in [master, slave] {
        // SAFETY: fcntl on descriptors this function owns.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: openpty NUL-terminates the name; the descriptors are new and ours.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
            name,
        )
    }
}

#[test]
fn node_stdio_writes_from_lines_taking_turns_each_carry_their_own_line() {
    // The agent says a stdio write's site for the descriptor once and nothing while the
    // next writes come from the same frames: each write(2) must still carry its own line
    // where lines take turns, where one helper is called from two lines (the same
    // innermost frame), for a library's write ten frames deep in its own code, and for
    // the program's own fs.writeSync(2, ...), with stderr a file (a synchronous write), a
    // pipe (libuv's) and a terminal (libuv's, on a descriptor of its own).
    require!("node");
    let (_d, dir) = scratch();
    let program = lay_out(
        &dir,
        "stdio_turns.js",
        "library/loglib.js",
        "node_modules/loglib/index.js",
    );
    let src = workload("stdio_turns.js");
    let line = |name: &str| site(&src, name).0;
    // The lines of the first two frames of the program's own, per write, in order.
    let mut want = Vec::new();
    for i in 0..50 {
        want.push((line("item"), line("loop")));
        if i % 25 == 24 {
            want.push((line("library"), line("loop")));
        }
        if i % 10 == 9 {
            want.push((line("note"), line("checkpoint")));
        }
        if i % 20 == 19 {
            want.push((line("sync"), line("loop")));
        }
    }
    want.push((line("note"), line("end")));
    let program_file = program.display().to_string();
    for to in ["file", "pipe", "tty"] {
        let trace = dir.join("t.dvt");
        let err = dir.join("stderr.txt");
        let mut c = dejavu(
            &["record", "-o", trace.to_str().unwrap()],
            &["node", program.to_str().unwrap(), "50"],
            &dir,
        );
        // A terminal: Node.js's stream writes to a descriptor of its own that libuv opens
        // again on the terminal (non-blocking), not to 2; fs.writeSync(2) to 2.
        let mut tty = None;
        match to {
            "file" => {
                c.stderr(std::fs::File::create(&err).unwrap());
            }
            "pipe" => {
                c.stderr(Stdio::piped());
            }
            _ => {
                let (master, slave, name) = pty();
                c.stderr(Stdio::from(slave));
                tty = Some((master, name));
            }
        }
        let child = c.spawn().unwrap();
        drop(c); // the terminal's other end is the child's alone now
        let reader = tty.as_ref().map(|(master, _)| {
            let mut f = std::fs::File::from(master.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut text = Vec::new();
                let mut buf = [0u8; 4096];
                // EIO once no process holds the terminal.
                while let Ok(n) = std::io::Read::read(&mut f, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    text.extend_from_slice(&buf[..n]);
                }
                text
            })
        });
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "to a {to}: {out:?}");
        let said = match to {
            "file" => std::fs::read_to_string(&err).unwrap(),
            "pipe" => String::from_utf8_lossy(&out.stderr).into_owned(),
            _ => String::from_utf8_lossy(&reader.unwrap().join().unwrap()).replace('\r', ""),
        };
        assert_eq!(said.matches("item ").count(), 52, "{said}");
        assert!(said.ends_with("done 50\n"), "{said}");
        let calls = calls_of(&trace);
        let writes: Vec<&Call> = calls
            .iter()
            .filter(|c| {
                c.sys == Sys::Write
                    && match &tty {
                        Some((_, name)) => &c.path == name,
                        None => c.fd == Some(2),
                    }
            })
            .collect();
        let got: Vec<(u32, u32)> = writes
            .iter()
            .map(|c| {
                let mut own = c.frames.iter().filter(|f| f.2 == program_file).map(|f| f.3);
                (own.next().unwrap_or(0), own.next().unwrap_or(0))
            })
            .collect();
        assert_eq!(got, want, "to a {to}: {writes:?}");
        // The library's writes keep its frames before the program's line.
        for (c, w) in writes.iter().zip(&want) {
            if w.0 == line("library") {
                let lib = c
                    .frames
                    .iter()
                    .filter(|f| f.2.contains("/node_modules/loglib/"))
                    .count();
                assert!(lib >= 8, "{c:?}");
            }
        }
    }
}

#[test]
fn python_a_ca_bundle_openssl_reads_names_the_line_that_made_the_context() {
    // ssl.create_default_context(cafile=...) per session: OpenSSL opens and reads the
    // bundle in C (libcrypto's frames only, before: pip's 58 rereads of its CA bundle
    // named no Python line). Every open and read of it is the program's line.
    require!("python3");
    let (_d, dir) = scratch();
    let system = Path::new("/etc/ssl/certs/ca-certificates.crt");
    assert!(
        system.exists(),
        "the system's CA bundle (ca-certificates) is not installed"
    );
    let ca = dir.join("ca.pem");
    std::fs::copy(system, &ca).unwrap();
    let src = workload("ssl_contexts.py");
    let py = python();
    let calls = record(
        &[&py, src.to_str().unwrap(), ca.to_str().unwrap(), "5"],
        &dir,
        &dir.join("stderr.txt"),
    );
    let ca = ca.display().to_string();
    let opens: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Openat && c.path == ca)
        .collect();
    assert_eq!(opens.len(), 5, "{opens:?}");
    let reads: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Read && c.path == ca)
        .collect();
    assert!(reads.len() >= 5, "{reads:?}");
    assert_own_line(&opens, &src, "context", FrameKind::Python);
    assert_own_line(&reads, &src, "context", FrameKind::Python);
}

#[test]
fn python_logging_per_event_to_a_file_and_to_stderr_carries_the_logging_line() {
    require!("python3");
    let (_d, dir) = scratch();
    let src = workload("logging_dirty.py");
    let err = dir.join("stderr.txt");
    let py = python();
    let calls = record(
        &[&py, src.to_str().unwrap(), dir.to_str().unwrap()],
        &dir,
        &err,
    );
    let log = dir.join("app.log").display().to_string();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("cache miss").count(), 50);
    // FileHandler: one write per record (it flushes each), then the close at exit.
    let writes: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Write && c.path == log)
        .collect();
    assert_eq!(writes.len(), 50, "{writes:?}");
    assert_own_line(&writes, &src, "warning", FrameKind::Python);
    // The handler's open is the line that made the handler.
    let opens: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Openat && c.path == log)
        .collect();
    assert_own_line(&opens, &src, "handler", FrameKind::Python);
    // StreamHandler to stderr (a file here): the same line.
    let err = err.display().to_string();
    let to_stderr: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Write && c.fd == Some(2) && c.path == err)
        .collect();
    assert_eq!(to_stderr.len(), 50, "{to_stderr:?}");
    assert_own_line(&to_stderr, &src, "warning", FrameKind::Python);
}

#[test]
fn python_logging_per_event_is_a_finding_at_the_logging_line() {
    require!("python3");
    let (_d, dir) = scratch();
    let src = workload("logging_dirty.py");
    let py = python();
    let (r, stderr) = run_report(&[&py, src.to_str().unwrap(), dir.to_str().unwrap()], &dir);
    assert_eq!(stderr.matches("cache miss").count(), 50, "{stderr}");
    // The log file and stderr: both the logging call's line.
    let f = findings(&r, "repeated-output");
    assert_eq!(f.len(), 2, "{:#}", r["findings"]);
    for f in f {
        assert_eq!(f["redundant_calls"].as_u64(), Some(49), "{f:#}");
        assert_callsite(&f["callsites"][0], &src, "warning");
    }
    let (clean, _) = run_report(
        &[
            &py,
            workload("logging_clean.py").to_str().unwrap(),
            dir.to_str().unwrap(),
        ],
        &dir,
    );
    assert!(
        findings(&clean, "repeated-output").is_empty(),
        "{:#}",
        clean["findings"]
    );
}

#[test]
fn python_writes_on_a_pipe_are_the_line_that_made_it() {
    // os.pipe's two descriptors get the line that made the pipe (an FD message, as an
    // open()'s): the small writes on it name that line. os.write itself is not wrapped
    // (multiprocessing takes it at its import: black's queue writes had no line and were
    // ranked as the program's own). The clean twin joins the messages into one write.
    assert_pipe_writes_named(&[]);
}

#[test]
fn python_writes_on_a_pipe_in_a_forked_child_are_the_line_that_made_it() {
    // A child forked after the pipe was made writes the messages on the descriptor it
    // inherited (as multiprocessing's workers send their results: flake8's and black's
    // first finding was such writes, with no line, ranked as the program's own). The
    // child's agent numbers its sites anew; the descriptor keeps the parent's line.
    assert_pipe_writes_named(&["fork"]);
}

/// pipe_writes.py with `args`: one small-writes finding on its pipe, at the line that made
/// the pipe; none for the clean twin.
fn assert_pipe_writes_named(args: &[&str]) {
    require!("python3");
    let (_d, dir) = scratch();
    let src = workload("pipe_writes.py");
    let py = python();
    let mut cmd = vec![py.as_str(), src.to_str().unwrap()];
    cmd.extend_from_slice(args);
    let (r, _) = run_report(&cmd, &dir);
    let f = findings(&r, "small-writes");
    let pipe: Vec<&&Value> = f
        .iter()
        .filter(|f| f["paths"][0].as_str().unwrap_or("").starts_with("pipe:"))
        .collect();
    assert_eq!(pipe.len(), 1, "{:#}", r["findings"]);
    assert!(
        pipe[0]["redundant_calls"].as_u64().unwrap_or(0) >= 40,
        "{:#}",
        pipe[0]
    );
    assert_callsite(&pipe[0]["callsites"][0], &src, "pipe");
    cmd.push("clean");
    let (clean, _) = run_report(&cmd, &dir);
    assert!(
        findings(&clean, "small-writes").is_empty(),
        "{:#}",
        clean["findings"]
    );
}

#[test]
fn python_print_to_stdout_and_stderr_carries_its_line_on_every_write() {
    // print() buffers in sys.stdout's and sys.stderr's text layer; the write(2) comes at a
    // flush (flush=True), at a line's end on a line-buffered stream (stderr), or at every
    // write on an unbuffered one (`python -u`): each must name its print line, also where
    // two lines take turns on one stream. What the interpreter writes with no Python frame
    // (a block-buffered stream's flush at exit, an uncaught SystemExit's message) gets no
    // line, not the last print's.
    require!("python3");
    let py = python();
    let src = workload("print_dirty.py");
    let (warn, _) = site(&src, "warn");
    let (checkpoint, _) = site(&src, "checkpoint");
    for unbuffered in [false, true] {
        let (_d, dir) = scratch();
        let trace = dir.join("t.dvt");
        let out = dir.join("out.txt");
        let err = dir.join("err.txt");
        let mut c = dejavu(
            &["record", "-o", trace.to_str().unwrap()],
            &[&py, src.to_str().unwrap(), "50", "exit"],
            &dir,
        );
        c.env_remove("PYTHONUNBUFFERED")
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap());
        if unbuffered {
            c.env("PYTHONUNBUFFERED", "1");
        }
        assert_eq!(c.status().unwrap().code(), Some(1), "SystemExit's status");
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text, format!("{}\ndone\n", ".".repeat(50)));
        let said = std::fs::read_to_string(&err).unwrap();
        assert_eq!(said.matches("bypassing authentication").count(), 50);
        assert!(said.ends_with("checkpoint 49\nstopped\n"), "{said}");
        let calls = calls_of(&trace);
        let (out, err) = (out.display().to_string(), err.display().to_string());
        let writes = |fd: i32, path: &str| -> Vec<&Call> {
            calls
                .iter()
                .filter(|c| c.sys == Sys::Write && c.fd == Some(fd) && c.path == path)
                .collect()
        };
        let python_line = |c: &Call| {
            c.frames
                .iter()
                .find(|f| f.0 == FrameKind::Python && f.2 == src.display().to_string())
                .map(|f| f.3)
        };
        let out_writes = writes(1, &out);
        let (last, dots) = out_writes.split_last().unwrap();
        // One write of the dot per item (and, unbuffered, one of print's empty `end`).
        assert_eq!(
            dots.len(),
            if unbuffered { 100 } else { 50 },
            "unbuffered {unbuffered}: {out_writes:?}"
        );
        assert_own_line(dots, &src, "dot", FrameKind::Python);
        if unbuffered {
            assert_own_line(&[*last], &src, "done", FrameKind::Python);
        } else {
            // Flushed by the interpreter at exit: no Python frame.
            assert!(
                last.frames.iter().all(|f| f.0 != FrameKind::Python),
                "{last:?}"
            );
        }
        // stderr: each print one write (line-buffered) or one per piece (unbuffered: the
        // text, the separator, the number, the newline); the warning per item, the
        // checkpoint after every tenth; then SystemExit's message, written with no frame.
        let pieces = if unbuffered { 4 } else { 1 };
        let mut want = Vec::new();
        for i in 0..50 {
            want.extend(std::iter::repeat_n(Some(warn), pieces));
            if i % 10 == 9 {
                want.extend(std::iter::repeat_n(Some(checkpoint), pieces));
            }
        }
        let err_writes = writes(2, &err);
        let got: Vec<Option<u32>> = err_writes.iter().map(|c| python_line(c)).collect();
        assert!(
            got.len() > want.len(),
            "unbuffered {unbuffered}: {err_writes:?}"
        );
        assert_eq!(
            got[..want.len()],
            want[..],
            "unbuffered {unbuffered}: {err_writes:?}"
        );
        // "stopped\n": one write (or two unbuffered), no Python line.
        let tail = &got[want.len()..];
        assert!(tail.iter().all(|l| l.is_none()), "{tail:?}");
        for c in &err_writes[..want.len()] {
            assert!(own(c).is_some_and(|f| f.1 == "on_item"), "{c:?}");
        }
    }
}

#[test]
fn python_unbuffered_writes_to_stdouts_bytes_layer_carry_their_line() {
    // flake8's results go to sys.stdout.buffer.write; under PYTHONUNBUFFERED each is a
    // write(2) that must name its own line, not the last one the text layer said (the
    // header's flush, or multiprocessing's flush seconds before).
    require!("python3");
    let py = python();
    let src = workload("buffer_write.py");
    let (_d, dir) = scratch();
    let trace = dir.join("t.dvt");
    let out = dir.join("out.txt");
    let mut c = dejavu(
        &["record", "-o", trace.to_str().unwrap()],
        &[&py, src.to_str().unwrap(), "30"],
        &dir,
    );
    c.env("PYTHONUNBUFFERED", "1")
        .stdout(std::fs::File::create(&out).unwrap());
    assert!(c.status().unwrap().success());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("results\nsrc/a.py:1:1: E501"), "{text}");
    assert_eq!(text.lines().count(), 31);
    let calls = calls_of(&trace);
    let out = out.display().to_string();
    let writes: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Write && c.fd == Some(1) && c.path == out)
        .collect();
    assert_eq!(writes.len(), 31, "{writes:?}");
    assert_own_line(&writes[..1], &src, "header", FrameKind::Python);
    assert_own_line(&writes[1..], &src, "result", FrameKind::Python);
}

#[test]
fn python_a_pool_workers_calls_are_not_named_at_the_line_that_made_the_pool() {
    // A forked worker runs on the stack it inherited: the parent's frames down to the
    // `Pool(...)` line lie below BaseProcess._bootstrap. Its stats of the task's path come
    // from os.stat (no frame of the script's above _bootstrap): no line of the program's.
    // A task of the script's own is named at its line.
    require!("python3");
    let py = python();
    let src = workload("pool_stat.py");
    let (pool_line, _) = site(&src, "pool");
    for own_task in [false, true] {
        let (_d, dir) = scratch();
        let target = dir.join("target.txt");
        std::fs::write(&target, "x").unwrap();
        let mut args = vec![py.as_str(), src.to_str().unwrap(), target.to_str().unwrap()];
        if own_task {
            args.push("own");
        }
        let trace = dir.join("t.dvt");
        let mut c = dejavu(&["record", "-o", trace.to_str().unwrap()], &args, &dir);
        assert!(c.status().unwrap().success());
        let calls = calls_of(&trace);
        let want = target.display().to_string();
        let stats: Vec<&Call> = calls
            .iter()
            .filter(|c| c.path == want && c.fd.is_none())
            .collect();
        assert!(stats.len() >= 20, "own task {own_task}: {stats:?}");
        if own_task {
            assert_own_line(&stats, &src, "task", FrameKind::Python);
        } else {
            for c in &stats {
                assert!(
                    own(c).is_none_or(|f| f.3 != pool_line),
                    "named at the Pool line: {c:?}"
                );
            }
        }
    }
}

#[test]
fn python_print_per_item_is_a_finding_at_its_line() {
    // The dots are small writes of stdout (a file) at the dot line, the warning per item
    // repeated output at the warn line; the clean twin has neither.
    require!("python3");
    let py = python();
    let (_d, dir) = scratch();
    let report = |name: &str| -> Value {
        let out = std::fs::File::create(dir.join("out.txt")).unwrap();
        run_report_with(&[&py, workload(name).to_str().unwrap()], &dir, |c| {
            c.env_remove("PYTHONUNBUFFERED").stdout(out);
        })
        .0
    };
    let src = workload("print_dirty.py");
    let r = report("print_dirty.py");
    let small = findings(&r, "small-writes");
    assert_eq!(small.len(), 1, "{:#}", r["findings"]);
    assert!(
        small[0]["redundant_calls"].as_u64().unwrap_or(0) >= 49,
        "{:#}",
        small[0]
    );
    assert_callsite(&small[0]["callsites"][0], &src, "dot");
    let repeated = findings(&r, "repeated-output");
    assert_eq!(repeated.len(), 1, "{:#}", r["findings"]);
    assert_eq!(
        repeated[0]["redundant_calls"].as_u64(),
        Some(49),
        "{:#}",
        repeated[0]
    );
    assert_callsite(&repeated[0]["callsites"][0], &src, "warn");
    let clean = report("print_clean.py");
    for d in ["small-writes", "repeated-output"] {
        assert!(findings(&clean, d).is_empty(), "{:#}", clean["findings"]);
    }
}

// ---- the shapes of the functions wrapped, and what the agent does not see

#[test]
fn node_fs_functions_of_every_shape_name_their_line() {
    // fs.realpathSync.native and fs.realpath.native are arrow functions in Node.js 20 (no
    // prototype), fs.opendirSync a lazy accessor: the agent left all three unwrapped, and
    // their calls had only Node.js's native frames (TypeScript's #1 finding, the readlinks
    // of its module resolution through realpathSync.native, had no line).
    require!("node");
    let (_d, dir) = scratch();
    let src = workload("realpath_native.js");
    std::fs::write(dir.join("data.json"), "{}").unwrap();
    std::fs::write(dir.join("other.json"), "{}").unwrap();
    let err = dir.join("stderr.txt");
    let calls = record(
        &["node", src.to_str().unwrap(), dir.to_str().unwrap()],
        &dir,
        &err,
    );
    let on = |sys: Sys, name: &str| -> Vec<&Call> {
        let p = dir.join(name).display().to_string();
        calls
            .iter()
            .filter(|c| c.sys == sys && c.path == p)
            .collect()
    };
    // libc's realpath reads each component's link: the file's own, once per call.
    let native = on(Sys::Readlink, "data.json");
    assert_eq!(native.len(), 20, "{native:?}");
    assert_own_line(&native, &src, "native", FrameKind::Js);
    let callback = on(Sys::Readlink, "other.json");
    assert_eq!(callback.len(), 1, "{callback:?}");
    assert_own_line(&callback, &src, "callback", FrameKind::Js);
    let d = dir.display().to_string();
    let opendir: Vec<&Call> = calls
        .iter()
        .filter(|c| matches!(c.sys, Sys::Openat | Sys::Open) && c.path == d)
        .collect();
    assert_eq!(opendir.len(), 20, "{opendir:?}");
    assert_own_line(&opendir, &src, "opendir", FrameKind::Js);
    // The listing's reads, after opendirSync returned: the descriptor's line (the open
    // was named, so its descriptor is).
    let reads: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Getdents64 && c.path == d)
        .collect();
    assert!(reads.len() >= 20, "{reads:?}");
    assert_own_line(&reads, &src, "opendir", FrameKind::Js);
}

#[test]
fn python_a_directory_listed_through_scandir_names_the_scandir_line_on_its_reads() {
    // os.scandir opens the directory inside the wrapped call; its reads (getdents64)
    // come later, as the program iterates, on a descriptor the agent never sees: they
    // take the line of the call that opened it.
    require!("python3");
    let (_d, dir) = scratch();
    let src = workload("listing.py");
    for i in 0..5 {
        std::fs::write(dir.join(format!("f{i}")), "x").unwrap();
    }
    let err = dir.join("stderr.txt");
    let py = python();
    let calls = record(
        &[&py, src.to_str().unwrap(), dir.to_str().unwrap()],
        &dir,
        &err,
    );
    let d = dir.display().to_string();
    let reads: Vec<&Call> = calls
        .iter()
        .filter(|c| c.sys == Sys::Getdents64 && c.path == d)
        .collect();
    assert!(reads.len() >= 20, "{reads:?}");
    assert_own_line(&reads, &src, "scandir", FrameKind::Python);
}

#[test]
fn node_system_information_reads_name_their_line() {
    // os.cpus(), os.totalmem() and process.report.getReport() read /proc (and the
    // cgroup's files) synchronously in libuv and Node.js: vite's first finding, 34 such
    // reads on the main thread (detect-libc's getReport for rollup's and esbuild's
    // loaders), had no line.
    require!("node");
    let (_d, dir) = scratch();
    let src = workload("os_info.js");
    let err = dir.join("stderr.txt");
    let calls = record(&["node", src.to_str().unwrap()], &dir, &err);
    let opens = |path: &str| -> Vec<&Call> {
        calls
            .iter()
            .filter(|c| matches!(c.sys, Sys::Openat | Sys::Open) && c.path == path)
            .collect()
    };
    let named = |list: &[&Call], name: &str| -> usize {
        let (line, function) = site(&src, name);
        let want = (FrameKind::Js, function, src.display().to_string(), line);
        list.iter().filter(|c| own(c) == Some(&want)).count()
    };
    let cpuinfo = opens("/proc/cpuinfo");
    assert_eq!(cpuinfo.len(), 8, "{cpuinfo:?}");
    assert_eq!(named(&cpuinfo, "cpus"), 5, "{cpuinfo:?}");
    assert_eq!(named(&cpuinfo, "report"), 3, "{cpuinfo:?}");
    let stat = opens("/proc/self/stat");
    assert_eq!(named(&stat, "report"), 3, "{stat:?}");
    let meminfo = opens("/proc/meminfo");
    assert_eq!(named(&meminfo, "totalmem"), 5, "{meminfo:?}");
}

#[test]
fn python_a_call_the_agent_does_not_see_on_a_path_it_named_is_not_given_that_line() {
    // The agent says a repeated os.stat's line once for the thread and path (STICKY); the
    // opens of the same file by code it does not wrap (posix.open here, a C extension's
    // own open) came after it and were given the stat's line. A sticky path now names only
    // the kind of call it named first.
    require!("python3");
    let (_d, dir) = scratch();
    let src = workload("sticky_kind.py");
    std::fs::write(dir.join("data.json"), "{}").unwrap();
    let err = dir.join("stderr.txt");
    let py = python();
    let calls = record(
        &[&py, src.to_str().unwrap(), dir.to_str().unwrap()],
        &dir,
        &err,
    );
    let p = dir.join("data.json").display().to_string();
    let stats: Vec<&Call> = calls
        .iter()
        .filter(|c| c.path == p && matches!(c.sys, Sys::Stat | Sys::Newfstatat | Sys::Statx))
        .collect();
    assert_eq!(stats.len(), 50, "{stats:?}");
    assert_own_line(&stats, &src, "stat", FrameKind::Python);
    let opens: Vec<&Call> = calls
        .iter()
        .filter(|c| c.path == p && matches!(c.sys, Sys::Openat | Sys::Open))
        .collect();
    assert_eq!(opens.len(), 5, "{opens:?}");
    let (line, _) = site(&src, "stat");
    for c in &opens {
        assert!(
            !c.frames
                .iter()
                .any(|f| f.0 == FrameKind::Python && f.3 == line),
            "an open named as the stat's line: {c:?}"
        );
    }
}

#[test]
fn python_a_path_checked_once_does_not_give_its_line_to_later_unwrapped_calls() {
    // compileall's isfile() of each file, then py_compile's stats of it through the import
    // system (posix.stat, not the os.stat the agent wraps): a path named once was made
    // sticky at once, and the unwrapped stats were given the isfile line (1,268 calls under
    // pip install). The isfile calls keep their line.
    require!("python3");
    let (_d, dir) = scratch();
    let src = workload("sticky_once.py");
    for i in 0..20 {
        std::fs::write(dir.join(format!("f{i:02}.py")), "x = 1\n").unwrap();
    }
    let err = dir.join("stderr.txt");
    let py = python();
    let calls = record(
        &[&py, src.to_str().unwrap(), dir.to_str().unwrap()],
        &dir,
        &err,
    );
    let (line, _) = site(&src, "isfile");
    let stats: Vec<&Call> = calls
        .iter()
        .filter(|c| {
            c.path.starts_with(&dir.display().to_string())
                && c.path.ends_with(".py")
                && matches!(c.sys, Sys::Stat | Sys::Newfstatat | Sys::Statx)
        })
        .collect();
    assert_eq!(stats.len(), 60, "{stats:?}");
    let named = stats
        .iter()
        .filter(|c| {
            c.frames
                .iter()
                .any(|f| f.0 == FrameKind::Python && f.3 == line)
        })
        .count();
    assert_eq!(named, 20, "only the isfile calls at its line: {stats:?}");
}

#[test]
fn python_the_import_systems_stat_of_a_path_a_line_made_sticky_is_not_given_its_line() {
    // find_spec's stat of a module's file (posix.stat through the import system, not the
    // os.stat the agent wraps) beside os.path.exists of the same file, 12 times: once the
    // exists line had made the path sticky, the import system's stats took its line
    // (ansible: ~600 of 1,501 stats named at _slurp). The agent forgets the path when the
    // import system stats it.
    require!("python3");
    let (_d, dir) = scratch();
    let src = workload("sticky_import.py");
    std::fs::create_dir(dir.join("six")).unwrap();
    std::fs::write(dir.join("six/__init__.py"), "").unwrap();
    let err = dir.join("stderr.txt");
    let py = python();
    let calls = record(
        &[&py, src.to_str().unwrap(), dir.to_str().unwrap()],
        &dir,
        &err,
    );
    let init = dir.join("six/__init__.py").display().to_string();
    let stats: Vec<&Call> = calls
        .iter()
        .filter(|c| c.path == init && matches!(c.sys, Sys::Stat | Sys::Newfstatat | Sys::Statx))
        .collect();
    assert_eq!(stats.len(), 24, "{stats:?}");
    let (line, _) = site(&src, "exists");
    let named = stats
        .iter()
        .filter(|c| {
            c.frames
                .iter()
                .any(|f| f.0 == FrameKind::Python && f.3 == line)
        })
        .count();
    assert_eq!(named, 12, "only the exists calls at its line: {stats:?}");
}

#[test]
fn python_the_import_systems_stat_of_a_directory_the_program_lstats_is_not_given_its_line() {
    // sphinx-build's import-time Path(__file__).resolve() lstat'ed site-packages from one
    // line (a sticky path for the thread), and the import system's stats of site-packages
    // (posix.stat before each import from it: the same system call without
    // AT_SYMLINK_NOFOLLOW) were then given that line: 66 calls at sphinx/__init__.py:27, a
    // line that runs once. A sticky path now names only calls of its first call's kind,
    // the flag included.
    require!("python3");
    let (_d, dir) = scratch();
    let src = workload("sticky_lstat.py");
    let mods = dir.join("mods");
    std::fs::create_dir(&mods).unwrap();
    for i in 0..10 {
        std::fs::write(mods.join(format!("m{i}.py")), "X = 1\n").unwrap();
    }
    let err = dir.join("stderr.txt");
    let py = python();
    let calls = record(
        &[&py, src.to_str().unwrap(), mods.to_str().unwrap()],
        &dir,
        &err,
    );
    let d = mods.display().to_string();
    let on_dir: Vec<&Call> = calls
        .iter()
        .filter(|c| c.path == d && matches!(c.sys, Sys::Newfstatat | Sys::Lstat | Sys::Stat))
        .collect();
    let (line, _) = site(&src, "lstat");
    let at_line = |c: &Call| {
        c.frames
            .iter()
            .any(|f| f.0 == FrameKind::Python && f.3 == line)
    };
    let (lstats, others): (Vec<&Call>, Vec<&Call>) = on_dir
        .into_iter()
        .partition(|c| c.flags & libc::AT_SYMLINK_NOFOLLOW as u64 != 0 || c.sys == Sys::Lstat);
    assert_eq!(lstats.len(), 50, "{lstats:?}");
    assert_own_line(&lstats, &src, "lstat", FrameKind::Python);
    assert!(
        others.len() >= 10,
        "the import system's stats of the directory: {others:?}"
    );
    let wrong: Vec<&&Call> = others.iter().filter(|c| at_line(c)).collect();
    assert!(
        wrong.is_empty(),
        "{} of {} stats named as the lstat's line: {wrong:?}",
        wrong.len(),
        others.len()
    );
}

#[test]
fn python_the_import_systems_stats_of_sys_path_are_not_given_an_isdir_line() {
    // pip's find_eggs isdir()s each sys.path entry; then 140 failed imports each stat the
    // sys.path directories through posix.stat (the same call, which the agent does not
    // see): they were all named at the isdir line, the top of pip's first screen.
    require!("python3");
    let (_d, dir) = scratch();
    let src = workload("sticky_syspath.py");
    let err = dir.join("stderr.txt");
    let py = python();
    let calls = record(&[&py, src.to_str().unwrap(), "30"], &dir, &err);
    let (line, _) = site(&src, "scan");
    let script_dir = src.parent().unwrap().display().to_string();
    let on_dir: Vec<&Call> = calls
        .iter()
        .filter(|c| c.path == script_dir && matches!(c.sys, Sys::Newfstatat | Sys::Stat))
        .collect();
    let at_line: Vec<&&Call> = on_dir
        .iter()
        .filter(|c| {
            c.frames
                .iter()
                .any(|f| f.0 == FrameKind::Python && f.3 == line)
        })
        .collect();
    // The two scans' isdir of the script's directory (sys.path[0]), and no more.
    assert_eq!(at_line.len(), 2, "{on_dir:#?}");
    assert!(on_dir.len() >= 30, "the failed imports' stats: {on_dir:?}");
}

// ---- a library's call several frames deep

/// Lays out `program` beside `lib` installed as `dest` (relative), in a new directory.
fn lay_out(dir: &Path, program: &str, lib: &str, dest: &str) -> PathBuf {
    let app = dir.join("app");
    let to = app.join(dest);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(workload(lib), &to).unwrap();
    let p = app.join(program);
    std::fs::copy(workload(program), &p).unwrap();
    std::fs::write(dir.join("data.json"), "{}").unwrap();
    p
}

/// Asserts that the stat of DIR/data.json has the library's frames, innermost first, then
/// the program's `@site library` line.
fn assert_library_call(calls: &[Call], dir: &Path, program: &Path, lib_part: &str) {
    let data = dir.join("data.json").display().to_string();
    let stats: Vec<&Call> = calls
        .iter()
        .filter(|c| c.path == data && matches!(c.sys, Sys::Stat | Sys::Newfstatat | Sys::Statx))
        .collect();
    assert_eq!(stats.len(), 1, "{stats:?}");
    let c = stats[0];
    let (line, function) = site(
        &workload(program.file_name().unwrap().to_str().unwrap()),
        "library",
    );
    let at = c
        .frames
        .iter()
        .position(|f| f.2 == program.display().to_string())
        .unwrap_or_else(|| panic!("no frame of the program: {c:?}"));
    assert_eq!(c.frames[at].1, function, "{c:?}");
    assert_eq!(c.frames[at].3, line, "{c:?}");
    assert_eq!(
        own(c),
        Some(&c.frames[at]),
        "the first of the program's own: {c:?}"
    );
    let lib_frames = c.frames[..at]
        .iter()
        .filter(|f| f.2.contains(lib_part))
        .count();
    assert!(lib_frames >= 4, "the library's frames before it: {c:?}");
}

#[test]
fn node_a_library_call_deep_in_node_modules_names_the_programs_line() {
    require!("node");
    let (_d, dir) = scratch();
    let program = lay_out(
        &dir,
        "library.js",
        "library/deeplib.js",
        "node_modules/deeplib/index.js",
    );
    let data = dir.join("data.json");
    let calls = record(
        &["node", program.to_str().unwrap(), data.to_str().unwrap()],
        &dir,
        &dir.join("stderr.txt"),
    );
    assert_library_call(&calls, &dir, &program, "/node_modules/deeplib/");
}

#[test]
fn python_a_package_call_deep_in_site_packages_names_the_programs_line() {
    require!("python3");
    let (_d, dir) = scratch();
    let program = lay_out(
        &dir,
        "library.py",
        "library/deeppkg.py",
        "site-packages/deeppkg/__init__.py",
    );
    let data = dir.join("data.json");
    let py = python();
    let calls = record(
        &[&py, program.to_str().unwrap(), data.to_str().unwrap()],
        &dir,
        &dir.join("stderr.txt"),
    );
    assert_library_call(&calls, &dir, &program, "/site-packages/deeppkg/");
}

/// An installed tool run as `python -m tool` (as `python -m pytest`): its __main__.py
/// only calls the package's code, and the finding names the line in that code that made
/// the calls, not the entry's `raise SystemExit(main())` that every call passes through
/// (as for the same tool's console script).
#[test]
fn python_an_installed_tool_run_with_dash_m_is_named_at_its_packages_line() {
    require!("python3");
    let (_d, dir) = scratch();
    let site = dir.join("lib/site-packages");
    for (from, to) in [
        ("library/tool_main.py", "tool/__main__.py"),
        ("library/tool_impl.py", "_tool/__init__.py"),
    ] {
        let to = site.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(workload(from), &to).unwrap();
    }
    let data = dir.join("data.json");
    std::fs::write(&data, "{}").unwrap();
    let py = python();
    // `-m` finds the package in the working directory.
    let (r, stderr) = run_report(&[&py, "-m", "tool", data.to_str().unwrap(), "30"], &site);
    let f = lookup_of(&r, &data, &stderr);
    assert_eq!(f["redundant_calls"].as_u64(), Some(29), "{f:#}");
    assert_callsite(&f["callsites"][0], &site.join("_tool/__init__.py"), "probe");
}

/// An installed tool run by its console script (`venv/bin/tool`, as pip writes them:
/// `from tool import main`, `sys.exit(main())`): its distribution's packages in
/// site-packages (`tool` and `_tool`, named by its dist-info's top_level.txt, as pytest's
/// `pytest` and `_pytest`) are the program's own code, not a dependency's (black, pip,
/// pytest: every finding of theirs was "its dependencies").
#[test]
fn python_an_installed_tools_console_script_owns_its_distributions_packages() {
    require!("python3");
    let (_d, dir) = scratch();
    let venv = dir.join("venv");
    let py = python();
    let st = Command::new(&py)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(st.success());
    let lib = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python"))
        .unwrap()
        .path();
    let site = lib.join("site-packages");
    for (to, text) in [
        (
            "_tool/__init__.py",
            std::fs::read_to_string(workload("library/tool_impl.py")).unwrap(),
        ),
        ("tool/__init__.py", "from _tool import main\n".to_string()),
        (
            "tool-1.0.dist-info/top_level.txt",
            "_tool\ntool\n".to_string(),
        ),
    ] {
        let to = site.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(&to, text).unwrap();
    }
    let script = venv.join("bin/tool");
    std::fs::write(
        &script,
        format!(
            "#!{}/bin/python3\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom tool import main\n\
             if __name__ == '__main__':\n    sys.exit(main(sys.argv[1:]))\n",
            venv.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.join("data.json");
    std::fs::write(&data, "{}").unwrap();
    let (r, stderr) = run_report(
        &[script.to_str().unwrap(), data.to_str().unwrap(), "30"],
        &dir,
    );
    let f = lookup_of(&r, &data, &stderr);
    assert_eq!(f["owner"], "own", "{f:#}");
    assert_callsite(&f["callsites"][0], &site.join("_tool/__init__.py"), "probe");
}

// ---- a tool run through node_modules/.bin; a library's calls with no program frame

/// Lays out the tool fixture (tool/cli.js, tool/lib/work.js) as `app`/node_modules/tool,
/// its bin linked as node_modules/.bin/tool (as npm does); returns the tool's directory.
fn lay_out_tool(app: &Path) -> PathBuf {
    let tool = app.join("node_modules/tool");
    std::fs::create_dir_all(tool.join("bin")).unwrap();
    std::fs::create_dir_all(tool.join("lib")).unwrap();
    std::fs::copy(workload("tool/cli.js"), tool.join("bin/cli.js")).unwrap();
    std::fs::copy(workload("tool/lib/work.js"), tool.join("lib/work.js")).unwrap();
    let bin = app.join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink("../tool/bin/cli.js", bin.join("tool")).unwrap();
    tool
}

/// A tool run as `node_modules/.bin/tool` (a link to its bin, as npm makes them) is the
/// program: its own files are the program's, so the call's site is the tool's line (and
/// its frames before it), not every frame out to Node.js's loader that ran the bin, as
/// for a library's call with no frame of the program's. (The agent read the program's
/// package from `require.main`, which a module preloaded with --require never has, and
/// fell back to argv[1] as given: `node_modules/.bin/`, no package.)
#[test]
fn node_a_tool_run_through_node_modules_bin_owns_its_files() {
    require!("node");
    let (_d, dir) = scratch();
    let tool = lay_out_tool(&dir.join("app"));
    let bin = dir.join("app/node_modules/.bin");
    let data = dir.join("data.json");
    std::fs::write(&data, "{}").unwrap();
    let calls = record(
        &[
            "node",
            bin.join("tool").to_str().unwrap(),
            data.to_str().unwrap(),
        ],
        &dir,
        &dir.join("stderr.txt"),
    );
    let want = data.display().to_string();
    let stats: Vec<&Call> = calls
        .iter()
        .filter(|c| c.path == want && matches!(c.sys, Sys::Stat | Sys::Newfstatat | Sys::Statx))
        .collect();
    assert_eq!(stats.len(), 1, "{stats:?}");
    let c = stats[0];
    let (line, function) = site(&workload("tool/lib/work.js"), "tool");
    let work = tool.join("lib/work.js").display().to_string();
    assert_eq!(
        c.frames.first().map(|f| (f.1.as_str(), f.2.as_str(), f.3)),
        Some((function.as_str(), work.as_str(), line)),
        "{c:?}"
    );
    let prefix = tool.display().to_string();
    assert!(
        !c.frames.is_empty()
            && c.frames.len() <= 4
            && c.frames.iter().all(|f| f.2.starts_with(&prefix)),
        "the tool's own frames only (at most 4), not the loader's that ran its bin: {c:?}"
    );
}

/// The same tool, run as a user runs it: `node node_modules/.bin/tool` from the project's
/// directory (a relative path) and through the link's absolute path (as npx runs it). Its
/// repeated stats are the program's own finding at the tool's line: the report finds the
/// tool's package from the script's real path, as the agent does. (It took the path as
/// given: a relative one named no package, `.bin/` was taken for one, and every file of
/// the tool was a dependency's.)
#[test]
fn node_a_tool_run_by_a_relative_path_or_its_link_is_the_programs_own_code() {
    require!("node");
    let (_d, dir) = scratch();
    let app = dir.join("app");
    let tool = lay_out_tool(&app);
    let data = dir.join("data.json");
    std::fs::write(&data, "{}").unwrap();
    let link = app.join("node_modules/.bin/tool");
    for script in [
        "node_modules/.bin/tool",
        "node_modules/tool/bin/cli.js",
        link.to_str().unwrap(),
    ] {
        let (report, stderr) = run_report(&["node", script, data.to_str().unwrap(), "30"], &app);
        let f = lookup_of(&report, &data, &stderr);
        assert_eq!(f["owner"], "own", "{script}: {f:#}");
        assert_callsite(&f["callsites"][0], &tool.join("lib/work.js"), "tool");
    }
}

/// Calls of a library made with no frame of the program's on the stack (its setImmediate
/// callbacks) are captured deep, and the agent then captures the next calls deep at once;
/// a call the program's callback then makes (called by the library, called by the
/// program) gets the same site as when it is captured first a few frames deep: its own
/// line, without the program's frames further out. And a call thirteen of the library's
/// frames deep keeps the innermost eight of them, then the program's line.
#[test]
fn node_calls_after_a_librarys_own_callbacks_keep_their_sites() {
    require!("node");
    let (_d, dir) = scratch();
    let program = lay_out(
        &dir,
        "later.js",
        "library/laterlib.js",
        "node_modules/laterlib/index.js",
    );
    for f in ["data.json", "deep.json"] {
        std::fs::write(dir.join(f), "{}").unwrap();
    }
    for n in 1..=6 {
        std::fs::write(dir.join(format!("lib.json{n}")), "{}").unwrap();
    }
    let calls = record(
        &["node", program.to_str().unwrap(), dir.to_str().unwrap()],
        &dir,
        &dir.join("stderr.txt"),
    );
    let stats_of = |name: &str| -> Vec<&Call> {
        let want = dir.join(name).display().to_string();
        calls
            .iter()
            .filter(|c| {
                c.path.starts_with(&want)
                    && matches!(c.sys, Sys::Stat | Sys::Newfstatat | Sys::Statx)
            })
            .collect()
    };
    let prog = program.display().to_string();
    let lib = stats_of("lib.json");
    assert_eq!(lib.len(), 6, "{lib:?}");
    assert!(lib[0].frames.iter().any(|f| f.2 == prog), "{:?}", lib[0]);
    for c in &lib[1..] {
        assert!(
            c.frames.iter().all(|f| f.2 != prog) && !c.frames.is_empty(),
            "a call from the library's own callback: no frame of the program's: {c:?}"
        );
    }
    let direct = stats_of("data.json");
    assert_eq!(direct.len(), 1, "{direct:?}");
    let (line, _) = site(&workload("later.js"), "direct");
    let frames: Vec<(&str, u32)> = direct[0]
        .frames
        .iter()
        .map(|f| (f.2.as_str(), f.3))
        .collect();
    assert_eq!(
        frames,
        vec![(prog.as_str(), line)],
        "the callback's line alone, as a capture of its first frames has it"
    );
    let deep = stats_of("deep.json");
    assert_eq!(deep.len(), 1, "{deep:?}");
    let (line, function) = site(&workload("later.js"), "deep");
    let c = deep[0];
    let at = c
        .frames
        .iter()
        .position(|f| f.2 == prog)
        .unwrap_or_else(|| panic!("no frame of the program: {c:?}"));
    assert_eq!(
        (c.frames[at].1.as_str(), c.frames[at].3),
        (function.as_str(), line)
    );
    assert_eq!(
        at, 8,
        "the library's innermost eight frames, then the program's: {c:?}"
    );
    assert!(c.frames[..at].iter().all(|f| f.1 == "deep"), "{c:?}");
}
