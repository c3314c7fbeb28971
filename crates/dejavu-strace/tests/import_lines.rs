//! Unit tests of the importer on hand-written strace lines, one format feature at a
//! time. Expected values come from strace's documented output and the kernel's
//! constants (docs/trace-format.md), not from running the importer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_strace::{import_files, ImportOptions, ImportReport, Importer, MemorySink};
use dejavu_trace::{
    ev, stat_known, ExitStatus, FileStat, LostReason, Record, StatId, Sys, Syscall, TraceReader,
};
use std::io::Write;

struct Imported {
    sink: MemorySink,
    report: ImportReport,
    exit: Option<ExitStatus>,
    end_ts: u64,
}

impl Imported {
    fn syscalls(&self) -> Vec<Syscall> {
        self.sink.syscalls().copied().collect()
    }

    fn only(&self, sys: Sys) -> Syscall {
        let v: Vec<Syscall> = self
            .syscalls()
            .into_iter()
            .filter(|s| s.sys == sys)
            .collect();
        assert_eq!(v.len(), 1, "expected one {sys} record, got {v:?}");
        v[0]
    }

    fn path(&self, s: &Syscall) -> Option<String> {
        self.sink.text(s.path)
    }

    fn path2(&self, s: &Syscall) -> Option<String> {
        self.sink.text(s.path2)
    }

    fn payload(&self, s: &Syscall) -> Option<Vec<u8>> {
        s.payload.map(|p| self.sink.str(p).to_vec())
    }

    fn stat(&self, id: Option<StatId>) -> FileStat {
        self.sink.stat(id.expect("stat answer"))
    }
}

/// Imports `lines` as one input whose lines without a pid column belong to pid 100.
fn import_with(lines: &[&str], cwd: Option<&str>, payload_bytes: u32) -> Imported {
    let mut imp = Importer::new(MemorySink::default(), cwd.map(str::as_bytes), payload_bytes);
    let src = imp.add_source("test.log", Some(100));
    for (i, l) in lines.iter().enumerate() {
        imp.feed(src, i as u64 + 1, l.as_bytes()).expect("feed");
    }
    let done = imp.finish().expect("finish");
    Imported {
        sink: done.sink,
        report: done.report,
        exit: done.exit,
        end_ts: done.end_ts,
    }
}

fn import(lines: &[&str]) -> Imported {
    import_with(lines, Some("/work"), 256)
}

const O_CLOEXEC: u64 = 0o2000000;

#[test]
fn complete_call_fields_and_timing() {
    let t = import(&[
        r#"100 10:00:00.000000 openat(AT_FDCWD</home/u>, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3</etc/ld.so.cache> <0.000053>"#,
        r#"100 10:00:00.001500 openat(AT_FDCWD</home/u>, "x", O_WRONLY|O_CREAT|O_TRUNC, 0644) = -1 EACCES (Permission denied) <0.000010>"#,
    ]);
    let s = t.syscalls();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].pid, s[0].tid, s[0].ts, s[0].dur, s[0].ret),
        (100, 100, 0, 53_000, 3)
    );
    assert_eq!(t.path(&s[0]).as_deref(), Some("/etc/ld.so.cache"));
    assert_eq!(s[0].flags, O_CLOEXEC);
    assert_eq!(s[0].ev, 0);
    assert_eq!((s[1].ts, s[1].ret), (1_500_000, -13));
    assert_eq!(t.path(&s[1]).as_deref(), Some("/home/u/x"));
    assert_eq!((s[1].flags, s[1].mode), (0o1 | 0o100 | 0o1000, 0o644));
    assert!(s[1].is_error());
    assert_eq!(t.end_ts, 1_500_000);
}

#[test]
fn unfinished_and_resumed_halves_are_joined() {
    let t = import(&[
        "100 10:00:00.000000 read(3</tmp/f>,  <unfinished ...>",
        "101 10:00:00.000100 close(4</tmp/g>) = 0 <0.000001>",
        r#"100 10:00:00.050000 <... read resumed>"abc", 4096) = 3 <0.050000>"#,
    ]);
    let r = t.only(Sys::Read);
    assert_eq!(
        (r.ts, r.dur, r.ret, r.count, r.fd),
        (0, 50_000_000, 3, 4096, Some(3))
    );
    assert_eq!(t.path(&r).as_deref(), Some("/tmp/f"));
    assert_eq!(r.ev, ev::PATH_FROM_FD);
    // The record is written when the call ends, after the close that ended before it.
    assert!(matches!(t.sink.records.last(), Some(Record::Syscall(s)) if s.sys == Sys::Read));
    assert_eq!(
        t.report.unmatched_resumed + t.report.unfinished_never_resumed,
        0
    );
}

#[test]
fn unmatched_and_never_resumed_calls_are_counted_and_flagged() {
    let t = import(&[
        r#"100 10:00:00.000000 <... read resumed>"abc", 4096) = 3 <0.050000>"#,
        "100 10:00:00.100000 write(1</dev/pts/0>, \"x\", 1 <unfinished ...>",
        "100 10:00:00.200000 +++ killed by SIGKILL +++",
        "101 10:00:00.300000 fsync(5 <unfinished ...>",
    ]);
    assert_eq!(t.report.unmatched_resumed, 1);
    assert_eq!(t.report.unfinished_never_resumed, 2);
    let r = t.only(Sys::Read);
    assert_eq!(r.ret, 3);
    assert_ne!(r.ev & ev::UNDECODED, 0);
    let w = t.only(Sys::Write);
    assert_ne!(w.ev & ev::UNFINISHED, 0);
    assert_eq!(t.path(&w).as_deref(), Some("/dev/pts/0"));
    assert!(!w.is_error());
    assert_ne!(t.only(Sys::Fsync).ev & ev::UNFINISHED, 0);
    assert_eq!(
        t.exit,
        Some(ExitStatus::Signal {
            signal: 9,
            core: false
        })
    );
}

#[test]
fn results_errors_restarts_and_no_return() {
    let t = import(&[
        r#"100 access("/nope", F_OK) = -1 ENOENT (No such file or directory)"#,
        "100 read(3, 0x7ffd, 8) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)",
        "100 read(3, 0x7ffd, 8) = ? <unavailable>",
        "100 read(3, 0x7ffd, 8) = -1 EWHATNOW (Something new)",
        "100 lseek(3, 0, SEEK_END) = 4294967296",
    ]);
    let s = t.syscalls();
    assert_eq!(s[0].ret, -2);
    assert_eq!((s[1].ret, s[1].ev & ev::RESTARTED), (-512, ev::RESTARTED));
    assert!(s[1].is_error());
    assert_ne!(s[2].ev & ev::UNFINISHED, 0);
    assert!(!s[2].is_error());
    assert_eq!(s[3].ret, -4095);
    assert_eq!(t.report.unknown_errno, 1);
    assert_eq!((s[4].ret, s[4].aux, s[4].offset), (1 << 32, 2, Some(0)));
}

