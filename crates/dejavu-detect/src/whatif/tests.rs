//! Unit tests of the what-if evaluator on synthetic traces: each policy's counts, stale
//! answers with their causes, invalidation points and verdicts.

use super::policy::{parse, Flags};
use super::{evaluate, own_fix, Outcome, Verdict};
use crate::testkit::{dir, file, TraceBuilder};
use dejavu_trace::{FrameKind, TraceReader};

fn run(b: TraceBuilder, f: Flags) -> Vec<Outcome> {
    let policies = parse(&f).expect("policy");
    let bytes = b.finish();
    let mut r = TraceReader::new(&bytes[..]).expect("reader");
    evaluate(&mut r, &policies, |_| {})
        .expect("evaluation")
        .outcomes
}

/// The rows of `b`'s trace analysed with every threshold at its lowest, each with the
/// outcome of its own fix (`whatif`'s reading of the finding), if it has one.
fn rows_with_own_fixes(b: TraceBuilder) -> Vec<(crate::Finding, Option<Outcome>)> {
    let cfg = crate::Config {
        min_calls: 1,
        ..crate::Config::default()
    };
    let bytes = b.finish();
    let mut r = TraceReader::new(&bytes[..]).expect("reader");
    let (a, covered) = crate::analyze_covered(&mut r, &cfg, |_| {}).expect("analysis");
    a.rows()
        .iter()
        .map(|f| {
            let cov = covered.get(&f.key).map(|v| v.as_slice());
            assert!(cov.is_some(), "{} covers nothing?", f.key);
            let outcome = own_fix(f, cov).map(|p| {
                let mut r = TraceReader::new(&bytes[..]).expect("reader");
                let mut out = evaluate(&mut r, &[p], |_| {}).expect("eval").outcomes;
                out.remove(0)
            });
            (f.clone(), outcome)
        })
        .collect()
}

fn cache(spec: &str) -> Flags {
    Flags {
        cache: vec![spec.into()],
        ..Flags::default()
    }
}

#[test]
fn a_stat_cache_removes_repeats_and_is_safe_when_nothing_changes() {
    let mut b = TraceBuilder::new();
    for _ in 0..5 {
        b.stat("/srv/app/config.json", Ok(file(7, 100, 1)));
    }
    b.stat("/etc/other", Ok(file(8, 1, 1)));
    b.stat("/etc/other", Ok(file(8, 1, 1)));
    let o = &run(b, cache("stat:/srv/app/**"))[0];
    assert_eq!((o.calls_before, o.calls_after, o.removed_calls), (5, 1, 4));
    assert_eq!(
        o.removed_ns,
        4 * 500,
        "the removed calls' recorded durations"
    );
    assert_eq!(o.stale_answers, 0);
    assert_eq!(o.verdict, Verdict::Safe);
    // Per syscall: every newfstatat of the trace (7) before, 3 after.
    assert_eq!(o.by_syscall[0].name, "newfstatat");
    assert_eq!((o.by_syscall[0].before, o.by_syscall[0].after), (7, 3));
}

#[test]
fn the_programs_own_write_is_an_invalidation_point_at_its_line() {
    let mut b = TraceBuilder::new();
    let reader = b.stack(&[(FrameKind::Python, "serve", "/app/serve.py", 10)]);
    let writer = b.stack(&[(FrameKind::Python, "save", "/app/serve.py", 42)]);
    b.stack = Some(reader);
    b.stat("/app/data.json", Ok(file(7, 100, 1)));
    b.stat("/app/data.json", Ok(file(7, 100, 1)));
    b.stack = Some(writer);
    b.open("/app/data.json", 0o1, 3, Some(file(7, 100, 1)));
    b.write(3, "/app/data.json", "more", false);
    b.close(3, "/app/data.json");
    b.stack = Some(reader);
    b.stat("/app/data.json", Ok(file(7, 104, 2)));
    b.stat("/app/data.json", Ok(file(7, 104, 2)));
    let o = &run(b, cache("stat:/app/**"))[0];
    assert_eq!((o.removed_calls, o.stale_answers), (2, 0));
    assert_eq!(
        o.verdict,
        Verdict::SafeWithInvalidation,
        "{}",
        o.verdict_text
    );
    assert_eq!(o.invalidation_points.len(), 1);
    assert_eq!(
        o.invalidation_points[0].at,
        "write at save@/app/serve.py:42"
    );
    // Never invalidating: the stat after the write is served the old answer, and the cause
    // is the program's own write.
    let mut b = TraceBuilder::new();
    b.stat("/app/data.json", Ok(file(7, 100, 1)));
    b.open("/app/data.json", 0o1, 3, Some(file(7, 100, 1)));
    b.write(3, "/app/data.json", "more", false);
    b.stat("/app/data.json", Ok(file(7, 104, 2)));
    let f = Flags {
        invalidate: Some("never".into()),
        ..cache("stat")
    };
    let o = &run(b, f)[0];
    assert_eq!((o.removed_calls, o.stale_answers), (1, 1));
    assert_eq!(o.verdict, Verdict::Unsafe);
    assert_eq!(o.stale_examples[0].cause.kind, "own_change");
}

#[test]
fn a_change_by_another_process_makes_an_on_write_cache_unsafe_and_is_named() {
    let mut b = TraceBuilder::new();
    b.stat("/app/data.json", Ok(file(7, 100, 1)));
    b.fork(200);
    b.pid = 200;
    b.tid = 200;
    b.exec("/usr/bin/rewriter", &["rewriter", "/app/data.json"]);
    b.open("/app/data.json", 0o1 | 0o1000, 3, Some(file(7, 0, 1)));
    b.write(3, "/app/data.json", "new content", false);
    b.pid = 100;
    b.tid = 100;
    b.stat("/app/data.json", Ok(file(7, 11, 5)));
    b.stat("/app/data.json", Ok(file(7, 11, 5)));
    let o = &run(b, cache("stat:/app/**"))[0];
    assert_eq!((o.removed_calls, o.stale_answers), (2, 2));
    assert_eq!(o.verdict, Verdict::Unsafe);
    let c = &o.stale_examples[0].cause;
    assert_eq!(
        (c.kind, c.pid, c.call),
        ("other_process", Some(200), Some("write"))
    );
    assert_eq!(c.command.as_deref(), Some("rewriter /app/data.json"));
    assert!(o.verdict_text.contains("pid 200"), "{}", o.verdict_text);
}

#[test]
fn an_answer_that_changed_with_no_traced_change_says_the_recording_cannot_rule_out_more() {
    let mut b = TraceBuilder::new();
    b.stat("/x", Ok(file(7, 100, 1)));
    b.stat("/x", Ok(file(7, 250, 9)));
    let o = &run(b, cache("stat"))[0];
    assert_eq!(o.stale_answers, 1);
    assert_eq!(o.stale_examples[0].cause.kind, "untraced");
    assert!(o.stale_examples[0].cause.text.contains("cannot rule out"));
}

