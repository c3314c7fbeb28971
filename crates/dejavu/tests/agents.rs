//! dejavu's Node.js and Python agents (docs/agents.md). Two promises are tested here with
//! real programs: the program never notices the agent (its output, errors and exit status
//! are those of a run without it, with the agent loaded but not recording, recording to a
//! pipe of our own, and under `dejavu record`), and every recorded call names the line of
//! JavaScript or Python that made it (sync, callback and promise calls, worker threads,
//! threads, child processes).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_trace::{FrameKind, MarkKind, Record, StackId, Sys, TraceReader};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

mod common;
use common::{dejavu, repo};

fn workload(name: &str) -> PathBuf {
    repo().join("tests/workloads/agents").join(name)
}

fn node_agent() -> PathBuf {
    repo().join("agents/node/dejavu-agent.js")
}

/// The Python agent laid out as a PYTHONPATH directory (loader and agent side by side),
/// in a directory of this test binary's, so its bytecode cache stays out of the repo.
fn python_agent_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().expect("tempdir");
        for f in ["sitecustomize.py", "_dejavu_site.py", "_dejavu_agent.py"] {
            std::fs::copy(repo().join("agents/python").join(f), d.path().join(f))
                .expect("copy agent");
        }
        d
    })
    .path()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lang {
    Node,
    Python,
    /// Python, another interpreter than the `python3` on PATH.
    PythonAt(&'static str),
}

impl Lang {
    fn program(self) -> &'static str {
        match self {
            Lang::Node => "node",
            Lang::Python => "python3",
            Lang::PythonAt(p) => p,
        }
    }
}

/// How a program is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// As the user would, without dejavu.
    Native,
    /// With the agent loaded (NODE_OPTIONS / PYTHONPATH) but no DEJAVU_AGENT_FD.
    NoChannel,
    /// With the agent loaded and a DEJAVU_AGENT_FD naming no open descriptor.
    ClosedChannel,
    /// With the agent loaded and a DEJAVU_AGENT_FD naming a descriptor that is open but
    /// is not the pipe it names (the program's own stdout): the agent must not write.
    WrongChannel,
    /// With the agent loaded and reporting to a pipe of this test.
    Channel,
    /// Under `dejavu record` (stacks on, the default).
    Recorded,
}

/// What a run printed, how it ended, and what its agents reported.
#[derive(Debug)]
struct Run {
    stdout: String,
    stderr: String,
    code: Option<i32>,
    /// Channel mode: messages received, by kind.
    messages: BTreeMap<u8, usize>,
}

/// The descriptor number the Channel mode gives the program.
const TEST_FD: i32 = 1000;

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0i32; 2];
    // Non-blocking as dejavu makes it; close-on-exec so no other test's child inherits it.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
    assert_eq!(r, 0, "pipe2");
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn inode(fd: &OwnedFd) -> u64 {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) }, 0);
    st.st_ino
}

/// An FD message (kind 9) without a request (0): the descriptor's own site, which no
/// ASYNC_END ends. Counted under this pseudo-kind.
const FD_OWN: u8 = 109;

/// Counts the protocol messages in `bytes` by kind (docs/agents.md, "Protocol"); FD
/// messages without a request count as FD_OWN.
fn count_messages(bytes: &[u8]) -> BTreeMap<u8, usize> {
    let mut m = BTreeMap::new();
    let mut at = 0;
    while at + 3 <= bytes.len() {
        let len = u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize;
        assert!(
            len >= 1 && at + 2 + len <= bytes.len(),
            "a torn message at byte {at}"
        );
        let mut kind = bytes[at + 2];
        // FD: pid, tid, ns, site, req, fd.
        if kind == 9 && len == 25 && bytes[at + 19..at + 23] == [0, 0, 0, 0] {
            kind = FD_OWN;
        }
        *m.entry(kind).or_default() += 1;
        at += 2 + len;
    }
    assert_eq!(at, bytes.len(), "trailing bytes");
    m
}

/// Runs `lang script args` in `mode`, with `scratch` emptied first (every run starts from
/// the same files at the same path).
fn run(lang: Lang, script: &Path, args: &[&str], mode: Mode, scratch: &Path) -> Run {
    let _ = std::fs::remove_dir_all(scratch);
    std::fs::create_dir_all(scratch).unwrap();
    let mut cmd;
    let trace = scratch.with_extension("dvt");
    if mode == Mode::Recorded {
        cmd = Command::new(dejavu());
        cmd.arg("record")
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .arg(lang.program());
    } else {
        cmd = Command::new(lang.program());
    }
    cmd.arg(script).args(args).stdin(Stdio::null());
    // The environment is the same in every mode but the agent's own variables.
    cmd.env_remove("DEJAVU_AGENT_FD");
    cmd.env_remove("NODE_OPTIONS");
    cmd.env_remove("PYTHONPATH");
    if !matches!(mode, Mode::Native | Mode::Recorded) {
        match lang {
            Lang::Node => cmd.env(
                "NODE_OPTIONS",
                format!("--require {}", node_agent().display()),
            ),
            Lang::Python | Lang::PythonAt(_) => cmd.env("PYTHONPATH", python_agent_dir()),
        };
    }
    let mut reader = None;
    match mode {
        Mode::ClosedChannel => {
            cmd.env("DEJAVU_AGENT_FD", "999:12345");
        }
        Mode::WrongChannel => {
            // fd 1 is open (a pipe to us), but not the pipe whose inode we name.
            let (r, _w) = pipe();
            cmd.env("DEJAVU_AGENT_FD", format!("1:{}", inode(&r)));
        }
        Mode::Channel => {
            let (r, w) = pipe();
            cmd.env("DEJAVU_AGENT_FD", format!("{TEST_FD}:{}", inode(&w)));
            let raw = w.as_raw_fd();
            // SAFETY: dup2 is async-signal-safe; it clears close-on-exec on the copy.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::dup2(raw, TEST_FD) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            reader = Some((r, w));
        }
        _ => {}
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("program runs");
    let mut bytes = Vec::new();
    let drain = reader.map(|(r, w)| {
        drop(w); // only the program holds the write end now
        std::thread::spawn(move || {
            // Blocking reads until every process holding the write end is gone.
            unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, 0) };
            let mut f = std::fs::File::from(r);
            let mut v = Vec::new();
            f.read_to_end(&mut v).expect("read the channel");
            v
        })
    });
    let out = child.wait_with_output().expect("program ends");
    if let Some(t) = drain {
        bytes = t.join().unwrap();
    }
    let _ = std::fs::remove_file(&trace);
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
        messages: count_messages(&bytes),
    }
}

/// `text` without the frames of the agent's own wrappers: the one thing a program can
/// see of the agent (docs/agents.md, "What the program can notice"): a stack trace taken
/// through a wrapped call has one more frame, the wrapper's.
fn strip_agent_frames(text: &str) -> String {
    let mut s = text.to_string();
    // Node.js: "\n    at NAME (/…/dejavu-agent.js:L:C)" inside a printed string (the
    // newline escaped) or on a line of its own.
    while let Some(i) = s.find("dejavu-agent.js:") {
        let before = &s[..i];
        let real = before.rfind('\n');
        let escaped = before.rfind("\\n");
        let start = match (real, escaped) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => a.or(b).unwrap_or(0),
        };
        let mut end = i + "dejavu-agent.js:".len();
        let b = s.as_bytes();
        while end < b.len() && (b[end].is_ascii_digit() || b[end] == b':') {
            end += 1;
        }
        if end < b.len() && b[end] == b')' {
            end += 1;
        }
        s.replace_range(start..end, "");
    }
    // Python, in printed lists: ", ('_dejavu_agent.py', L, 'NAME')".
    while let Some(i) = s.find(", ('_dejavu_agent.py', ") {
        let end = i + s[i..].find(')').unwrap() + 1;
        s.replace_range(i..end, "");
    }
    // Python, in a printed traceback: the "File" line and the lines under it.
    let mut kept = Vec::new();
    let mut skipping = false;
    for line in s.split_inclusive('\n') {
        if line.starts_with("  File \"") {
            skipping = line.contains("/_dejavu_agent.py\"");
        } else if !line.starts_with("    ") {
            skipping = false;
        }
        if !skipping {
            kept.push(line);
        }
    }
    kept.concat()
}

