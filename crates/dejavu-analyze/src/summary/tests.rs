//! Tests of the summary: numbers on hand-built traces, and snapshots of both renderings.

// A failed unwrap is a failed test, with the backtrace to find it.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::testutil::{file_stat, meta, reader, TestTrace};
use dejavu_trace::{End, Exec, Exit, Lost, Signal, Spawn, TraceWriter, WriterOptions};

fn summarize(bytes: &[u8]) -> Summary {
    Summary::from_reader(&mut reader(bytes)).unwrap()
}

fn text(s: &Summary, opts: &TextOptions) -> String {
    let mut out = Vec::new();
    s.render_text(&mut out, opts).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn syscalls_count_calls_errors_time_and_errnos() {
    let mut t = TestTrace::new(&meta(&["prog"]));
    for i in 0..10 {
        let s = t.call(i * 10, 1, Sys::Stat, "/etc/hosts", 0, 100);
        t.sys(s);
    }
    for i in 0..3 {
        let s = t.call(200 + i, 1, Sys::Stat, "/nope", -2, 50);
        t.sys(s);
    }
    let s = t.call(300, 1, Sys::Openat, "/root/x", -13, 7);
    t.sys(s);
    let s = t.call(301, 1, Sys::Openat, "/nope", -2, 5);
    t.sys(s);
    let s = t.call(302, 1, Sys::Openat, "/etc/hosts", 3, 1000);
    t.sys(s);
    let sum = summarize(&t.finish(End {
        end_ts: 5000,
        ..End::default()
    }));

    let stat = &sum.syscalls[&Sys::Stat];
    assert_eq!(
        (stat.calls, stat.errors, stat.time_ns, stat.unfinished),
        (13, 3, 1150, 0)
    );
    assert_eq!(stat.errnos, BTreeMap::from([(2, 3)]));
    assert_eq!(stat.mean_ns(), 1150 / 13);
    let open = &sum.syscalls[&Sys::Openat];
    assert_eq!((open.calls, open.errors, open.time_ns), (3, 2, 1012));
    assert_eq!(open.errnos, BTreeMap::from([(2, 1), (13, 1)]));
    assert_eq!(
        (sum.totals.calls, sum.totals.errors, sum.totals.time_ns),
        (16, 5, 2162)
    );
    assert_eq!(sum.syscalls.len(), 2, "only calls that occur are listed");
    assert_eq!(sum.records, 16);
    assert_eq!(sum.duration_ns, 5000);
    assert_eq!(sum.lost_events, 0);
    assert!(sum.truncation.is_none());

    let j = sum.to_json();
    assert_eq!(j["syscalls"]["stat"]["calls"], 13);
    assert_eq!(j["syscalls"]["stat"]["errors"], 3);
    assert_eq!(j["syscalls"]["stat"]["time_ns"], 1150);
    assert_eq!(j["syscalls"]["openat"]["errnos"]["EACCES"], 1);
    assert_eq!(j["syscalls"]["openat"]["errnos"]["ENOENT"], 1);
}

#[test]
fn unfinished_calls_are_calls_but_neither_errors_nor_time() {
    let mut t = TestTrace::new(&meta(&["prog"]));
    let mut s = t.call(0, 1, Sys::Read, "pipe:[77]", -4, 999_999);
    s.ev = ev::UNFINISHED | ev::PATH_FROM_FD;
    t.sys(s);
    let s = t.call(10, 1, Sys::Read, "pipe:[77]", 5, 20);
    t.sys(s);
    let sum = summarize(&t.finish(End::default()));
    let read = &sum.syscalls[&Sys::Read];
    assert_eq!(
        (read.calls, read.unfinished, read.errors, read.time_ns),
        (2, 1, 0, 20)
    );
    assert_eq!(read.mean_ns(), 20, "the mean is over finished calls");
    assert_eq!(sum.totals.unfinished, 1);
    let p = &sum.paths[0];
    assert_eq!((p.calls, p.errors, p.time_ns), (2, 0, 20));
    assert_eq!(sum.to_json()["syscalls"]["read"]["unfinished"], 1);
    let out = text(&sum, &TextOptions::default());
    assert!(
        out.contains("1 call never returned while traced (read 1): counted as calls"),
        "{out}"
    );
}

#[test]
fn paths_count_the_primary_path_only_and_sort_by_time_then_calls() {
    let mut t = TestTrace::new(&meta(&["prog"]));
    // /a: 3 calls, 300ns. /b: 1 call, 300ns (ties /a on time, fewer calls). /c: 1 call,
    // 900ns. /new appears only as rename's path2 and must not be counted.
    for i in 0..3 {
        let s = t.call(i, 1, Sys::Lstat, "/a", 0, 100);
        t.sys(s);
    }
    let s = t.call(10, 1, Sys::Stat, "/b", 0, 300);
    t.sys(s);
    let mut s = t.call(20, 1, Sys::Rename, "/c", 0, 900);
    s.path2 = Some(t.s("/new"));
    t.sys(s);
    let s = t.call(30, 1, Sys::Access, "/a", -2, 0);
    t.sys(s);
    let s = t.call(40, 1, Sys::Fsync, "", 0, 5);
    t.sys(s);
    let sum = summarize(&t.finish(End::default()));

    let order: Vec<&str> = sum.paths.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(order, ["/c", "/a", "/b"]);
    let a = &sum.paths[1];
    assert_eq!((a.calls, a.errors, a.time_ns), (4, 1, 300));
    assert_eq!(a.by_syscall, [(Sys::Lstat, 3), (Sys::Access, 1)]);
    let j = sum.to_json();
    assert_eq!(j["paths"][1]["path"], "/a");
    assert_eq!(j["paths"][1]["by_syscall"]["lstat"], 3);
    assert_eq!(j["paths"][1]["by_syscall"]["access"], 1);
    assert_eq!(j["paths"].as_array().unwrap().len(), 3);
}

#[test]
fn the_same_path_defined_twice_is_listed_once_and_bad_utf8_is_replaced() {
    // Nothing in the format forbids a producer from defining the same bytes under two ids.
    let strs: [&[u8]; 3] = [b"/dup", b"/dup", b"/bad\xff"];
    let mut b = SummaryBuilder::new(&meta(&["prog"]));
    for id in [0u32, 1, 2] {
        let mut s = Syscall::new(id as u64, 1, 1, Sys::Stat);
        s.path = Some(StrId(id));
        s.dur = 10;
        b.record(&Record::Syscall(s), |id| strs[id.0 as usize]);
    }
    let sum = b.finish_with(None, None, |id| strs[id.0 as usize]);
    let paths: Vec<(&str, u64)> = sum
        .paths
        .iter()
        .map(|p| (p.path.as_str(), p.calls))
        .collect();
    assert_eq!(paths, [("/dup", 2), ("/bad\u{fffd}", 1)]);
}

#[test]
fn paths_with_block_local_ids_are_counted_by_their_bytes() {
    // Block-local ids are renumbered in every block; only the bytes identify a path.
    let opts = WriterOptions {
        block_bytes: 1,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &meta(&["prog"]), opts).unwrap();
    for (i, p) in ["/a", "/b", "/a", "/a", "/b"].iter().enumerate() {
        let mut s = Syscall::new(i as u64, 1, 1, Sys::Stat);
        s.path = Some(w.intern_local(p.as_bytes()));
        s.dur = 10;
        w.push(&Record::Syscall(s)).unwrap();
    }
    // The same path under a global id joins the local ones.
    let mut s = Syscall::new(9, 1, 1, Sys::Lstat);
    s.path = Some(w.intern(b"/b"));
    w.push(&Record::Syscall(s)).unwrap();
    let sum = summarize(&w.finish(End::default()).unwrap());
    type Row<'a> = (&'a str, u64, &'a [(Sys, u64)]);
    let paths: Vec<Row> = sum
        .paths
        .iter()
        .map(|p| (p.path.as_str(), p.calls, &p.by_syscall[..]))
        .collect();
    assert_eq!(
        paths,
        [
            ("/a", 3, &[(Sys::Stat, 3)][..]),
            ("/b", 3, &[(Sys::Stat, 2), (Sys::Lstat, 1)][..])
        ]
    );
}

#[test]
fn processes_get_parents_argv_exit_and_threads() {
    let mut t = TestTrace::new(&meta(&["node", "server.js"]));
    // Root 100 never execs: its argv is the meta command. It has two more threads.
    let s = t.call(0, 100, Sys::Openat, "/app/server.js", 3, 10);
    t.sys(s);
    t.push(Record::Spawn(Spawn {
        ts: 1,
        parent_pid: 100,
        parent_tid: 100,
        pid: 100,
        tid: 101,
        clone_flags: 0,
    }));
    let mut s = t.call(2, 100, Sys::Read, "/app/server.js", 10, 10);
    s.tid = 102; // a thread the trace never saw spawned (started before attaching)
    t.sys(s);
    // 200 forks from 100 and never execs: it runs node server.js too.
    t.push(Record::Spawn(Spawn {
        ts: 3,
        parent_pid: 100,
        parent_tid: 101,
        pid: 200,
        tid: 200,
        clone_flags: 0,
    }));
    // 300 forks from 100, execs twice: the latest argv wins.
    t.push(Record::Spawn(Spawn {
        ts: 4,
        parent_pid: 100,
        parent_tid: 100,
        pid: 300,
        tid: 300,
        clone_flags: 0,
    }));
    let (exe, argv) = (t.s("/bin/sh"), t.s("sh\0-c\0git status"));
    t.push(Record::Exec(Exec {
        ts: 5,
        pid: 300,
        tid: 300,
        exe,
        argv,
    }));
    let (exe, argv) = (t.s("/usr/bin/git"), t.s("git\0status"));
    t.push(Record::Exec(Exec {
        ts: 6,
        pid: 300,
        tid: 300,
        exe,
        argv,
    }));
    // 400 forks from 300 after its exec: inherits git's argv.
    t.push(Record::Spawn(Spawn {
        ts: 7,
        parent_pid: 300,
        parent_tid: 300,
        pid: 400,
        tid: 400,
        clone_flags: 0,
    }));
    t.push(Record::Exit(Exit {
        ts: 8,
        pid: 400,
        tid: 400,
        status: ExitStatus::Code(3),
    }));
    t.push(Record::Exit(Exit {
        ts: 9,
        pid: 300,
        tid: 300,
        status: ExitStatus::Signal {
            signal: 9,
            core: false,
        },
    }));
    // A thread's exit is not the process's.
    t.push(Record::Exit(Exit {
        ts: 10,
        pid: 100,
        tid: 101,
        status: ExitStatus::Code(7),
    }));
    t.push(Record::Signal(Signal {
        ts: 11,
        pid: 200,
        tid: 200,
        signal: 15,
    }));
    // pid 400 is reused by a new child of 100 after the first 400 exited.
    t.push(Record::Spawn(Spawn {
        ts: 12,
        parent_pid: 100,
        parent_tid: 100,
        pid: 400,
        tid: 400,
        clone_flags: 0,
    }));
    let sum = summarize(&t.finish(End {
        end_ts: 20,
        exit: Some(ExitStatus::Code(0)),
        ..End::default()
    }));

    type Row<'a> = (u32, u32, Vec<&'a str>, Option<i32>, u32);
    let p: Vec<Row> = sum
        .processes
        .iter()
        .map(|p| {
            (
                p.pid,
                p.ppid,
                p.argv.iter().map(String::as_str).collect(),
                p.exit.map(|e| e.shell_code()),
                p.threads,
            )
        })
        .collect();
    assert_eq!(
        p,
        [
            (100, 0, vec!["node", "server.js"], Some(0), 3),
            (200, 100, vec!["node", "server.js"], None, 1),
            (300, 100, vec!["git", "status"], Some(137), 1),
            (400, 300, vec!["git", "status"], Some(3), 1),
            (400, 100, vec!["node", "server.js"], None, 1),
        ]
    );
    assert_eq!(sum.processes[2].exe.as_deref(), Some("/usr/bin/git"));
    assert_eq!(sum.processes[0].calls, 2);
    let j = sum.to_json();
    assert_eq!(j["processes"][2]["exit"], 137);
    assert_eq!(j["processes"][2]["signal"], "SIGKILL");
    assert_eq!(j["processes"][1]["exit"], Value::Null);
    assert_eq!(j["processes"][0]["argv"], json!(["node", "server.js"]));
    assert_eq!(j["processes"][3]["ppid"], 300);

    // The tree nests children under the right parent, pid reuse included.
    let out = text(&sum, &TextOptions::default());
    let tree: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Processes"))
        .skip(3)
        .take(5)
        .collect();
    assert!(tree[0].ends_with("  node server.js"), "{out}");
    assert!(
        tree[1].ends_with("├─ node server.js") && tree[1].contains(" 200 "),
        "{out}"
    );
    assert!(
        tree[2].ends_with("├─ git status") && tree[2].contains("SIGKILL"),
        "{out}"
    );
    assert!(
        tree[3].ends_with("│  └─ git status") && tree[3].contains(" 400 "),
        "{out}"
    );
    assert!(
        tree[4].ends_with("└─ node server.js") && tree[4].contains(" 400 "),
        "{out}"
    );
}