#[test]
fn a_statx_without_the_times_is_served_by_a_full_answer_and_is_no_change() {
    use dejavu_trace::stat_known::{CTIME, MTIME};
    let full = file(7, 90, 1_796_011_195_258_908_769);
    let partial = dejavu_trace::FileStat {
        known: full.known & !(MTIME | CTIME),
        mtime_ns: 0,
        ctime_ns: 0,
        ..full
    };
    let mut b = TraceBuilder::new();
    for _ in 0..3 {
        b.stat("/src/Greeter.java", Ok(partial));
        b.stat("/src/Greeter.java", Ok(full));
    }
    let o = &run(b, cache("stat"))[0];
    assert_eq!((o.removed_calls, o.stale_answers), (5, 0), "{o:#?}");
    // The size changed: stale, whichever fields were asked for.
    let mut b = TraceBuilder::new();
    b.stat("/src/Greeter.java", Ok(full));
    b.stat(
        "/src/Greeter.java",
        Ok(dejavu_trace::FileStat {
            size: 91,
            ..partial
        }),
    );
    let o = &run(b, cache("stat"))[0];
    assert_eq!((o.removed_calls, o.stale_answers), (1, 1), "{o:#?}");
}

#[test]
fn a_ttl_bounds_how_long_a_stale_answer_is_served() {
    let build = || {
        let mut b = TraceBuilder::new();
        b.stat("/x", Ok(file(7, 100, 1))); // t=0: filled
        b.stat("/x", Ok(file(7, 200, 2))); // changed outside: stale within the TTL
        b.stat("/x", Ok(file(7, 200, 2))); // stale
        b.wait(1_000_000_000);
        b.stat("/x", Ok(file(7, 200, 2))); // expired: asked again
        b.stat("/x", Ok(file(7, 200, 2))); // fresh hit
        b
    };
    let f = Flags {
        ttl: Some(500_000_000),
        ..cache("stat")
    };
    let o = &run(build(), f)[0];
    assert_eq!(
        (o.calls_before, o.removed_calls, o.stale_answers),
        (5, 3, 2)
    );
    let o = &run(build(), cache("stat"))[0];
    assert_eq!((o.removed_calls, o.stale_answers), (4, 4), "without a TTL");
}

#[test]
fn a_negative_cache_is_invalidated_by_a_create_in_the_directory_by_the_process() {
    let mut b = TraceBuilder::new();
    b.stat("/d/opt.json", Err(2));
    b.stat("/d/opt.json", Err(2));
    b.open("/d/opt.json", 0o101, 3, Some(file(9, 0, 1))); // O_CREAT by the program
    b.stat("/d/opt.json", Ok(file(9, 0, 1)));
    b.stat("/d/opt.json", Err(2)); // a positive answer is not cached
    let f = Flags {
        negative_cache: vec!["/d/**".into()],
        ..Flags::default()
    };
    let o = &run(b, f)[0];
    assert_eq!((o.removed_calls, o.stale_answers), (1, 0));
    assert_eq!(
        o.verdict,
        Verdict::SafeWithInvalidation,
        "{}",
        o.verdict_text
    );
}

#[test]
fn keep_open_removes_reopens_and_closes_and_counts_the_bytes_at_risk() {
    let mut b = TraceBuilder::new();
    for _ in 0..4 {
        b.open("/data/t.tdb", 0o101, 3, Some(file(5, 0, 1)));
        b.call(dejavu_trace::Sys::Pwrite64, |c, b| {
            c.fd = Some(3);
            c.path = Some(b.s("/data/t.tdb"));
            c.ev = dejavu_trace::ev::PATH_FROM_FD;
            c.count = 8;
            c.ret = 8;
            c.offset = Some(0);
        });
        b.close(3, "/data/t.tdb");
    }
    let f = Flags {
        keep_open: vec!["/data/**/*.tdb".into(), "/other/*.tdb".into()],
        ..Flags::default()
    };
    let out = run(b, f);
    let o = &out[0];
    // 4 opens + 4 closes; 3 opens and 3 closes go.
    assert_eq!((o.calls_before, o.removed_calls), (8, 6));
    let k = o.keep_open.as_ref().expect("keep-open risk");
    assert_eq!((k.bytes_at_risk, k.records_at_risk), (32, 4));
    assert_eq!(o.verdict, Verdict::Safe, "{}", o.verdict_text);
    assert_eq!(out[1].calls_before, 0, "another glob covers nothing here");
}

#[test]
fn ensure_dir_once_reports_the_moment_another_process_removed_the_directory() {
    let mut b = TraceBuilder::new();
    b.access("/h/chats", 0, 0);
    b.mkdir("/h/chats", -17);
    b.access("/h/chats", 0, 0);
    b.mkdir("/h/chats", -17);
    b.stat("/h/chats", Ok(dir(3)));
    b.fork(300);
    b.pid = 300;
    b.tid = 300;
    b.exec("/bin/rm", &["rm", "-r", "/h/chats"]);
    b.call(dejavu_trace::Sys::Rmdir, |c, b| {
        c.path = Some(b.s("/h/chats"))
    });
    b.pid = 100;
    b.tid = 100;
    b.access("/h/chats", 0, -2);
    b.mkdir("/h/chats", 0);
    let f = Flags {
        ensure_dir_once: vec!["**/chats".into()],
        ..Flags::default()
    };
    let o = &run(b, f)[0];
    // access + mkdir + stat after the first mkdir, then access + mkdir again.
    assert_eq!(o.removed_calls, 5);
    // The check found it missing and mkdir created it again: two answers the flag got
    // wrong.
    assert_eq!(o.stale_answers, 2);
    assert_eq!(o.moments.len(), 1);
    assert_eq!((o.moments[0].pid, o.moments[0].call), (300, "rmdir"));
    assert_eq!(o.verdict, Verdict::Unsafe);
}

#[test]
fn ensure_dir_once_drops_the_parents_stat_that_os_makedirs_makes_first() {
    // pip's ensure_dir per file: os.makedirs(d) stats d's parent, then mkdir(d) -> EEXIST.
    // The parent is outside the glob; its stat goes with the mkdir all the same.
    let build = || {
        let mut b = TraceBuilder::new();
        b.stat("/s/a", Err(2));
        b.mkdir("/s", 0);
        b.mkdir("/s/a", 0);
        b.mkdir("/s/a/data", 0);
        for i in 0..5 {
            if i > 0 {
                b.stat("/s/a", Ok(dir(4)));
                b.mkdir("/s/a/data", -17);
            }
            let f = format!("/s/a/data/f{i}");
            b.open(&f, 0o1101, 3, Some(file(10 + i, 0, 1)));
            b.write(3, &f, "x", true);
            b.close(3, &f);
        }
        b
    };
    let f = Flags {
        ensure_dir_once: vec!["**/data".into()],
        ..Flags::default()
    };
    let o = &run(build(), f)[0];
    assert_eq!((o.removed_calls, o.stale_answers), (8, 0));
    // The finding says as much, and its own fix saves it.
    let rows = rows_with_own_fixes(build());
    let (e, o) = rows
        .iter()
        .find(|(f, _)| f.detector == "ensure-dir")
        .expect("an ensure-dir row");
    assert_eq!(e.redundant_calls, 8);
    assert_eq!(o.as_ref().expect("its own fix").removed_calls, 8);
}