/// Asserts that `got` is what the program printed natively, but for the agent's frames.
fn assert_same(what: &str, native: &Run, got: &Run) {
    assert_eq!(
        native.code, got.code,
        "{what}: exit status\nstderr: {}",
        got.stderr
    );
    assert_eq!(
        native.stdout,
        strip_agent_frames(&got.stdout),
        "{what}: stdout"
    );
    assert_eq!(
        native.stderr,
        strip_agent_frames(&got.stderr),
        "{what}: stderr"
    );
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Runs a workload natively and in `modes`, comparing each with the native run.
fn assert_unnoticed(lang: Lang, script: &str, args: &[&str], modes: &[Mode]) -> Vec<Run> {
    let d = scratch();
    let s = d.path().join("s");
    let mut full: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    full.push(s.display().to_string());
    let full: Vec<&str> = full.iter().map(|a| a.as_str()).collect();
    let native = run(lang, &workload(script), &full, Mode::Native, &s);
    assert!(
        !native.stdout.is_empty() || !native.stderr.is_empty(),
        "{script}: no output"
    );
    modes
        .iter()
        .map(|&m| {
            let r = run(lang, &workload(script), &full, m, &s);
            assert_same(&format!("{script} {args:?} {m:?}"), &native, &r);
            r
        })
        .collect()
}

const NOT_RECORDING: &[Mode] = &[Mode::NoChannel, Mode::ClosedChannel, Mode::WrongChannel];

// ---- the program never notices

#[test]
fn node_sees_the_same_fs_with_the_agent_loaded_but_not_recording() {
    require!("node");
    assert_unnoticed(Lang::Node, "behaviour.js", &[], NOT_RECORDING);
}

#[test]
fn node_sees_the_same_fs_while_its_agent_reports() {
    require!("node");
    let runs = assert_unnoticed(Lang::Node, "behaviour.js", &[], &[Mode::Channel]);
    let m = &runs[0].messages;
    // The comparison is only worth something if the wrappers were really at work.
    assert_eq!(m.get(&1), Some(&1), "one HELLO: {m:?}");
    let n = |k: u8| m.get(&k).copied().unwrap_or(0);
    // Sync calls (ENTER), and console.log's writes (the stream's own site, said when the
    // line changes).
    assert!(
        n(3) > 25 && n(3) + n(FD_OWN) > 50,
        "sync calls reported: {m:?}"
    );
    assert_eq!(m.get(&3), m.get(&4), "every ENTER has its EXIT: {m:?}");
    assert!(n(5) >= 8, "async calls reported: {m:?}");
    assert!(n(9) > 0, "descriptor calls reported: {m:?}");
    assert_eq!(
        n(5) + n(9),
        n(6),
        "every ASYNC_BEGIN and FD with a request has its ASYNC_END: {m:?}"
    );
}

#[test]
fn node_stdio_writes_say_their_site_once_per_run_of_writes() {
    // A stdio write says its site as the descriptor's own (FD without a request) only
    // when it differs from the last one said: lines taking turns on stderr cost one FD per
    // change of line, a run of writes from one line none after its first, and no ENTER or
    // EXIT. (tests/agent_gaps.rs checks that every write still carries its own line.)
    require!("node");
    let d = scratch();
    let prog = d.path().join("prog");
    std::fs::create_dir_all(prog.join("node_modules/loglib")).unwrap();
    std::fs::copy(workload("stdio_turns.js"), prog.join("stdio_turns.js")).unwrap();
    std::fs::copy(
        workload("library/loglib.js"),
        prog.join("node_modules/loglib/index.js"),
    )
    .unwrap();
    let r = run(
        Lang::Node,
        &prog.join("stdio_turns.js"),
        &["50"],
        Mode::Channel,
        &d.path().join("scratch"),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.ends_with("done 50\n"), "{}", r.stderr);
    // The lines that write, in order (stdio_turns.js): 'item' per item, the library after
    // every 25th, 'checkpoint' after every tenth, fs.writeSync's 'sync' after every
    // twentieth, then 'end'.
    let mut lines = Vec::new();
    for i in 0..50 {
        lines.push("item");
        if i % 25 == 24 {
            lines.push("library");
        }
        if i % 10 == 9 {
            lines.push("checkpoint");
        }
        if i % 20 == 19 {
            lines.push("sync");
        }
    }
    lines.push("end");
    let changes = lines.windows(2).filter(|w| w[0] != w[1]).count();
    let m = &r.messages;
    let n = |k: u8| m.get(&k).copied().unwrap_or(0);
    assert_eq!(n(FD_OWN), changes + 1, "{m:?}");
    assert_eq!(n(9), 0, "no FD with a request: {m:?}");
    assert_eq!(n(6), 0, "nothing to end: {m:?}");
    // The module loader's reads of the two files are wrapped calls; no write is (not
    // fs.writeSync(2, ...) either).
    assert!(n(3) < 10 && n(3) == n(4), "{m:?}");
}

#[test]
fn node_sees_the_same_fs_under_dejavu_record() {
    require!("node");
    assert_unnoticed(Lang::Node, "behaviour.js", &[], &[Mode::Recorded]);
}

#[test]
fn node_dies_of_an_fs_error_the_same_way_with_the_agent() {
    require!("node");
    for mode in ["sync", "callback", "rejection", "promise-handled-late"] {
        assert_unnoticed(
            Lang::Node,
            "crash.js",
            &[mode],
            &[Mode::NoChannel, Mode::Channel, Mode::Recorded],
        );
    }
}

#[test]
fn python_sees_the_same_files_with_the_agent_loaded_but_not_recording() {
    require!("python3");
    assert_unnoticed(Lang::Python, "behaviour.py", &[], NOT_RECORDING);
}

#[test]
fn python_sees_the_same_files_while_its_agent_reports() {
    require!("python3");
    let runs = assert_unnoticed(Lang::Python, "behaviour.py", &[], &[Mode::Channel]);
    let m = &runs[0].messages;
    // The program, its fork and its two subprocesses (which keep the channel although
    // subprocess closes inherited descriptors).
    assert_eq!(m.get(&1), Some(&4), "HELLO per process: {m:?}");
    assert!(
        m.get(&3).copied().unwrap_or(0) > 50,
        "calls reported: {m:?}"
    );
    assert_eq!(m.get(&3), m.get(&4), "every ENTER has its EXIT: {m:?}");
}

#[test]
fn python_sees_the_same_files_under_dejavu_record() {
    require!("python3");
    assert_unnoticed(Lang::Python, "behaviour.py", &[], &[Mode::Recorded]);
}

/// Python 3.8 to 3.10 (pyenv's, or python3.X on PATH): their pathlib keeps os.stat and
/// the others as class attributes of its accessor and calls them through it, where a
/// wrapper that is a Python function would become a method (and be given the accessor
/// as its path: pathlib's every call failed under the agent). behaviour.py's pathlib
/// calls run under dejavu record as without it.
#[test]
fn older_pythons_see_the_same_files_under_dejavu_record() {
    let mut found = Vec::new();
    for v in ["3.8", "3.9", "3.10"] {
        let pyenv = std::env::var_os("PYENV_ROOT")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
        let installed = pyenv
            .and_then(|r| std::fs::read_dir(r.join("versions")).ok())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.strip_prefix(v).is_some_and(|r| r.starts_with('.')))
            })
            .map(|p| p.join("bin/python3"))
            .find(|p| p.exists());
        match installed {
            Some(p) => found.push(p.display().to_string()),
            None if common::have(&format!("python{v}")) => found.push(format!("python{v}")),
            None => {}
        }
    }
    if found.is_empty() {
        common::skip(
            "python3.10",
            "no Python 3.8, 3.9 or 3.10 here (pyenv's or on PATH)",
        );
        return;
    }
    for py in found {
        let py: &'static str = Box::leak(py.into_boxed_str());
        assert_unnoticed(Lang::PythonAt(py), "behaviour.py", &[], &[Mode::Recorded]);
    }
}

#[test]
fn python_dies_of_a_file_error_the_same_way_with_the_agent() {
    require!("python3");
    for mode in ["main", "thread", "exit"] {
        assert_unnoticed(
            Lang::Python,
            "crash.py",
            &[mode],
            &[Mode::NoChannel, Mode::Channel, Mode::Recorded],
        );
    }
}

#[test]
fn the_node_agent_wraps_nothing_without_a_channel_and_unhooks_cleanly_with_one() {
    require!("node");
    let probe = format!(
        "const fs = require('fs'); const before = fs.statSync.toString(); \
         const a = require({agent:?}); const s = a.stats(); a.unhook(); \
         console.log(JSON.stringify([s.active, s.wrapped > 40, before.includes('function statSync(path'), \
         fs.statSync.toString().includes('function statSync(path'), fs.promises.stat.toString().startsWith('async function stat('), a.stats().wrapped]));",
        agent = node_agent().display().to_string()
    );
    let d = scratch();
    let script = d.path().join("probe.js");
    std::fs::write(&script, probe).unwrap();
    let s = d.path().join("s");
    let off = run(Lang::Node, &script, &[], Mode::NoChannel, &s);
    assert_eq!(
        off.stdout, "[false,false,true,true,true,0]\n",
        "{}",
        off.stderr
    );
    let on = run(Lang::Node, &script, &[], Mode::Channel, &s);
    assert_eq!(
        on.stdout, "[true,true,false,true,true,0]\n",
        "wrapped, then restored: {}",
        on.stderr
    );
}

#[test]
fn the_python_agent_leaves_no_trace_without_a_channel_and_unhooks_cleanly_with_one() {
    require!("python3");
    let probe = "import os, posix, io, builtins, sys\n\
        a = sys.modules.get('_dejavu_agent')\n\
        wrapped = os.stat is not posix.stat and open is io.open\n\
        if a: a.unhook()\n\
        print(a is not None, wrapped, os.stat is posix.stat, builtins.open is io.open, io.open.__module__, \
        os.stat in os.supports_dir_fd, len(os.supports_dir_fd), '_dejavu_agent' in sys.modules, 'sitecustomize' in sys.modules)\n";
    let d = scratch();
    let script = d.path().join("probe.py");
    std::fs::write(&script, probe).unwrap();
    let s = d.path().join("s");
    let native = run(Lang::Python, &script, &[], Mode::Native, &s);
    let off = run(Lang::Python, &script, &[], Mode::NoChannel, &s);
    assert_eq!(off.stdout, native.stdout, "{}", off.stderr);
    assert!(
        native.stdout.starts_with("False False True True"),
        "{}",
        native.stdout
    );
    let on = run(Lang::Python, &script, &[], Mode::Channel, &s);
    let want = native.stdout.replacen("False False", "True True", 1);
    assert_eq!(
        on.stdout, want,
        "loaded, then restored to exactly the native state: {}",
        on.stderr
    );
}

#[test]
fn the_programs_own_sitecustomize_still_runs_and_fails_as_it_would() {
    require!("python3");
    let d = scratch();
    let user = d.path().join("user");
    std::fs::create_dir(&user).unwrap();
    let s = d.path().join("s");
    let script = d.path().join("main.py");
    std::fs::write(&script, "import sys, sitecustomize\nprint('main', sitecustomize.MARK, sys.path.count(sys.argv[1]))\n").unwrap();
    for (body, what) in [
        (
            "import sys\nMARK = 'user'\nprint('user sitecustomize runs', __name__)\n",
            "loads",
        ),
        ("raise RuntimeError('broken customization')\n", "raises"),
    ] {
        std::fs::write(user.join("sitecustomize.py"), body).unwrap();
        let go = |mode: Mode| {
            let mut cmd = Command::new("python3");
            cmd.arg(&script).arg(&user).env_remove("DEJAVU_AGENT_FD");
            match mode {
                Mode::Native => cmd.env("PYTHONPATH", &user),
                _ => cmd.env(
                    "PYTHONPATH",
                    format!("{}:{}", python_agent_dir().display(), user.display()),
                ),
            };
            let _ = &s;
            let out = cmd.output().unwrap();
            (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
                out.status.code(),
            )
        };
        let native = go(Mode::Native);
        assert_eq!(
            go(Mode::NoChannel),
            native,
            "the user's sitecustomize {what}"
        );
    }
}

