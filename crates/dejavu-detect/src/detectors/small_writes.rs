//! small-writes: runs of tiny writes to one descriptor that one buffered or vectored
//! write would carry (unbuffered output, a write per field or per line).

use crate::group::{bytes, count, extras, is_write, plural, uses_fd, Tallies, Tally, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{FdKind, PathKey, View};
use dejavu_trace::{ev, Sys, Syscall};
use rustc_hash::FxHashMap;

/// The fix said in the program's language: the generic one names every language's way
/// (BufWriter, fwrite, io.BufferedWriter, cork), and a Node.js program's console.log to a
/// file is not helped by cork(), which it named.
fn fix_for(runtime: crate::program::Runtime) -> Option<&'static str> {
    use crate::program::Runtime;
    match runtime {
        Runtime::Python => Some(
            "buffer the output: leave Python's buffering on (drop python3 -u and PYTHONUNBUFFERED=1 \
             from the environment: each print() then writes its text and its newline apart; open \
             files without buffering=0), and flush once, not after every piece (print(..., \
             flush=True), file.flush() per item); build the record in memory and write it once",
        ),
        Runtime::Node => Some(
            "join the pieces into one write per record or per batch: console.log and \
             process.stdout/stderr write each call at once when they go to a file or a pipe \
             (cork() helps only a stream that buffers, such as a socket or fs.createWriteStream); \
             log through a buffered destination (pino.destination({ minLength })) or build the \
             lines and write them together",
        ),
        Runtime::Jvm => Some(
            "wrap the stream in a BufferedOutputStream or BufferedWriter (a PrintStream without \
             autoflush for System.out to a file), and flush once, not after every piece",
        ),
        Runtime::Shell | Runtime::Script(_) | Runtime::Native => None,
    }
}

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "small-writes",
    summary: "runs of tiny writes to one descriptor that one buffered write would carry",
    explain: "A run is a sequence of successful writes (write, writev, pwrite64, pwritev, pwritev2) of at \
most max_bytes each to one descriptor of one process, with no other call on that descriptor in between \
(a read, lseek, fstat, fsync, ftruncate, fcntl or close ends the run, as does a write larger than \
max_bytes or a failed one), no pause longer than gap_ms between the end of one write and the start of \
the next (on a socket, no pause longer than 1 ms: a longer one is the other end answering a request, \
whose reads dejavu does not record; writes a buffer would gather come microseconds apart), and, \
for the positional calls, each write starting where the previous one ended. Within a \
run, a 64 KiB buffer would have carried the bytes in ceil(bytes / 64 KiB) writes; every write beyond \
that is redundant: redundant = writes - max(1, ceil(bytes / 65536)). The time counted is that share \
of the run's write time (redundant / writes of it); the finding's calls are all tiny writes seen on \
the path, runs of one included. Writes to /dev/null are the no-reader detector's and are not counted here. \
Terminals, pipes and sockets are reported like files, with the hazards that apply to them; on a \
terminal every write that ends a line (a newline or a carriage return in its kept bytes; a write whose \
bytes were not kept counts as one) is needed too, since the line buffering a terminal needs still \
writes it: redundant = writes - max(1, ceil(bytes / 65536), lines). A write of \
one byte to a pipe is a token (make's jobserver, a self-pipe wakeup) and ends a run instead, as does \
a framed message on a pipe or socket (its first 4 bytes the length of the rest, big- or \
little-endian: Python multiprocessing's and concurrent.futures' messages and wake-ups), which the \
process at the other end waits for. Writes \
to descriptor 2 (stderr) are not counted: stderr is unbuffered by convention so that diagnostics \
survive a crash, and a message repeated there is repeated-output's.",
    example: "for each field: os.write(fd, field)   // 40,000 writes of 12 bytes where one 64 KiB \
write per batch would do",
    fix: "buffer the output: a BufWriter / fwrite with a real buffer / io.BufferedWriter instead of \
unbuffered writes (python3 -u or PYTHONUNBUFFERED=1 in the environment: each print() then writes \
its text and its newline apart; os.write, setvbuf(_IONBF)), and flush once, not after every piece \
(print(..., flush=True), fflush per item); build the record in memory and write it once, or hand \
the pieces to one writev; in Node.js, cork the stream or join the chunks",
    hazards: "Buffered output must be flushed on exit, on fatal signals and before the process waits \
for input or another process, or it is lost or arrives late. Interactive output (a \
terminal, a prompt, a progress line) needs line buffering, not full buffering. Several writers to one \
file or pipe rely on each write being one record: buffer whole records, and keep pipe writes at most \
PIPE_BUF (4 KiB) if they must stay atomic.",
    options: &[
        (
            "max_bytes",
            512,
            "a write of at most this many bytes is tiny and can belong to a run",
        ),
        (
            "gap_ms",
            100,
            "a pause longer than this between two writes ends the run (the program was waiting, not \
             writing piecemeal)",
        ),
    ],
    make: |cfg: &Config| {
        Box::new(SmallWrites {
            max_bytes: cfg.opt("small-writes", "max_bytes", 512),
            gap_ns: cfg.opt("small-writes", "gap_ms", 100).saturating_mul(1_000_000),
            runs: FxHashMap::default(),
            tallies: Tallies::default(),
            extra: FxHashMap::default(),
        })
    },
};