#[test]
fn log_once_removes_repeated_lines_per_output() {
    let mut b = TraceBuilder::new();
    for i in 0..5 {
        b.write(
            2,
            "/dev/pts/0",
            &format!("warning: slow request {i}\n"),
            true,
        );
    }
    b.write(2, "/dev/pts/0", "done\n", true);
    let f = Flags {
        log_once: Some(String::new()),
        ..Flags::default()
    };
    let o = &run(b, f)[0];
    assert_eq!((o.calls_before, o.removed_calls), (6, 4));
}

#[test]
fn a_findings_own_fix_saves_what_the_finding_says() {
    let build = || {
        let mut b = TraceBuilder::new();
        for _ in 0..6 {
            b.stat("/etc/app.conf", Ok(file(7, 100, 1)));
            b.stat("/etc/missing.conf", Err(2));
        }
        // Many paths, each repeated: the finding shows a pattern, covers them all.
        for round in 0..3 {
            for m in 0..8 {
                let _ = round;
                b.stat(&format!("/srv/m{m}/x/package.json"), Ok(file(20 + m, 1, 1)));
            }
        }
        b
    };
    let mut checked = 0;
    for (f, o) in rows_with_own_fixes(build()) {
        let Some(o) = o else { continue };
        assert_eq!(
            o.removed_calls - o.stale_answers,
            f.redundant_calls,
            "{} {:?}",
            f.detector,
            f.paths
        );
        checked += 1;
    }
    assert_eq!(checked, 3);
}

/// open + pwrite(8 bytes) + close of `path` as fd `fd`, by the builder's current thread.
fn cycle(b: &mut TraceBuilder, path: &str, fd: i32, ino: u64) {
    b.open(path, 0o101, fd as i64, Some(file(ino, 0, 1)));
    b.call(dejavu_trace::Sys::Pwrite64, |c, b| {
        c.fd = Some(fd);
        c.path = Some(b.s(path));
        c.ev = dejavu_trace::ev::PATH_FROM_FD;
        c.count = 8;
        c.ret = 8;
        c.offset = Some(0);
    });
    b.close(fd, path);
}

fn keep(glob: &str) -> Flags {
    Flags {
        keep_open: vec![glob.into()],
        ..Flags::default()
    }
}

#[test]
fn two_threads_writing_a_kept_file_need_a_lock() {
    let mut b = TraceBuilder::new();
    cycle(&mut b, "/data/t.tdb", 3, 5);
    b.tid = 101;
    cycle(&mut b, "/data/t.tdb", 3, 5);
    b.tid = 100;
    cycle(&mut b, "/data/t.tdb", 3, 5);
    let o = &run(b, keep("/data/*.tdb"))[0];
    assert_eq!(o.removed_calls, 4);
    assert_eq!(
        o.verdict,
        Verdict::SafeWithInvalidation,
        "{}",
        o.verdict_text
    );
    assert!(
        o.invalidation_points[0]
            .at
            .contains("threads 100, 101 of pid 100"),
        "{:?}",
        o.invalidation_points
    );
    assert_eq!(o.keep_open.as_ref().unwrap().writers.len(), 2);
}

#[test]
fn another_process_writing_a_kept_file_makes_keep_open_unsafe() {
    let mut b = TraceBuilder::new();
    cycle(&mut b, "/data/t.tdb", 3, 5);
    b.fork(200);
    b.pid = 200;
    b.tid = 200;
    b.exec("/usr/bin/ingest", &["ingest"]);
    cycle(&mut b, "/data/t.tdb", 4, 5);
    b.pid = 100;
    b.tid = 100;
    cycle(&mut b, "/data/t.tdb", 3, 5);
    let o = &run(b, keep("/data/*.tdb"))[0];
    assert_eq!(o.verdict, Verdict::Unsafe, "{}", o.verdict_text);
    assert_eq!(o.moments_total, 1);
    assert_eq!(o.moments[0].pid, 200);
    assert!(
        o.moments[0].text.contains("ingest"),
        "{}",
        o.moments[0].text
    );
}

#[test]
fn a_rotation_by_another_process_is_a_rename_the_kept_handle_would_miss() {
    let mut b = TraceBuilder::new();
    cycle(&mut b, "/var/log/app.log", 3, 5);
    b.fork(300);
    b.pid = 300;
    b.tid = 300;
    b.exec("/usr/sbin/logrotate", &["logrotate"]);
    b.call(dejavu_trace::Sys::Rename, |c, b| {
        c.path = Some(b.s("/var/log/app.log"));
        c.path2 = Some(b.s("/var/log/app.log.1"));
    });
    b.pid = 100;
    b.tid = 100;
    cycle(&mut b, "/var/log/app.log", 3, 6); // a new inode has the name
    let o = &run(b, keep("/var/log/*.log"))[0];
    assert_eq!(o.verdict, Verdict::Unsafe);
    // The rename itself, and the reopen that found another file.
    assert_eq!(o.moments_total, 2, "{:#?}", o.moments);
    assert_eq!((o.moments[0].pid, o.moments[0].call), (300, "rename"));
    assert!(
        o.moments[1].text.contains("logrotate"),
        "{}",
        o.moments[1].text
    );
    assert_eq!(o.removed_calls, 0, "the reopen was needed");
}

#[test]
fn a_negative_cache_misses_a_create_by_another_process() {
    let mut b = TraceBuilder::new();
    b.stat("/d/opt.json", Err(2));
    b.stat("/d/opt.json", Err(2));
    b.fork(200);
    b.pid = 200;
    b.tid = 200;
    b.exec("/usr/bin/touch", &["touch", "/d/opt.json"]);
    b.open("/d/opt.json", 0o101, 3, Some(file(9, 0, 1)));
    b.pid = 100;
    b.tid = 100;
    b.stat("/d/opt.json", Ok(file(9, 0, 1)));
    let f = Flags {
        negative_cache: vec!["/d/**".into()],
        ..Flags::default()
    };
    let o = &run(b, f)[0];
    assert_eq!((o.removed_calls, o.stale_answers), (2, 1));
    let c = &o.stale_examples[0].cause;
    assert_eq!((c.kind, c.pid), ("other_process", Some(200)));
    assert_eq!(o.stale_examples[0].served, "ENOENT");
}