#[test]
fn relative_paths_resolve_against_annotations_and_tracked_cwd() {
    let t = import_with(
        &[
            r#"100 newfstatat(AT_FDCWD</srv/app>, "./a//b/../c", 0x7ffd, 0) = -1 ENOENT (No such file or directory)"#,
            // Without an annotation the cwd learned above is used.
            r#"100 stat("lib/x.py", 0x7ffd) = -1 ENOENT (No such file or directory)"#,
            r#"100 chdir("sub") = 0"#,
            r#"100 access("y", F_OK) = -1 ENOENT (No such file or directory)"#,
            r#"100 openat(3</etc>, "hosts", O_RDONLY) = 4"#,
            r#"100 mkdirat(4</opt>, "new", 0700) = 0"#,
        ],
        None,
        256,
    );
    let s = t.syscalls();
    assert_eq!(t.path(&s[0]).as_deref(), Some("/srv/app/a/b/../c"));
    assert_eq!(t.path(&s[1]).as_deref(), Some("/srv/app/lib/x.py"));
    assert_eq!(t.path(&s[2]).as_deref(), Some("/srv/app/sub"));
    assert_eq!(t.path(&s[3]).as_deref(), Some("/srv/app/sub/y"));
    assert_eq!(t.path(&s[4]).as_deref(), Some("/etc/hosts"));
    assert_eq!(
        (t.path(&s[5]).as_deref(), s[5].mode),
        (Some("/opt/new"), 0o700)
    );
    assert_eq!(t.report.relative_paths_unresolved, 0);
}