#[test]
fn backend_announcements_do_not_invent_processes() {
    // The ptrace backend announces the program it started as a child of pid 0, and an
    // attached process as a child of its real (untraced) parent.
    let mut t = TestTrace::new(&meta(&["make"]));
    t.push(Record::Spawn(Spawn {
        ts: 0,
        parent_pid: 0,
        parent_tid: 0,
        pid: 50,
        tid: 50,
        clone_flags: 0,
    }));
    let s = t.call(1, 50, Sys::Stat, "/Makefile", 0, 1);
    t.sys(s);
    t.push(Record::Spawn(Spawn {
        ts: 2,
        parent_pid: 1,
        parent_tid: 1,
        pid: 70,
        tid: 70,
        clone_flags: 0,
    }));
    let (exe, argv) = (t.s("/usr/sbin/nginx"), t.s("nginx: worker process"));
    t.push(Record::Exec(Exec {
        ts: 2,
        pid: 70,
        tid: 70,
        exe,
        argv,
    }));
    let sum = summarize(&t.finish(End {
        exit: Some(ExitStatus::Code(2)),
        ..End::default()
    }));
    let p: Vec<(u32, u32, String, Option<i32>)> = sum
        .processes
        .iter()
        .map(|p| {
            (
                p.pid,
                p.ppid,
                p.argv.join(" "),
                p.exit.map(|e| e.shell_code()),
            )
        })
        .collect();
    assert_eq!(
        p,
        [
            (50, 0, "make".to_string(), Some(2)),
            (70, 1, "nginx: worker process".to_string(), None)
        ]
    );
    let out = text(&sum, &TextOptions::default());
    assert!(
        out.contains(
            "\n      70        1  ?                  1         0  'nginx: worker process'\n"
        ),
        "{out}"
    );
}