/// The Python agent's bytecode is kept in dejavu's cache directory between recordings,
/// and the loader's (`_dejavu_site`, which the zip's `sitecustomize` runs): the first
/// recording's Python compiles both (~5 ms), the next one's finds their bytecode up to
/// date beside its copies (Python's own check: `-v` says the bytecode "matches" its
/// source) and compiles nothing. docs/agents.md, "Start-up".
#[test]
fn the_python_agents_bytecode_is_kept_between_recordings() {
    require!("python3");
    let d = scratch();
    let cache = d.path().join("cache");
    let record = |n: u32| {
        let out = Command::new(dejavu())
            .arg("record")
            .arg("-o")
            .arg(d.path().join(format!("t{n}.dvt")))
            .args(["--", "python3", "-v", "-c", "print('ran')"])
            .env("DEJAVU_CACHE_DIR", &cache)
            .env_remove("PYTHONPATH")
            .env_remove("PYTHONPYCACHEPREFIX")
            .env_remove("PYTHONDONTWRITEBYTECODE")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        // The agent's and the loader's imports, as `python -v` tells them.
        let ours = |name: &str| {
            err.lines()
                .filter(|l| l.contains(name))
                .map(str::to_owned)
                .collect::<Vec<_>>()
                .join("\n")
        };
        (ours("_dejavu_agent"), ours("_dejavu_site"))
    };
    let (first, first_site) = record(1);
    for first in [&first, &first_site] {
        assert!(
            first.contains("# created '"),
            "compiled, bytecode written: {first}"
        );
        assert!(!first.contains(" matches "), "{first}");
    }
    // Kept, private.
    let kept: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python-agent-"))
        .flat_map(|e| {
            std::fs::read_dir(e.path())
                .unwrap()
                .flatten()
                .map(|f| f.path())
        })
        .collect();
    let mut names: Vec<String> = kept
        .iter()
        .map(|k| k.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{kept:?}");
    assert!(
        names[0].starts_with("_dejavu_agent.") && names[0].ends_with(".pyc"),
        "{names:?}"
    );
    assert!(
        names[1].starts_with("_dejavu_site.") && names[1].ends_with(".pyc"),
        "{names:?}"
    );
    for k in &kept {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(k).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let (second, second_site) = record(2);
    for second in [&second, &second_site] {
        assert!(
            second.contains(" matches "),
            "taken from the cache: {second}"
        );
        assert!(
            !second.contains("# created '"),
            "not compiled again: {second}"
        );
    }
    // Without a cache directory, every recording compiles, as before.
    let out = Command::new(dejavu())
        .arg("record")
        .arg("-o")
        .arg(d.path().join("t3.dvt"))
        .args(["--", "python3", "-v", "-c", "pass"])
        .env("DEJAVU_CACHE_DIR", "")
        .env_remove("PYTHONPATH")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("_dejavu_agent.cpython") && err.contains("# created '"),
        "compiled: {err}"
    );
}

// ---- call sites

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

/// A frame as the tests look at it: (kind, function, file, line).
type Fr = (FrameKind, String, String, u32);

/// A recorded call on a scratch file: its process, thread, call and stack (innermost
/// frame first).
#[derive(Debug)]
struct Call {
    pid: u32,
    tid: u32,
    sys: Sys,
    frames: Vec<Fr>,
}

impl Call {
    /// The innermost of the program's own frames (the runtime's frames before it
    /// skipped): the line the agents name for the call.
    fn own(&self) -> Option<&Fr> {
        self.frames.iter().find(|f| !is_runtime_frame(f))
    }
}

/// The Python standard library's directory (its frames are the runtime's).
fn python_stdlib() -> &'static str {
    static DIR: OnceLock<String> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import os; print(os.path.dirname(os.__file__))"])
            .env_remove("PYTHONPATH")
            .output()
            .expect("python3 runs");
        format!("{}/", String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// Whether a frame is the runtime's, as the agents tell (docs/agents.md): Node.js's own
/// modules and builtins, Python's standard library and frozen modules.
fn is_runtime_frame(f: &Fr) -> bool {
    match f.0 {
        FrameKind::Js => f.2.is_empty() || f.2.starts_with("node:"),
        FrameKind::Python => {
            f.2.starts_with("<frozen ")
                || (f.2.starts_with(python_stdlib()) && !f.2.contains("-packages/"))
        }
        FrameKind::Native => false,
    }
}

/// A record of a trace, as the tests look at it, in trace order.
#[derive(Debug)]
enum Ev {
    Call {
        ts: u64,
        call: Call,
        path: Option<String>,
    },
    Mark(dejavu_trace::Mark),
}

/// Records `lang script args` (with `extra` dejavu flags); returns its records in trace
/// order and the trace's stack count.
fn record_events(lang: Lang, script: &Path, args: &[&str], extra: &[&str]) -> (Vec<Ev>, usize) {
    let (evs, stacks, _) = record_events_out(lang, script, args, extra);
    (evs, stacks)
}

/// `record_events`, and what the program wrote to its standard output.
fn record_events_out(
    lang: Lang,
    script: &Path,
    args: &[&str],
    extra: &[&str],
) -> (Vec<Ev>, usize, String) {
    let d = scratch();
    let trace = d.path().join("t.dvt");
    let out = Command::new(dejavu())
        .arg("record")
        .args(extra)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(lang.program())
        .arg(script)
        .args(args)
        .env_remove("NODE_OPTIONS")
        .env_remove("PYTHONPATH")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut r = TraceReader::open(&trace).unwrap();
    let mut raw = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::Syscall(c) => {
                let path = c.path.map(|p| r.strings().lossy(p).into_owned());
                // The agents write (and fstat) only their descriptor, the highest free one
                // below 1024: none of those calls may be recorded. (The program's own
                // close_range calls may name numbers that high.)
                let agents_calls = [
                    Sys::Write,
                    Sys::Writev,
                    Sys::Fstat,
                    Sys::Newfstatat,
                    Sys::Statx,
                ];
                assert!(
                    !(agents_calls.contains(&c.sys) && c.fd.is_some_and(|fd| fd >= 1000)),
                    "a call on the agents' descriptor was recorded: {c:?}"
                );
                raw.push(Ok((c, path)));
            }
            Record::Mark(m) => raw.push(Err(m)),
            _ => {}
        }
    }
    // Stacks resolve once the reader has read them all.
    let s = |id: Option<dejavu_trace::StrId>| {
        id.map(|i| r.strings().lossy(i).into_owned())
            .unwrap_or_default()
    };
    let evs = raw
        .into_iter()
        .map(|x| match x {
            Ok((c, path)) => {
                let frames = c
                    .stack
                    .map(|id: StackId| {
                        r.stack(id)
                            .iter()
                            .map(|f| (f.kind, s(f.function), s(f.file), f.line))
                            .collect()
                    })
                    .unwrap_or_default();
                Ev::Call {
                    ts: c.ts,
                    call: Call {
                        pid: c.pid,
                        tid: c.tid,
                        sys: c.sys,
                        frames,
                    },
                    path,
                }
            }
            Err(m) => Ev::Mark(m),
        })
        .collect();
    (
        evs,
        r.stack_count(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Records `lang script DIR` (with `extra` dejavu flags) and returns the calls on files
/// under DIR, by file name, the whole trace's stack count, and every path recorded.
fn record_calls(
    lang: Lang,
    script: &str,
    extra: &[&str],
) -> (BTreeMap<String, Vec<Call>>, usize, Vec<String>) {
    let (calls, stacks, paths, _) = record_calls_out(lang, script, extra);
    (calls, stacks, paths)
}

/// `record_calls`, and what the program wrote to its standard output.
fn record_calls_out(
    lang: Lang,
    script: &str,
    extra: &[&str],
) -> (BTreeMap<String, Vec<Call>>, usize, Vec<String>, String) {
    let d = scratch();
    let dir = d.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    // The files the fixtures' sites work on (made here, so no call of the program's
    // own touches them but the sites').
    for name in [
        "sync",
        "callback",
        "promise",
        "readfile",
        "relative",
        "worker",
        "child",
        "stat",
        "exists",
        "pathlib",
        "open",
        "thread",
        "fork",
        "readstream",
        "filehandle",
        "fileobj",
        "phase",
    ] {
        std::fs::write(dir.join(name), name).unwrap();
    }
    let (evs, stacks, stdout) =
        record_events_out(lang, &workload(script), &[dir.to_str().unwrap()], extra);
    let mut calls: BTreeMap<String, Vec<Call>> = BTreeMap::new();
    let mut paths = Vec::new();
    let prefix = format!("{}/", dir.display());
    for ev in evs {
        let Ev::Call { call, path, .. } = ev else {
            continue;
        };
        if let Some(p) = path {
            if let Some(name) = p.strip_prefix(&prefix) {
                calls.entry(name.to_string()).or_default().push(call);
            }
            paths.push(p);
        }
    }
    (calls, stacks, paths, stdout)
}

/// Asserts that the calls on DIR/`name` of kinds `sys` have the `@site name` line of
/// `fixture` as their innermost frame of the program's own, with only the runtime's
/// frames before it (fs or os.path's, the module loader's); returns them.
fn assert_site<'a>(
    calls: &'a BTreeMap<String, Vec<Call>>,
    name: &str,
    fixture: &str,
    kind: FrameKind,
    sys: &[Sys],
) -> Vec<&'a Call> {
    assert_site_on(calls, name, name, fixture, kind, sys)
}

/// `assert_site` for the calls on DIR/`target` and the `@site name` line.
fn assert_site_on<'a>(
    calls: &'a BTreeMap<String, Vec<Call>>,
    target: &str,
    name: &str,
    fixture: &str,
    kind: FrameKind,
    sys: &[Sys],
) -> Vec<&'a Call> {
    let file = workload(fixture);
    let (line, function) = site(&file, name);
    let mine: Vec<&Call> = calls
        .get(target)
        .map(|v| v.iter().filter(|c| sys.contains(&c.sys)).collect())
        .unwrap_or_default();
    assert!(
        !mine.is_empty(),
        "no {sys:?} on {name}; calls: {:?}",
        calls.get(name)
    );
    for c in &mine {
        assert_eq!(
            c.own(),
            Some(&(kind, function.clone(), file.display().to_string(), line)),
            "{name}: {c:?}"
        );
        assert!(c.frames.iter().all(|f| f.0 == kind), "{name}: {c:?}");
    }
    mine
}