/// What one buffer flush carries.
const BUFFER: u64 = 64 * 1024;

/// The current run of tiny writes on one (pid, fd).
#[derive(Clone)]
struct Run {
    /// The process image writing.
    image: u32,
    /// The open file the run writes to (0 when the descriptor predates the trace).
    open_id: u64,
    path: PathKey,
    kind: FdKind,
    append: bool,
    writes: u64,
    bytes: u64,
    dur: u64,
    first_ts: u64,
    second_ts: u64,
    last_ts: u64,
    last_end: u64,
    /// pwrite family: the offset the next write must start at to continue the run.
    next_offset: Option<i64>,
    /// Writes to a terminal that end a line (a newline or a carriage return in what was
    /// kept of them; one whose bytes were not kept counts): line buffering, which a
    /// terminal needs, still writes each of them.
    lines: u64,
    /// The run's writes (`View::seq`, duration): those beyond what a buffer needs are
    /// marked redundant when the run ends.
    members: Vec<(u64, u64, Option<dejavu_trace::StackId>)>,
}

/// Kinds of destination seen, for the hazards.
const K_TTY: u8 = 1;
const K_PIPE: u8 = 2;
const K_SOCKET: u8 = 4;
/// The longest pause within a run on a socket (see `on_syscall`).
const SOCKET_GAP_NS: u64 = 1_000_000;
const K_APPEND: u8 = 8;

#[derive(Default)]
struct Extra {
    redundant: u64,
    runs: u64,
    writes: u64,
    bytes: u64,
    /// Writes a buffer would have needed.
    needed: u64,
    kinds: u8,
    /// Through which descriptors the runs wrote: V_STDOUT, V_OTHER (stdin is written to
    /// when it is a terminal; stderr is never counted here).
    via: u8,
    /// What stdout was, for the finding's label (`stdout -> PATH`, `stdout (pipe)`).
    stdout_kind: Option<FdKind>,
}

/// Extra::via.
const V_STDOUT: u8 = 1;
const V_OTHER: u8 = 2;

struct SmallWrites {
    max_bytes: u64,
    gap_ns: u64,
    runs: FxHashMap<(u32, i32), Run>,
    tallies: Tallies,
    extra: FxHashMap<(u32, PathKey), Extra>,
}

impl SmallWrites {
    /// The end of run `r` on descriptor `fd`.
    fn end_run(&mut self, fd: i32, r: &Run, cx: &Cx<'_>) {
        if !cx.config.counts(r.first_ts) {
            return;
        }
        let t = self.tallies.get(r.image, r.path);
        t.calls += r.writes;
        let needed = r.bytes.div_ceil(BUFFER).max(1).max(r.lines);
        if r.writes <= needed {
            return;
        }
        let redundant = r.writes - needed;
        // u128: a long run's total time times its count can exceed u64.
        let wasted = (r.dur as u128 * redundant as u128 / r.writes as u128) as u64;
        add_batch(t, redundant, wasted, r.second_ts, r.last_ts);
        // The first `needed` writes would remain (one buffered write each); the rest go.
        for &(call, dur, stack) in r.members.iter().skip(needed as usize) {
            cx.mark(call, dur, stack);
            t.sites.add(stack, 1, dur);
        }
        let e = self.extra.entry((r.image, r.path)).or_default();
        e.redundant += redundant;
        e.runs += 1;
        e.writes += r.writes;
        e.bytes += r.bytes;
        e.needed += needed;
        if fd == 1 {
            e.via |= V_STDOUT;
            e.stdout_kind.get_or_insert(r.kind);
        } else {
            e.via |= V_OTHER;
        }
        e.kinds |= match r.kind {
            FdKind::Tty => K_TTY,
            FdKind::Pipe => K_PIPE,
            FdKind::Socket => K_SOCKET,
            _ => 0,
        } | if r.append { K_APPEND } else { 0 };
    }