#[test]
fn an_attached_trace_does_not_borrow_the_meta_command_for_unrelated_roots() {
    let mut m = meta(&["nginx: worker"]);
    m.attached = vec![10, 20];
    let mut t = TestTrace::new(&m);
    let s = t.call(0, 10, Sys::Stat, "/x", 0, 1);
    t.sys(s);
    let s = t.call(1, 20, Sys::Stat, "/x", 0, 1);
    t.sys(s);
    let sum = summarize(&t.finish(End {
        exit: Some(ExitStatus::Code(1)),
        ..End::default()
    }));
    assert!(
        sum.processes
            .iter()
            .all(|p| p.argv.is_empty() && p.exit.is_none()),
        "{:?}",
        sum.processes
    );
}

#[test]
fn lost_events_and_a_cut_off_trace_are_reported() {
    let mut t = TestTrace::new(&meta(&["prog"]));
    t.push(Record::Lost(Lost {
        ts: 5,
        pid: 1,
        count: 40,
        reason: LostReason::BufferFull,
    }));
    t.push(Record::Lost(Lost {
        ts: 6,
        pid: 0,
        count: 2,
        reason: LostReason::Unparsed,
    }));
    let s = t.call(7, 1, Sys::Close, "", 0, 1_000);
    t.sys(s);
    let bytes = t.cut_off();
    let sum = summarize(&bytes);
    assert_eq!(sum.lost_events, 42);
    assert_eq!(
        sum.lost_by_reason,
        [(LostReason::BufferFull, 40), (LostReason::Unparsed, 2)]
    );
    let trunc = sum.truncation.as_ref().expect("cut off");
    assert_eq!(trunc.lost_bytes, 0);
    assert_eq!(
        sum.duration_ns, 1_007,
        "a cut-off trace lasts until its last call ended"
    );
    assert_eq!(sum.records, 3);
    let j = sum.to_json();
    assert_eq!(j["lost_events"], 42);
    assert_eq!(j["truncated"]["lost_bytes"], 0);
    let out = text(&sum, &TextOptions::default());
    assert!(
        out.contains("42 events were lost (buffer_full 40, unparsed 2)"),
        "{out}"
    );
    assert!(out.contains("no end marker"), "{out}");

    // The end block's count wins when it knows of more (events lost outside records).
    let mut t = TestTrace::new(&meta(&["prog"]));
    t.push(Record::Lost(Lost {
        ts: 5,
        pid: 1,
        count: 1,
        reason: LostReason::Undecodable,
    }));
    let sum = summarize(&t.finish(End {
        lost_events: 9,
        ..End::default()
    }));
    assert_eq!(sum.lost_events, 9);
    assert!(sum.truncation.is_none());
}