const STATS: &[Sys] = &[
    Sys::Stat,
    Sys::Lstat,
    Sys::Newfstatat,
    Sys::Statx,
    Sys::Access,
    Sys::Faccessat,
    Sys::Faccessat2,
];

/// The expected count of calls per `@line` mark, as `calls_by_marked_line` gives them.
fn per_line(counts: &[(&str, usize)]) -> BTreeMap<String, usize> {
    counts.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

/// The calls on DIR/`target` of kinds `sys`, counted by the `@line NAME` marker of
/// `fixture` their innermost own frame is on ("?" for a line without one, "-" for none).
fn calls_by_marked_line(
    calls: &BTreeMap<String, Vec<Call>>,
    target: &str,
    fixture: &str,
    sys: &[Sys],
) -> BTreeMap<String, usize> {
    let file = workload(fixture);
    let names = line_markers(&file);
    let mut out = BTreeMap::new();
    for c in calls.get(target).into_iter().flatten() {
        if !sys.contains(&c.sys) {
            continue;
        }
        let name = match c.own() {
            Some(f) if f.2 == file.display().to_string() => {
                names.get(&f.3).cloned().unwrap_or_else(|| "?".into())
            }
            _ => "-".into(),
        };
        *out.entry(name).or_insert(0) += 1;
    }
    out
}

/// The `@line NAME` markers of a fixture (`// @line NAME` or `# @line NAME` ending a
/// line), by line number.
fn line_markers(file: &std::path::Path) -> BTreeMap<u32, String> {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let n = l.split("// @line ").nth(1).or(l.split("# @line ").nth(1))?;
            Some((i as u32 + 1, n.trim().to_string()))
        })
        .collect()
}

/// The calls on DIR/`target` of kinds `sys`, in trace order, each named by the `@line NAME`
/// marker on the innermost of its frames in `fixture` that carries one ("-" for none): for
/// the calls of a helper, the line that called the helper.
fn marked_callers(
    calls: &BTreeMap<String, Vec<Call>>,
    target: &str,
    fixture: &str,
    sys: &[Sys],
) -> Vec<String> {
    let file = workload(fixture);
    let names = line_markers(&file);
    let file = file.display().to_string();
    calls
        .get(target)
        .into_iter()
        .flatten()
        .filter(|c| sys.contains(&c.sys))
        .map(|c| {
            c.frames
                .iter()
                .filter(|f| f.2 == file)
                .find_map(|f| names.get(&f.3).cloned())
                .unwrap_or_else(|| "-".into())
        })
        .collect()
}

/// The number after `what` at the start of a fixture's output (`captures 29 for ...`).
fn printed_count(out: &str, what: &str, script: &str) -> usize {
    out.strip_prefix(what)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("{script}: no count in {out:?}"))
}

#[test]
fn node_repeated_calls_are_said_once_and_still_name_each_line() {
    // A loop on one path at one line is said once (STICKY) and checked now and then; a
    // path whose site switched is checked at every call until a calm run. Every call
    // keeps its line, but for the documented price: when another line starts calling the
    // same function on a path, up to 256 of its first calls (the Node.js agent lets up to
    // 256 calls pass between two checks) may still go to the line before (F, E: 300 calls
    // each).
    require!("node");
    assert_repeats(Lang::Node, "repeats.js", (300, 300), 256);
}

#[test]
fn python_repeated_calls_are_said_once_and_still_name_each_line() {
    // Python's agent lets up to 256 calls pass between two checks, as Node.js's does:
    // up to 256 (F, E: 300 calls each).
    require!("python3");
    assert_repeats(Lang::Python, "repeats.py", (300, 300), 256);
}

/// repeats_lines.js / .py: every call at its own line, summed over the fixture's paths
/// (`opened`: the stats of the line that made the files, Python's open() fstat).
fn assert_first_calls_exact(lang: Lang, script: &str, opened: usize) {
    let (calls, _, _) = record_calls(lang, script, &[]);
    let mut by_line: BTreeMap<String, usize> = BTreeMap::new();
    for name in calls.keys().filter(|n| n.starts_with("each/")) {
        for (line, n) in calls_by_marked_line(&calls, name, script, STATS) {
            *by_line.entry(line).or_insert(0) += n;
        }
    }
    let mut want = per_line(&[("A", 40), ("B", 40), ("C", 40), ("E", 80), ("F", 40)]);
    if opened > 0 {
        want.insert("O".into(), opened);
    }
    assert_eq!(by_line, want, "every call at its own line");
}

#[test]
fn node_a_paths_first_calls_from_other_lines_each_name_their_line() {
    // Each of 40 paths opened (openSync: a repeated-call function too), then stat'ed once
    // at A, then once at B, then at C; 40 more opened, stat'ed twice at E, then once at
    // F. A path's first calls after its first, and after a change of function, are all
    // checked, so another line's calls are found at once (before, the call after a check
    // went unchecked: F's 40 calls were E's).
    require!("node");
    assert_first_calls_exact(Lang::Node, "repeats_lines.js", 0);
}

#[test]
fn python_a_paths_first_calls_from_other_lines_each_name_their_line() {
    // As Node.js's (exists, isfile and getsize are all os.stat's calls: one function).
    require!("python3");
    assert_first_calls_exact(Lang::Python, "repeats_lines.py", 80);
}