#[test]
fn bytes_at_risk_are_those_buffered_at_one_moment_not_over_the_whole_recording() {
    let mut b = TraceBuilder::new();
    b.fork(200);
    b.pid = 200;
    b.tid = 200;
    for _ in 0..3 {
        cycle(&mut b, "/data/a.tdb", 3, 5);
    }
    // Its exit flushes its buffer: 24 bytes were at risk until then.
    b.push(dejavu_trace::Record::Exit(dejavu_trace::Exit {
        ts: 50_000,
        pid: 200,
        tid: 200,
        status: dejavu_trace::ExitStatus::Code(0),
    }));
    b.pid = 100;
    b.tid = 100;
    for _ in 0..2 {
        cycle(&mut b, "/data/b.tdb", 3, 6);
    }
    let o = &run(b, keep("/data/*.tdb"))[0];
    let k = o.keep_open.as_ref().unwrap();
    assert_eq!((k.bytes_at_risk, k.records_at_risk), (24, 3));
    assert_eq!(k.worst_path.as_deref(), Some("/data/a.tdb"));
    assert_eq!(o.removed_calls, 2 * 2 + 2);
}

#[test]
fn a_negative_cache_also_remembers_a_change_that_keeps_failing() {
    // rm of a file that is long gone, per request: negative-probe's other kind.
    let mut b = TraceBuilder::new();
    for _ in 0..4 {
        b.call(dejavu_trace::Sys::Unlink, |c, b| {
            c.path = Some(b.s("/run/app.lock"));
            c.ret = -2;
        });
    }
    let f = Flags {
        negative_cache: vec!["/run/*".into()],
        ..Flags::default()
    };
    let o = &run(b, f)[0];
    assert_eq!(
        (o.calls_before, o.removed_calls, o.stale_answers),
        (4, 3, 0)
    );
    assert_eq!(o.by_syscall[0].name, "unlink");
}

const CFG: &str = "/srv/app/config.json";

/// Python's way of reading a file: open, fstat, read(size+1), read -> 0, close.
fn read_config(b: &mut TraceBuilder, st: dejavu_trace::FileStat) {
    let size = st.size;
    b.open(CFG, 0o2000000, 3, Some(st));
    b.call(dejavu_trace::Sys::Fstat, |c, b| {
        c.fd = Some(3);
        c.path = Some(b.s(CFG));
        c.ev = dejavu_trace::ev::PATH_FROM_FD;
        c.stat = Some(b.st(st));
    });
    b.read(3, CFG, size as u64 + 1, size);
    b.read(3, CFG, 1, 0);
    b.close(3, CFG);
}

#[test]
fn a_content_cache_removes_every_call_of_a_full_reread() {
    let mut b = TraceBuilder::new();
    for _ in 0..4 {
        read_config(&mut b, file(7, 120, 1));
    }
    // A partial read is no read of the content: not governed.
    b.open(CFG, 0, 3, Some(file(7, 120, 1)));
    b.read(3, CFG, 10, 10);
    b.close(3, CFG);
    let o = &run(b, cache("read:/srv/**"))[0];
    assert_eq!(
        (o.calls_before, o.removed_calls, o.stale_answers),
        (20, 15, 0)
    );
    assert_eq!(o.verdict, Verdict::Safe);
    let rows: Vec<(&str, u64, u64)> = o
        .by_syscall
        .iter()
        .map(|r| (r.name.as_str(), r.before, r.after))
        .collect();
    assert!(rows.contains(&("read", 9, 3)), "{rows:?}");
}

#[test]
fn a_content_cache_serves_stale_content_after_another_process_rewrites_the_file() {
    let mut b = TraceBuilder::new();
    read_config(&mut b, file(7, 120, 1));
    read_config(&mut b, file(7, 120, 1));
    b.fork(200);
    b.pid = 200;
    b.tid = 200;
    b.exec("/usr/bin/deploy", &["deploy"]);
    b.open(CFG, 0o1 | 0o1000, 4, Some(file(7, 0, 1)));
    b.write(4, CFG, "{\"port\": 1}", false);
    b.close(4, CFG);
    b.pid = 100;
    b.tid = 100;
    read_config(&mut b, file(7, 11, 5));
    read_config(&mut b, file(7, 11, 5));
    let o = &run(b, cache("read:/srv/**"))[0];
    assert_eq!((o.removed_calls, o.stale_answers), (15, 2));
    assert_eq!(o.verdict, Verdict::Unsafe);
    let c = &o.stale_examples[0].cause;
    assert_eq!(
        (c.kind, c.pid, c.call),
        ("other_process", Some(200), Some("write"))
    );
}

#[test]
fn the_programs_own_rmdir_is_where_an_ensure_once_flag_must_be_cleared() {
    let mut b = TraceBuilder::new();
    let cleanup = b.stack(&[(FrameKind::Native, "cleanup", "/app/main.c", 70)]);
    b.mkdir("/h/chats", 0);
    b.mkdir("/h/chats", -17);
    b.stack = Some(cleanup);
    b.call(dejavu_trace::Sys::Rmdir, |c, b| {
        c.path = Some(b.s("/h/chats"))
    });
    b.stack = None;
    b.mkdir("/h/chats", 0); // the program recreates it: the cleared flag asks again
    b.mkdir("/h/chats", -17);
    let f = Flags {
        ensure_dir_once: vec!["**/chats".into()],
        ..Flags::default()
    };
    let o = &run(b, f)[0];
    assert_eq!((o.removed_calls, o.stale_answers), (2, 0));
    assert_eq!(
        o.verdict,
        Verdict::SafeWithInvalidation,
        "{}",
        o.verdict_text
    );
    assert_eq!(
        o.invalidation_points[0].at,
        "clear the flag at cleanup@/app/main.c:70 (rmdir)"
    );
}

#[test]
fn the_programs_own_rotation_is_where_a_kept_handle_must_be_reopened() {
    let mut b = TraceBuilder::new();
    let rotate = b.stack(&[(FrameKind::Native, "rotate", "/app/log.c", 12)]);
    cycle(&mut b, "/var/log/app.log", 3, 5);
    cycle(&mut b, "/var/log/app.log", 3, 5);
    b.stack = Some(rotate);
    b.call(dejavu_trace::Sys::Rename, |c, b| {
        c.path = Some(b.s("/var/log/app.log"));
        c.path2 = Some(b.s("/var/log/app.log.1"));
    });
    b.stack = None;
    cycle(&mut b, "/var/log/app.log", 3, 6);
    let o = &run(b, keep("/var/log/*.log"))[0];
    assert_eq!(
        o.verdict,
        Verdict::SafeWithInvalidation,
        "{}",
        o.verdict_text
    );
    assert_eq!(o.moments_total, 0);
    assert_eq!(
        o.invalidation_points[0].at,
        "reopen after rename at rotate@/app/log.c:12"
    );
    assert_eq!(
        o.removed_calls, 2,
        "the second cycle's open and the first's close"
    );
}