    fn end(&mut self, pid: u32, fd: i32, cx: &Cx<'_>) {
        if let Some(r) = self.runs.remove(&(pid, fd)) {
            self.end_run(fd, &r, cx);
        }
    }
}

/// Whether a write of `len` bytes whose kept bytes are `kept` is one framed message: a
/// 4-byte length (big- or little-endian) of the bytes that follow it in the same write.
fn is_framed(kept: &[u8], len: i64) -> bool {
    let Some(head) = kept.first_chunk::<4>() else {
        return false;
    };
    let rest = len - 4;
    rest >= 0
        && (i64::from(u32::from_be_bytes(*head)) == rest
            || i64::from(u32::from_le_bytes(*head)) == rest)
}

/// Counts `n` redundant calls of one batch at once.
fn add_batch(t: &mut Tally, n: u64, wasted: u64, first: u64, last: u64) {
    if t.redundant == 0 || first < t.first_ts {
        t.first_ts = first;
    }
    t.last_ts = t.last_ts.max(last);
    t.redundant += n;
    t.wasted_ns += wasted;
}

impl Detector for SmallWrites {
    fn wants(&self, sys: Sys) -> bool {
        uses_fd(sys)
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let Some(fd) = s.fd else { return };
        if let Some(fd2) = s.fd2 {
            // sendfile's source, dup2's target: the run on it ends.
            if !self.runs.is_empty() {
                self.end(s.pid, fd2, cx);
            }
        }
        let path = v.path;
        let kind = match (v.fd, path) {
            (Some(f), _) => f.kind,
            (None, Some(p)) => FdKind::classify(cx.replay.paths.bytes(p), None),
            (None, None) => FdKind::Other,
        };
        // One byte to a pipe is a token (make's jobserver, a self-pipe wakeup), not data
        // a buffer could gather: each must go when it goes.
        let token = s.ret == 1 && s.count <= 1 && kind == FdKind::Pipe;
        // A framed message on a pipe or socket (a 4-byte length, then that many bytes:
        // multiprocessing's Connection, concurrent.futures' wake-ups of zero bytes): the
        // process at the other end waits for each one, so each must go when it goes.
        let message = matches!(kind, FdKind::Pipe | FdKind::Socket)
            && s.payload
                .is_some_and(|p| is_framed(cx.strings.get(p), s.ret));
        // stderr is unbuffered by convention (C's stderr, Python's sys.stderr, Node's
        // console.error) so that diagnostics survive a crash: buffering it is not the fix.
        let diagnostics = fd == 2;
        let tiny = is_write(s.sys)
            && s.ev & ev::UNFINISHED == 0
            && s.ret >= 0
            && !token
            && !message
            && !diagnostics
            && s.count.max(s.ret as u64) <= self.max_bytes;
        let (Some(path), true) = (path, tiny && kind != FdKind::DevNull) else {
            if !self.runs.is_empty() {
                self.end(s.pid, fd, cx);
            }
            return;
        };
        let open_id = v.fd.map_or(0, |f| f.open_id);
        let n = s.ret as u64;
        let line = u64::from(
            kind == FdKind::Tty
                && s.payload
                    .is_none_or(|p| cx.strings.get(p).iter().any(|&c| c == b'\n' || c == b'\r')),
        );
        let end = s.ts + s.dur;
        let key = (s.pid, fd);
        if let Some(r) = self.runs.get_mut(&key) {
            // On a socket, a pause of more than a millisecond is the other end answering
            // (a request, then the next once the response came: its reads are not
            // recorded, so they do not end the run): writes a buffer would gather come
            // microseconds apart. pnpm's HTTPS requests, 1-65 ms apart, had been a run.
            let gap = if kind == FdKind::Socket {
                self.gap_ns.min(SOCKET_GAP_NS)
            } else {
                self.gap_ns
            };
            let continues = r.open_id == open_id
                && r.path == path
                && s.ts.saturating_sub(r.last_end) <= gap
                && r.next_offset == s.offset;
            if continues {
                if r.writes == 1 {
                    r.second_ts = s.ts;
                }
                r.writes += 1;
                r.bytes += n;
                r.lines += line;
                r.dur += s.dur;
                r.last_ts = s.ts;
                r.last_end = r.last_end.max(end);
                r.next_offset = s.offset.map(|o| o + n as i64);
                r.members.push((v.seq, s.dur, s.stack));
                return;
            }
            self.end(s.pid, fd, cx);
        }
        self.runs.insert(
            key,
            Run {
                image: v.image,
                open_id,
                path,
                kind,
                append: v.fd.is_some_and(|f| f.append),
                writes: 1,
                bytes: n,
                dur: s.dur,
                first_ts: s.ts,
                second_ts: s.ts,
                last_ts: s.ts,
                last_end: end,
                next_offset: s.offset.map(|o| o + n as i64),
                lines: line,
                members: vec![(v.seq, s.dur, s.stack)],
            },
        );
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        let mut open: Vec<((u32, i32), Run)> = self.runs.drain().collect();
        open.sort_by_key(|(k, _)| *k);
        for ((_, fd), r) in open {
            self.end_run(fd, &r, cx);
        }
        let mut out = self.tallies.findings_with(
            &INFO, cx, Wording { cache: false }, &|_, _| Vec::new(),
            &mut extras(
                &self.extra,
                |a, b| {
                    a.redundant += b.redundant;
                    a.runs += b.runs;
                    a.writes += b.writes;
                    a.bytes += b.bytes;
                    a.needed += b.needed;
                    a.kinds |= b.kinds;
                    a.via |= b.via;
                    a.stdout_kind = a.stdout_kind.or(b.stdout_kind);
                },
                |f, e| {
                    // All of it the program's standard output (redirected to a file by
                    // its parent, or by itself: pytest's capture dup2s a temporary file
                    // over it): said so, as repeated-output says it.
                    if e.via == V_STDOUT {
                        if let (Some(kind), Some(path)) = (e.stdout_kind, f.paths.first()) {
                            f.stream = crate::group::stream_label(1, kind, path);
                        }
                    }
                    f.example = Some(format!(
                        "{} writes of {} on average in {} run{}, which {} {}buffered write{} would carry",
                        count(e.writes),
                        bytes(e.bytes / e.writes.max(1)),
                        count(e.runs),
                        plural(e.runs),
                        count(e.needed),
                        if e.kinds & K_TTY != 0 { "line-" } else { "" },
                        plural(e.needed)
                    ));
                    // Python's unbuffered mode, from the environment the program was
                    // started with: every print() a write (its text, then its newline).
                    if e.via == V_STDOUT
                        && crate::program::command_runtime(&f.command)
                            == crate::program::Runtime::Python
                    {
                        if let Some(v) = cx.replay.meta_env("PYTHONUNBUFFERED").filter(|v| !v.is_empty()) {
                            f.hazards.insert(
                                0,
                                format!(
                                    "this run had PYTHONUNBUFFERED={v} in its environment, which makes \
                                     Python write each print() as it comes: run it without, as its \
                                     users do, before changing the code"
                                ),
                            );
                        }
                    }
                    if e.kinds & K_TTY != 0 {
                        f.hazards.push(
                            "this is a terminal: interactive output needs line buffering (flush at each \
                             newline and before reading input), not a buffer that fills"
                                .into(),
                        );
                    }
                    if e.kinds & K_PIPE != 0 {
                        f.hazards.push(
                            "this is a pipe: its reader may wait for each line or record, so flush at record \
                             boundaries; writes above PIPE_BUF (4 KiB) are not atomic when several processes \
                             write to it"
                                .into(),
                        );
                    }
                    if e.kinds & K_SOCKET != 0 {
                        f.hazards.push(
                            "this is a socket: on a datagram or SEQPACKET socket every write is one message \
                             and must not be merged; on a stream socket, merging also avoids one packet per \
                             write"
                                .into(),
                        );
                    }
                    if e.kinds & K_APPEND != 0 {
                        f.hazards.push(
                            "the file is opened with O_APPEND, maybe shared with other writers: keep each \
                             record in one write so records do not interleave"
                                .into(),
                        );
                    }
                    f.hazards.push(
                        "flush the buffer on exit, on fatal signals and on errors, or the tail of the output \
                         is lost"
                            .into(),
                    );
                },
            ),
        );
        // The fix in the program's language, where the command says which and the writes
        // are that language's code: writes a native library made (SQLite's journal under
        // mypy, its first call site a native frame) keep the general fix.
        for f in &mut out {
            let native = f.callsites.first().is_some_and(|c| !c.module.is_empty());
            if let Some(fix) =
                fix_for(crate::program::command_runtime(&f.command)).filter(|_| !native)
            {
                f.fix = fix.to_string();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{chardev, file, TraceBuilder};
    use crate::Config;
    use dejavu_trace::{ev, Sys};

    fn pwrite(b: &mut TraceBuilder, fd: i32, path: &str, off: i64, n: u64) {
        b.call(Sys::Pwrite64, |c, b| {
            c.fd = Some(fd);
            c.path = Some(b.s(path));
            c.ev = ev::PATH_FROM_FD;
            c.offset = Some(off);
            c.count = n;
            c.ret = n as i64;
        });
    }

    #[test]
    fn a_run_of_tiny_writes_is_redundant_beyond_one_buffer() {
        let mut b = TraceBuilder::new();
        b.open("/out/data.csv", 0o1101, 3, Some(file(3, 0, 1)));
        for _ in 0..100 {
            b.write(3, "/out/data.csv", "field,", false); // 6 bytes
        }
        b.close(3, "/out/data.csv");
        let f = b.findings("small-writes");
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].calls, f[0].redundant_calls, f[0].wasted_ns),
            (100, 99, 99 * 500)
        );
        assert_eq!(f[0].paths, vec!["/out/data.csv".to_string()]);
        assert_eq!(
            f[0].example.as_deref(),
            Some("100 writes of 6 bytes on average in 1 run, which 1 buffered write would carry")
        );
        assert_eq!(
            f[0].first_ts, 3000,
            "the second write is the first redundant one"
        );
    }