#[test]
fn the_text_report_fits_the_width_and_lists_the_top_paths() {
    let mut t = TestTrace::new(&meta(&[
        "prog",
        "with a very long argument list ".repeat(8).trim(),
    ]));
    for i in 0..30u64 {
        let path = format!(
            "/very/deep/directory/structure/of/a/project/{}/node_modules/pkg/file{i}.js",
            "x".repeat(40)
        );
        for k in 0..=i {
            let s = t.call(i * 100 + k, 1, Sys::Statx, &path, 0, 1000);
            t.sys(s);
        }
    }
    let sum = summarize(&t.finish(End::default()));
    let out = text(
        &sum,
        &TextOptions {
            top: 5,
            ..TextOptions::default()
        },
    );
    for l in out.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    assert!(out.contains("Top 5 of 30 paths, by time"), "{out}");
    assert!(
        out.contains("... and 25 more paths (325 calls, 325.0µs)"),
        "{out}"
    );
    assert!(
        out.contains(" /very/deep/directory/…/node_modules/pkg/file29.js\n"),
        "{out}"
    );
    let out = text(
        &sum,
        &TextOptions {
            width: 160,
            ..TextOptions::default()
        },
    );
    assert!(
        out.lines().any(|l| l.chars().count() > 100),
        "a wider terminal gets wider lines"
    );
}