/// rename(from, to) by the builder's current thread.
fn rename(b: &mut TraceBuilder, from: &str, to: &str) {
    b.call(dejavu_trace::Sys::Rename, |c, b| {
        c.path = Some(b.s(from));
        c.path2 = Some(b.s(to));
    });
}

/// Two stats of /app/d/sub/x.json, a rename of /app/d to /app/e (by `pid`, 100: the caching
/// process itself), a stat of the old name (gone) and of the new one.
fn moved_dir(by: u32) -> TraceBuilder {
    let mut b = TraceBuilder::new();
    let mover = b.stack(&[(FrameKind::Python, "archive", "/app/move.py", 9)]);
    b.stat("/app/d/sub/x.json", Ok(file(7, 100, 1)));
    b.stat("/app/d/sub/x.json", Ok(file(7, 100, 1)));
    if by != 100 {
        b.fork(by);
        b.pid = by;
        b.tid = by;
        b.exec("/usr/bin/mover", &["mover", "/app/d"]);
    }
    b.stack = Some(mover);
    rename(&mut b, "/app/d", "/app/e");
    b.stack = None;
    b.pid = 100;
    b.tid = 100;
    b.stat("/app/d/sub/x.json", Err(2));
    b.stat("/app/e/sub/x.json", Ok(file(7, 100, 1)));
    b
}

#[test]
fn a_rename_of_a_directory_above_a_cached_path_invalidates_an_on_write_cache() {
    let o = &run(moved_dir(100), cache("stat:/app/**"))[0];
    // The second stat is a hit; the stat after the rename is asked again (ENOENT), the
    // stat of the new name is a first.
    assert_eq!(
        (o.calls_before, o.removed_calls, o.stale_answers),
        (4, 1, 0)
    );
    assert_eq!(
        o.verdict,
        Verdict::SafeWithInvalidation,
        "{}",
        o.verdict_text
    );
    assert_eq!(
        o.invalidation_points.len(),
        1,
        "{:?}",
        o.invalidation_points
    );
    assert_eq!(
        o.invalidation_points[0].at,
        "rename at archive@/app/move.py:9"
    );
    // Never invalidating, the old name's size is served after the rename: the process's
    // own rename of the directory above it.
    let f = Flags {
        invalidate: Some("never".into()),
        ..cache("stat:/app/**")
    };
    let o = &run(moved_dir(100), f)[0];
    assert_eq!((o.removed_calls, o.stale_answers), (2, 1));
    let c = &o.stale_examples[0].cause;
    assert_eq!((c.kind, c.call), ("own_change", Some("rename")));
    assert!(
        c.text.contains("a directory above it (rename of /app/d)"),
        "{}",
        c.text
    );
}

#[test]
fn a_rename_of_a_directory_above_a_cached_path_by_another_process_is_named() {
    let o = &run(moved_dir(200), cache("stat:/app/**"))[0];
    assert_eq!((o.removed_calls, o.stale_answers), (2, 1));
    assert_eq!(o.verdict, Verdict::Unsafe);
    let c = &o.stale_examples[0].cause;
    assert_eq!(
        (c.kind, c.pid, c.call),
        ("other_process", Some(200), Some("rename"))
    );
    assert!(
        c.text.contains("a directory above it (rename of /app/d)"),
        "{}",
        c.text
    );
}

fn flags_with(f: impl FnOnce(&mut Flags)) -> Flags {
    let mut x = Flags::default();
    f(&mut x);
    x
}

#[test]
fn skip_unread_drops_the_writes_nobody_reads_and_says_what_they_were() {
    // Attached (-p): the stdout the service was started with counts (no-reader's rule).
    let mut b = TraceBuilder::attached();
    b.open("/dev/null", 1, 3, Some(crate::testkit::chardev(1, 3)));
    for _ in 0..5 {
        b.write(3, "/dev/null", "debug\n", true);
    }
    // stdout, pointed at /dev/null before the trace began: known by its name.
    b.write(1, "/dev/null", "done\n", true);
    // A pipe whose reader has gone: the bytes asked for.
    b.call(dejavu_trace::Sys::Write, |c, b| {
        c.fd = Some(4);
        c.path = Some(b.s("pipe:[77]"));
        c.ev = dejavu_trace::ev::PATH_FROM_FD;
        c.count = 10;
        c.ret = -32;
    });
    // A file somebody reads.
    b.open("/app/out.txt", 0o101, 5, Some(file(9, 0, 1)));
    b.write(5, "/app/out.txt", "result\n", false);
    let o = &run(b, flags_with(|f| f.skip_unread = vec!["/**".into()]))[0];
    // pipe:[77] is not under /**: not governed. The 5 + 1 writes to /dev/null go, the
    // file's write stays.
    assert_eq!((o.calls_before, o.removed_calls), (7, 6), "{o:#?}");
    let r = o.at_risk.as_ref().expect("at risk");
    assert_eq!((r.bytes, r.records), (35, 6));
    assert!(
        o.hazards.iter().any(|h| h.contains("deliberate")),
        "{:?}",
        o.hazards
    );
    assert!(o
        .hazards
        .iter()
        .any(|h| h.contains("1 of these writes went to stdout")));
    assert_eq!(o.verdict, Verdict::Safe);
    // The program dejavu started, given stdout on /dev/null by dejavu's user: those writes
    // are not the program's to drop (no-reader does not count them either); they stay.
    let mut b = TraceBuilder::new();
    for _ in 0..2 {
        b.write(1, "/dev/null", "done\n", true);
    }
    let o = &run(b, flags_with(|f| f.skip_unread = vec!["/**".into()]))[0];
    assert_eq!((o.calls_before, o.removed_calls), (2, 0), "{o:#?}");
    // Every output, the pipe included: its EPIPE is dropped too, with its hazard.
    let mut b = TraceBuilder::new();
    for _ in 0..3 {
        b.call(dejavu_trace::Sys::Write, |c, b| {
            c.fd = Some(4);
            c.path = Some(b.s("pipe:[77]"));
            c.ev = dejavu_trace::ev::PATH_FROM_FD;
            c.count = 10;
            c.ret = -32;
        });
    }
    let o = &run(b, flags_with(|f| f.skip_unread = vec!["pipe:*".into()]))[0];
    assert_eq!(o.removed_calls, 3);
    assert_eq!(o.at_risk.as_ref().map(|r| r.bytes), Some(30));
    assert!(o
        .hazards
        .iter()
        .any(|h| h.contains("3 writes failed with EPIPE")));
}