#[test]
fn a_place_the_agent_stops_naming_gets_native_stacks_again() {
    // unnamed_place.py calls os.stat (wrapped: the agent names the calls) 300 times, then
    // posix.stat (the original: not named) 100,000 times on another path, from one line
    // and so from one native place. Under eBPF the kernel stops copying the stack of a
    // place the agent names, and must copy it again once calls there go unnamed: the
    // reader takes the place out of the kernel's cache when it sees the first of them,
    // and each CPU's kept copy of that entry must go with it. The calls the kernel
    // answered before that go without a stack (docs/ebpf-backend.md, "Native call
    // stacks": a handful of milliseconds' worth); every call after them has its own.
    require!("python3");
    let d = scratch();
    let dir = d.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let (named_path, other) = (dir.join("stat"), dir.join("other"));
    std::fs::write(&named_path, "stat").unwrap();
    std::fs::write(&other, "other").unwrap();
    let trace = d.path().join("t.dvt");
    let out = Command::new(dejavu())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg("python3")
        .arg(workload("unnamed_place.py"))
        .arg(&dir)
        .env_remove("NODE_OPTIONS")
        .env_remove("PYTHONPATH")
        .env("DEJAVU_NATIVE_STATS", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let mut r = TraceReader::open(&trace).unwrap();
    let (mut stacks, mut unnamed) = (Vec::new(), Vec::new());
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Syscall(c) = rec {
            if !matches!(c.sys, Sys::Newfstatat | Sys::Stat | Sys::Statx) {
                continue;
            }
            let path = c.path.map(|p| r.strings().lossy(p).into_owned());
            if path.as_deref() == named_path.to_str() {
                stacks.push(c.stack);
            } else if path.as_deref() == other.to_str() {
                unnamed.push(c.stack);
            }
        }
    }
    assert_eq!(
        (stacks.len(), unnamed.len()),
        (300, 100_000),
        "os.stat's and posix.stat's\n{err}"
    );
    let native_only = |id: &Option<StackId>| {
        id.is_some_and(|id| {
            let frames = r.stack(id);
            !frames.is_empty() && frames.iter().all(|f| f.kind == FrameKind::Native)
        })
    };
    let named = stacks
        .iter()
        .filter(|id| id.is_some_and(|id| r.stack(id).iter().any(|f| f.kind == FrameKind::Python)))
        .count();
    assert_eq!(named, 300, "the agent names each os.stat call");
    // The calls without a stack of their own are those the kernel answered before the
    // reader took the place out (its delay: milliseconds, more on a loaded machine); every
    // call after them has its own. (Kept entries never dropped: all 100,000 without.)
    let without: Vec<usize> = (0..unnamed.len())
        .filter(|&i| !native_only(&unnamed[i]))
        .collect();
    assert!(
        without.last().is_none_or(|&l| l < 90_000),
        "posix.stat's 100,000 calls: {} without a native stack, at {:?}..{:?}\n{err}",
        without.len(),
        without.first(),
        without.last()
    );
    if std::env::var("DEJAVU_BACKEND").as_deref() == Ok("ebpf") {
        // The case this is about happened: calls the kernel left to the agent that it
        // did not name (else the test passes without testing it).
        let line = err
            .lines()
            .find(|l| l.contains("eBPF stacks:"))
            .unwrap_or_else(|| panic!("no eBPF stacks line\n{err}"));
        let misses: u64 = line
            .split(" of them not named")
            .next()
            .and_then(|h| h.rsplit('(').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no count of calls not named in: {line}"));
        assert!(
            misses >= 1,
            "no call left to the agent went unnamed: {line}"
        );
    }
}

#[test]
fn python_threads_calling_on_one_path_each_keep_their_line() {
    // The Python agent keeps one repeated-call entry per path, for the thread that called
    // last: two threads looping on one path take it from each other (each take checks and
    // says its site again), and every call keeps its own line (the STICKY dejavu keeps is
    // per thread and path). The main thread loops on the path first, alone, which the
    // agent's fast path takes as its own without asking (no thread started yet): the
    // threads started after it must each say their own site (fails if starting a thread
    // does not end that: their first calls ride the main thread's entry, unnamed).
    require!("python3");
    let script = "repeats_threads.py";
    let (calls, _, _) = record_calls(Lang::Python, script, &[]);
    let by_line = calls_by_marked_line(&calls, "stat", script, STATS);
    let want = per_line(&[("M", 100), ("L", 300), ("R", 300)]);
    assert_eq!(by_line, want, "every call at its own line");
}

#[test]
fn python_calls_inside_a_wrapped_call_do_not_ride_a_loops_fast_entry() {
    // A loop that stats one path from one line takes the Python agent's fast path (no
    // thread started: one dict lookup per call). Once, in the middle, a logging handler's
    // emit (a wrapped call, its ENTER said) writes to a stream whose write() stats the
    // same path from another line: those calls are emit's nested calls, each named at its
    // own line, not the loop's (fails if the fast entries outlive the start of a wrapped
    // call: the calls inside emit then ride the loop's entry, unnamed).
    require!("python3");
    let script = "repeats_nested.py";
    let (calls, _, _) = record_calls(Lang::Python, script, &[]);
    let by_line = calls_by_marked_line(&calls, "stat", script, STATS);
    let want = per_line(&[("M", 900), ("N", 50)]);
    assert_eq!(by_line, want, "every call at its own line");
}

/// The count a fixture printed on its line starting with `prefix` ("getcwd calls: N").
fn count_on_line(out: &str, prefix: &str) -> usize {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no count printed: {out}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn python_a_relative_path_after_a_chdir_is_said_again() {
    // The Python agent's entry for a relative path holds the working directory it was
    // said in: after a chdir the same string names another file, so its calls are said
    // again (at once, not at the next check of the site), and every call keeps its line;
    // the same after an os.fchdir. The agent reads the working directory once per chdir,
    // not at every call (a getcwd syscall per call before: 900 reads here).
    require!("python3");
    let script = "repeats_cwd.py";
    let (calls, _, _, out) = record_calls_out(Lang::Python, script, &[]);
    for target in ["a/stat", "b/stat", "c/stat"] {
        let by_line = calls_by_marked_line(&calls, target, script, STATS);
        let want = per_line(&[("S", 300)]);
        assert_eq!(by_line, want, "{target}: every call at its line");
    }
    let reads = count_on_line(&out, "getcwd calls: ");
    assert!(
        reads <= 12,
        "the agent read the working directory {reads} times"
    );
}

#[test]
fn node_an_absolute_paths_repeated_calls_do_not_read_the_working_directory() {
    // The Node.js agent's entry for a path holds the working directory only when the path
    // is relative: absolute paths' calls, before and after a chdir, each name their line
    // without a process.cwd() per call (a property lookup and a call, ~20 ns of the
    // agent's ~80 per call in a stat loop); a relative path's calls after the chdir (on
    // the first file again) name theirs too.
    require!("node");
    let script = "repeats_cwd.js";
    let (calls, _, _, out) = record_calls_out(Lang::Node, script, &[]);
    for (target, lines) in [
        ("stat", &[("S", 300), ("R", 300)][..]),
        ("phase", &[("T", 300)]),
    ] {
        let by_line = calls_by_marked_line(&calls, target, script, STATS);
        let want = per_line(lines);
        assert_eq!(by_line, want, "{target}: every call at its line");
    }
    let reads = count_on_line(&out, "cwd calls: ");
    assert!(
        reads <= 12,
        "the agent read the working directory {reads} times for 600 calls on an absolute path"
    );
}

#[test]
fn a_switch_of_function_on_a_path_does_not_check_its_site_at_every_call() {
    // The program reads a file, then stats it 1,000 times from one line (Node.js's module
    // loader reads a script that then stats itself): a different function on the path is
    // not another line calling the same function, so the stats are checked now and then
    // (1, 2, 4, ... then every 256th or 16th call), not at every call (before: 1,000
    // stack captures or frame walks, a stat loop 2.5 times slower under the default).
    require!("node");
    require!("python3");
    for (lang, script, what, most) in [
        (Lang::Node, "switch.js", "captures", 20),
        (Lang::Python, "switch.py", "walks", 100),
    ] {
        let d = scratch();
        let file = d.path().join("f");
        std::fs::write(&file, "f").unwrap();
        let out = Command::new(dejavu())
            .arg("record")
            .arg("-o")
            .arg(d.path().join("t.dvt"))
            .arg("--")
            .arg(lang.program())
            .arg(workload(script))
            .arg(&file)
            .arg("1000")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let n: usize = text
            .strip_prefix(what)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("{script}: no count in {text:?}"));
        assert!(
            n <= most,
            "{script}: {n} {what} for 1000 stats (at most {most})"
        );
        assert!(n >= 2, "{script}: the site is still checked: {text}");
    }
}

#[test]
fn a_helper_called_from_two_lines_is_checked_at_every_call_only_for_a_while() {
    // A helper stat'ing one path, called from two lines one after the other (a warm-up of
    // 50 calls, then 2,000): a site includes the callers, so the second line's first
    // check finds the site switched, and the path is checked at every call until 8 checks
    // in a row found the same site, then 1, 2, 4, ... calls apart again (docs/agents.md,
    // "Repeated calls"). Before, it stayed checked at every call: 1,987 stack captures
    // (Node.js) and 2,003 frame walks (Python) for these 2,050 calls; now 29 and 134. Every
    // call names its caller, but for the documented price at the switch: up to 256 of
    // the second line's first calls may name the first.
    require!("node");
    require!("python3");
    for (lang, script, what, most, price) in [
        (Lang::Node, "helper.js", "captures", 100, 256),
        (Lang::Python, "helper.py", "walks", 300, 256),
    ] {
        let (calls, _, _, out) = record_calls_out(lang, script, &[]);
        let n = printed_count(&out, what, script);
        assert!(
            n <= most,
            "{script}: {n} {what} for 2050 stats (at most {most})"
        );
        assert!(n >= 2, "{script}: the site is still checked: {out}");
        let lines = marked_callers(&calls, "stat", script, STATS);
        assert_eq!(lines.len(), 2050, "{script}: {lines:?}");
        assert!(
            lines[..50].iter().all(|l| l == "W"),
            "{script}: the warm-up's calls at W: {:?}",
            &lines[..50]
        );
        // The second line's calls: first those still given to W (found at the next
        // check), then every one at T.
        let late = &lines[50..];
        let misnamed = late.iter().take_while(|l| *l == "W").count();
        assert!(
            late[misnamed..].iter().all(|l| l == "T"),
            "{script}: once found, every call at T: {late:?}"
        );
        assert!(
            misnamed <= price,
            "{script}: {misnamed} of T's calls given to W (at most {price})"
        );
    }
}

#[test]
fn lines_taking_turns_on_a_path_keep_their_calls_but_for_a_bounded_price() {
    // A helper stat'ing one path, called from two lines taking turns in blocks: 30 times
    // 20 calls from A, then 20 from B (1,200 calls). The bound on the calls given to the
    // other line, from the design (docs/agents.md, "Repeated calls"):
    // - a call is given to the other line only between a switch of lines and the check that
    //   finds it; while the path is volatile every call is a check, so that happens only
    //   while it is not: before the first switch is found, and after each decay;
    // - while volatile, each block's first call finds a switch (switches + 1, calm 0) and
    //   its 19 others are at most 19 calm checks; a decay after s switches needs
    //   8 * 2^(s - 1) of them: 8 (s = 1) and 16 (s = 2) fit in a block, 32 (s = 3) does not.
    //   So at most 2 decays: at most 3 stretches of checks 1, 2, 4, ... calls apart;
    // - in such a stretch (from the entry's first call, or from a decay, both within the
    //   block before the other line's) the calls between checks are 1, 2, 4, 8, 16: the
    //   other line's block starts within 20 calls and gets a check within its first 17
    //   calls, while the gap is at most 16, so at most 16 of its calls are misnamed.
    // At most 3 * 16 = 48, and every block's last call names its line. (Measured: 17.
    // Agents that checked a switched path at every call for good: 16. Had the calm needed
    // stayed 8 checks at every switch: 219.)
    require!("node");
    require!("python3");
    const BLOCK: usize = 20;
    const MOST: usize = 3 * 16;
    for (lang, script) in [(Lang::Node, "blocks.js"), (Lang::Python, "blocks.py")] {
        let (calls, _, _, out) = record_calls_out(lang, script, &[]);
        let lines = marked_callers(&calls, "stat", script, STATS);
        assert_eq!(lines.len(), 60 * BLOCK, "{script}: {lines:?}");
        let mut misnamed = 0;
        for (b, block) in lines.chunks(BLOCK).enumerate() {
            let (own, other) = if b % 2 == 0 { ("A", "B") } else { ("B", "A") };
            // The first calls of a block may still go to the other line, then all are its.
            let late = block.iter().take_while(|l| *l == other).count();
            assert!(
                late < BLOCK && block[late..].iter().all(|l| l == own),
                "{script}: block {b} ({own}): {block:?}"
            );
            misnamed += late;
        }
        assert!(
            misnamed <= MOST,
            "{script}: {misnamed} calls given to the other line (at most {MOST}); {out}"
        );
    }
}

/// The repeated-call fixture `script` (repeats.js, repeats.py): each line's calls at that
/// line, but for up to `price` at the change from one loop to another on the same path
/// (`phases`: the calls of F, then of E); and said in far fewer reports than calls
/// (`record -v`'s agents line: an ENTER and an EXIT per call would be twice the calls).
fn assert_repeats(lang: Lang, script: &str, phases: (usize, usize), price: usize) {
    let d = scratch();
    for f in ["stat", "phase"] {
        std::fs::write(d.path().join(f), f).unwrap();
    }
    let out = Command::new(dejavu())
        .args(["record", "-v", "-o"])
        .arg(d.path().join("t.dvt"))
        .arg("--")
        .arg(lang.program())
        .arg(workload(script))
        .arg(d.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("language agents:"))
        .unwrap_or_else(|| panic!("no agents line: {err}"));
    let number_before = |what: &str| -> u64 {
        let head = line.split(what).next().unwrap();
        head.rsplit(|c: char| !c.is_ascii_digit())
            .find(|w| !w.is_empty())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no number before {what:?}: {line}"))
    };
    let reports = number_before(" reports");
    let sticky = number_before(" to a repeated call's site");
    assert!(reports < 150, "{line}");
    assert!(sticky >= 300, "most of the calls by their path: {line}");

    let (calls, _, _) = record_calls(lang, script, &[]);
    let stat = calls_by_marked_line(&calls, "stat", script, STATS);
    let want = per_line(&[("A", 200), ("X", 1), ("B", 20), ("C", 20), ("D", 20)]);
    assert_eq!(stat, want, "every call at its own line");
    let phase = calls_by_marked_line(&calls, "phase", script, STATS);
    let (f, e) = (phase.get("F").copied(), phase.get("E").copied());
    assert_eq!(phase.len(), 2, "{phase:?}");
    assert_eq!(
        f.unwrap_or(0) + e.unwrap_or(0),
        phases.0 + phases.1,
        "{phase:?}"
    );
    assert!(
        (phases.0..=phases.0 + price).contains(&f.unwrap_or(0)),
        "at most {price} of E's calls given to F: {phase:?}"
    );
}

#[test]
fn node_sync_calls_name_the_line_and_function_of_the_fs_call() {
    require!("node");
    let (calls, _, _) = record_calls(Lang::Node, "callsites.js", &[]);
    let sync = assert_site(&calls, "sync", "callsites.js", FrameKind::Js, STATS);
    assert_eq!(sync.len(), 2, "both calls, one stack: {sync:?}");
    assert!(sync.iter().all(|c| c.tid == c.pid), "on the main thread");
}

#[test]
fn node_callback_and_promise_calls_name_the_line_that_issued_them() {
    require!("node");
    let (calls, _, _) = record_calls(Lang::Node, "callsites.js", &[]);
    for name in ["callback", "promise", "relative"] {
        let got = assert_site(&calls, name, "callsites.js", FrameKind::Js, STATS);
        assert!(
            got.iter().all(|c| c.tid != c.pid),
            "{name}: made on a threadpool thread: {got:?}"
        );
    }
    // fs.promises.readFile: open, fstat, read and close on threadpool threads, all the
    // JavaScript line's.
    let rf = assert_site(
        &calls,
        "readfile",
        "callsites.js",
        FrameKind::Js,
        &[Sys::Openat, Sys::Statx, Sys::Fstat, Sys::Read, Sys::Close],
    );
    let kinds: std::collections::BTreeSet<Sys> = rf.iter().map(|c| c.sys).collect();
    assert!(
        kinds.contains(&Sys::Openat) && kinds.contains(&Sys::Read) && kinds.contains(&Sys::Close),
        "{kinds:?}"
    );
}

#[test]
fn node_fs_streams_and_file_handles_name_the_lines_that_made_their_calls() {
    require!("node");
    let (calls, _, _) = record_calls(Lang::Node, "callsites.js", &[]);
    let f = "callsites.js";
    let js = FrameKind::Js;
    // A write stream: its open and close are the line that created it, its writes (made
    // later, from the stream's code, on the threadpool) the line of the program's write().
    assert_site_on(
        &calls,
        "stream",
        "stream",
        f,
        js,
        &[Sys::Openat, Sys::Close],
    );
    let w = assert_site_on(
        &calls,
        "stream",
        "stream-write",
        f,
        js,
        &[Sys::Write, Sys::Pwrite64, Sys::Writev, Sys::Pwritev],
    );
    assert!(w.iter().all(|c| c.tid != c.pid), "on the threadpool: {w:?}");
    // A read stream: everything is the line that created it.
    assert_site(
        &calls,
        "readstream",
        f,
        js,
        &[Sys::Openat, Sys::Read, Sys::Pread64, Sys::Close],
    );
    // A FileHandle: its read is fh.read()'s line; its open and its close (an own
    // property of the handle, not wrapped) the open's.
    assert_site_on(
        &calls,
        "filehandle",
        "filehandle",
        f,
        js,
        &[Sys::Openat, Sys::Close],
    );
    assert_site_on(
        &calls,
        "filehandle",
        "filehandle-read",
        f,
        js,
        &[Sys::Read, Sys::Pread64],
    );
}

#[test]
fn node_worker_threads_and_child_processes_report_too() {
    require!("node");
    let (calls, _, _) = record_calls(Lang::Node, "callsites.js", &[]);
    let w = assert_site(
        &calls,
        "worker",
        "callsites-worker.js",
        FrameKind::Js,
        STATS,
    );
    assert!(
        w.iter().all(|c| c.tid != c.pid),
        "on the worker's thread: {w:?}"
    );
    let main_pid = calls["sync"][0].pid;
    let ch = assert_site(&calls, "child", "callsites-child.js", FrameKind::Js, STATS);
    assert!(
        ch.iter().all(|c| c.pid != main_pid),
        "in the child process: {ch:?}"
    );
}

#[test]
fn python_calls_name_the_line_and_function_of_the_call() {
    require!("python3");
    let (calls, _, _) = record_calls(Lang::Python, "callsites.py", &[]);
    let st = assert_site(&calls, "stat", "callsites.py", FrameKind::Python, STATS);
    assert_eq!(st.len(), 2, "{st:?}");
    // Through os.path and pathlib: the program's line, not the standard library's.
    assert_site(&calls, "exists", "callsites.py", FrameKind::Python, STATS);
    assert_site(&calls, "pathlib", "callsites.py", FrameKind::Python, STATS);
    // open(): the openat is the line's (the reads through the file object come later).
    let o = calls.get("open").unwrap();
    let (line, _) = site(&workload("callsites.py"), "open");
    assert!(
        o.iter()
            .any(|c| c.sys == Sys::Openat
                && c.own().is_some_and(|t| t.1 == "open_site" && t.3 == line)),
        "{o:?}"
    );
    // os.makedirs (through os.mkdir): every mkdir the call made.
    let mk: Vec<&Call> = calls
        .iter()
        .filter(|(k, _)| k.starts_with("makedirs-dir"))
        .flat_map(|(_, v)| v.iter().filter(|c| c.sys == Sys::Mkdir))
        .collect();
    let (line, function) = site(&workload("callsites.py"), "makedirs-dir");
    assert_eq!(mk.len(), 3, "{mk:?}");
    assert!(
        mk.iter()
            .all(|c| c.own().is_some_and(|t| t.1 == function && t.3 == line)),
        "{mk:?}"
    );
    let th = assert_site(&calls, "thread", "callsites.py", FrameKind::Python, STATS);
    assert!(th.iter().all(|c| c.tid != c.pid), "{th:?}");
    // A file object's read, write (at its flush) and close, after open() returned: the
    // open's line.
    let fo = assert_site(
        &calls,
        "fileobj",
        "callsites.py",
        FrameKind::Python,
        &[Sys::Openat, Sys::Read, Sys::Write, Sys::Close],
    );
    let kinds: std::collections::BTreeSet<Sys> = fo.iter().map(|c| c.sys).collect();
    assert!(
        [Sys::Openat, Sys::Read, Sys::Write, Sys::Close]
            .iter()
            .all(|k| kinds.contains(k)),
        "{fo:?}"
    );
}

#[test]
fn python_children_report_over_the_inherited_channel() {
    require!("python3");
    let (calls, _, _) = record_calls(Lang::Python, "callsites.py", &[]);
    let main_pid = calls["stat"][0].pid;
    // subprocess.run closes inherited descriptors: the agent kept the channel open.
    let ch = assert_site(
        &calls,
        "child",
        "callsites_child.py",
        FrameKind::Python,
        STATS,
    );
    assert!(ch.iter().all(|c| c.pid != main_pid), "{ch:?}");
    // os.fork: the child is a new process with its own site numbers.
    let f = assert_site(&calls, "fork", "callsites.py", FrameKind::Python, STATS);
    assert!(f.iter().all(|c| c.pid != main_pid), "{f:?}");
}

#[test]
fn stacks_off_loads_no_agent_and_records_no_stacks() {
    require!("node");
    require!("python3");
    for (lang, script) in [(Lang::Node, "callsites.js"), (Lang::Python, "callsites.py")] {
        let (calls, stacks, paths) = record_calls(lang, script, &["--stacks", "off"]);
        assert_eq!(stacks, 0, "{script}: no stack at all");
        assert!(calls.values().flatten().all(|c| c.frames.is_empty()));
        assert!(
            !paths.iter().any(|p| p.contains("dejavu-agents-")),
            "{script}: no agent file was touched"
        );
        assert!(
            calls.contains_key("sync") || calls.contains_key("stat"),
            "{script} ran"
        );
    }
}

// ---- start-up marks

/// The marks of `pid` in `evs`, with their positions.
fn marks_of(evs: &[Ev], pid: u32, kind: MarkKind) -> Vec<(usize, u64)> {
    evs.iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Ev::Mark(m) if m.pid == pid && m.kind == kind => Some((i, m.ts)),
            _ => None,
        })
        .collect()
}