/// A small trace that looks like a Node.js server with a config stat loop, a child shell
/// and a few warnings' worth of trouble.
fn snapshot_trace() -> Vec<u8> {
    let mut t = TestTrace::new(&meta(&["node", "server.js", "--port", "8080"]));
    let cfg = file_stat(11, 512);
    let cfg_id = t.w.intern_stat(&cfg);
    let mut ts = 1_000;
    let s = t.call(ts, 4000, Sys::Openat, "/app/server.js", 18, 12_000);
    t.sys(s);
    t.push(Record::Spawn(Spawn {
        ts: 2_000,
        parent_pid: 4000,
        parent_tid: 4000,
        pid: 4000,
        tid: 4001,
        clone_flags: 0,
    }));
    t.push(Record::Spawn(Spawn {
        ts: 2_100,
        parent_pid: 4000,
        parent_tid: 4000,
        pid: 4000,
        tid: 4002,
        clone_flags: 0,
    }));
    for i in 0..400u64 {
        ts += 3_000 + i % 7 * 100;
        let mut s = t.call(
            ts,
            4000,
            Sys::Statx,
            "/app/config/settings.json",
            0,
            1_500 + i % 5 * 100,
        );
        s.stat = Some(cfg_id);
        t.sys(s);
        if i % 4 == 0 {
            ts += 2_000;
            let s = t.call(
                ts,
                4000,
                Sys::Statx,
                "/app/node_modules/@company/feature-flags/dist/cjs/index.node",
                -2,
                1_100,
            );
            t.sys(s);
        }
        if i % 50 == 0 {
            ts += 4_000;
            let mut s = t.call(ts, 4000, Sys::Openat, "/app/data/sessions.db", 21, 9_000);
            s.stat = Some(t.w.intern_stat(&file_stat(12, 1 << 20)));
            t.sys(s);
            let mut s = t.call(
                ts + 10_000,
                4000,
                Sys::Read,
                "/app/data/sessions.db",
                4096,
                6_000,
            );
            s.ev = ev::PATH_FROM_FD;
            s.fd = Some(21);
            t.sys(s);
            let mut s = t.call(
                ts + 20_000,
                4000,
                Sys::Close,
                "/app/data/sessions.db",
                0,
                800,
            );
            s.ev = ev::PATH_FROM_FD;
            s.fd = Some(21);
            t.sys(s);
            let mut s = t.call(ts + 25_000, 4000, Sys::Write, "pipe:[81234]", 17, 3_000);
            s.tid = 4001;
            s.ev = ev::PATH_FROM_FD;
            s.fd = Some(1);
            s.payload = Some(t.s("GET /health 200\n"));
            t.sys(s);
            ts += 30_000;
        }
    }
    let s = t.call(ts, 4000, Sys::Mkdir, "/app/tmp/cache", -17, 4_000);
    t.sys(s);
    t.push(Record::Spawn(Spawn {
        ts: ts + 1_000,
        parent_pid: 4000,
        parent_tid: 4000,
        pid: 4100,
        tid: 4100,
        clone_flags: 0x11,
    }));
    let (exe, argv) = (t.s("/bin/sh"), t.s("/bin/sh\0-c\0git rev-parse HEAD"));
    t.push(Record::Exec(Exec {
        ts: ts + 2_000,
        pid: 4100,
        tid: 4100,
        exe,
        argv,
    }));
    t.push(Record::Spawn(Spawn {
        ts: ts + 3_000,
        parent_pid: 4100,
        parent_tid: 4100,
        pid: 4101,
        tid: 4101,
        clone_flags: 0x11,
    }));
    let (exe, argv) = (t.s("/usr/bin/git"), t.s("git\0rev-parse\0HEAD"));
    t.push(Record::Exec(Exec {
        ts: ts + 4_000,
        pid: 4101,
        tid: 4101,
        exe,
        argv,
    }));
    for (k, p) in ["/app/.git/HEAD", "/app/.git/refs/heads/main"]
        .iter()
        .enumerate()
    {
        let s = t.call(
            ts + 5_000 + k as u64 * 1_000,
            4101,
            Sys::Openat,
            p,
            3,
            7_000,
        );
        t.sys(s);
    }
    t.push(Record::Exit(Exit {
        ts: ts + 9_000,
        pid: 4101,
        tid: 4101,
        status: ExitStatus::Code(0),
    }));
    t.push(Record::Exit(Exit {
        ts: ts + 9_500,
        pid: 4100,
        tid: 4100,
        status: ExitStatus::Code(0),
    }));
    let mut s = t.call(ts + 10_000, 4000, Sys::Read, "pipe:[81240]", 0, 0);
    s.tid = 4002;
    s.ev = ev::UNFINISHED | ev::PATH_FROM_FD;
    t.sys(s);
    t.push(Record::Lost(Lost {
        ts: ts + 11_000,
        pid: 4000,
        count: 12,
        reason: LostReason::BufferFull,
    }));
    t.push(Record::Signal(Signal {
        ts: ts + 20_000,
        pid: 4000,
        tid: 4000,
        signal: 15,
    }));
    t.push(Record::Exit(Exit {
        ts: ts + 30_000,
        pid: 4000,
        tid: 4000,
        status: ExitStatus::Signal {
            signal: 15,
            core: false,
        },
    }));
    t.finish(End {
        end_ts: ts + 40_000,
        exit: Some(ExitStatus::Signal {
            signal: 15,
            core: false,
        }),
        ..End::default()
    })
}

#[test]
fn snapshot_text() {
    let sum = summarize(&snapshot_trace());
    insta::assert_snapshot!(text(
        &sum,
        &TextOptions {
            top: 4,
            ..TextOptions::default()
        }
    ));
}

#[test]
fn snapshot_json() {
    let sum = summarize(&snapshot_trace());
    insta::assert_snapshot!(serde_json::to_string_pretty(&sum.to_json()).unwrap());
}