fn fsync(b: &mut TraceBuilder, fd: i32, path: &str) {
    b.call(dejavu_trace::Sys::Fsync, |c, b| {
        c.fd = Some(fd);
        c.path = Some(b.s(path));
        c.ev = dejavu_trace::ev::PATH_FROM_FD;
    });
}

/// Ten records of 100 bytes each synced, one of 20,000 bytes, two of 10.
fn journal() -> TraceBuilder {
    let mut b = TraceBuilder::new();
    b.open("/db/journal", 0o2101, 3, Some(file(4, 0, 1)));
    for _ in 0..10 {
        b.write(3, "/db/journal", &"r".repeat(100), false);
        fsync(&mut b, 3, "/db/journal");
    }
    b.write(3, "/db/journal", &"R".repeat(20_000), false);
    fsync(&mut b, 3, "/db/journal");
    for _ in 0..2 {
        b.write(3, "/db/journal", &"r".repeat(10), false);
        fsync(&mut b, 3, "/db/journal");
    }
    b
}

#[test]
fn batch_syncs_keep_the_last_sync_of_each_batch_and_count_the_bytes_left_unsynced() {
    let o = &run(
        journal(),
        flags_with(|f| f.batch_syncs = vec!["/db/*".into()]),
    )[0];
    // Two batches (20,000 bytes since a sync start a new one): 10 syncs -> 1, 3 -> 1.
    assert_eq!((o.calls_before, o.removed_calls), (13, 11), "{o:#?}");
    let r = o.at_risk.as_ref().expect("at risk");
    // Before the last sync: the 20,000 bytes (synced in the recording right away) and two
    // records of 10 are not durable under the fix.
    assert_eq!((r.bytes, r.records), (20_020, 3));
    assert_eq!(r.worst_path.as_deref(), Some("/db/journal"));
    assert!(o.hazards.iter().any(|h| h.contains("group commit")));
    assert_eq!(o.by_syscall[0].name, "fsync");
    assert_eq!((o.by_syscall[0].before, o.by_syscall[0].after), (13, 2));
}

#[test]
fn the_own_fixes_of_no_reader_and_fsync_per_op_save_what_their_findings_say() {
    let mut b = journal();
    b.open("/dev/null", 1, 5, Some(crate::testkit::chardev(1, 3)));
    for _ in 0..4 {
        b.write(5, "/dev/null", "debug\n", true);
    }
    let bytes = b.finish();
    let mut r = TraceReader::new(&bytes[..]).expect("reader");
    let cfg = crate::Config {
        min_calls: 1,
        ..crate::Config::default()
    };
    let (a, covered) = crate::analyze_covered(&mut r, &cfg, |_| {}).expect("analysis");
    let mut seen = Vec::new();
    for f in a.rows() {
        let Some(p) = own_fix(f, covered.get(&f.key).map(|v| v.as_slice())) else {
            continue;
        };
        let mut r = TraceReader::new(&bytes[..]).expect("reader");
        let o = &evaluate(&mut r, &[p], |_| {}).expect("eval").outcomes[0];
        assert_eq!(o.removed_calls, f.redundant_calls, "{}", f.detector);
        seen.push(f.detector);
    }
    seen.sort_unstable();
    assert_eq!(seen, ["fsync-per-op", "no-reader"]);
}

/// A run of 200 writes of 500 bytes to /app/out.csv, an lseek, a run of 3 writes of 10
/// bytes (with one to stderr among them), a pause of 200 ms, a run of 2.
fn piecemeal() -> TraceBuilder {
    let mut b = TraceBuilder::new();
    b.open("/app/out.csv", 0o101, 3, Some(file(9, 0, 1)));
    for _ in 0..200 {
        b.write(3, "/app/out.csv", &"x".repeat(500), false);
    }
    b.call(dejavu_trace::Sys::Lseek, |c, b| {
        c.fd = Some(3);
        c.path = Some(b.s("/app/out.csv"));
        c.ev = dejavu_trace::ev::PATH_FROM_FD;
    });
    for i in 0..3 {
        b.write(3, "/app/out.csv", "0123456789", false);
        if i == 1 {
            b.write(2, "/dev/pts/0", "warning\n", true);
        }
    }
    b.wait(200_000_000);
    for _ in 0..2 {
        b.write(3, "/app/out.csv", "0123456789", false);
    }
    b
}

#[test]
fn batch_writes_merge_each_run_into_a_write_per_64_kib_and_count_the_bytes_buffered() {
    let o = &run(
        piecemeal(),
        flags_with(|f| f.batch_writes = vec!["/app/*".into()]),
    )[0];
    // 100,000 bytes need two flushes of 64 KiB: 198 of 200 go; then 2 of 3, 1 of 2. The
    // write to stderr is not merged (unbuffered by convention), and not governed.
    assert_eq!((o.calls_before, o.removed_calls), (205, 201), "{o:#?}");
    let r = o.at_risk.as_ref().expect("at risk");
    // The buffer holds 131 writes of 500 bytes before the 132nd fills it.
    assert_eq!((r.bytes, r.records), (65_500, 131));
    assert!(o
        .hazards
        .iter()
        .any(|h| h.contains("flush the buffer on exit")));
    // small-writes' finding on the same trace says the same.
    let bytes = piecemeal().finish();
    let mut rd = TraceReader::new(&bytes[..]).expect("reader");
    let (a, covered) =
        crate::analyze_covered(&mut rd, &crate::Config::default(), |_| {}).expect("analysis");
    let f = a
        .rows()
        .iter()
        .find(|f| f.detector == "small-writes")
        .expect("a small-writes finding");
    let p = own_fix(f, covered.get(&f.key).map(|v| v.as_slice())).expect("its fix");
    let mut rd = TraceReader::new(&bytes[..]).expect("reader");
    let o = &evaluate(&mut rd, &[p], |_| {}).expect("eval").outcomes[0];
    assert_eq!((f.redundant_calls, o.removed_calls), (201, 201));
}

fn fd_call(b: &mut TraceBuilder, sys: dejavu_trace::Sys, fd: i32, path: &str) {
    b.call(sys, |c, b| {
        c.fd = Some(fd);
        c.path = Some(b.s(path));
        c.ev = dejavu_trace::ev::PATH_FROM_FD;
    });
}