    #[test]
    fn the_fix_is_said_in_the_programs_language() {
        let fix = |exe: &str, argv: &[&str]| {
            let mut b = TraceBuilder::new();
            b.exec(exe, argv);
            b.open("/out/log.txt", 0o1101, 3, Some(file(3, 0, 1)));
            for _ in 0..50 {
                b.write(3, "/out/log.txt", "line\n", false);
            }
            b.close(3, "/out/log.txt");
            let f = b.findings("small-writes");
            assert_eq!(f.len(), 1, "{f:?}");
            f[0].fix.clone()
        };
        let node = fix("/usr/bin/node", &["node", "/srv/app.js"]);
        assert!(
            node.contains("cork() helps only a stream that buffers"),
            "{node}"
        );
        assert!(!node.contains("PYTHONUNBUFFERED"), "{node}");
        let py = fix("/usr/bin/python3.11", &["python3", "/srv/app.py"]);
        assert!(py.contains("PYTHONUNBUFFERED"), "{py}");
        assert!(!py.contains("cork"), "{py}");
        let java = fix("/usr/bin/java", &["java", "-jar", "app.jar"]);
        assert!(java.contains("BufferedOutputStream"), "{java}");
        // Native code: every language's way, as the detector says it.
        let c = fix("/srv/bin/app", &["app"]);
        assert_eq!(c, super::INFO.fix);
    }