/// The calls on DIR/`name`, with their positions and times.
fn calls_on<'a>(evs: &'a [Ev], dir: &Path, name: &str) -> Vec<(usize, u64, &'a Call)> {
    let want = dir.join(name).display().to_string();
    evs.iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Ev::Call { ts, call, path } if path.as_deref() == Some(want.as_str()) => {
                Some((i, *ts, call))
            }
            _ => None,
        })
        .collect()
}

/// A scratch directory holding empty files of the given names (canonical path).
fn dir_with(d: &tempfile::TempDir, names: &[&str]) -> PathBuf {
    let dir = d.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    for n in names {
        std::fs::write(dir.join(n), n).unwrap();
    }
    dir.canonicalize().unwrap()
}

/// Asserts that `pid` has exactly one MainDone, after every call on DIR/main and before
/// every call on DIR/timer, in trace order and in time.
fn assert_main_done_between(evs: &[Ev], dir: &Path, what: &str) {
    let main = calls_on(evs, dir, "main");
    let timer = calls_on(evs, dir, "timer");
    assert!(
        !main.is_empty() && !timer.is_empty(),
        "{what}: main {main:?} timer {timer:?}"
    );
    let pid = main[0].2.pid;
    assert!(main
        .iter()
        .chain(&timer)
        .all(|c| c.2.pid == pid && c.2.tid == pid));
    let done = marks_of(evs, pid, MarkKind::MainDone);
    assert_eq!(done.len(), 1, "{what}: one MainDone: {done:?}");
    let (at, ts) = done[0];
    let (last_main, first_timer) = (main.last().unwrap(), &timer[0]);
    assert!(
        last_main.0 < at && at < first_timer.0,
        "{what}: MainDone at record {at}, the main module's last call at {}, the timer's first at {}",
        last_main.0,
        first_timer.0
    );
    assert!(
        last_main.1 < ts && ts < first_timer.1,
        "{what}: MainDone at {ts} ns, the main module's last call at {}, the timer's first at {}",
        last_main.1,
        first_timer.1
    );
    // Nobody else: no other process of the program ran a main module.
    let others: Vec<&dejavu_trace::Mark> = evs
        .iter()
        .filter_map(|e| match e {
            Ev::Mark(m) if m.kind == MarkKind::MainDone && m.pid != pid => Some(m),
            _ => None,
        })
        .collect();
    assert!(others.is_empty(), "{what}: {others:?}");
    // The agent said hello before the main module's first call.
    let ready = marks_of(evs, pid, MarkKind::AgentReady);
    assert_eq!(ready.len(), 1, "{what}: one AgentReady: {ready:?}");
    assert!(ready[0].0 < main[0].0 && ready[0].1 < main[0].1, "{what}");
}

