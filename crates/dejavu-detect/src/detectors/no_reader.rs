//! no-reader: output nobody can read — writes to /dev/null, and writes that fail with
//! EPIPE because the reader of the pipe or socket has gone. Also home of a few helpers
//! the write-side detectors (small-writes, open-close-churn, fsync-per-op, ensure-dir,
//! check-then-act) share for wording their findings.

use crate::group::{bytes, count, extras, is_write, plural, Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{FdKind, PathKey, View};
use dejavu_trace::{ev, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "no-reader",
    summary: "output nobody can read: writes to /dev/null, and writes that fail with EPIPE",
    explain: "Every write (write, pwrite64, writev, pwritev, pwritev2, sendfile, splice) whose \
destination is /dev/null is redundant: the descriptor is /dev/null by its stat answer (character \
device 1:3) or, when the descriptor was opened before the trace began, by its path. Except the \
descriptors the program dejavu started was given (`dejavu run -- cmd > /dev/null`), and a /dev/null \
that a launcher (the recorded command `sh -c 'cmd > /dev/null'`) put on a descriptor of the \
program it runs: whoever ran dejavu pointed those at /dev/null for the recording, which is not the \
program's doing, so their writes are not counted; when dejavu attached (-p) they are, since the service's launcher chose \
them, and so is a /dev/null the program opens itself and hands to a child. So is every write \
that fails with EPIPE: the read end of the pipe or socket is closed, nothing will ever read the bytes, \
and the program only survives because SIGPIPE is ignored or handled. The finding counts the calls, \
their time, and the bytes that went nowhere (bytes returned for /dev/null, bytes requested for EPIPE). \
Writes to a terminal, a file, or a pipe with a live reader are never counted here, however \
uninteresting their content; other failures (EAGAIN, EBADF, ENOSPC) are not counted either.",
    example: "a worker started with stdout and stderr redirected to /dev/null formats and writes a debug \
line per request: 1.2 MB written to /dev/null in 30,000 writes",
    fix: "don't produce the output: check the log level, isatty() or a --quiet flag before formatting \
the message, and stop writing (or exit cleanly) on the first EPIPE instead of writing on",
    hazards: "Redirecting a child's output to /dev/null is often a deliberate way to silence it: the \
fix belongs where the output is produced (a quiet flag or log level the parent passes), not in \
removing the redirection. On EPIPE, stop producing but still flush and close what matters (files, \
queues): exiting straight from the error handler can drop buffered data. A write may be kept for its \
side effects (a progress heartbeat, a syscall used as a delay); check before removing it.",
    options: &[],
    make: |_cfg: &Config| Box::new(NoReader::default()),
};

const EPIPE: i64 = -32;

/// What went nowhere on one (pid, path).
#[derive(Clone, Default)]
struct Lost {
    null_writes: u64,
    null_bytes: u64,
    epipe_writes: u64,
    epipe_bytes: u64,
    /// Writes through descriptor 1 or 2: the standard streams someone redirected.
    std_streams: u64,
    redundant: u64,
}

impl Lost {
    fn add(&mut self, o: &Lost) {
        self.null_writes += o.null_writes;
        self.null_bytes += o.null_bytes;
        self.epipe_writes += o.epipe_writes;
        self.epipe_bytes += o.epipe_bytes;
        self.std_streams += o.std_streams;
        self.redundant += o.redundant;
    }
}

#[derive(Default)]
struct NoReader {
    tallies: Tallies,
    lost: FxHashMap<(u32, PathKey), Lost>,
    /// /dev/null opens (by open id) that a process dup'ed onto another descriptor (a
    /// shell's `> /dev/null`), and the image that did: if it is a launcher (the recorded
    /// command `sh -c 'git log -p > /dev/null'`), the redirect is whoever ran dejavu's,
    /// as `dejavu run -- git log -p > /dev/null` is. Known once the trace is over.
    redirected: FxHashMap<u64, u32>,
    /// The writes to those, held until then.
    held: Vec<(u64, Write)>,
}

/// Writes held until the trace is over (see `NoReader::redirected`).
const MAX_HELD: usize = 1 << 20;

/// A write nobody reads.
#[derive(Clone, Copy)]
struct Write {
    image: u32,
    path: PathKey,
    seq: u64,
    ts: u64,
    dur: u64,
    stack: Option<dejavu_trace::StackId>,
    null: bool,
    bytes: u64,
    std_stream: bool,
}

impl NoReader {
    fn count(&mut self, w: Write, cx: &Cx<'_>) {
        let t = self.tallies.get(w.image, w.path);
        t.calls += 1;
        t.redundant(w.ts, w.dur, w.stack);
        cx.mark(w.seq, w.dur, w.stack);
        let l = self.lost.entry((w.image, w.path)).or_default();
        l.redundant += 1;
        if w.null {
            l.null_writes += 1;
            l.null_bytes += w.bytes;
        } else {
            l.epipe_writes += 1;
            l.epipe_bytes += w.bytes;
        }
        if w.std_stream {
            l.std_streams += 1;
        }
    }
}

impl Detector for NoReader {
    fn wants(&self, sys: Sys) -> bool {
        is_write(sys) || matches!(sys, Sys::Sendfile | Sys::Splice | Sys::Dup2 | Sys::Dup3)
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if s.ev & ev::UNFINISHED != 0 {
            return;
        }
        if matches!(s.sys, Sys::Dup2 | Sys::Dup3) {
            if let Some(f) = v.fd.filter(|f| f.kind == FdKind::DevNull && s.ret >= 0) {
                self.redirected.insert(f.open_id, v.image);
            }
            return;
        }
        if !cx.config.counts(s.ts) {
            return;
        }
        let Some(path) = v.path else { return };
        let Some(null) = nobody_reads(s, v, path, cx) else {
            return;
        };
        let w = Write {
            image: v.image,
            path,
            seq: v.seq,
            ts: s.ts,
            dur: s.dur,
            stack: s.stack,
            null,
            bytes: if null { s.ret as u64 } else { s.count },
            std_stream: matches!(s.fd, Some(1 | 2)),
        };
        match v
            .fd
            .filter(|f| null && self.redirected.contains_key(&f.open_id))
        {
            // (Held up to a bound: past it, a daemon that pointed its own stdout at
            // /dev/null and logs on would hold every write; they are then counted as any
            // program's, as before launchers' redirects were told apart.)
            Some(f) if self.held.len() < MAX_HELD => self.held.push((f.open_id, w)),
            _ => self.count(w, cx),
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        for (open_id, w) in std::mem::take(&mut self.held) {
            let by = self.redirected[&open_id];
            if cx.program_role(by).1 != Some(crate::Owner::Launcher) {
                self.count(w, cx);
            }
        }
        let out = self.tallies.findings_with(
            &INFO, cx, Wording { cache: false }, &|_, _| Vec::new(),
            &mut extras(
                &self.lost,
                Lost::add,
                |f, l| {
                    let mut parts = Vec::new();
                    if l.null_writes > 0 {
                        parts.push(format!(
                            "{} written to /dev/null in {} write{}",
                            bytes(l.null_bytes),
                            count(l.null_writes),
                            plural(l.null_writes)
                        ));
                    }
                    if l.epipe_writes > 0 {
                        parts.push(format!(
                            "{} write{} of {} failed with EPIPE after the reader had gone",
                            count(l.epipe_writes),
                            plural(l.epipe_writes),
                            bytes(l.epipe_bytes)
                        ));
                        f.hazards.push(
                            "the program kept writing after its reader had gone (SIGPIPE is ignored or \
                             handled): stop on the first EPIPE, but flush and close files and queues before \
                             exiting"
                                .into(),
                        );
                    }
                    if l.null_writes > 0 {
                        f.hazards.push(
                            "/dev/null may be a deliberate way to silence this output: make the producer \
                             quiet (log level, isatty(), a --quiet flag) instead of removing the redirection"
                                .into(),
                        );
                    }
                    if l.std_streams > 0 {
                        f.hazards.push(format!(
                            "{} of these writes went to stdout/stderr, which the parent pointed at /dev/null \
                             or a closed pipe: the fix may belong in how the parent starts this program",
                            count(l.std_streams)
                        ));
                    }
                    f.example = Some(parts.join("; "));
                },
            ),
        );
        out
    }
}

/// Whether nobody reads what write `s` wrote: Some(true) for /dev/null, Some(false) for a
/// write that failed with EPIPE, None otherwise (whatif's `--skip-unread` asks the same).
pub(crate) fn nobody_reads(s: &Syscall, v: &View, path: PathKey, cx: &Cx<'_>) -> Option<bool> {
    if s.ret == EPIPE {
        return Some(false);
    }
    if s.ret < 0 || !is_dev_null(v, path, cx) {
        return None;
    }
    if !cx.replay.attached && v.fd.is_none_or(|f| f.opened_ts == 0) {
        // A descriptor the program dejavu started was given (`dejavu run -- cmd >
        // /dev/null`): whoever ran dejavu pointed it there for this recording, which is
        // not the program's doing. When attached (-p), the service's launcher did: that
        // counts. A child whose output the program itself pointed at /dev/null counts.
        return None;
    }
    Some(true)
}

fn is_dev_null(v: &View, path: PathKey, cx: &Cx<'_>) -> bool {
    match v.fd {
        Some(f) => f.kind == FdKind::DevNull,
        // Opened before the trace began (inherited stdout, say): only the name is known.
        None => cx.replay.paths.bytes(path) == b"/dev/null",
    }
}

#[cfg(test)]
mod tests {
    use super::{bytes, count};
    use crate::testkit::{chardev, file, TraceBuilder};
    use dejavu_trace::Sys;

    /// `sh -c 'CMD > /dev/null'`: the shell opens /dev/null, puts it on stdout and execs
    /// CMD, which writes 20 lines there.
    fn shell_redirect(b: &mut TraceBuilder, script: &str) {
        b.exec("/bin/sh", &["sh", "-c", script]);
        redirect_stdout(b);
        b.exec("/usr/bin/git", &["git", "log", "-p"]);
        for _ in 0..20 {
            b.write(1, "/dev/null", "diff --git a/x b/x\n", true);
        }
    }

    fn redirect_stdout(b: &mut TraceBuilder) {
        b.open("/dev/null", 0o1101, 3, Some(chardev(1, 3)));
        b.call(Sys::Dup2, |c, _| {
            c.fd = Some(3);
            c.fd2 = Some(1);
            c.ret = 1;
        });
        b.close(3, "/dev/null");
    }

    /// A program that points its own stdout at /dev/null, then writes there.
    fn own_redirect(b: &mut TraceBuilder) {
        b.exec("/w/app", &["app"]);
        redirect_stdout(b);
        for _ in 0..20 {
            b.write(1, "/dev/null", "diff --git a/x b/x\n", true);
        }
    }

    #[test]
    fn a_launchers_redirect_to_dev_null_is_the_recordings_not_the_programs() {
        // The recorded command is the shell that runs one command: its redirect is the
        // user's way of writing `dejavu run -- git log -p > /dev/null`.
        let mut b = TraceBuilder::new();
        shell_redirect(&mut b, "git log -p >/dev/null");
        assert!(b.findings("no-reader").is_empty());
        // A program's own redirect counts.
        let mut b = TraceBuilder::new();
        own_redirect(&mut b);
        let f = b.findings("no-reader");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].redundant_calls, 20);
    }

    #[test]
    fn writes_to_dev_null_are_all_redundant_and_bytes_are_reported() {
        let mut b = TraceBuilder::new();
        b.open("/dev/null", 1, 3, Some(chardev(1, 3)));
        for _ in 0..20 {
            b.write(3, "/dev/null", "debug: request handled\n", true); // 23 bytes
        }
        let f = b.findings("no-reader");
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].calls, f[0].redundant_calls, f[0].wasted_ns),
            (20, 20, 20 * 500)
        );
        assert_eq!(f[0].paths, vec!["/dev/null".to_string()]);
        assert_eq!(
            f[0].example.as_deref(),
            Some("460 bytes written to /dev/null in 20 writes")
        );
        assert!(f[0].hazards.iter().any(|h| h.contains("deliberate")));
    }

    #[test]
    fn an_inherited_descriptor_is_known_by_its_path_and_flags_the_std_streams() {
        // Attached (-p): the service's launcher pointed its stdout at /dev/null.
        let mut b = TraceBuilder::attached();
        for _ in 0..4 {
            b.write(1, "/dev/null", "x", true);
        }
        let f = b.findings("no-reader");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].redundant_calls, 4);
        assert!(f[0].hazards.iter().any(|h| h.contains("stdout/stderr")));
    }

    #[test]
    fn the_std_streams_dejavus_user_pointed_at_dev_null_are_not_the_programs_doing() {
        // `dejavu run -- test > /dev/null`: the program was given /dev/null; its writes there
        // are no finding. The /dev/null it opens itself, and gives a child as stdout, is.
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            b.write(1, "/dev/null", "x", true);
        }
        assert!(b.findings("no-reader").is_empty());
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            b.write(1, "/dev/null", "x", true);
        }
        b.open("/dev/null", 1, 3, Some(chardev(1, 3)));
        b.call(Sys::Dup2, |c, _| {
            c.fd = Some(3);
            c.fd2 = Some(1);
            c.ret = 1;
        });
        for _ in 0..3 {
            b.write(1, "/dev/null", "y", true);
        }
        let f = b.findings("no-reader");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].redundant_calls, 3);
    }

    #[test]
    fn epipe_writes_are_redundant_and_count_the_bytes_requested() {
        let mut b = TraceBuilder::new();
        b.call(Sys::Pipe2, |c, _| {
            c.fd = Some(3);
            c.fd2 = Some(4);
        });
        b.write(4, "pipe:[77]", "first line\n", true); // the reader was still there
        for _ in 0..5 {
            b.call(Sys::Write, |c, b| {
                c.fd = Some(4);
                c.path = Some(b.s("pipe:[77]"));
                c.ev = dejavu_trace::ev::PATH_FROM_FD;
                c.count = 100;
                c.ret = -32;
            });
        }
        // Other failures are not the reader's absence.
        b.call(Sys::Write, |c, b| {
            c.fd = Some(4);
            c.path = Some(b.s("pipe:[77]"));
            c.count = 100;
            c.ret = -11; // EAGAIN
        });
        let f = b.findings("no-reader");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].calls, f[0].redundant_calls), (5, 5));
        assert_eq!(f[0].paths, vec!["pipe:[77]".to_string()]);
        assert_eq!(
            f[0].example.as_deref(),
            Some("5 writes of 500 bytes failed with EPIPE after the reader had gone")
        );
        assert!(f[0].hazards.iter().any(|h| h.contains("EPIPE")));
    }

    #[test]
    fn writes_to_files_terminals_and_live_pipes_are_not_reported() {
        let mut b = TraceBuilder::new();
        b.open("/var/log/app.log", 0o2101, 3, Some(file(5, 0, 1)));
        b.open("/dev/pts/0", 2, 4, Some(chardev(136, 0)));
        // A device that is not /dev/null, even if it is named like it in a chroot.
        b.open("/srv/dev/null", 1, 5, Some(chardev(1, 5)));
        for _ in 0..10 {
            b.write(3, "/var/log/app.log", "line\n", true);
            b.write(4, "/dev/pts/0", "line\n", true);
            b.write(5, "/srv/dev/null", "line\n", true);
            b.write(6, "pipe:[9]", "line\n", true);
        }
        assert!(b.findings("no-reader").is_empty());
    }

    #[test]
    fn a_fd_opened_on_dev_null_by_name_but_stat_says_otherwise_is_trusted_to_stat() {
        let mut b = TraceBuilder::new();
        // /dev/null replaced by a regular file (it happens in containers): writes land.
        b.open("/dev/null", 1, 3, Some(file(8, 0, 1)));
        for _ in 0..3 {
            b.write(3, "/dev/null", "x", false);
        }
        assert!(b.findings("no-reader").is_empty());
    }

    #[test]
    fn the_default_threshold_hides_a_single_epipe() {
        let mut b = TraceBuilder::new();
        b.call(Sys::Write, |c, b| {
            c.fd = Some(1);
            c.path = Some(b.s("pipe:[5]"));
            c.count = 10;
            c.ret = -32;
        });
        let cfg = crate::Config {
            only: Some(vec!["no-reader".into()]),
            ..crate::Config::default()
        };
        let a = b.analyze_with(&cfg);
        assert!(a.findings.iter().all(|f| f.detector != "no-reader"));
        assert_eq!(a.hidden, 1);
    }

    #[test]
    fn paths_grouped_into_a_pattern_get_the_summed_example() {
        let mut b = TraceBuilder::new();
        for i in 0..5 {
            for _ in 0..2 {
                b.call(Sys::Write, |c, b| {
                    c.fd = Some(4);
                    c.path = Some(b.s(&format!("/run/app/sock{i}")));
                    c.count = 10;
                    c.ret = -32;
                });
            }
        }
        let cfg = crate::Config {
            min_calls: 3,
            only: Some(vec!["no-reader".into()]),
            ..crate::Config::default()
        };
        let a = b.analyze_with(&cfg);
        assert_eq!(a.findings.len(), 1);
        let f = &a.findings[0];
        assert_eq!((f.path_count, f.redundant_calls), (5, 10));
        assert_eq!(f.paths, vec!["/run/app/*".to_string()]);
        assert_eq!(
            f.example.as_deref(),
            Some("10 writes of 100 bytes failed with EPIPE after the reader had gone")
        );
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(bytes(1), "1 byte");
        assert_eq!(bytes(512), "512 bytes");
        assert_eq!(bytes(1_200_000), "1.2 MB");
        assert_eq!(bytes(12_300), "12.3 kB");
    }
}