    #[test]
    fn one_byte_tokens_to_a_pipe_are_not_small_writes() {
        // make's jobserver: a byte per job slot handed back, by protocol.
        let mut b = TraceBuilder::new();
        for _ in 0..60 {
            b.write(9, "pipe:[4242]", "+", false);
        }
        assert!(b.findings("small-writes").is_empty());
        // Two bytes a write to the same pipe are data.
        let mut b = TraceBuilder::new();
        for _ in 0..60 {
            b.write(9, "pipe:[4242]", "ab", false);
        }
        assert_eq!(b.findings("small-writes").len(), 1);
    }

    #[test]
    fn framed_messages_on_a_pipe_are_not_small_writes() {
        // multiprocessing's Connection: a 4-byte big-endian length, then the pickle; and
        // concurrent.futures' wake-ups, a message of no bytes.
        let body = "x".repeat(86);
        let framed = format!("\0\0\0{}{body}", char::from(86u8));
        let mut b = TraceBuilder::new();
        for _ in 0..60 {
            b.write(9, "pipe:[4242]", &framed, true);
            b.write(10, "pipe:[4243]", "\0\0\0\0", true);
        }
        let f = b.findings("small-writes");
        assert!(f.is_empty(), "{f:#?}");
        // A length that is not the rest of the write: data, as without the prefix.
        let mut b = TraceBuilder::new();
        for _ in 0..60 {
            b.write(
                9,
                "pipe:[4242]",
                &format!("\0\0\0{}{body}", char::from(90u8)),
                true,
            );
        }
        assert_eq!(b.findings("small-writes").len(), 1);
        // The same bytes to a file are not a message to anyone waiting.
        let mut b = TraceBuilder::new();
        for _ in 0..60 {
            b.write(9, "/w/records.bin", &framed, true);
        }
        assert_eq!(b.findings("small-writes").len(), 1);
    }