#[test]
fn node_marks_the_end_of_a_commonjs_main_module_once_and_not_for_its_worker() {
    require!("node");
    let d = scratch();
    let dir = dir_with(&d, &["main", "worker", "timer"]);
    let (evs, _) = record_events(
        Lang::Node,
        &workload("startup.js"),
        &[dir.to_str().unwrap()],
        &[],
    );
    assert_main_done_between(&evs, &dir, "startup.js");
    // The worker thread ran (and reported) while the main module was done.
    let worker = calls_on(&evs, &dir, "worker");
    assert!(!worker.is_empty(), "the worker ran");
    let pid = worker[0].2.pid;
    assert!(worker.iter().all(|c| c.2.tid != pid), "{worker:?}");
    assert!(
        worker
            .iter()
            .all(|c| c.2.own().is_some_and(|f| f.0 == FrameKind::Js)),
        "the worker's agent reported: {worker:?}"
    );
    assert_eq!(marks_of(&evs, pid, MarkKind::MainDone).len(), 1);
    assert_eq!(marks_of(&evs, pid, MarkKind::AgentReady).len(), 1);
    // dejavu keeps one mark per process whatever comes: the agents themselves send one
    // MAIN_DONE (kind 8), from the main thread, and a HELLO (kind 1) per thread's agent.
    let m = run(
        Lang::Node,
        &workload("startup.js"),
        &[dir.to_str().unwrap()],
        Mode::Channel,
        &d.path().join("scratch"),
    )
    .messages;
    assert_eq!((m.get(&8), m.get(&1)), (Some(&1), Some(&2)), "{m:?}");
}

#[test]
fn node_marks_the_end_of_an_es_module_main_after_its_top_level_await() {
    require!("node");
    let d = scratch();
    let dir = dir_with(&d, &["main", "timer"]);
    let (evs, _) = record_events(
        Lang::Node,
        &workload("startup.mjs"),
        &[dir.to_str().unwrap()],
        &[],
    );
    assert_eq!(
        calls_on(&evs, &dir, "main").len(),
        2,
        "both sides of the await"
    );
    assert_main_done_between(&evs, &dir, "startup.mjs");
}

#[test]
fn node_sends_no_main_done_for_a_main_module_that_exits_in_it() {
    require!("node");
    let d = scratch();
    let dir = dir_with(&d, &["main"]);
    let script = d.path().join("exits.js");
    std::fs::write(
        &script,
        "require('fs').statSync(process.argv[2] + '/main'); setTimeout(() => {}, 10); process.exit(0);\n",
    )
    .unwrap();
    let (evs, _) = record_events(Lang::Node, &script, &[dir.to_str().unwrap()], &[]);
    let main = calls_on(&evs, &dir, "main");
    assert_eq!(main.len(), 1);
    let pid = main[0].2.pid;
    assert!(marks_of(&evs, pid, MarkKind::MainDone).is_empty());
    assert_eq!(marks_of(&evs, pid, MarkKind::AgentReady).len(), 1);
}

#[test]
fn python_marks_each_process_ready_before_its_first_call_from_the_script() {
    require!("python3");
    let d = scratch();
    let dir = dir_with(
        &d,
        &[
            "stat", "exists", "pathlib", "open", "fileobj", "thread", "child", "fork",
        ],
    );
    let (evs, _) = record_events(
        Lang::Python,
        &workload("callsites.py"),
        &[dir.to_str().unwrap()],
        &[],
    );
    let scripts = [
        workload("callsites.py").display().to_string(),
        workload("callsites_child.py").display().to_string(),
    ];
    // Per process: its first call with a frame of the script it runs. (A subprocess's
    // calls until its exec are its parent's line, which started it: they do not count.)
    let mut first: BTreeMap<u32, (usize, u64)> = BTreeMap::new();
    for (i, e) in evs.iter().enumerate() {
        if let Ev::Call { ts, call, .. } = e {
            if call.sys == Sys::Execve {
                first.remove(&call.pid);
                continue;
            }
            if call.frames.iter().any(|f| scripts.contains(&f.2)) {
                first.entry(call.pid).or_insert((i, *ts));
            }
        }
    }
    // The program, its subprocess and its fork.
    assert_eq!(first.len(), 3, "{first:?}");
    for (pid, (at, ts)) in first {
        let ready = marks_of(&evs, pid, MarkKind::AgentReady);
        assert_eq!(ready.len(), 1, "process {pid}: {ready:?}");
        assert!(
            ready[0].0 < at && ready[0].1 < ts,
            "process {pid}: AgentReady {:?}, first call from the script at record {at}, {ts} ns",
            ready[0]
        );
        assert!(marks_of(&evs, pid, MarkKind::MainDone).is_empty());
    }
}

// ---- the runtime's frames between the call and the program's line

#[test]
fn node_module_loading_for_a_require_carries_the_loaders_frames_and_the_require_line() {
    require!("node");
    let script = workload("requires.js");
    let (evs, _) = record_events(Lang::Node, &script, &[], &[]);
    let lib = workload("requires-lib.js").display().to_string();
    let (line, function) = site(&script, "require");
    let loads: Vec<&Call> = evs
        .iter()
        .filter_map(|e| match e {
            Ev::Call { call, path, .. }
                if path.as_deref() == Some(lib.as_str()) && call.sys == Sys::Openat =>
            {
                Some(call)
            }
            _ => None,
        })
        .collect();
    assert!(!loads.is_empty(), "the module was opened");
    for c in loads {
        assert!(is_runtime_frame(&c.frames[0]), "{c:?}");
        assert!(
            c.frames
                .iter()
                .any(|f| f.2.starts_with("node:internal/modules/")),
            "the module loader's frames: {c:?}"
        );
        assert_eq!(
            c.own(),
            Some(&(
                FrameKind::Js,
                function.clone(),
                script.display().to_string(),
                line
            )),
            "further out, the require line: {c:?}"
        );
        assert!(c.frames.len() <= 24, "{c:?}");
    }
}

#[test]
fn python_calls_through_the_standard_library_carry_its_frames_and_the_programs_line() {
    require!("python3");
    let d = scratch();
    let dir = dir_with(&d, &["isdir"]);
    let script = workload("stdlib.py");
    let (evs, _) = record_events(Lang::Python, &script, &[dir.to_str().unwrap()], &[]);
    let (line, function) = site(&script, "isdir");
    let stats: Vec<&Call> = calls_on(&evs, &dir, "isdir")
        .into_iter()
        .map(|c| c.2)
        .filter(|c| STATS.contains(&c.sys))
        .collect();
    assert_eq!(stats.len(), 1, "{stats:?}");
    let c = stats[0];
    let top = &c.frames[0];
    assert_eq!(top.1, "isdir", "{c:?}");
    assert!(
        top.2 == "<frozen genericpath>" || top.2.ends_with("/genericpath.py"),
        "genericpath's frame first: {c:?}"
    );
    assert_eq!(
        c.own(),
        Some(&(
            FrameKind::Python,
            function,
            script.display().to_string(),
            line
        )),
        "then the program's line: {c:?}"
    );
}