/// Checks before acts: 4 access + open (the last open fails), 3 stat + open + fstat, 2
/// stat + open + read (the stat's size may be used), 2 lstat + open (not a check).
fn checked() -> TraceBuilder {
    let mut b = TraceBuilder::new();
    for i in 0..4 {
        b.access("/srv/in/a.txt", 0, 0);
        if i == 3 {
            b.open("/srv/in/a.txt", 0, -2, None);
        } else {
            b.open("/srv/in/a.txt", 0, 3, Some(file(5, 10, 1)));
            b.close(3, "/srv/in/a.txt");
        }
    }
    for (n, then) in [(3, dejavu_trace::Sys::Fstat), (2, dejavu_trace::Sys::Read)] {
        for _ in 0..n {
            b.stat("/srv/in/b.txt", Ok(file(6, 10, 1)));
            b.open("/srv/in/b.txt", 0, 3, Some(file(6, 10, 1)));
            fd_call(&mut b, then, 3, "/srv/in/b.txt");
            b.close(3, "/srv/in/b.txt");
        }
    }
    for _ in 0..2 {
        b.call(dejavu_trace::Sys::Lstat, |c, b| {
            c.path = Some(b.s("/srv/in/c.txt"));
            c.stat = Some(b.st(file(7, 1, 1)));
        });
        b.open("/srv/in/c.txt", 0, 3, Some(file(7, 1, 1)));
        b.close(3, "/srv/in/c.txt");
    }
    b
}

#[test]
fn skip_checks_removes_the_checks_their_acts_answer_and_names_the_race() {
    let o = &run(
        checked(),
        flags_with(|f| f.skip_checks = vec!["/srv/**".into()]),
    )[0];
    // 4 access checks and 5 stat checks have an act; the 2 stats whose descriptor is read
    // before any fstat stay, the lstats are not checks.
    assert_eq!((o.calls_before, o.removed_calls), (9, 7), "{o:#?}");
    assert!(o.at_risk.is_none());
    assert!(
        o.hazards.iter().any(|h| h.contains("1 acts failed")),
        "{:?}",
        o.hazards
    );
    assert!(o
        .hazards
        .iter()
        .any(|h| h.contains("3 stats before an open")));
    assert!(o.hazards.iter().any(|h| h.contains("4 access checks")));
    // check-then-act's finding on the same trace says the same.
    let bytes = checked().finish();
    let mut rd = TraceReader::new(&bytes[..]).expect("reader");
    let cfg = crate::Config {
        min_calls: 1,
        ..crate::Config::default()
    };
    let (a, covered) = crate::analyze_covered(&mut rd, &cfg, |_| {}).expect("analysis");
    let mut said = 0;
    for f in a.rows().iter().filter(|f| f.detector == "check-then-act") {
        let p = own_fix(f, covered.get(&f.key).map(|v| v.as_slice())).expect("its fix");
        let mut rd = TraceReader::new(&bytes[..]).expect("reader");
        let o = &evaluate(&mut rd, &[p], |_| {}).expect("eval").outcomes[0];
        assert_eq!(o.removed_calls, f.redundant_calls, "{:?}", f.paths);
        said += f.redundant_calls;
    }
    assert_eq!(said, 7);
}

fn fstat_of(b: &mut TraceBuilder, fd: i32, path: &str, size: i64) {
    b.call(dejavu_trace::Sys::Fstat, |c, b| {
        c.fd = Some(fd);
        c.path = Some(b.s(path));
        c.ev = dejavu_trace::ev::PATH_FROM_FD;
        c.stat = Some(b.st(file(5, size, size)));
    });
}

/// pid 100 appends 10 bytes and fstats its log 6 times; pid 200 appends 5 bytes in
/// between (after the third); `untraced` adds 7 bytes nobody traced before the last.
fn appends(untraced: bool) -> TraceBuilder {
    const LOG: &str = "/data/tile.log";
    let mut b = TraceBuilder::new();
    b.open(LOG, 0o1 | 0o100 | 0o2000, 3, Some(file(5, 100, 1)));
    let mut size = 100;
    for i in 0..6 {
        if i == 3 {
            b.fork(200);
            b.pid = 200;
            b.tid = 200;
            b.exec("/usr/bin/stamp", &["stamp", LOG]);
            b.open(LOG, 0o1 | 0o2000, 3, Some(file(5, size, 1)));
            b.write(3, LOG, "stamp", false);
            size += 5;
            b.pid = 100;
            b.tid = 100;
        }
        b.write(3, LOG, "0123456789", false);
        size += 10;
        if untraced && i == 5 {
            size += 7;
        }
        fstat_of(&mut b, 3, LOG, size);
    }
    b
}

#[test]
fn track_size_answers_from_the_process_own_writes_and_a_second_writer_makes_it_stale() {
    let f = flags_with(|f| f.track_size = vec!["/data/*".into()]);
    let o = &run(appends(false), f.clone())[0];
    // The first fstat establishes; the other five are answered from the kept size. The
    // one after pid 200's append is served 10 bytes short of the file.
    assert_eq!(
        (o.calls_before, o.removed_calls, o.stale_answers),
        (6, 5, 1),
        "{o:#?}"
    );
    assert_eq!(o.verdict, Verdict::Unsafe);
    let st = &o.stale_examples[0];
    assert_eq!(
        (st.served.as_str(), st.actual.as_str()),
        ("size 140", "size 145")
    );
    assert_eq!(
        (st.cause.kind, st.cause.pid, st.cause.call),
        ("other_process", Some(200), Some("write"))
    );
    assert!(o.hazards.iter().any(|h| h.contains("only writer")));
    // A size that grew with no traced change: untraced.
    let o = &run(appends(true), f)[0];
    assert_eq!(o.stale_answers, 2);
    assert_eq!(o.stale_examples[1].cause.kind, "untraced");
    // self-inflicted-lookup's finding: the lookups answered right (removed less stale).
    let bytes = appends(true).finish();
    let mut rd = TraceReader::new(&bytes[..]).expect("reader");
    let cfg = crate::Config {
        min_calls: 1,
        ..crate::Config::default()
    };
    let (a, covered) = crate::analyze_covered(&mut rd, &cfg, |_| {}).expect("analysis");
    let f = a
        .rows()
        .iter()
        .find(|f| f.detector == "self-inflicted-lookup")
        .expect("finding");
    let p = own_fix(f, covered.get(&f.key).map(|v| v.as_slice())).expect("its fix");
    let mut rd = TraceReader::new(&bytes[..]).expect("reader");
    let o = &evaluate(&mut rd, &[p], |_| {}).expect("eval").outcomes[0];
    assert_eq!(
        (f.redundant_calls, o.removed_calls - o.stale_answers),
        (3, 3)
    );
}

/// open + pwrite(8 bytes at `off`) + close of /data/t.tdb.
fn tile_at(b: &mut TraceBuilder, off: i64) {
    b.open("/data/t.tdb", 0o101, 3, Some(file(9, 0, 1)));
    b.call(dejavu_trace::Sys::Pwrite64, |c, b| {
        c.fd = Some(3);
        c.path = Some(b.s("/data/t.tdb"));
        c.ev = dejavu_trace::ev::PATH_FROM_FD;
        c.count = 8;
        c.ret = 8;
        c.offset = Some(off);
    });
    b.close(3, "/data/t.tdb");
}