    #[test]
    fn a_native_librarys_writes_in_a_python_program_get_no_python_advice() {
        let run = |frames: &[(&str, &str)]| {
            let mut b = TraceBuilder::new();
            b.exec("/usr/bin/python3", &["python3", "-m", "mypy"]);
            let s = b.native_stack(frames);
            b.stack = Some(s);
            for _ in 0..60 {
                b.write(5, "/w/cache.db-wal", "page", false);
            }
            b.findings("small-writes")[0]
                .fix
                .contains("leave Python's buffering on")
        };
        assert!(!run(&[(
            "sqlite3PagerCommitPhaseOne",
            "/usr/lib/libsqlite3.so.0"
        )]));
        // No site: the command's language.
        assert!(run(&[]));
    }

    #[test]
    fn requests_on_a_socket_a_response_apart_are_no_run() {
        // pnpm's HTTPS requests, one write each, milliseconds apart (the responses came
        // between them, unrecorded); a header and a body written microseconds apart are.
        let run = |pause_ns: u64| {
            let mut b = TraceBuilder::new();
            for _ in 0..60 {
                b.write(7, "socket:[88]", "GET /pkg HTTP/1.1", false);
                b.wait(pause_ns);
            }
            b.findings("small-writes").len()
        };
        assert_eq!(run(5_000_000), 0);
        assert_eq!(run(20_000), 1);
    }

    #[test]
    fn stderr_stays_unbuffered() {
        let mut b = TraceBuilder::new();
        for _ in 0..60 {
            b.write(2, "/var/log/app.err", "GET / 200\n", false);
        }
        assert!(b.findings("small-writes").is_empty());
        let mut b = TraceBuilder::new();
        for _ in 0..60 {
            b.write(1, "/var/log/app.out", "GET / 200\n", false);
        }
        assert_eq!(
            b.findings("small-writes").len(),
            1,
            "stdout is data: buffer it"
        );
    }

    #[test]
    fn a_python_run_with_unbuffered_output_says_so() {
        // flake8 under PYTHONUNBUFFERED=1: each print() writes its line, then its newline.
        let run = |env: &[&str], argv: &[&str]| {
            let mut b = TraceBuilder::with_env(env);
            b.exec("/usr/bin/python3", argv);
            for _ in 0..60 {
                b.write(1, "/w/out.txt", "a.py:1:1: E501", false);
                b.write(1, "/w/out.txt", "\n", false);
            }
            let f = b.findings("small-writes");
            assert_eq!(f.len(), 1, "{f:?}");
            f[0].hazards[0].contains("PYTHONUNBUFFERED=1 in its environment")
        };
        assert!(run(&["PYTHONUNBUFFERED=1"], &["python3", "-m", "flake8"]));
        assert!(!run(&[], &["python3", "-m", "flake8"]));
        // Not a Python program: its writes are its own doing.
        let mut b = TraceBuilder::with_env(&["PYTHONUNBUFFERED=1"]);
        b.exec("/usr/bin/awk", &["awk", "{print}"]);
        for _ in 0..60 {
            b.write(1, "pipe:[77]", "ab", false);
        }
        let f = b.findings("small-writes");
        assert!(
            !f[0].hazards.iter().any(|h| h.contains("PYTHONUNBUFFERED")),
            "{f:?}"
        );
    }