#[test]
fn cwd_option_and_unknown_cwd() {
    let lines = [r#"100 stat("rel/p", 0x7ffd) = -1 ENOENT (No such file or directory)"#];
    let t = import_with(&lines, Some("/base/"), 256);
    assert_eq!(t.path(&t.only(Sys::Stat)).as_deref(), Some("/base/rel/p"));
    let t = import_with(&lines, None, 256);
    assert_eq!(t.path(&t.only(Sys::Stat)).as_deref(), Some("rel/p"));
    assert_eq!(t.report.relative_paths_unresolved, 1);
}

#[test]
fn fchdir_and_children_inherit_cwd() {
    let t = import_with(
        &[
            r#"100 openat(AT_FDCWD, "/var/lib", O_RDONLY|O_DIRECTORY) = 3"#,
            "100 fchdir(3) = 0",
            "100 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 200",
            r#"200 unlink("old") = 0"#,
        ],
        Some("/"),
        256,
    );
    let f = t.only(Sys::Fchdir);
    assert_eq!(
        (t.path(&f).as_deref(), f.ev),
        (Some("/var/lib"), ev::PATH_FROM_FD)
    );
    let u = t.only(Sys::Unlink);
    assert_eq!((u.pid, t.path(&u).as_deref()), (200, Some("/var/lib/old")));
}

#[test]
fn descriptors_without_y_come_from_the_tracked_table() {
    let t = import(&[
        r#"100 openat(AT_FDCWD, "data.bin", O_RDONLY) = 3"#,
        "100 read(3, \"\\0\\1\", 2) = 2",
        "100 dup2(3, 10) = 10",
        "100 pread64(10, \"\", 16, 4096) = 0",
        "100 close(3) = 0",
        "100 read(3, 0x7ffd, 1) = -1 EBADF (Bad file descriptor)",
        "100 pipe2([5, 6], O_CLOEXEC) = 0",
        "100 write(6, \"hi\", 2) = 2",
        "100 fstat(7, {st_mode=S_IFREG|0644, st_size=1, ...}) = 0",
    ]);
    let s = t.syscalls();
    assert_eq!(
        (t.path(&s[1]).as_deref(), s[1].ev),
        (Some("/work/data.bin"), ev::PATH_FROM_FD)
    );
    assert_eq!(
        (s[2].fd, s[2].fd2, t.path(&s[2]).as_deref()),
        (Some(3), Some(10), Some("/work/data.bin"))
    );
    assert_eq!(
        (t.path(&s[3]).as_deref(), s[3].offset, s[3].count),
        (Some("/work/data.bin"), Some(4096), 16)
    );
    assert_eq!(s[5].path, None);
    assert_ne!(s[5].ev & ev::FD_UNKNOWN, 0);
    assert_eq!(
        (s[6].fd, s[6].fd2, s[6].flags),
        (Some(5), Some(6), O_CLOEXEC)
    );
    // A pipe: the payload is recorded even without -y.
    assert_eq!(t.payload(&s[7]), Some(b"hi".to_vec()));
    assert_ne!(s[8].ev & ev::FD_UNKNOWN, 0);
    assert!(t.report.fd_unknown >= 2);
}

#[test]
fn files_made_with_o_tmpfile_are_not_the_directory_they_were_made_in() {
    let t = import(&[
        r#"100 openat(AT_FDCWD, "/tmp", O_RDWR|O_EXCL|O_CLOEXEC|O_TMPFILE, 0600) = 3"#,
        "100 write(3, \"u\", 1) = 1",
        "100 close(3) = 0",
        r#"100 openat(AT_FDCWD, "/tmp/", O_RDWR|O_TMPFILE, 0600) = 3"#,
        "100 fstat(3, {st_mode=S_IFREG|0600, st_size=0, ...}) = 0",
        r#"100 openat(AT_FDCWD</work>, "/tmp", O_RDWR|O_TMPFILE, 0600) = 4</tmp/#1234 (deleted)>"#,
        "100 write(4</tmp/#1234 (deleted)>, \"u\", 1) = 1",
        r#"100 newfstatat(AT_FDCWD, "/tmp", {st_mode=S_IFDIR|01777, st_size=4096, ...}, 0) = 0"#,
    ]);
    let s = t.syscalls();
    // The open names the directory; its descriptor's calls are the new file's, a name of
    // their own each (the inode, as strace -y gives it, or a number of the import's).
    assert_eq!(t.path(&s[0]).as_deref(), Some("/tmp"));
    assert_eq!(t.path(&s[1]).as_deref(), Some("/tmp/#tmpfile-1 (deleted)"));
    assert_eq!(t.path(&s[4]).as_deref(), Some("/tmp/#tmpfile-2 (deleted)"));
    assert_eq!(t.path(&s[6]).as_deref(), Some("/tmp/#1234 (deleted)"));
    assert_eq!(t.path(&s[7]).as_deref(), Some("/tmp"));
}

#[test]
fn payloads_only_for_terminals_pipes_sockets_devnull_and_append() {
    let t = import(&[
        r#"100 write(3</home/u/out.txt>, "regular", 7) = 7"#,
        r#"100 write(1</dev/pts/3>, "tty\n", 4) = 4"#,
        r#"100 write(4</dev/null<char 1:3>>, "null", 4) = 4"#,
        r#"100 write(5<pipe:[77]>, "a long line cut by strace"..., 100) = 100"#,
        r#"100 openat(AT_FDCWD</w>, "app.log", O_WRONLY|O_CREAT|O_APPEND, 0666) = 6</w/app.log>"#,
        r#"100 writev(6</w/app.log>, [{iov_base="ab", iov_len=2}, {iov_base="cd\n", iov_len=3}], 2) = 5"#,
        r#"100 write(7<UNIX-STREAM:[123->124]>, "sock", 4) = 4"#,
        r#"100 write(8</dev/tty1<char 4:1>>, "x", 1) = 1"#,
    ]);
    let w: Vec<Syscall> = t
        .syscalls()
        .into_iter()
        .filter(|s| s.sys != Sys::Openat)
        .collect();
    assert_eq!(t.payload(&w[0]), None);
    assert_eq!(t.payload(&w[1]), Some(b"tty\n".to_vec()));
    assert_eq!(t.path(&w[2]).as_deref(), Some("/dev/null"));
    assert_eq!(t.payload(&w[2]), Some(b"null".to_vec()));
    assert_eq!(
        t.payload(&w[3]),
        Some(b"a long line cut by strace".to_vec())
    );
    assert_ne!(w[3].ev & ev::PAYLOAD_TRUNCATED, 0);
    assert_eq!(
        (t.payload(&w[4]), w[4].count),
        (Some(b"abcd\n".to_vec()), 5)
    );
    assert_eq!(w[4].ev & ev::PAYLOAD_TRUNCATED, 0);
    assert_eq!(t.path(&w[5]).as_deref(), Some("socket:[123]"));
    assert_eq!(t.payload(&w[5]), Some(b"sock".to_vec()));
    assert_eq!(t.payload(&w[6]), Some(b"x".to_vec()));
}

#[test]
fn payloads_for_the_standard_streams_and_log_files_whatever_they_are() {
    let t = import(&[
        // Descriptors 0-2 keep their bytes even as regular files, even unknown ones.
        r#"100 write(2</tmp/run/err.txt>, "warn: retry 1\n", 14) = 14"#,
        r#"100 write(1, "out\n", 4) = 4"#,
        // Log names: *.log, *.log.N, *.err, nohup.out, under log/ or logs/.
        r#"100 write(3</srv/app.log>, "a", 1) = 1"#,
        r#"100 write(4</srv/app.log.2>, "b", 1) = 1"#,
        r#"100 write(5</srv/build.err>, "c", 1) = 1"#,
        r#"100 write(6</home/u/nohup.out>, "d", 1) = 1"#,
        r#"100 write(7</srv/logs/today>, "e", 1) = 1"#,
        // Data: no payload.
        r#"100 write(8</srv/data.csv>, "1,2\n", 4) = 4"#,
        r#"100 write(9</srv/catalog>, "f", 1) = 1"#,
    ]);
    let w = t.syscalls();
    let kept: Vec<Option<Vec<u8>>> = w.iter().map(|s| t.payload(s)).collect();
    assert_eq!(
        kept,
        [
            Some(b"warn: retry 1\n".to_vec()),
            Some(b"out\n".to_vec()),
            Some(b"a".to_vec()),
            Some(b"b".to_vec()),
            Some(b"c".to_vec()),
            Some(b"d".to_vec()),
            Some(b"e".to_vec()),
            None,
            None
        ]
    );
    // Every write has its fingerprint, kept bytes or not.
    assert!(w.iter().all(|s| s.fingerprint.is_some()), "{w:?}");
}

#[test]
fn write_fingerprints_come_from_the_bytes_strace_printed() {
    use dejavu_trace::mask::fingerprint;
    let t = import_with(
        &[
            r#"100 write(3</srv/data.bin>, "request 41 ok\n", 14) = 14"#,
            r#"100 write(3</srv/data.bin>, "request 42 ok\n", 14) = 14"#,
            r#"100 write(3</srv/data.bin>, "request 42 failed\n", 18) = 18"#,
            // A short write: only what it wrote.
            r#"100 pwrite64(3</srv/data.bin>, "abcdef", 6, 0) = 3"#,
            r#"100 writev(1<pipe:[5]>, [{iov_base="ab", iov_len=2}, {iov_base="cd\n", iov_len=3}], 2) = 5"#,
            // strace's -s cut it: what it shows.
            r#"100 write(3</srv/data.bin>, "a long line cut by strace"..., 100) = 100"#,
            // Failed, and nothing written: no fingerprint.
            r#"100 write(3</srv/data.bin>, "x", 1) = -1 ENOSPC (No space left on device)"#,
            r#"100 write(3</srv/data.bin>, "", 0) = 0"#,
        ],
        Some("/"),
        0,
    );
    let fp: Vec<Option<u64>> = t.syscalls().iter().map(|s| s.fingerprint).collect();
    assert_eq!(
        fp,
        [
            Some(fingerprint(b"request 41 ok\n")),
            Some(fingerprint(b"request 41 ok\n")),
            Some(fingerprint(b"request 42 failed\n")),
            Some(fingerprint(b"abc")),
            Some(fingerprint(b"abcd\n")),
            Some(fingerprint(b"a long line cut by strace")),
            None,
            None
        ]
    );
    assert_ne!(fp[0], fp[2]);
    // --no-payload (payload_bytes 0): fingerprints only.
    assert!(t.syscalls().iter().all(|s| s.payload.is_none()));
}

#[test]
fn payload_limit_and_switch() {
    let lines = [r#"100 write(1</dev/pts/0>, "0123456789", 10) = 10"#];
    let t = import_with(&lines, None, 4);
    let w = t.only(Sys::Write);
    assert_eq!(t.payload(&w), Some(b"0123".to_vec()));
    assert_ne!(w.ev & ev::PAYLOAD_TRUNCATED, 0);
    let t = import_with(&lines, None, 0);
    assert_eq!(t.only(Sys::Write).payload, None);
}

#[test]
fn fcntl_setfl_append_enables_payloads() {
    let t = import(&[
        r#"100 openat(AT_FDCWD, "/var/data/x", O_WRONLY) = 3"#,
        "100 fcntl(3, F_SETFL, O_WRONLY|O_APPEND) = 0",
        r#"100 write(3, "line\n", 5) = 5"#,
    ]);
    let f = t.only(Sys::Fcntl);
    assert_eq!((f.flags, f.aux), (4, 0o2001));
    assert_eq!(t.payload(&t.only(Sys::Write)), Some(b"line\n".to_vec()));
}

#[test]
fn stat_answers_without_and_with_v() {
    let t = import(&[
        r#"100 newfstatat(AT_FDCWD</w>, "/etc/passwd", {st_mode=S_IFREG|0644, st_size=1221, ...}, 0) = 0"#,
        r#"100 newfstatat(3</etc/ld.so.cache>, "", {st_dev=makedev(0xfe, 0), st_ino=613, st_mode=S_IFREG|0644, st_nlink=1, st_uid=0, st_gid=0, st_blksize=4096, st_blocks=72, st_size=33763, st_atime=1795306369 /* 2026-11-22T00:12:49.752878872+0000 */, st_atime_nsec=752878872, st_mtime=1795306369 /* 2026-11-22T00:12:49.732878872+0000 */, st_mtime_nsec=732878872, st_ctime=1795306369 /* 2026-11-22T00:12:49.736878872+0000 */, st_ctime_nsec=736878872}, AT_EMPTY_PATH) = 0"#,
        r#"100 read(3</etc/ld.so.cache>, "x", 1) = 1"#,
        r#"100 fstat(1</dev/null>, {st_mode=S_IFCHR|0666, st_rdev=makedev(0x1, 0x3), ...}) = 0"#,
        r#"100 stat("/nope", 0x7ffd) = -1 ENOENT (No such file or directory)"#,
    ]);
    let s = t.syscalls();
    let st = t.stat(s[0].stat);
    assert_eq!(st.known, stat_known::MODE | stat_known::SIZE);
    assert_eq!((st.mode, st.size), (0o100644, 1221));
    assert_ne!(s[0].ev & ev::STAT_PARTIAL, 0);

    let st = t.stat(s[1].stat);
    assert_eq!(
        st.known,
        stat_known::IDENTITY
            | stat_known::MODE
            | stat_known::SIZE
            | stat_known::MTIME
            | stat_known::CTIME
            | stat_known::OWNER
    );
    assert_eq!(
        (st.dev, st.ino, st.nlink, st.size),
        (FileStat::makedev(0xfe, 0), 613, 1, 33763)
    );
    assert_eq!(st.mtime_ns, 1_795_306_369_732_878_872);
    assert_eq!(st.ctime_ns, 1_795_306_369_736_878_872);
    assert_eq!(s[1].ev & ev::STAT_PARTIAL, 0);
    // AT_EMPTY_PATH with "": the call is about the descriptor.
    assert_eq!((s[1].fd, s[1].flags), (Some(3), 0x1000));
    assert_eq!(
        (t.path(&s[1]).as_deref(), s[1].ev),
        (Some("/etc/ld.so.cache"), ev::PATH_FROM_FD)
    );

    // Later calls on that descriptor carry the identity learned from the fstat.
    let id = t.stat(s[2].stat);
    assert_eq!(
        (id.known, id.dev, id.ino),
        (stat_known::IDENTITY, FileStat::makedev(0xfe, 0), 613)
    );

    let st = t.stat(s[3].stat);
    assert_eq!(st.known, stat_known::MODE | stat_known::RDEV);
    assert_eq!((st.mode, st.rdev), (0o20666, FileStat::makedev(1, 3)));
    assert_eq!(s[4].stat, None);
}

#[test]
fn statx_answers() {
    let t = import(&[
        r#"100 statx(AT_FDCWD</w>, "/", AT_STATX_SYNC_AS_STAT|AT_SYMLINK_NOFOLLOW|AT_NO_AUTOMOUNT, STATX_MODE|STATX_SIZE, {stx_mask=STATX_BASIC_STATS|STATX_MNT_ID, stx_blksize=4096, stx_attributes=STATX_ATTR_MOUNT_ROOT, stx_nlink=21, stx_uid=0, stx_gid=0, stx_mode=S_IFDIR|0755, stx_ino=2, stx_size=4096, stx_blocks=8, stx_attributes_mask=STATX_ATTR_COMPRESSED, stx_atime={tv_sec=1795306808, tv_nsec=472869974} /* 2026-11-22T00:20:08.472869974+0000 */, stx_ctime={tv_sec=1795306382, tv_nsec=412878615} /* 2026-11-22T00:13:02.412878615+0000 */, stx_mtime={tv_sec=1795306381, tv_nsec=5} /* 2026-11-22T00:13:01.000000005+0000 */, stx_rdev_major=0, stx_rdev_minor=0, stx_dev_major=254, stx_dev_minor=0, stx_mnt_id=0x1b}) = 0"#,
        r#"100 statx(AT_FDCWD</w>, "/etc", AT_STATX_SYNC_AS_STAT, STATX_BASIC_STATS, {stx_mask=STATX_BASIC_STATS, stx_attributes=0, stx_mode=S_IFDIR|0755, stx_size=4096, ...}) = 0"#,
    ]);
    let s = t.syscalls();
    assert_eq!((s[0].flags, s[0].aux), (0x100 | 0x800, 0x2 | 0x200));
    let st = t.stat(s[0].stat);
    assert_eq!(
        st.known & stat_known::RDEV,
        0,
        "rdev is meaningless for a directory"
    );
    assert_eq!(
        (st.dev, st.ino, st.mode, st.size, st.nlink),
        (FileStat::makedev(254, 0), 2, 0o40755, 4096, 21)
    );
    assert_eq!(
        (st.mtime_ns, st.ctime_ns),
        (1_795_306_381_000_000_005, 1_795_306_382_412_878_615)
    );
    assert_eq!(s[0].ev & ev::STAT_PARTIAL, 0);
    assert_eq!(t.stat(s[1].stat).known, stat_known::MODE | stat_known::SIZE);
    assert_ne!(s[1].ev & ev::STAT_PARTIAL, 0);
}

#[test]
fn readlink_rename_symlink_link_and_chown() {
    let t = import(&[
        r#"100 readlink("/proc/self/exe", "/usr/bin/python3.11", 4096) = 19"#,
        r#"100 readlinkat(AT_FDCWD</w>, "l", 0x7ffd, 64) = -1 EINVAL (Invalid argument)"#,
        r#"100 renameat2(AT_FDCWD</w>, "a", 5</d>, "b", RENAME_NOREPLACE) = 0"#,
        r#"100 symlinkat("../target", AT_FDCWD</w>, "ln") = 0"#,
        r#"100 linkat(AT_FDCWD</w>, "a", AT_FDCWD</w>, "h", AT_SYMLINK_FOLLOW) = 0"#,
        r#"100 fchownat(AT_FDCWD</w>, "f", 1000, -1, AT_SYMLINK_NOFOLLOW) = 0"#,
    ]);
    let s = t.syscalls();
    assert_eq!(t.path(&s[0]).as_deref(), Some("/proc/self/exe"));
    assert_eq!(
        (t.path2(&s[0]).as_deref(), s[0].count),
        (Some("/usr/bin/python3.11"), 4096)
    );
    assert_eq!((s[1].path2, s[1].count), (None, 64));
    assert_eq!(
        (
            t.path(&s[2]).as_deref(),
            t.path2(&s[2]).as_deref(),
            s[2].flags
        ),
        (Some("/w/a"), Some("/d/b"), 1)
    );
    assert_eq!(
        (t.path(&s[3]).as_deref(), t.path2(&s[3]).as_deref()),
        (Some("/w/ln"), Some("../target"))
    );
    assert_eq!(s[4].flags, 0x400);
    assert_eq!((s[5].aux, s[5].flags), (1000 << 32 | 0xffff_ffff, 0x100));
}

#[test]
fn unknown_flag_names_keep_the_known_bits() {
    let t = import(&[r#"100 openat(AT_FDCWD</w>, "f", O_RDWR|O_SHINY_NEW|O_CLOEXEC) = 3</w/f>"#]);
    assert_eq!(t.only(Sys::Openat).flags, 0o2 | O_CLOEXEC);
    assert_eq!(t.report.unknown_symbols, 1);
}

#[test]
fn openat2_close_range_connect_sendfile_memfd() {
    let t = import(&[
        r#"100 openat2(AT_FDCWD</w>, "f", {flags=O_RDONLY|O_CLOEXEC, mode=0, resolve=RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH}, 24) = 3</w/f>"#,
        "100 close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) = 0",
        r#"100 connect(4<socket:[9]>, {sa_family=AF_UNIX, sun_path="/run/x.sock"}, 110) = 0"#,
        r#"100 connect(4<socket:[9]>, {sa_family=AF_UNIX, sun_path=@"abstract"}, 11) = -1 ECONNREFUSED (Connection refused)"#,
        r#"100 connect(5<TCP:[10]>, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("127.0.0.1")}, 16) = 0"#,
        r#"100 sendfile(6</out>, 7</in>, [100] => [108], 8) = 8"#,
        r#"100 memfd_create("buf", MFD_CLOEXEC|MFD_ALLOW_SEALING) = 8</memfd:buf>(deleted)"#,
        r#"100 write(8</memfd:buf>(deleted), "z", 1) = 1"#,
    ]);
    let s = t.syscalls();
    assert_eq!((s[0].flags, s[0].mode, s[0].aux), (O_CLOEXEC, 0, 4 | 8));
    assert_eq!((s[1].fd, s[1].aux, s[1].flags), (Some(3), 0xffff_ffff, 4));
    assert_eq!(
        (s[2].aux, t.path(&s[2]).as_deref(), s[2].fd),
        (1, Some("/run/x.sock"), Some(4))
    );
    assert_eq!(t.path(&s[3]).as_deref(), Some("@abstract"));
    assert_eq!((s[4].aux, s[4].path), (2, None));
    assert_eq!(
        (s[5].fd, s[5].fd2, s[5].offset, s[5].count),
        (Some(6), Some(7), Some(100), 8)
    );
    assert_eq!(
        (t.path(&s[5]).as_deref(), t.path2(&s[5]).as_deref()),
        (Some("/out"), Some("/in"))
    );
    assert_eq!((t.path2(&s[6]).as_deref(), s[6].flags), (Some("buf"), 3));
    assert_eq!(t.path(&s[7]).as_deref(), Some("/memfd:buf (deleted)"));
}

#[test]
fn yy_socket_names_keep_the_inode() {
    let t = import(&[
        "100 socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_TCP) = 4<TCP:[12384]>",
        r#"100 sendto(4<TCP:[127.0.0.1:50236->127.0.0.1:60457]>, "hi", 2, 0, NULL, 0) = 2"#,
        r#"100 write(4<TCP:[127.0.0.1:50236->127.0.0.1:60457]>, "hi", 2) = 2"#,
    ]);
    let so = t.only(Sys::Socket);
    assert_eq!(
        (so.aux, so.flags, so.mode, so.ret),
        (2, 1 | O_CLOEXEC, 6, 4)
    );
    let w = t.only(Sys::Write);
    assert_eq!(t.path(&w).as_deref(), Some("socket:[12384]"));
    assert_eq!(t.payload(&w), Some(b"hi".to_vec()));
    assert_eq!(t.report.ignored_syscalls.get("sendto"), Some(&1));
}

#[test]
fn process_tree_clone_fork_vfork_threads_exec_exit() {
    let t = import(&[
        "100 10:00:00.000000 execve(\"./app\", [\"app\", \"-v\"], 0x7ffd /* 20 vars */) = 0",
        "100 10:00:00.001000 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x7f, parent_tid=0x7f, exit_signal=0, stack=0x7f, stack_size=0x7fff80, tls=0x7f} => {parent_tid=[101]}, 88) = 101",
        "101 10:00:00.002000 close(9) = -1 EBADF (Bad file descriptor)",
        "101 10:00:00.003000 +++ exited with 0 +++",
        "100 10:00:00.004000 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 102",
        "102 10:00:00.005000 execve(\"/bin/sh\", [\"sh\", \"-c\", \"echo a very long command\"...], 0x7ffd /* 20 vars */) = 0",
        "102 10:00:00.006000 +++ killed by SIGSEGV (core dumped) +++",
        "100 10:00:00.007000 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_DUMPED, si_pid=102, si_uid=0} ---",
        "100 10:00:00.008000 vfork() = 103",
        "103 10:00:00.009000 exit_group(3) = ?",
        "103 10:00:00.009500 +++ exited with 3 +++",
        "100 10:00:00.010000 fork() = 104",
        "104 10:00:00.011000 +++ exited with 0 +++",
        "100 10:00:00.012000 +++ exited with 2 +++",
    ]);
    let spawns: Vec<_> = t
        .sink
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Spawn(s) = r {
                Some(*s)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(spawns.len(), 4);
    assert_eq!(
        (spawns[0].parent_pid, spawns[0].pid, spawns[0].tid),
        (100, 100, 101)
    );
    assert!(spawns[0].is_thread());
    assert_ne!(spawns[0].clone_flags & 0x10000, 0);
    assert_eq!(
        (spawns[1].pid, spawns[1].tid, spawns[1].clone_flags),
        (102, 102, 0x200000 | 0x1000000 | 17)
    );
    assert!(!spawns[1].is_thread());
    assert_eq!(
        (spawns[2].pid, spawns[2].clone_flags),
        (103, 0x4000 | 0x100 | 17)
    );
    assert_eq!((spawns[3].pid, spawns[3].clone_flags), (104, 17));

    // The thread's call belongs to process 100.
    let c = t.only(Sys::Close);
    assert_eq!((c.pid, c.tid), (100, 101));

    let execs: Vec<_> = t
        .sink
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Exec(e) = r {
                Some(*e)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(execs.len(), 2);
    assert_eq!(t.sink.str(execs[0].exe), b"/work/app");
    assert_eq!(t.sink.str(execs[0].argv), b"app\0-v");
    assert_eq!(
        t.sink.str(execs[1].argv),
        b"sh\0-c\0echo a very long command"
    );
    let ex: Vec<Syscall> = t
        .syscalls()
        .into_iter()
        .filter(|s| s.sys == Sys::Execve)
        .collect();
    assert_eq!(t.payload(&ex[0]), Some(b"app\0-v".to_vec()));
    assert_eq!(ex[0].ev & ev::PAYLOAD_TRUNCATED, 0);
    assert_ne!(ex[1].ev & ev::PAYLOAD_TRUNCATED, 0);

    let exits: Vec<_> = t
        .sink
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Exit(e) = r {
                Some(*e)
            } else {
                None
            }
        })
        .collect();
    let st: Vec<(u32, u32, ExitStatus)> = exits.iter().map(|e| (e.pid, e.tid, e.status)).collect();
    assert_eq!(
        st,
        vec![
            (100, 101, ExitStatus::Code(0)),
            (
                102,
                102,
                ExitStatus::Signal {
                    signal: 11,
                    core: true
                }
            ),
            (103, 103, ExitStatus::Code(3)),
            (104, 104, ExitStatus::Code(0)),
            (100, 100, ExitStatus::Code(2)),
        ]
    );
    assert_eq!(t.exit, Some(ExitStatus::Code(2)));
    let sig: Vec<_> = t
        .sink
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Signal(s) = r {
                Some(*s)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        (sig.len(), sig[0].signal, sig[0].pid, sig[0].ts),
        (1, 17, 100, 7_000_000)
    );
    assert_eq!(t.report.ignored_syscalls.get("exit_group"), Some(&1));
    assert_eq!(t.report.ignored_syscalls.get("clone3"), Some(&1));
}

#[test]
fn child_lines_before_the_parents_clone_returns() {
    let t = import(&[
        "100 clone(child_stack=NULL, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM <unfinished ...>",
        r#"101 openat(AT_FDCWD, "/t", O_RDONLY) = 3"#,
        "100 <... clone resumed>, tls=0x7f, child_tidptr=0x7f) = 101",
    ]);
    let spawns: Vec<_> = t
        .sink
        .records
        .iter()
        .filter(|r| matches!(r, Record::Spawn(_)))
        .collect();
    assert_eq!(spawns.len(), 1, "{spawns:?}");
    assert!(matches!(t.sink.records[0], Record::Spawn(s) if s.tid == 101 && s.pid == 100));
    let o = t.only(Sys::Openat);
    assert_eq!((o.pid, o.tid), (100, 101));
}

#[test]
fn exec_by_a_thread_supersedes_the_leader() {
    let t = import(&[
        "100 clone3({flags=CLONE_VM|CLONE_THREAD, exit_signal=0} => {parent_tid=[101]}, 88) = 101",
        r#"101 execve("/bin/true", ["true"], 0x7ffd /* 1 var */ <unfinished ...>"#,
        "100 +++ superseded by execve in pid 101 +++",
        "100 <... execve resumed>) = 0",
    ]);
    let e = t.only(Sys::Execve);
    assert_eq!((e.pid, e.tid, e.ret, e.ev), (100, 100, 0, 0));
    assert_eq!(t.path(&e).as_deref(), Some("/bin/true"));
    assert_eq!(t.report.unmatched_resumed, 0);
}

#[test]
fn cloexec_descriptors_close_on_exec() {
    let t = import(&[
        r#"100 openat(AT_FDCWD, "/a", O_RDONLY|O_CLOEXEC) = 3"#,
        r#"100 openat(AT_FDCWD, "/b", O_RDONLY) = 4"#,
        r#"100 execve("/bin/x", ["x"], 0x1 /* 0 vars */) = 0"#,
        "100 read(3, 0x1, 1) = -1 EBADF (Bad file descriptor)",
        "100 read(4, \"\", 1) = 0",
    ]);
    let r: Vec<Syscall> = t
        .syscalls()
        .into_iter()
        .filter(|s| s.sys == Sys::Read)
        .collect();
    assert_eq!(r[0].path, None);
    assert_eq!(t.path(&r[1]).as_deref(), Some("/b"));
}

#[test]
fn timestamps_cross_midnight_and_epochs() {
    let t = import(&[
        "100 23:59:59.900000 close(3) = 0",
        "100 00:00:00.100000 close(4) = 0",
        "100 00:00:01.000000 close(5) = 0",
    ]);
    let ts: Vec<u64> = t.syscalls().iter().map(|s| s.ts).collect();
    assert_eq!(ts, vec![0, 200_000_000, 1_100_000_000]);

    let t = import(&[
        "1700000000.500000 close(3) = 0",
        "1700000001.000001 close(4) = 0",
    ]);
    let ts: Vec<u64> = t.syscalls().iter().map(|s| s.ts).collect();
    assert_eq!(ts, vec![0, 500_001_000]);
    // No pid column: the source's pid.
    assert_eq!(t.syscalls()[0].pid, 100);

    let t = import(&[
        "100      0.000000 close(3) = 0",
        "100      0.250000 close(4) = 0",
        "100      0.000010 close(5) = 0",
    ]);
    let ts: Vec<u64> = t.syscalls().iter().map(|s| s.ts).collect();
    assert_eq!(ts, vec![0, 250_000_000, 250_010_000]);
}

#[test]
fn hex_strings_and_escapes_in_paths() {
    let t = import(&[
        r#"100 openat(AT_FDCWD, "\x2f\x65\x74\x63\x2f\x68\x6f\x73\x74\x73", O_RDONLY) = 3"#,
        r#"100 openat(AT_FDCWD</w>, "weird/a>b", O_RDONLY) = 4</w/weird/a\76b>"#,
        "100 read(4</w/weird/a\\76b>, \"\", 1) = 0",
        r#"100 stat("/tmp/n\nl\303\244", 0x1) = -1 ENOENT (No such file or directory)"#,
    ]);
    let s = t.syscalls();
    assert_eq!(t.path(&s[0]).as_deref(), Some("/etc/hosts"));
    assert_eq!(t.path(&s[2]).as_deref(), Some("/w/weird/a>b"));
    assert_eq!(
        t.sink.str(s[3].path.expect("path")),
        "/tmp/n\nlä".as_bytes()
    );
}

#[test]
fn unparsed_lines_are_reported_with_line_numbers_and_lost_records() {
    let t = import(&[
        "100 close(3) = 0",
        "this is not strace output",
        r#"100 openat(AT_FDCWD, "/cut"#,
        "100 close(4) = 0",
        "100 read(3, 4) = banana",
        "",
        "% time     seconds  usecs/call     calls    errors syscall",
        "  0.00    0.000000           0         2           close",
    ]);
    let lines: Vec<u64> = t.report.unparsed.iter().map(|u| u.line).collect();
    assert_eq!(lines, vec![2, 3, 5]);
    assert_eq!(t.report.unparsed[0].text, "this is not strace output");
    assert!(t
        .report
        .unparsed
        .iter()
        .all(|u| u.file == "test.log" && !u.reason.is_empty()));
    let lost: Vec<_> = t
        .sink
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Lost(l) = r {
                Some(*l)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(lost.len(), 3);
    assert!(lost
        .iter()
        .all(|l| l.reason == LostReason::Unparsed && l.count == 1));
    assert_eq!(t.syscalls().len(), 2);
    assert_eq!(t.report.lines, 8);
    assert_eq!(t.report.summary_lines, 2);
}

#[test]
fn ignored_syscalls_are_counted_not_written() {
    let t = import(&[
        "100 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f00",
        "100 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, 3, 0) = 0x7f10",
        "100 futex(0x7f, FUTEX_WAIT_PRIVATE, 0, NULL <unfinished ...>",
        "100 <... futex resumed>) = 0",
        "100 close(3) = 0",
    ]);
    // Anonymous memory is not traced; the mapping of descriptor 3 is (below).
    assert_eq!(t.report.ignored_syscalls.get("mmap"), Some(&1));
    assert_eq!(t.report.ignored_syscalls.get("futex"), Some(&1));
    assert_eq!(t.syscalls().len(), 2);
    assert_eq!(t.report.syscalls, 2);
}

#[test]
fn mmap_of_a_file_is_recorded_and_anonymous_memory_is_not() {
    let t = import(&[
        r#"100 openat(AT_FDCWD, "/data/x.bin", O_RDONLY) = 3</data/x.bin>"#,
        "100 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f00",
        // MAP_ANONYMOUS makes the kernel ignore the descriptor.
        "100 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, 3</data/x.bin>, 0) = 0x7f08",
        "100 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, -1, 0) = -1 EBADF (Bad file descriptor)",
        "100 mmap(0x7f20, 12288, PROT_READ|PROT_EXEC, MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE, 3</data/x.bin>, 0x1000) = 0x7f20",
    ]);
    assert_eq!(t.report.ignored_syscalls.get("mmap"), Some(&3));
    let m = t.only(Sys::Mmap);
    assert_eq!(t.path(&m).as_deref(), Some("/data/x.bin"));
    assert_eq!(m.fd, Some(3));
    assert_eq!(m.count, 12288);
    assert_eq!(m.offset, Some(0x1000));
    assert_eq!(m.aux, 1 | 4, "prot");
    assert_eq!(m.flags, 2 | 0x10 | 0x800, "flags");
    assert_eq!(m.ret, 0x7f20);
    assert_eq!(t.report.unknown_symbols, 0);
}

#[test]
fn stderr_form_with_interleaved_attach_messages() {
    let mut imp = Importer::new(MemorySink::default(), Some(b"/".as_slice()), 256);
    let src = imp.add_source("stderr", Some(100));
    let lines = [
        "10:00:00.000000 openat(AT_FDCWD, \"/a\", O_RDONLY) = 3",
        "10:00:00.001000 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLDstrace: Process 200 attached",
        ", child_tidptr=0x7f) = 200",
        "[pid   200] 10:00:00.002000 read(3, \"\", 1) = 0",
        "[pid   100] 10:00:00.003000 wait4(-1,  <unfinished ...>",
        "[pid   200] 10:00:00.004000 +++ exited with 0 +++",
        "10:00:00.005000 <... wait4 resumed>NULL, 0, NULL) = 200",
        "10:00:00.006000 close(3) = 0",
    ];
    for (i, l) in lines.iter().enumerate() {
        imp.feed(src, i as u64 + 1, l.as_bytes()).expect("feed");
    }
    let done = imp.finish().expect("finish");
    assert!(
        done.report.unparsed.is_empty(),
        "{:?}",
        done.report.unparsed
    );
    let sc: Vec<(u32, Sys)> = done.sink.syscalls().map(|s| (s.pid, s.sys)).collect();
    assert_eq!(
        sc,
        vec![(100, Sys::Openat), (200, Sys::Read), (100, Sys::Close)]
    );
    let read = done
        .sink
        .syscalls()
        .find(|s| s.sys == Sys::Read)
        .copied()
        .expect("read");
    assert_eq!(
        done.sink.text(read.path).as_deref(),
        Some("/a"),
        "the child inherits fd 3"
    );
    let spawn = done.sink.records.iter().find_map(|r| {
        if let Record::Spawn(s) = r {
            Some(*s)
        } else {
            None
        }
    });
    assert_eq!(spawn.map(|s| (s.parent_pid, s.pid)), Some((100, 200)));
    assert_eq!(done.report.ignored_syscalls.get("wait4"), Some(&1));
}

#[test]
fn a_line_cut_by_an_attach_message_at_the_end_is_not_lost() {
    let t = import(&["100 clone(child_stack=NULL, flags=SIGCHLDstrace: Process 200 attached"]);
    assert_eq!(t.report.lines, 1);
    assert_eq!(t.report.unparsed.len(), 1);
    assert_eq!(t.report.unparsed[0].line, 1);
    assert_eq!(
        t.report.unparsed[0].text,
        "100 clone(child_stack=NULL, flags=SIGCHLD"
    );
}

#[test]
fn never_panics_on_cut_or_random_lines() {
    let samples = [
        r#"4680  00:20:08.473218 statx(AT_FDCWD</tmp/st>, "/", AT_STATX_SYNC_AS_STAT|AT_SYMLINK_NOFOLLOW, STATX_MODE, {stx_mask=STATX_BASIC_STATS, stx_mode=S_IFDIR|0755, stx_size=4096, ...}) = 0 <0.000047>"#,
        r#"6535  00:21:34.196340 openat(AT_FDCWD</tmp/st/w>, "/dev/null", O_WRONLY) = 3</dev/null<char 1:3>> <0.000017>"#,
        r#"6535  00:21:34.196761 clone3({flags=CLONE_VM|CLONE_THREAD, exit_signal=0} => {parent_tid=[6536]}, 88) = 6536"#,
        r#"[pid  6540] 00:21:34.453351 <... read resumed>0x7ffce34faba8, 8) = ? ERESTARTSYS (To be restarted if SA_RESTART is set) <0.200320>"#,
        r#"6535  --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=6537} ---"#,
        r#"6535  writev(3</a\76b>, [{iov_base="ab\"", iov_len=2}, {iov_base="cde\n"..., iov_len=4}], 2) = 6"#,
        r#"1 pipe2([3<pipe:[10999]>, 4<pipe:[10999]>], O_CLOEXEC) = 0"#,
        r#"1 execve("/x", ["a", "b"...], 0x1 /* 2 vars */) = 0"#,
        // Numbers far out of range.
        "99999999999999999:59:59.999999999 close(3) = 0 <99999999999999999999.9>",
        "18446744073709551615.999999999 close(1) = 18446744073709551616",
        r#"1 fstat(3, {st_dev=makedev(0xffffffffffffffff, -1), st_ino=-1, st_mode=0177777777, st_mtime=9223372036854775807, st_mtime_nsec=999999999, st_ctime=-9223372036854775808.5}) = 0"#,
        r#"1 statx(3, "", AT_EMPTY_PATH, STATX_ALL, {stx_mtime={tv_sec=9223372036854775807, tv_nsec=9}, stx_mode=S_IFCHR, stx_rdev_major=4294967296}) = 0"#,
        r#"1 writev(1<pipe:[1]>, [{iov_base="", iov_len=18446744073709551615}, {iov_base="", iov_len=18446744073709551615}], 2) = -1"#,
        "1 +++ exited with 99999999999999999999 +++",
        "1      99999999999999999.999999 close(3) = 0",
    ];
    let mut imp = Importer::new(MemorySink::default(), None, 256);
    let src = imp.add_source("fuzz", None);
    let mut n = 0;
    for s in samples {
        let b = s.as_bytes();
        for cut in 0..=b.len() {
            n += 1;
            imp.feed(src, n, &b[..cut]).expect("feed");
            imp.feed(src, n, &b[cut..]).expect("feed");
        }
    }
    // Pseudo-random bytes drawn from strace's punctuation.
    let alphabet = b"0123456789 ()[]{}<>\"\\=,.|:-+?/x_ASIGabc";
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        let mut line = Vec::new();
        for _ in 0..(seed % 60) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            line.push(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        n += 1;
        imp.feed(src, n, &line).expect("feed");
    }
    // The test fails by panicking; the counts must still be sane.
    let done = imp.finish().expect("finish");
    assert!(done.report.lines > n && done.report.lines <= 2 * n);
    assert!(done.report.unparsed.len() as u64 <= done.report.lines);
}

fn write_file(dir: &std::path::Path, name: &str, lines: &[&str]) -> std::path::PathBuf {
    let p = dir.join(name);
    let mut f = std::fs::File::create(&p).expect("create");
    for l in lines {
        writeln!(f, "{l}").expect("write");
    }
    p
}

#[test]
fn ff_files_merge_by_time_and_take_the_pid_from_the_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parent = write_file(
        dir.path(),
        "trace.300",
        &[
            r#"1700000000.000000 execve("/bin/sh", ["sh"], 0x1 /* 1 var */) = 0 <0.000100>"#,
            "1700000000.000200 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 301 <0.000050>",
            "1700000000.000400 close(3) = 0 <0.000001>",
            "1700000000.000900 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=301} ---",
            "1700000000.001000 +++ exited with 0 +++",
        ],
    );
    let child = write_file(
        dir.path(),
        "trace.301",
        &[
            "1700000000.000300 close(4) = 0 <0.000001>",
            "1700000000.000500 close(5) = 0 <0.000001>",
            "1700000000.000800 +++ exited with 1 +++",
        ],
    );
    let out = dir.path().join("t.dvt");
    let f = std::fs::File::create(&out).expect("create");
    let report = import_files(&[child, parent], &ImportOptions::default(), f).expect("import");
    assert!(report.unparsed.is_empty());
    let mut r = TraceReader::open(&out).expect("open");
    assert_eq!(r.meta().start_unix_ns, 1_700_000_000_000_000_000);
    assert_eq!(r.meta().command, vec!["sh".to_string()]);
    let mut seq = Vec::new();
    while let Some(rec) = r.next_record().expect("record") {
        let what = match rec {
            Record::Syscall(s) => format!("{} {} {}", s.pid, s.sys, s.fd.unwrap_or(-1)),
            Record::Spawn(s) => format!("spawn {}>{}", s.parent_pid, s.pid),
            Record::Exec(e) => format!("exec {}", e.pid),
            Record::Exit(e) => format!("exit {} {:?}", e.pid, e.status),
            Record::Signal(s) => format!("signal {} {}", s.pid, s.signal),
            Record::Lost(l) => format!("lost {}", l.count),
            // strace logs carry no runtime marks: the import never writes one.
            Record::Mark(m) => format!("mark {} {:?}", m.pid, m.kind),
            // Nor mappings (strace does not say where code is).
            Record::Mapping(m) => format!("mapping {} {:?}", m.pid, m.kind),
        };
        seq.push((rec.ts(), what));
    }
    let want: Vec<(u64, &str)> = vec![
        (0, "300 execve -1"),
        (100_000, "exec 300"),
        (200_000, "spawn 300>301"),
        (300_000, "301 close 4"),
        (400_000, "300 close 3"),
        (500_000, "301 close 5"),
        (800_000, "exit 301 Code(1)"),
        (900_000, "signal 300 17"),
        (1_000_000, "exit 300 Code(0)"),
    ];
    let got: Vec<(u64, &str)> = seq.iter().map(|(t, s)| (*t, s.as_str())).collect();
    assert_eq!(got, want);
    let end = r.end().expect("end block");
    assert_eq!(end.exit, Some(ExitStatus::Code(0)));
    assert_eq!(end.records, 9);
}

#[test]
fn garbage_in_a_file_is_reported_by_line_and_marked_lost_in_the_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = write_file(
        dir.path(),
        "g.log",
        &[
            "7 close(3) = 0",
            "\u{1}\u{2}binary junk",
            "7 close(4) = 0",
            "7 close(5",
            "7 close(6) = 0",
        ],
    );
    let out = dir.path().join("g.dvt");
    let f = std::fs::File::create(&out).expect("create");
    let report = import_files(&[log], &ImportOptions::default(), f).expect("import");
    let at: Vec<(u64, &str)> = report
        .unparsed
        .iter()
        .map(|u| (u.line, u.text.as_str()))
        .collect();
    assert_eq!(at, vec![(2, "\u{1}\u{2}binary junk"), (4, "7 close(5")]);
    let mut r = TraceReader::open(&out).expect("open");
    let mut lost = 0;
    let mut calls = 0;
    while let Some(rec) = r.next_record().expect("record") {
        match rec {
            Record::Lost(l) => {
                assert_eq!(l.reason, LostReason::Unparsed);
                lost += l.count;
            }
            Record::Syscall(_) => calls += 1,
            _ => {}
        }
    }
    assert_eq!((lost, calls), (2, 3));
    assert_eq!(r.end().expect("end").lost_events, 2);
}

#[test]
fn exec_ends_the_other_threads_calls_as_unfinished() {
    let t = import(&[
        "100 clone3({flags=CLONE_VM|CLONE_FILES|CLONE_THREAD, exit_signal=0} => {parent_tid=[101]}, 88) = 101",
        "101 read(3</p>,  <unfinished ...>",
        r#"100 execve("/bin/x", ["x"], 0x1 /* 0 vars */) = 0"#,
        "100 +++ exited with 0 +++",
    ]);
    let r = t.only(Sys::Read);
    assert_eq!((r.pid, r.tid), (100, 101));
    assert_ne!(r.ev & ev::UNFINISHED, 0);
    assert_eq!(t.path(&r).as_deref(), Some("/p"));
    assert_eq!(t.report.unfinished_never_resumed, 1);
    // The read is written before the process's exit.
    let kinds: Vec<&str> = t
        .sink
        .records
        .iter()
        .map(|r| match r {
            Record::Spawn(_) => "spawn",
            Record::Syscall(s) if s.sys == Sys::Execve => "execve",
            Record::Syscall(_) => "read",
            Record::Exec(_) => "exec",
            Record::Exit(_) => "exit",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, vec!["spawn", "execve", "read", "exec", "exit"]);
}

#[test]
fn many_ff_files_are_merged_without_keeping_them_all_open() {
    // More files than the importer keeps open at once, longer than the part it reads
    // ahead, so that files are closed and reopened; their lines interleave in time.
    let dir = tempfile::tempdir().expect("tempdir");
    let n = 300u64;
    let per_file = 60u64;
    let mut inputs = Vec::new();
    for k in 0..n {
        let lines: Vec<String> = (0..per_file)
            .map(|j| format!("1700000000.{:06} close({}) = 0", k + j * n, 3 + j))
            .collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        inputs.push(write_file(dir.path(), &format!("t.{}", 1000 + k), &refs));
    }
    let out = dir.path().join("m.dvt");
    let f = std::fs::File::create(&out).expect("create");
    let report = import_files(&inputs, &ImportOptions::default(), f).expect("import");
    assert!(report.unparsed.is_empty());
    let mut r = TraceReader::open(&out).expect("open");
    let mut got = Vec::new();
    while let Some(rec) = r.next_record().expect("record") {
        if let Record::Syscall(s) = rec {
            got.push((s.ts, s.pid, s.fd));
        }
    }
    // Line j of file k is at microsecond k + j*n: one record per microsecond, in order.
    let want: Vec<(u64, u32, Option<i32>)> = (0..per_file * n)
        .map(|t| (t * 1000, 1000 + (t % n) as u32, Some(3 + (t / n) as i32)))
        .collect();
    assert_eq!(got, want);
}