#[test]
fn python_http_server_listing_a_directory_names_its_frames_in_http_server() {
    require!("python3");
    use std::io::{BufRead, BufReader, Write};
    let d = scratch();
    let dir = dir_with(&d, &["a.txt", "b.txt"]);
    std::fs::create_dir(dir.join("sub")).unwrap();
    let trace = d.path().join("t.dvt");
    let mut cmd = Command::new(dejavu());
    cmd.arg("record")
        .arg("-o")
        .arg(&trace)
        .args([
            "--",
            "python3",
            "-u",
            "-m",
            "http.server",
            "0",
            "--bind",
            "127.0.0.1",
        ])
        .arg("--directory")
        .arg(&dir)
        .env_remove("NODE_OPTIONS")
        .env_remove("PYTHONPATH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: resetting a signal's disposition is async-signal-safe. A harness that
    // ignores SIGTERM must not make the server ignore ours.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    // "Serving HTTP on 127.0.0.1 port 41233 (http://127.0.0.1:41233/) ..."
    let port: u16 = line
        .split("port ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    assert!(page.contains("a.txt") && page.contains("sub/"), "{page}");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    let mut r = TraceReader::open(&trace).unwrap();
    let mut stacks = Vec::new();
    let listed: Vec<String> = ["a.txt", "b.txt", "sub"]
        .iter()
        .map(|n| dir.join(n).display().to_string())
        .collect();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Syscall(c) = rec {
            let on_listed = c
                .path
                .is_some_and(|p| listed.contains(&r.strings().lossy(p).into_owned()));
            if on_listed && STATS.contains(&c.sys) {
                stacks.push(c.stack);
            }
        }
    }
    assert!(stacks.len() >= 3, "each listed entry stat'ed: {stacks:?}");
    for id in stacks {
        let frames: Vec<Fr> = id
            .map(|id| {
                r.stack(id)
                    .iter()
                    .map(|f| {
                        let s = |i: Option<dejavu_trace::StrId>| {
                            i.map(|i| r.strings().lossy(i).into_owned())
                                .unwrap_or_default()
                        };
                        (f.kind, s(f.function), s(f.file), f.line)
                    })
                    .collect()
            })
            .unwrap_or_default();
        // No frame of a program's own: the standard library's, not the interpreter's C.
        assert!(
            frames.iter().any(|f| f.0 == FrameKind::Python
                && f.2.ends_with("/http/server.py")
                && f.1.ends_with("list_directory")),
            "{frames:?}"
        );
        assert!(frames.iter().all(is_runtime_frame), "{frames:?}");
        assert!(frames.len() <= 24);
    }
}

/// A TMPDIR with a colon in it: the agents' directory goes on PYTHONPATH, which a colon
/// would split, so dejavu puts it under /tmp instead and Python still names its line.
#[test]
fn python_names_its_line_when_tmpdir_holds_a_colon() {
    if !common::have("python3") {
        common::skip("python3", "python3 is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("a:b");
    std::fs::create_dir(&tmp).unwrap();
    let script = dir.path().join("st.py");
    std::fs::write(
        &script,
        "import os\nfor i in range(20):\n    os.stat('/etc/hostname')\n",
    )
    .unwrap();
    let trace = dir.path().join("t.dvt");
    let st = Command::new(dejavu())
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", "python3"])
        .arg(&script)
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new(dejavu())
        .args(["report", "--color", "never"])
        .arg(&trace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = format!("{}:3", script.display());
    assert!(text.contains(&line), "the agent names {line}: {text}");
}

#[test]
fn node_in_a_mount_namespace_with_its_own_tmp_still_finds_its_agent() {
    // systemd's PrivateTmp, or unshare -m and a tmpfs on /tmp: the agents' directory is
    // outside /tmp (in /dev/shm), so Node.js still loads its --require and names the line.
    require!("node");
    if unsafe { libc::geteuid() } != 0 || !common::have("unshare") {
        common::skip("root", "a mount namespace needs root and unshare");
        return;
    }
    let d = scratch();
    let trace = d.path().join("t.dvt");
    let out = Command::new(dejavu())
        .args(["record", "-o"])
        .arg(&trace)
        .args([
            "--",
            "unshare",
            "-m",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs /tmp && node -e \"const fs = require('fs'); \
             for (let i = 0; i < 20; i++) fs.statSync('/etc/hostname'); console.log('ran')\"",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n", "{err}");
    let rep = Command::new(dejavu())
        .args(["report", "--color", "never"])
        .arg(&trace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&rep.stdout);
    assert!(
        text.contains("[eval]:1"),
        "the agent named the line: {text}"
    );
}

#[test]
fn python_warnings_raised_inside_a_wrapped_call_name_the_programs_line() {
    require!("python3");
    let d = scratch();
    let script = workload("warnings_open.py");
    let file = d.path().join("out.bin");
    for mode in ["filtered", "plain"] {
        let native = Command::new("python3")
            .arg(&script)
            .arg(mode)
            .arg(&file)
            .output()
            .unwrap();
        let out = Command::new(dejavu())
            .args(["record", "-o"])
            .arg(d.path().join("t.dvt"))
            .args(["--", "python3"])
            .arg(&script)
            .arg(mode)
            .arg(&file)
            .output()
            .unwrap();
        let strip = |b: &[u8]| {
            String::from_utf8_lossy(b)
                .lines()
                .filter(|l| !l.starts_with("dejavu: "))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        };
        assert_eq!(strip(&out.stderr), strip(&native.stderr), "{mode}");
        assert_eq!(out.stdout, native.stdout, "{mode}");
    }
}

/// The calls of the process that made a call on `marker`, split at its agent's hello:
/// (the calls before it and after the process's last execve: how many, how many with a
/// stack), whether it said hello since that execve, and the marker call's stack,
/// innermost frame first.
fn start_up_split(trace: &Path, marker: &Path) -> ((usize, usize), bool, Vec<Fr>) {
    let mut r = TraceReader::open(trace).unwrap();
    let marker = marker.display().to_string();
    let mut recs = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::Syscall(c) => {
                let path = c.path.map(|p| r.strings().lossy(p).into_owned());
                recs.push(Ok((c.pid, c.sys, c.stack, path)));
            }
            Record::Mark(m) if m.kind == MarkKind::AgentReady => recs.push(Err(m.pid)),
            _ => {}
        }
    }
    let Some(pid) = recs.iter().find_map(|x| match x {
        Ok((pid, _, _, Some(p))) if *p == marker => Some(*pid),
        _ => None,
    }) else {
        panic!("no call on {marker}");
    };
    let (mut before, mut with, mut ready, mut site) = (0, 0, false, Vec::new());
    for x in &recs {
        match x {
            Err(p) if *p == pid => ready = true,
            Ok((p, sys, stack, path)) if *p == pid => {
                if path.as_deref() == Some(marker.as_str()) {
                    let s = |id: Option<dejavu_trace::StrId>| {
                        id.map(|i| r.strings().lossy(i).into_owned())
                            .unwrap_or_default()
                    };
                    site = stack
                        .map(|id| {
                            r.stack(id)
                                .iter()
                                .map(|f| (f.kind, s(f.function), s(f.file), f.line))
                                .collect()
                        })
                        .unwrap_or_default();
                } else if *sys == Sys::Execve {
                    // The interpreter's own calls only (`python3` may be pyenv's shell
                    // script, which execs it in the same process).
                    (before, with, ready) = (0, 0, false);
                } else if !ready {
                    before += 1;
                    with += stack.is_some() as usize;
                }
            }
            _ => {}
        }
    }
    ((before, with), ready, site)
}

#[test]
fn an_interpreters_start_up_goes_without_native_stacks_until_its_agent_says_hello() {
    require!("python3");
    require!("node");
    let d = scratch();
    let marker = d.path().canonicalize().unwrap().join("marker");
    std::fs::write(&marker, "x").unwrap();
    let m = marker.display().to_string();
    let py = format!("import os, time\ntime.sleep(0.3)\nos.stat({m:?})\n");
    let js = format!("require('fs').statSync({m:?});");
    let run = |flags: &[&str], cmd: &[&str]| {
        let trace = d.path().join("t.dvt");
        let (st, err) = common::record_quiet_with(&trace, flags, cmd, d.path());
        assert!(st.success(), "{cmd:?}: {err}");
        start_up_split(&trace, &marker)
    };
    // The default: the interpreter's calls before its agent's hello (its start-up, the
    // runtime's in the report) have no native stack; the program's call after it has the
    // agent's site.
    for (cmd, kind) in [
        (["python3", "-c", py.as_str()], FrameKind::Python),
        (["node", "-e", js.as_str()], FrameKind::Js),
    ] {
        let ((before, with), ready, site) = run(&[], &cmd);
        assert!(ready, "{cmd:?}: no hello");
        assert!(before >= 20, "{cmd:?}: {before} calls before the hello");
        assert_eq!(
            with, 0,
            "{cmd:?}: {with} of {before} start-up calls with a stack"
        );
        assert_eq!(site.first().map(|f| f.0), Some(kind), "{cmd:?}: {site:?}");
    }
    // `--stacks all` takes them.
    let ((before, with), ready, _) = run(&["--stacks", "all"], &["python3", "-c", &py]);
    assert!(ready);
    assert!(
        with * 10 >= before * 9,
        "{with} of {before} start-up calls with a stack"
    );
    // An interpreter no agent will load into (-I: PYTHONPATH ignored) keeps its native
    // stacks: the call after the pause (by then the eBPF reader has read its exec) has one.
    let ((before, _), ready, site) = run(&[], &["python3", "-I", "-c", &py]);
    assert!(!ready, "python3 -I said hello");
    assert!(before >= 20, "{before}");
    assert!(
        site.first().is_some_and(|f| f.0 == FrameKind::Native),
        "python3 -I's stat: {site:?}"
    );
    // Nor into one exec'd without the agents' channel (every descriptor closed first),
    // whose environment still names it.
    let closing = format!(
        "import os\nos.closerange(3, 65536)\nos.execvp('python3', ['python3', '-c', {py:?}])\n"
    );
    let (_, ready, site) = run(&[], &["python3", "-c", &closing]);
    assert!(!ready, "a python3 without the channel said hello");
    assert!(
        site.first().is_some_and(|f| f.0 == FrameKind::Native),
        "the stat of a python3 without the channel: {site:?}"
    );
}