    #[test]
    fn tiny_writes_to_stdout_say_so_and_where_it_went() {
        let mut b = TraceBuilder::new();
        for _ in 0..60 {
            b.write(1, "/tmp/#4242 (deleted)", "u", false);
        }
        let f = b.findings("small-writes");
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].stream.as_deref(),
            Some("stdout -> /tmp/#4242 (deleted)")
        );
        let mut b = TraceBuilder::new();
        for _ in 0..60 {
            b.write(1, "pipe:[77]", "ab", false);
        }
        assert_eq!(
            b.findings("small-writes")[0].stream.as_deref(),
            Some("stdout (pipe)")
        );
        // The same file written through another descriptor too: no stream to name.
        let mut b = TraceBuilder::new();
        b.open("/out/log", 0o1101, 5, Some(file(5, 0, 1)));
        for _ in 0..60 {
            b.write(1, "/out/log", "ab", false);
        }
        b.write(5, "/out/log", "x", false);
        for _ in 0..60 {
            b.write(5, "/out/log", "ab", false);
        }
        let f = b.findings("small-writes");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].stream, None);
        // A file of its own: no stream.
        let mut b = TraceBuilder::new();
        b.open("/out/data.csv", 0o1101, 3, Some(file(3, 0, 1)));
        for _ in 0..60 {
            b.write(3, "/out/data.csv", "ab", false);
        }
        assert_eq!(b.findings("small-writes")[0].stream, None);
    }

    #[test]
    fn one_buffered_write_is_clean() {
        let mut b = TraceBuilder::new();
        b.open("/out/data.csv", 0o1101, 3, Some(file(3, 0, 1)));
        b.write(3, "/out/data.csv", &"field,".repeat(100), false);
        b.close(3, "/out/data.csv");
        assert!(b.findings("small-writes").is_empty());
    }

    #[test]
    fn a_read_a_seek_or_a_pause_ends_the_run() {
        let mut b = TraceBuilder::new();
        b.open("/db/f", 2, 3, Some(file(3, 0, 1)));
        for _ in 0..3 {
            b.write(3, "/db/f", "ab", false);
        }
        b.read(3, "/db/f", 10, 0); // run 1: 3 writes, 2 redundant
        for _ in 0..3 {
            b.write(3, "/db/f", "ab", false);
        }
        b.wait(200_000_000); // a 200 ms pause: run 2 ends (2 redundant)
        for _ in 0..3 {
            b.write(3, "/db/f", "ab", false);
        }
        b.call(Sys::Lseek, |c, b| {
            c.fd = Some(3);
            c.path = Some(b.s("/db/f"));
        }); // run 3: 2 redundant
        b.write(3, "/db/f", "ab", false); // alone: nothing
        let f = b.findings("small-writes");
        assert_eq!((f[0].calls, f[0].redundant_calls), (10, 6));
        let example = f[0].example.as_deref().unwrap_or_default();
        assert!(example.contains("in 3 runs"), "{example}");
    }

    #[test]
    fn big_writes_do_not_run_and_a_run_needs_one_write_per_64k() {
        let mut b = TraceBuilder::new();
        b.open("/f", 1, 3, Some(file(3, 0, 1)));
        for _ in 0..10 {
            b.write(3, "/f", &"x".repeat(600), false);
        }
        b.close(3, "/f");
        assert!(b.findings("small-writes").is_empty());
        // 200 writes of 500 bytes = 100,000 bytes: a 64 KiB buffer needs 2 writes.
        let mut b = TraceBuilder::new();
        b.open("/f", 1, 3, Some(file(3, 0, 1)));
        for _ in 0..200 {
            b.write(3, "/f", &"x".repeat(500), false);
        }
        let f = b.findings("small-writes");
        assert_eq!(f[0].redundant_calls, 198);
    }

    #[test]
    fn positional_writes_run_only_when_contiguous() {
        let mut b = TraceBuilder::new();
        b.open("/db/pages", 2, 3, Some(file(3, 0, 1)));
        for i in 0..5 {
            pwrite(&mut b, 3, "/db/pages", i * 100, 100); // contiguous: one run
        }
        for i in 0..5 {
            pwrite(&mut b, 3, "/db/pages", 10_000 + i * 4096, 100); // scattered
        }
        let f = b.findings("small-writes");
        assert_eq!(f[0].redundant_calls, 4);
    }

    #[test]
    fn descriptors_are_separate_and_dev_null_is_not_ours() {
        let mut b = TraceBuilder::new();
        b.open("/a", 1, 3, Some(file(3, 0, 1)));
        b.open("/b", 1, 4, Some(file(4, 0, 1)));
        b.open("/dev/null", 1, 5, Some(chardev(1, 3)));
        for _ in 0..4 {
            b.write(3, "/a", "x", false);
            b.write(4, "/b", "y", false); // interleaved: each descriptor has its run
            b.write(5, "/dev/null", "z", true);
        }
        let mut f = b.findings("small-writes");
        f.sort_by(|a, b| a.paths.cmp(&b.paths));
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].paths, vec!["/a".to_string()]);
        assert_eq!((f[0].redundant_calls, f[1].redundant_calls), (3, 3));
    }

    #[test]
    fn terminals_are_reported_with_the_line_buffering_hazard() {
        // A progress line written in three pieces, five times: line buffering (what a
        // terminal needs) still writes each line, so two writes of each three go.
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.write(1, "/dev/pts/3", "progress ", true);
            b.write(1, "/dev/pts/3", "1%", true);
            b.write(1, "/dev/pts/3", "\r", true);
        }
        let f = b.findings("small-writes");
        assert_eq!(f[0].redundant_calls, 10);
        assert!(f[0].hazards.iter().any(|h| h.contains("line buffering")));
        assert_eq!(
            f[0].example.as_deref(),
            Some(
                "15 writes of 4 bytes on average in 1 run, which 5 line-buffered writes would \
                 carry"
            )
        );
        // A line per write (Sphinx's progress updates, each its own `\r` line): nothing a
        // terminal's buffer would merge.
        let mut b = TraceBuilder::new();
        for i in 0..20 {
            b.write(1, "/dev/pts/3", &format!("reading sources... {i}%\r"), true);
        }
        assert!(b.findings("small-writes").is_empty());
        // Bytes not kept: each write may end a line, none is counted.
        let mut b = TraceBuilder::new();
        for _ in 0..20 {
            b.write(1, "/dev/pts/3", "x", false);
        }
        assert!(b.findings("small-writes").is_empty());
    }

    #[test]
    fn a_closed_and_reused_descriptor_starts_a_new_run() {
        let mut b = TraceBuilder::new();
        for i in 0..3 {
            b.open("/log", 0o2101, 3, Some(file(3, i, 1)));
            b.write(3, "/log", "one line\n", true);
            b.close(3, "/log");
        }
        assert!(
            b.findings("small-writes").is_empty(),
            "open-close-churn's pattern, not ours"
        );
    }

    #[test]
    fn options_change_the_outcome() {
        let run = |opts: &[(&str, &str)]| {
            let mut b = TraceBuilder::new();
            b.open("/f", 1, 3, Some(file(3, 0, 1)));
            for _ in 0..20 {
                b.write(3, "/f", &"x".repeat(100), false);
                b.wait(5_000_000); // 5 ms apart
            }
            let mut cfg = Config {
                min_calls: 1,
                ..Config::default()
            };
            for (k, v) in opts {
                cfg.options.insert(k.to_string(), v.to_string());
            }
            b.analyze_with(&cfg)
                .findings
                .into_iter()
                .filter(|f| f.detector == "small-writes")
                .map(|f| f.redundant_calls)
                .sum::<u64>()
        };
        assert_eq!(run(&[]), 19);
        assert_eq!(run(&[("small-writes.max_bytes", "99")]), 0);
        assert_eq!(run(&[("small-writes.gap_ms", "1")]), 0);
    }
}