#[test]
fn a_kept_handle_buffered_until_exit_merges_the_writes_that_follow_each_other() {
    // Ten tiles one after the other, then five at the same offset (each rewrites the last).
    let build = || {
        let mut b = TraceBuilder::new();
        for i in 0..10 {
            tile_at(&mut b, i * 8);
        }
        for _ in 0..5 {
            tile_at(&mut b, 0);
        }
        b
    };
    let o = &run(build(), keep("/data/*.tdb"))[0];
    let k = o.keep_open.as_ref().expect("keep_open");
    // The ten merge into one write; each of the five starts elsewhere: one write each.
    assert_eq!((k.writes_before, k.writes_after), (15, 6), "{k:#?}");
    // Not among the governed calls: the opens and closes are.
    assert_eq!((o.calls_before, o.removed_calls), (30, 28));
    // Written through at once, nothing is merged.
    let f = Flags {
        flush: Some("each-write".into()),
        ..keep("/data/*.tdb")
    };
    let o = &run(build(), f)[0];
    let k = o.keep_open.as_ref().expect("keep_open");
    assert_eq!((k.writes_before, k.writes_after), (0, 0));
}

/// On stderr: 12 writes of one warning (its number varies), one write carrying it after
/// another line, one carrying it cut in two writes.
fn warnings() -> TraceBuilder {
    let mut b = TraceBuilder::new();
    for i in 0..12 {
        b.write(
            2,
            "/dev/pts/0",
            &format!("warning: retry {i} of the upload\n"),
            true,
        );
    }
    b.write(
        2,
        "/dev/pts/0",
        "starting the next batch now\nwarning: retry 40 of the upload\n",
        true,
    );
    b.write(2, "/dev/pts/0", "warning: retry 4", true);
    b.write(2, "/dev/pts/0", "1 of the upload\n", true);
    b
}

#[test]
fn a_repeated_output_findings_own_fix_counts_masked_lines_as_the_finding_does() {
    let bytes = warnings().finish();
    let mut rd = TraceReader::new(&bytes[..]).expect("reader");
    let (a, covered) =
        crate::analyze_covered(&mut rd, &crate::Config::default(), |_| {}).expect("analysis");
    let f = a
        .rows()
        .iter()
        .find(|f| f.detector == "repeated-output")
        .expect("a repeated-output finding");
    assert_eq!(f.redundant_calls, 13);
    let p = super::own_log_fix(f, covered.lines(&f.key).expect("its lines"));
    let mut rd = TraceReader::new(&bytes[..]).expect("reader");
    let o = &evaluate(&mut rd, &[p], |_| {}).expect("eval").outcomes[0];
    let l = o.lines.as_ref().expect("lines");
    // 14 occurrences, one left: the 13 the finding says.
    assert_eq!((l.before, l.after, l.removed), (14, 1, 13));
    // Calls: the 11 one-line writes after the first go, and so does the write that
    // finishes the cut line (its first half ends no line: not governed); the write that
    // also carries another line stays.
    assert_eq!((o.calls_before, o.removed_calls), (14, 12), "{o:#?}");
    assert!(o.hazards.iter().any(|h| h.contains("aggregate")));
}

/// pid 100 runs `git --version` 12 times, each child first probing /usr/local/bin/git
/// (ENOENT), then making 2 calls of its own (the execve, a stat).
fn spawns() -> TraceBuilder {
    use dejavu_trace::{Exit, ExitStatus, Record, Sys};
    let mut b = TraceBuilder::new();
    b.exec("/usr/bin/python3", &["python3", "app.py"]);
    for i in 0..12 {
        let child = 200 + i;
        b.fork(child);
        b.pid = child;
        b.tid = child;
        b.call(Sys::Execve, |c, b| {
            c.path = Some(b.s("/usr/local/bin/git"));
            c.payload = Some(b.s("git\0--version"));
            c.ret = -2;
        });
        b.exec("/usr/bin/git", &["git", "--version"]);
        b.call(Sys::Execve, |c, b| {
            c.path = Some(b.s("/usr/bin/git"));
            c.payload = Some(b.s("git\0--version"));
        });
        b.stat("/etc/gitconfig", Err(2));
        b.push(Record::Exit(Exit {
            ts: 0,
            pid: child,
            tid: child,
            status: ExitStatus::Code(0),
        }));
        b.pid = 100;
        b.tid = 100;
    }
    b
}

#[test]
fn a_repeated_exec_findings_own_fix_removes_the_later_runs_and_every_call_they_made() {
    let bytes = spawns().finish();
    let mut rd = TraceReader::new(&bytes[..]).expect("reader");
    let (a, covered) =
        crate::analyze_covered(&mut rd, &crate::Config::default(), |_| {}).expect("analysis");
    let mut seen = Vec::new();
    for f in a.rows().iter().filter(|f| f.detector == "repeated-exec") {
        let p = super::own_exec_fix(
            f,
            covered.execs(&f.key).unwrap_or(&[]),
            covered.probes(&f.key).unwrap_or(&[]),
        );
        let mut rd = TraceReader::new(&bytes[..]).expect("reader");
        let o = &evaluate(&mut rd, &[p], |_| {}).expect("eval").outcomes[0];
        assert_eq!(f.redundant_calls, 11, "{:?}", f.key);
        match &o.execs {
            // Run once: 12 runs -> 1; the 11 later runs' 2 calls each go with them.
            Some(x) => {
                assert_eq!((x.before, x.after, x.removed), (12, 1, 11));
                assert_eq!((o.calls_before, o.removed_calls), (24, 22), "{o:#?}");
                seen.push("runs");
            }
            // Resolve once: the 11 later probes go.
            None => {
                assert_eq!((o.calls_before, o.removed_calls), (12, 11), "{o:#?}");
                seen.push("probes");
            }
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, ["probes", "runs"]);
}

#[test]
fn a_stat_cache_does_not_serve_a_directorys_stat_made_while_it_is_open() {
    // gnulib's fts (du, find): lstat, open, lstat again while open (an automount check),
    // close; each directory's second stat is not one a cache serves, as repeated-lookup
    // does not count it. A stat after the close is.
    const O_DIRECTORY: u64 = 0o200000;
    let mut b = TraceBuilder::new();
    for i in 0..4 {
        let d = format!("/w/d{i}");
        b.stat(&d, Ok(dir(i + 10)));
        b.open(&d, O_DIRECTORY, 3, Some(dir(i + 10)));
        b.stat(&d, Ok(dir(i + 10)));
        b.close(3, &d);
        b.stat(&d, Ok(dir(i + 10)));
    }
    let o = &run(b, cache("stat:/w/**"))[0];
    assert_eq!((o.calls_before, o.calls_after, o.removed_calls), (12, 8, 4));
}
