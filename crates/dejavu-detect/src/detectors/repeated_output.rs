//! repeated-output: the same line, once numbers, hex ids, UUIDs and timestamps are
//! masked, written again and again to stdout, stderr, a terminal or a log file (seed 002:
//! one warning per inbound message).

use crate::{Config, Cx, Detector, DetectorInfo, Finding, Severity};
use dejavu_replay::{FdKind, PathKey, View};
use dejavu_trace::{ev, StrId, Sys, Syscall};
use rustc_hash::{FxHashMap, FxHasher};
use std::hash::Hasher;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "repeated-output",
    summary: "the same output line (numbers, ids and timestamps masked) written again and again",
    explain: "Logs, not data. Every write to a standard stream (fd 0-2, wherever it points: \
terminal, pipe, socket, file or /dev/null), a terminal or a log file is output someone reads; \
a log file is one named *.log, *.log.N, *.err or nohup.out, or under a directory named log or \
logs, or one opened in append mode that no process syncs (fsync, fdatasync, sync_file_range: \
an append-only file that is synced, such as redis's, or a journal, is data), where only its \
lines that read as messages count (a sentence of three words or more, or a log record: \
ninja's .ninja_log, a record of values per build edge, is data). A /dev/null the \
program opened on another descriptor is where it throws bytes away (no-reader counts those \
writes), not a log. The recorded bytes are split into lines (a line cut across several \
writes to one descriptor is joined first) and each line is masked: decimal numbers, hex runs of \
8 or more characters (and 0x... literals), UUIDs, month and weekday names and runs of blanks are \
replaced, so ISO-8601/RFC 3339 stamps, syslog and common-log stamps, request ids and counters no \
longer tell two occurrences apart. Lines are counted per process, per stream and target and per \
masked text (the template). On stderr, terminals and log files, a template written \
at least min_repeats times is a finding: a log line (in a file appended to, known at the \
end: unless it was synced). stdout is different: what a program \
streams there is usually its product (git log's diff headers, find's file names, a filter's \
rows), so a template on stdout is reported only when it is a sentence (three words or more), makes up \
at least half of the lines the process wrote to that stdout and was written at least \
min_repeats times exactly the same (numbers included: rows and file names that differ in a \
number are data), or when the line reads as \
a log record (it starts with a timestamp such as 2024-05-01 or 12:34:56, or names a level: \
WARN, [info], error:, DeprecationWarning:), which also counts in any other regular file. Other \
regular files are data. Where only a write's fingerprint was recorded (the bytes of regular \
files that are not standard streams are not kept, and --no-payload keeps none), a write is one \
occurrence and writes with the same fingerprint (the first 256 bytes, masked) to a log file or \
stderr are the same line; such a finding shows no example. Not counted: writes to pipes and \
sockets other than fd 0-2 (protocol data, not messages); blank lines and lines with fewer than \
3 letters after masking (numbers, progress dots, CSV rows of numbers are data); access log \
records (an HTTP method and a path: \"GET /api/items/2 HTTP/1.1\" 200), which record one request \
each; lines that start with a place in a file (a path and :LINE, or (LINE,COL): a compiler's, \
linter's or grep -n's results, src/a.py:76:80: E501 ...) unless written exactly the same each \
time (a warning from one line: /app/x.py:42: DeprecationWarning: ...); lines written \
before --skip-startup. Calls and redundant calls count line occurrences, not write calls; the \
time counted is each write's duration shared among its lines by bytes. Only the recorded prefix \
of each write is seen, so for writes longer than payload_bytes the counts are lower bounds; \
a line the prefix cuts after another line of the same write (a logger's batch) is not counted, \
since where it is cut moves with the lines before it, while a write that is one long line is \
cut at the same place each time and counts. \
Findings on fd 0-2 name the stream and where it went: `stderr -> /var/log/app.log`, `stdout \
(pipe)`, `stderr (terminal)` (JSON: stream).",
    example: "socket.on('message', m => { console.warn(`${new Date().toISOString()} bypassing \
authentication (loadTest)`); ... })   // the same warning for every message",
    fix: "log it once (at start-up or the first time), or rate-limit it / aggregate it into a \
periodic line with a counter",
    hazards: "A repeated line may still carry per-occurrence detail someone needs (which request, \
which user): aggregate it with a counter or sample it rather than drop it. Masking can merge lines \
that differ only in a number the reader cares about; the example shows the first occurrence as \
written.",
    options: &[
        (
            "min_repeats",
            10,
            "a masked line must be written at least this many times to be reported",
        ),
        (
            "max_lines",
            10_000,
            "distinct masked lines tracked per process; beyond it, lines seen once are forgotten \
and, if that does not free enough room, new lines are not counted (the finding says how many)",
        ),
    ],
    make: |cfg: &Config| {
        Box::new(RepeatedOutput {
            min_repeats: cfg.opt(INFO.id, "min_repeats", 10).max(2),
            max_lines: cfg.opt(INFO.id, "max_lines", 10_000).max(1) as usize,
            procs: FxHashMap::default(),
            splitter: Splitter::default(),
            synced: Default::default(),
        })
    },
};

pub(crate) use dejavu_trace::mask::mask;

/// Text for people: lossy UTF-8, blanks trimmed, at most `max` characters.
pub(crate) fn shorten(b: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(b);
    let s = s.trim();
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

/// Lines longer than this are identified by their first bytes.
const MAX_LINE: usize = 1024;
/// Bytes of the first occurrence kept for the example.
const KEEP: usize = 480;

/// Where the first occurrence's text is: inside a recorded payload (no copy), or copied
/// when it was assembled from several writes.
enum Src {
    Payload {
        id: StrId,
        start: u32,
        len: u32,
    },
    Owned(Box<[u8]>),
    /// Only the write's fingerprint was recorded (a regular file's bytes are not kept).
    Unrecorded,
}

struct Line {
    count: u64,
    /// Byte-weighted write time of all occurrences, and of the first.
    ns: u64,
    first_ns: u64,
    /// The second occurrence (the first redundant one) and the last.
    second_ts: u64,
    last_ts: u64,
    src: Src,
    /// Where the repeats were written from.
    sites: crate::group::Sites,
    /// Redundant occurrences not yet marked (a line is marked once it is known to be a
    /// finding: at min_repeats for log lines, at the end for stdout lines).
    pending: Vec<Call>,
    /// Known to be a finding: occurrences are marked as they come.
    live: bool,
    /// Pending occurrences were dropped (too many before the line was known to count).
    forgot: bool,
    /// Whether it is a log line or (on stdout) maybe the program's product.
    role: Role,
    /// What the target is (for naming a standard stream).
    kind: FdKind,
    /// stdout lines and located ones: the hash of the first occurrence as written (not
    /// masked), and how many occurrences were exactly that.
    raw: u64,
    exact: u64,
    /// The line starts with a place in a file (`src/a.py:76:80: E501 ...`, gcc's and
    /// Python's warnings): it counts only when written exactly the same each time (a
    /// warning from one line), not when its numbers differ (a linter's or compiler's
    /// results, one per place).
    located: bool,
}

/// What the writes to a target are, as far as repeated output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    /// Log lines: stderr, terminals other than stdout, /dev/null, log files (append mode,
    /// `*.log` names, `log/` directories). Every repeated template counts.
    Log,
    /// stdout not to a log file: the program's product unless one sentence makes up most of
    /// it (or the line reads as a log record).
    Product,
    /// Another regular file: data, unless the line reads as a log record.
    Data,
    /// A regular file that is a log by its append mode alone (not its name, not a standard
    /// stream): a log unless the program syncs it, which makes it data (redis's
    /// append-only file, a journal): decided at the end, as stdout's lines are.
    Appended,
}

/// A line's identity: the target written to, the stream (fd 0-2, or 3 for any other
/// descriptor), and the hash of the masked line (or the write's fingerprint).
type Key = (PathKey, u8, u64);
/// Lines grouped into one finding: target, stream, and the fingerprint of an unrecorded line.
type GroupKey = (PathKey, u8, Option<u64>);

#[derive(Default)]
struct ProcLines {
    lines: FxHashMap<Key, Line>,
    /// Lines written to stdout, per target (what a stdout line must dominate).
    stdout_lines: FxHashMap<PathKey, u64>,
    /// Occurrences of lines not counted because the table was full.
    dropped: u64,
    /// Lines seen once that were forgotten to make room.
    evicted: u64,
    /// The table stays full even after forgetting lines seen once.
    saturated: bool,
    /// Writes whose payload was cut at payload_bytes.
    truncated_writes: u64,
}

struct Carry {
    open_id: u64,
    buf: Vec<u8>,
    ns: u64,
}

struct RepeatedOutput {
    min_repeats: u64,
    max_lines: usize,
    procs: FxHashMap<u32, ProcLines>,
    splitter: Splitter,
    /// Files some process synced (fsync, fdatasync, sync_file_range): data, not logs.
    synced: rustc_hash::FxHashSet<PathKey>,
}

/// Cuts the output written to each descriptor into lines (a line cut across several writes
/// joined, several lines of one write apart), keeps those that are messages of output that
/// counts (see [`INFO`]) and hashes each masked. The detector counts them; `dejavu whatif`
/// replays a finding's fix ("log it once") on the same lines.
pub(crate) struct Splitter {
    /// Partial lines per (pid, fd).
    carry: FxHashMap<(u32, i32), Carry>,
    scratch: Vec<u8>,
    /// Payload id -> (masked hash, is a message), direct-mapped.
    cache: Vec<(u32, u64, bool)>,
}

impl Default for Splitter {
    fn default() -> Self {
        Splitter {
            carry: FxHashMap::default(),
            scratch: Vec::with_capacity(256),
            cache: Vec::new(),
        }
    }
}

/// One occurrence of a line of output (or, where only a write's fingerprint was recorded,
/// of that write).
pub(crate) struct Occ<'t> {
    pub(crate) image: u32,
    pub(crate) target: PathKey,
    pub(crate) stream: u8,
    base: Role,
    kind: FdKind,
    /// The line as written (empty for a fingerprint).
    text: &'t [u8],
    /// Where it starts in a trace-wide payload (None: assembled from several writes).
    at: Option<(StrId, u32)>,
    /// Its share of the write's duration.
    ns: u64,
    /// A line of stdout (it counts toward what a stdout line must dominate).
    product: bool,
    /// The masked line's hash, or the write's fingerprint; None: not a message.
    pub(crate) h: Option<u64>,
    unrecorded: bool,
}

/// Slots of the cache of single-line payloads (payloads are interned, so a line written
/// again without a varying part is the same string id).
const CACHE: usize = 4096;

impl Splitter {
    /// The masked line's hash, or None for lines that are not messages.
    fn hash(&mut self, text: &[u8]) -> Option<u64> {
        let text = trim_end(text);
        if text.is_empty() {
            return None;
        }
        let text = &text[..text.len().min(MAX_LINE)];
        if mask(text, &mut self.scratch) < 3 {
            return None;
        }
        let mut h = FxHasher::default();
        h.write(&self.scratch);
        Some(h.finish())
    }

    /// `hash` for a whole payload holding exactly one line, through the cache.
    fn hash_payload(&mut self, id: StrId, text: &[u8]) -> Option<u64> {
        if id.is_local() {
            // Block-local ids are reused by later blocks for other bytes: no caching.
            return self.hash(text);
        }
        if self.cache.is_empty() {
            self.cache = vec![(u32::MAX, 0, false); CACHE];
        }
        let slot = id.0 as usize % CACHE;
        let (cid, h, ok) = self.cache[slot];
        if cid == id.0 {
            return ok.then_some(h);
        }
        let r = self.hash(text);
        self.cache[slot] = (id.0, r.unwrap_or(0), r.is_some());
        r
    }

    /// Whether a complete line counts, and its masked hash: None when it is not output
    /// that counts (blank, an access log record, a data file's line that is no log record);
    /// `(product, None)` for a line that is not a message (too few letters).
    fn key(
        &mut self,
        base: Role,
        text: &[u8],
        at: Option<(StrId, u32)>,
        cx: &Cx<'_>,
    ) -> Option<(bool, Option<u64>)> {
        if trim_end(text).is_empty() || is_access_log(text) {
            return None;
        }
        if base == Role::Data && !looks_like_log(text) {
            return None;
        }
        // A file appended to, without a log's name: a log only where a line reads as a
        // message (a sentence, or a log record). Records of values are its data: ninja's
        // .ninja_log (`5\t28\t1796011260530349763\tCMakeFiles/m1.c.o\te21c677a6f0627e7`,
        // a line per build edge, alike once numbers and hashes are masked), a shell's
        // history, rows of a CSV.
        if base == Role::Appended && !looks_like_log(text) && !is_prose(text) {
            return None;
        }
        // A whole payload that is one line: its hash is cached by payload id.
        let h = match at {
            Some((payload, 0)) if text.len() == cx.strings.get(payload).len() => {
                self.hash_payload(payload, text)
            }
            _ => self.hash(text),
        };
        Some((base == Role::Product, h))
    }

    /// A descriptor closed: its partial line goes.
    pub(crate) fn close(&mut self, pid: u32, fd: i32) {
        if !self.carry.is_empty() {
            self.carry.remove(&(pid, fd));
        }
    }

    /// A process is gone: it leaves no partial lines behind.
    pub(crate) fn exit(&mut self, pid: u32) {
        if !self.carry.is_empty() {
            self.carry.retain(|(p, _), _| *p != pid);
        }
    }

    /// One write: `emit` gets each complete line of output it carries (or finishes), in
    /// order. Returns whether the recorded payload was cut short of the write.
    pub(crate) fn write(
        &mut self,
        s: &Syscall,
        v: &View,
        cx: &Cx<'_>,
        emit: &mut dyn FnMut(Occ<'_>),
    ) -> bool {
        let Some(fd) = s.fd else { return false };
        let Some(target) = v.path else { return false };
        if s.ret <= 0 || s.ev & ev::UNFINISHED != 0 {
            return false;
        }
        let (kind, append) = match v.fd {
            Some(f) => (f.kind, f.append),
            None => (FdKind::classify(cx.replay.paths.bytes(target), None), false),
        };
        let Some(base) = role_of(fd, kind, append, cx.replay.paths.bytes(target)) else {
            return false;
        };
        let stream = stream_of(fd);
        macro_rules! occ {
            ($text:expr, $at:expr, $ns:expr, $product:expr, $h:expr, $unrecorded:expr) => {
                Occ {
                    image: v.image,
                    target,
                    stream,
                    base,
                    kind,
                    text: $text,
                    at: $at,
                    ns: $ns,
                    product: $product,
                    h: $h,
                    unrecorded: $unrecorded,
                }
            };
        }
        let Some(payload) = s.payload else {
            // Only the fingerprint: one write is one occurrence. Without the bytes a stdout
            // line cannot be told from data, nor a line in another file from a log record.
            if let Some(fp) = s.fingerprint {
                if matches!(base, Role::Log | Role::Appended) && dejavu_trace::mask::is_message(fp)
                {
                    emit(occ!(&[], None, s.dur, false, Some(fp), true));
                }
            }
            return false;
        };
        let open_id = v.fd.map_or(0, |f| f.open_id);
        let all = cx.strings.get(payload);
        let data = &all[..all.len().min(s.ret as usize)];
        let truncated = s.ev & ev::PAYLOAD_TRUNCATED != 0 || data.len() < s.ret as usize;
        let total = s.ret as u64;
        // The head of this write may finish a line an earlier write began.
        let mut carried = self
            .carry
            .remove(&(s.pid, fd))
            .filter(|c| c.open_id == open_id && !c.buf.is_empty());
        // The common case: the whole payload is one line (the cache knows it).
        if carried.is_none()
            && !truncated
            && data.len() == all.len()
            && data.iter().position(|&b| b == b'\n') == Some(data.len() - 1)
        {
            let at = Some((payload, 0));
            if let Some((product, h)) = self.key(base, data, at, cx) {
                emit(occ!(data, at, s.dur, product, h, false));
            }
            return truncated;
        }
        let mut pos = 0usize;
        while pos < data.len() {
            let (end, next) = match data[pos..].iter().position(|&b| b == b'\n') {
                Some(i) => (pos + i, pos + i + 1),
                None => (data.len(), data.len()),
            };
            if next == end && truncated && pos > 0 {
                // The recorded prefix ends inside a line that an earlier line of the same
                // write pushed there: where it is cut depends on that line's length, so
                // its fragments are not one line, and each would be a line of its own
                // (pino's batches of access-log lines: four rows of fragments of one
                // line). A write that is one long line is cut at the same place each
                // time: that fragment is kept, below.
                break;
            }
            let complete = next > end || truncated;
            let ns = share(s.dur, next - pos, total);
            if !complete {
                // A partial line: keep it for the next write to this descriptor.
                let mut c = carried.take().unwrap_or(Carry {
                    open_id,
                    buf: Vec::new(),
                    ns: 0,
                });
                let room = MAX_LINE.saturating_sub(c.buf.len());
                c.buf.extend_from_slice(&data[pos..end.min(pos + room)]);
                c.ns += ns;
                self.carry.insert((s.pid, fd), c);
                break;
            }
            if let Some(mut c) = carried.take() {
                let room = MAX_LINE.saturating_sub(c.buf.len());
                c.buf.extend_from_slice(&data[pos..end.min(pos + room)]);
                let text = std::mem::take(&mut c.buf);
                if let Some((product, h)) = self.key(base, &text, None, cx) {
                    emit(occ!(&text, None, c.ns + ns, product, h, false));
                }
            } else {
                let text = &data[pos..end];
                let at = Some((payload, pos as u32));
                if let Some((product, h)) = self.key(base, text, at, cx) {
                    emit(occ!(text, at, ns, product, h, false));
                }
            }
            pos = next;
        }
        truncated
    }
}

impl RepeatedOutput {
    /// One occurrence of a line: counted by its masked text.
    fn line(&mut self, o: Occ<'_>, ts: u64, call: Call, cx: &Cx<'_>) {
        if o.product {
            *self
                .procs
                .entry(o.image)
                .or_default()
                .stdout_lines
                .entry(o.target)
                .or_default() += 1;
        }
        let Some(h) = o.h else { return };
        let (text, at, base, kind) = (o.text, o.at, o.base, o.kind);
        let unrecorded = o.unrecorded;
        let first = || {
            if unrecorded {
                let role = if base == Role::Appended {
                    Role::Appended
                } else {
                    Role::Log
                };
                return (Src::Unrecorded, role, kind);
            }
            let keep = text.len().min(KEEP);
            let src = match at {
                // A block-local id means other bytes in a later block: copy.
                Some((id, start)) if !id.is_local() => Src::Payload {
                    id,
                    start,
                    len: keep as u32,
                },
                _ => Src::Owned(text[..keep].into()),
            };
            let role = if matches!(base, Role::Product | Role::Data) && looks_like_log(text) {
                Role::Log
            } else {
                base
            };
            (src, role, kind)
        };
        // On stdout, whether the line is written exactly the same each time (a warning) or
        // varies in its numbers (rows, file names): only the former can be a finding. The
        // same for a line that names a place in a file, wherever it goes.
        let located = !unrecorded && is_located(text);
        let raw = if base == Role::Product || located {
            let mut x = FxHasher::default();
            x.write(trim_end(&text[..text.len().min(MAX_LINE)]));
            x.finish()
        } else {
            0
        };
        self.count(
            o.image,
            (o.target, o.stream, h),
            first,
            (raw, located),
            o.ns,
            ts,
            call,
            cx,
        );
    }

    /// Counts one occurrence of a line. `src` locates its first bytes for the example and
    /// `role` says what the line is (both asked for only on its first occurrence); `call` is
    /// the write carrying it (`View::seq`, duration, stack), marked redundant once the line
    /// is known to be a finding (see [`Line::pending`]).
    #[allow(clippy::too_many_arguments)]
    fn count(
        &mut self,
        image: u32,
        key: Key,
        first: impl FnOnce() -> (Src, Role, FdKind),
        (raw, located): (u64, bool),
        ns: u64,
        ts: u64,
        call: Call,
        cx: &Cx<'_>,
    ) {
        let max = self.max_lines;
        let min = self.min_repeats;
        let p = self.procs.entry(image).or_default();
        let stdout_total = p.stdout_lines.get(&key.0).copied().unwrap_or(0);
        if let Some(l) = p.lines.get_mut(&key) {
            l.count += 1;
            l.exact += (raw == l.raw) as u64;
            l.sites.add(call.2, 1, ns);
            l.ns += ns;
            if l.count == 2 {
                l.second_ts = ts;
            }
            l.last_ts = l.last_ts.max(ts);
            if l.live {
                cx.mark(call.0, call.1, call.2);
                return;
            }
            l.pending.push(call);
            let live = match l.role {
                Role::Log | Role::Data => l.count >= min && (!l.located || l.exact >= min),
                // Whether a stdout line is a finding is known at the end (it must make up
                // half the lines); unless it already does after many occurrences.
                Role::Product => {
                    l.pending.len() >= PENDING && l.exact >= min && l.count * 2 >= stdout_total
                }
                // Whether the program syncs the file is known at the end.
                Role::Appended => false,
            };
            if live {
                l.live = true;
                for c in l.pending.drain(..) {
                    cx.mark(c.0, c.1, c.2);
                }
                l.pending = Vec::new();
            } else if l.pending.len() >= PENDING {
                // Not a finding so far: stop remembering (if it becomes one, the trace's
                // total of redundant calls leaves these out; the finding's counts do not).
                l.pending = Vec::new();
                l.forgot = true;
            }
            return;
        }
        if p.lines.len() >= max {
            if !p.saturated {
                // Forget lines seen once; if that frees less than a quarter, stop taking
                // new lines (so each sweep is paid for by many inserts).
                let before = p.lines.len();
                p.lines.retain(|_, l| l.count >= 2);
                p.evicted += (before - p.lines.len()) as u64;
                p.saturated = p.lines.len() > max - max / 4;
            }
            if p.lines.len() >= max {
                p.dropped += 1;
                return;
            }
        }
        let (src, role, kind) = first();
        p.lines.insert(
            key,
            Line {
                count: 1,
                ns,
                first_ns: ns,
                second_ts: 0,
                last_ts: ts,
                src,
                sites: crate::group::Sites::default(),
                role,
                kind,
                raw,
                exact: 1,
                located,
                pending: Vec::new(),
                live: false,
                forgot: false,
            },
        );
    }
}

/// A write: its `View::seq`, duration and stack.
type Call = (u64, u64, Option<dejavu_trace::StackId>);

/// Occurrences of a line remembered until it is known to be a finding.
const PENDING: usize = 1 << 16;

/// The stream a descriptor is: 0-2 for stdin, stdout, stderr; 3 for any other.
fn stream_of(fd: i32) -> u8 {
    if (0..=2).contains(&fd) {
        fd as u8
    } else {
        3
    }
}

/// What writes to `fd` are (None: not output at all, such as protocol traffic on a pipe or
/// socket that is not a standard stream).
fn role_of(fd: i32, kind: FdKind, append: bool, path: &[u8]) -> Option<Role> {
    let log_file = kind == FdKind::File && (append || is_log_name(path));
    match fd {
        0 | 2 => Some(Role::Log),
        1 if log_file => Some(Role::Log),
        1 => Some(Role::Product),
        _ => match kind {
            FdKind::Tty => Some(Role::Log),
            // A /dev/null the program opened itself is where it throws bytes away (isort's
            // check mode writes each file's new text there): no-reader counts those writes;
            // their lines are no log.
            FdKind::DevNull => None,
            FdKind::File if is_log_name(path) => Some(Role::Log),
            FdKind::File if append => Some(Role::Appended),
            FdKind::File => Some(Role::Data),
            _ => None,
        },
    }
}

/// A log file by its name: `*.log`, `*.log.N`, `*.err`, `nohup.out`, or anything under a
/// directory named `log` or `logs`. (`*.out` in general is not: a.out, expected outputs.)
/// The capture backends keep the bytes written to such files by the same rule.
pub(crate) fn is_log_name(path: &[u8]) -> bool {
    dejavu_trace::payload::is_log_name(path)
}

/// Log levels a log record names early on.
const LEVELS: [&[u8]; 14] = [
    b"TRACE",
    b"DEBUG",
    b"INFO",
    b"NOTICE",
    b"WARN",
    b"WARNING",
    b"ERROR",
    b"FATAL",
    b"CRITICAL",
    b"CRIT",
    b"ALERT",
    b"EMERG",
    b"SEVERE",
    b"DEPRECATED",
];

/// Whether a line reads as a log record: it starts with a timestamp (`2024-05-01`,
/// `12:34:56`, `May  1 12:34:56`, optionally in brackets) or names a level among its first
/// words (`WARN`, `[warn]`, `warning:`, `DeprecationWarning:`).
pub(crate) fn looks_like_log(line: &[u8]) -> bool {
    let head = &line[..line.len().min(64)];
    let mut t = head;
    while let [b'[' | b' ' | b'(', rest @ ..] = t {
        t = rest;
    }
    let digits = |b: &[u8], n: usize| b.len() >= n && b[..n].iter().all(u8::is_ascii_digit);
    if digits(t, 4) && matches!(t.get(4), Some(b'-' | b'/')) && digits(&t[5..], 2) {
        return true; // 2024-05-01, 2024/05/01
    }
    let clock = |b: &[u8]| {
        let d = b.iter().take_while(|c| c.is_ascii_digit()).count();
        (1..=2).contains(&d) && b.get(d) == Some(&b':') && digits(&b[d + 1..], 2)
    };
    if clock(t) {
        return true; // 12:34:56
    }
    // Syslog: "May  1 12:34:56".
    if t.len() > 4 && t[..3].iter().all(u8::is_ascii_alphabetic) && t[3] == b' ' {
        let rest = t[4..].trim_ascii_start();
        let d = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        if (1..=2).contains(&d) && rest.get(d) == Some(&b' ') && clock(&rest[d + 1..]) {
            return true;
        }
    }
    // A level among the first words.
    let mut i = 0;
    while i < head.len() {
        if !head[i].is_ascii_alphabetic() {
            i += 1;
            continue;
        }
        let start = i;
        while i < head.len() && head[i].is_ascii_alphabetic() {
            i += 1;
        }
        let w = &head[start..i];
        let before = start.checked_sub(1).map(|j| head[j]);
        let after = head.get(i).copied();
        let upper = w.iter().all(u8::is_ascii_uppercase);
        let level = LEVELS.iter().any(|l| l.eq_ignore_ascii_case(w));
        if level && (upper || before == Some(b'[') || after == Some(b':') || after == Some(b']')) {
            return true;
        }
        // Node: "(node:123) DeprecationWarning: ...", Python: "UserWarning: ...".
        if after == Some(b':') && (w.ends_with(b"Warning") || w.ends_with(b"Error")) {
            return true;
        }
    }
    false
}

/// Whether a line is an access log record: an HTTP method followed by a path
/// (`"GET /api/items/2 HTTP/1.1" 200`, morgan's `GET / 200 1.2 ms`). Each one records a
/// request, so it repeats as often as a client asks for the same URL: not a repeated
/// message, however alike the lines look.
fn is_access_log(line: &[u8]) -> bool {
    const METHODS: [&[u8]; 7] = [
        b"GET", b"POST", b"PUT", b"DELETE", b"HEAD", b"PATCH", b"OPTIONS",
    ];
    let head = &line[..line.len().min(256)];
    METHODS.iter().any(|m| {
        head.windows(m.len() + 2).enumerate().any(|(i, w)| {
            w.starts_with(m)
                && w.ends_with(b" /")
                && (i == 0 || matches!(head[i - 1], b'"' | b' ' | b'['))
        })
    })
}

/// Whether a line starts with a place in a file, as compilers, linters and `grep -n` print
/// their results and Python its warnings: a path (no blanks, with a `/` or a `.` in it)
/// followed by `:LINE` (`src/a.py:76:80: E501 ...`, `./main.go:12:2: ...`,
/// `/app/x.py:42: DeprecationWarning: ...`) or `(LINE,COL)` (`src/a.ts(12,5): error ...`).
fn is_located(line: &[u8]) -> bool {
    let l = match line.iter().position(|b| !b.is_ascii_whitespace()) {
        Some(i) => &line[i..],
        None => return false,
    };
    let Some(end) = l
        .iter()
        .position(|&b| b == b':' || b == b'(' || b.is_ascii_whitespace())
    else {
        return false;
    };
    // A path: with a directory in it, or a source file's name. Not a host (`10.0.0.1:8080`,
    // `db.example.com:5432: connection refused` is a log line, whatever its port).
    let path = &l[..end];
    const EXTS: &[&[u8]] = &[
        b"py", b"pyi", b"js", b"mjs", b"cjs", b"ts", b"tsx", b"jsx", b"c", b"h", b"cc", b"cpp",
        b"hpp", b"cxx", b"rs", b"go", b"java", b"kt", b"rb", b"php", b"cs", b"swift", b"scala",
        b"md", b"rst", b"txt", b"json", b"yaml", b"yml", b"toml", b"css", b"scss", b"html", b"vue",
        b"svelte", b"sh", b"sql", b"proto", b"lua", b"ex", b"exs", b"erl", b"hs",
    ];
    let ext = path
        .rsplit(|&b| b == b'.')
        .next()
        .filter(|_| path.contains(&b'.'));
    if !path.contains(&b'/') && !ext.is_some_and(|e| EXTS.contains(&e)) {
        return false;
    }
    let rest = &l[end + 1..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return false;
    }
    matches!(
        (l[end], rest.get(digits)),
        (b':', None | Some(b':' | b' ')) | (b'(', Some(b',' | b')'))
    )
}

/// Whether a line is a sentence rather than a value: three or more blank-separated words
/// with letters in them (`bypassing socket.io authentication`, not `./src/a1.c` or `true`).
fn is_prose(line: &[u8]) -> bool {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|w| w.iter().any(u8::is_ascii_alphabetic))
        .count()
        >= 3
}

fn trim_end(mut b: &[u8]) -> &[u8] {
    while let [rest @ .., last] = b {
        if last.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    b
}

fn share(dur: u64, part: usize, total: u64) -> u64 {
    if total == 0 {
        0
    } else {
        (dur as u128 * part as u128 / total as u128) as u64
    }
}

impl Detector for RepeatedOutput {
    fn wants(&self, sys: Sys) -> bool {
        matches!(
            sys,
            Sys::Write
                | Sys::Pwrite64
                | Sys::Writev
                | Sys::Pwritev
                | Sys::Pwritev2
                | Sys::Close
                | Sys::Fsync
                | Sys::Fdatasync
                | Sys::SyncFileRange
        )
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let Some(fd) = s.fd else { return };
        if matches!(s.sys, Sys::Fsync | Sys::Fdatasync | Sys::SyncFileRange) {
            if let Some(p) = v.path {
                self.synced.insert(p);
            }
            return;
        }
        if s.sys == Sys::Close {
            self.splitter.close(s.pid, fd);
            return;
        }
        if !cx.config.counts(s.ts) {
            return;
        }
        let call = (v.seq, s.dur, s.stack);
        let mut splitter = std::mem::take(&mut self.splitter);
        let truncated = splitter.write(s, v, cx, &mut |o| self.line(o, s.ts, call, cx));
        self.splitter = splitter;
        if truncated {
            self.procs.entry(v.image).or_default().truncated_writes += 1;
        }
    }

    fn on_record(&mut self, rec: &dejavu_trace::Record, _cx: &Cx<'_>) {
        // A process that is gone leaves no partial lines behind.
        if let dejavu_trace::Record::Exit(e) = rec {
            if e.pid == e.tid {
                self.splitter.exit(e.pid);
            }
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        for (&image, p) in &self.procs {
            let mut notes = Vec::new();
            if p.dropped > 0 || p.evicted > 0 {
                notes.push(format!(
                    "this process wrote more distinct lines than max_lines ({}): {} line(s) seen \
                     once were forgotten and {} occurrence(s) of new lines were not counted, so \
                     counts may be low (raise repeated-output.max_lines)",
                    self.max_lines, p.evicted, p.dropped
                ));
            }
            if p.truncated_writes > 0 {
                notes.push(format!(
                    "{} write(s) were longer than the recorded payload prefix: lines past it \
                     were not seen, so counts are lower bounds (record with a larger payload \
                     limit to see them)",
                    p.truncated_writes
                ));
            }
            // Lines with a call site are one finding each (the site and the line say which
            // log call); lines without one are grouped per stream or target, so a program
            // whose stack is unknown gets one row per stream, naming its lines.
            let mut groups: FxHashMap<GroupKey, Vec<(u64, &Line)>> = FxHashMap::default();
            for (&(target, stream, fp), l) in &p.lines {
                if l.count < self.min_repeats {
                    continue;
                }
                let text = l.text(cx);
                if l.located && l.exact < self.min_repeats {
                    continue;
                }
                if l.role == Role::Appended && self.synced.contains(&target) {
                    continue;
                }
                if l.role == Role::Product {
                    // stdout is the program's product: a repeated line there is reported
                    // only when one sentence makes up half of what it wrote.
                    let lines = p.stdout_lines.get(&target).copied().unwrap_or(0);
                    if l.count * 2 < lines || l.exact < self.min_repeats || !is_prose(text) {
                        continue;
                    }
                }
                for c in &l.pending {
                    cx.mark(c.0, c.1, c.2);
                }
                let site = (!l.sites.is_empty()).then_some(fp);
                groups
                    .entry((target, stream, site))
                    .or_default()
                    .push((fp, l));
            }
            let mut groups: Vec<_> = groups.into_iter().collect();
            groups.sort_by_key(|((t, s, f), _)| (t.0, *s, *f));
            for ((target, stream, site), mut lines) in groups {
                lines.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(&b.0)));
                let (fp, top) = lines[0];
                let text = top.text(cx);
                let calls: u64 = lines.iter().map(|(_, l)| l.count).sum();
                let redundant: u64 = lines.iter().map(|(_, l)| l.count - 1).sum();
                let wasted: u64 = lines
                    .iter()
                    .map(|(_, l)| l.ns.saturating_sub(l.first_ns))
                    .sum();
                let mut sites = crate::group::Sites::default();
                for (_, l) in &lines {
                    sites.merge(&l.sites);
                }
                let share = cx.share(wasted);
                let path = cx.path(target);
                let stream_name = crate::group::stream_label(stream, top.kind, &path);
                let mut hazards = vec![
                    "if each occurrence carries detail someone needs, aggregate it (a counter \
                     per interval) rather than drop it"
                        .to_string(),
                ];
                if lines.len() > 1 {
                    let named: Vec<String> = lines
                        .iter()
                        .take(3)
                        .map(|(_, l)| {
                            let t = l.text(cx);
                            let t = if t.is_empty() {
                                "(not recorded)".to_string()
                            } else {
                                format!("\"{}\"", shorten(t, 60))
                            };
                            format!("{t} ({} times)", l.count)
                        })
                        .collect();
                    hazards.push(format!(
                        "{} different lines repeated here, told apart by no call site (the trace \
                         has no stacks for these writes): {}{}",
                        lines.len(),
                        named.join(", "),
                        if lines.len() > 3 { ", ..." } else { "" }
                    ));
                }
                if lines.iter().any(|(_, l)| matches!(l.src, Src::Unrecorded)) {
                    hazards.push(
                        "the bytes of writes to regular files are not recorded, only a \
                         fingerprint of each write's first 256 bytes (masked): the line is not \
                         shown, and writes that carry the same line with different numbers \
                         count as one; the call site says which log call it is"
                            .to_string(),
                    );
                }
                if lines.iter().any(|(_, l)| l.forgot) {
                    hazards.push(format!(
                        "more than {PENDING} occurrences came before the line was known to \
                         be a finding: the run's total of redundant calls leaves some out"
                    ));
                }
                hazards.extend(notes.iter().cloned());
                let example = (!text.is_empty()).then(|| shorten(text, 120));
                let first_ts = lines.iter().map(|(_, l)| l.second_ts).min().unwrap_or(0);
                let last_ts = lines.iter().map(|(_, l)| l.last_ts).max().unwrap_or(0);
                let mut f = Finding {
                    detector: INFO.id,
                    severity: Severity::grade(share, redundant),
                    owner: crate::Owner::Own,
                    program: String::new(),
                    programs: Vec::new(),
                    key: String::new(),
                    processes: 1,
                    pid: 0,
                    command: String::new(),
                    paths: vec![path.clone()],
                    path_count: 1,
                    top_paths: vec![crate::PathCount {
                        path,
                        redundant_calls: redundant,
                    }],
                    calls,
                    redundant_calls: redundant,
                    wasted_ns: wasted,
                    share,
                    first_ts,
                    last_ts,
                    fix: INFO.fix.to_string(),
                    hazards,
                    cache: None,
                    example,
                    callsites: cx.callsites(&sites, image, redundant),
                    first_sites: Vec::new(),
                    sequence: None,
                    stream: stream_name,
                    also: Vec::new(),
                    shown_in: None,
                };
                // The key names the stream, not where it went this time (a pipe's inode,
                // a redirect's file), so runs compare; with a call site, the line too.
                let place = match stream {
                    0..=2 => ["stdin", "stdout", "stderr"][stream as usize].to_string(),
                    _ => crate::pattern::mask(cx.replay.paths.bytes(target)),
                };
                let what = if site.is_none() {
                    String::new()
                } else if matches!(top.src, Src::Unrecorded) {
                    " fingerprint".to_string()
                } else {
                    let mut template = Vec::new();
                    mask(text, &mut template);
                    template.truncate(80);
                    for b in &mut template {
                        if *b < b' ' {
                            *b = b'#'; // the mask's markers, readable in a key
                        }
                    }
                    format!(" {}", String::from_utf8_lossy(&template))
                };
                cx.label(&mut f, image, &format!("{place}{what}"));
                if site.is_some() && matches!(top.src, Src::Unrecorded) {
                    // Past the masking of the subject: a hash is not a per-run id.
                    f.key.push_str(&format!(" {fp:016x}"));
                }
                if let Some(c) = cx.coverage {
                    // The lines behind it, for `dejavu whatif` to replay "log it once".
                    c.borrow_mut()
                        .lines
                        .entry(f.key.clone())
                        .or_default()
                        .extend(lines.iter().map(|(h, _)| (image, target, stream, *h)));
                }
                out.push(f);
            }
        }
        out
    }
}

impl Line {
    /// The first occurrence's text (empty when only its fingerprint was recorded).
    fn text<'c>(&'c self, cx: &'c Cx<'_>) -> &'c [u8] {
        match &self.src {
            Src::Payload { id, start, len } => {
                let b = cx.strings.get(*id);
                let (a, z) = (*start as usize, (*start + *len) as usize);
                b.get(a..z).unwrap_or(&[])
            }
            Src::Owned(b) => b,
            Src::Unrecorded => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::mask;
    use crate::testkit::{chardev, file, TraceBuilder};
    use crate::Config;
    use dejavu_trace::{ev, Sys};

    fn m(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        mask(s.as_bytes(), &mut out);
        out
    }

    #[test]
    fn masking_erases_numbers_ids_and_timestamps_but_not_words() {
        assert_eq!(
            m("2024-05-01T12:34:56.789Z warn: retry 3 of 5 for req 42"),
            m("2025-12-31T01:02:03.004Z warn: retry 4 of 5 for req 9000")
        );
        assert_eq!(
            m("2024-05-01 12:34:56,789 warn"),
            m("2024-05-01 02:04:06,001 warn")
        );
        assert_eq!(
            m("[01/May/2024:12:34:56 +0000] GET /x"),
            m("[17/Dec/2023:01:02:03 +0000] GET /x")
        );
        assert_eq!(m("May  1 12:00:00 host app"), m("Dec 10 09:09:09 host app"));
        assert_eq!(
            m("job 550e8400-e29b-41d4-a716-446655440000 done"),
            m("job 6ba7b810-9dad-11d1-80b4-00c04fd430c8 done")
        );
        assert_eq!(m("commit 3f2a9c1e7b done"), m("commit deadbeef01 done"));
        assert_eq!(m("ptr 0x7ffd1234"), m("ptr 0x1f"));
        assert_ne!(m("cache hit"), m("cache miss"));
        assert_ne!(m("user alice"), m("user bob"));
    }

    fn warn_lines(b: &mut TraceBuilder, n: usize, fd: i32, path: &str) {
        for i in 0..n {
            let line = format!(
                "2024-05-01T12:00:{:02}.{:03}Z WARN bypassing socket.io authentication for message {i}\n",
                i % 60,
                i * 7 % 1000
            );
            b.write(fd, path, &line, true);
        }
    }

    #[test]
    fn a_warning_per_message_differing_only_in_its_timestamp_is_repeated_output() {
        let mut b = TraceBuilder::new();
        warn_lines(&mut b, 25, 2, "/dev/pts/0");
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].calls, f[0].redundant_calls), (25, 24));
        assert_eq!(f[0].wasted_ns, 24 * 500, "each write carried one line");
        assert_eq!(f[0].paths, vec!["/dev/pts/0".to_string()]);
        let ex = f[0].example.clone().unwrap_or_default();
        assert!(
            ex.starts_with("2024-05-01T12:00:00.000Z WARN bypassing socket.io"),
            "the first occurrence, unmasked: {ex}"
        );
    }

    #[test]
    fn a_linters_results_are_not_repeated_output_but_one_warning_line_is() {
        // flake8's results, one per place, to stderr and to a log file: the same message at
        // other lines and columns. Not a repeated line.
        let mut b = TraceBuilder::new();
        b.open("/w/flake8.log", 0o2101, 3, None);
        for i in 0..40 {
            let line = format!(
                "src/urllib3/connection.py:{}:{}: E501 line too long ({} > 79 characters)\n",
                10 + i * 3,
                80 + i % 7,
                81 + i
            );
            b.write(2, "/dev/pts/0", &line, true);
            b.write(3, "/w/flake8.log", &line, true);
            let ts = format!(
                "src/a.ts({},{}): error TS2304: Cannot find name 'x'.\n",
                i + 1,
                5
            );
            b.write(2, "/dev/pts/0", &ts, true);
        }
        let f = b.findings("repeated-output");
        assert!(f.is_empty(), "{f:#?}");

        // Python's warning from one line, written again and again: exactly the same line.
        let mut b = TraceBuilder::new();
        for _ in 0..30 {
            b.write(
                2,
                "/dev/pts/0",
                "/app/x.py:42: DeprecationWarning: use load() instead\n",
                true,
            );
        }
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].redundant_calls, 29);
    }

    #[test]
    fn located_lines_are_told_from_others() {
        for yes in [
            "src/a.py:76:80: E501 line too long",
            "./main.go:12:2: declared and not used: x",
            "/app/x.py:42: DeprecationWarning: old",
            "src/a.ts(12,5): error TS2304",
            "README.md:3:fix this",
        ] {
            assert!(super::is_located(yes.as_bytes()), "{yes}");
        }
        for no in [
            "12:34:56 WARN retrying",
            "2024-05-01T12:00:00Z request done",
            "warning: unused variable",
            "http://example.com:8080/x fetched",
            "note: see a.c",
            "a.py: no line here",
            "10.0.0.1:8080 connection reset",
            "db.example.com:5432: connection refused",
        ] {
            assert!(!super::is_located(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn distinct_lines_and_lines_below_the_threshold_are_quiet() {
        let mut b = TraceBuilder::new();
        for w in ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"] {
            for i in 0..3 {
                b.write(1, "/dev/pts/0", &format!("processing {w} step {i}\n"), true);
            }
        }
        // Numbers alone are data, not messages; nor are progress counters.
        for i in 0..50 {
            b.write(1, "/dev/pts/0", &format!("{i}\n"), true);
            b.write(1, "/dev/pts/0", &format!("{i}/50 ok\n"), true);
        }
        assert!(b.findings("repeated-output").is_empty());
    }

    #[test]
    fn lines_are_joined_across_writes_and_split_within_one() {
        let mut b = TraceBuilder::new();
        for i in 0..12 {
            b.write(1, "/dev/pts/0", "deprecated: use --fo", true);
            b.write(
                1,
                "/dev/pts/0",
                &format!("o instead\nrequest {i} ok\n"),
                true,
            );
        }
        let mut f = b.findings("repeated-output");
        f.sort_by_key(|f| f.example.clone());
        // On stdout "request N ok" is not a sentence: data, not reported.
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].example.as_deref(),
            Some("deprecated: use --foo instead")
        );
        assert_eq!((f[0].calls, f[0].redundant_calls), (12, 11));
        let mut b = TraceBuilder::new();
        for i in 0..12 {
            b.write(2, "/dev/pts/0", "deprecated: use --fo", true);
            b.write(
                2,
                "/dev/pts/0",
                &format!("o instead\nrequest {i} ok\n"),
                true,
            );
        }
        // Without stacks, one finding for the stream, naming both lines.
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].calls, f[0].redundant_calls), (24, 22));
        assert!(
            f[0].hazards.iter().any(|h| h.contains("2 different lines")
                && h.contains("\"deprecated: use --foo instead\" (12 times)")
                && h.contains("\"request 0 ok\" (12 times)")),
            "{:?}",
            f[0].hazards
        );
    }

    #[test]
    fn protocol_pipes_and_unrecorded_payloads_are_not_output() {
        let mut b = TraceBuilder::new();
        b.call(Sys::Pipe2, |c, _| {
            c.fd = Some(5);
            c.fd2 = Some(6);
        });
        for _ in 0..20 {
            b.write(
                6,
                "pipe:[77]",
                "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n",
                true,
            );
            // A data file: only the fingerprint, and it is not a log.
            b.write(9, "/srv/data/rows.txt", "same line again\n", false);
        }
        assert!(b.findings("repeated-output").is_empty());
    }

    #[test]
    fn a_dev_null_the_program_opened_holds_no_log_lines() {
        // isort --check writes each file's new text to open(os.devnull, "w"): no-reader
        // counts those writes. A stderr sent to /dev/null still carries log lines.
        let mut b = TraceBuilder::new();
        b.open("/dev/null", 0o1, 4, Some(chardev(1, 3)));
        for _ in 0..20 {
            b.write(4, "/dev/null", "import os, sys\n", true);
        }
        assert!(b.findings("repeated-output").is_empty());
        let mut b = TraceBuilder::new();
        for _ in 0..20 {
            b.write(2, "/dev/null", "retrying the upstream\n", true);
        }
        assert_eq!(b.findings("repeated-output").len(), 1);
    }

    #[test]
    fn a_file_appended_to_and_synced_is_data_not_a_log() {
        // redis's append-only file, appended and fdatasync'ed (its lines here a sentence,
        // as a log's would be). The same lines appended to a file nobody syncs are a log's.
        for sync in [true, false] {
            let mut b = TraceBuilder::new();
            b.open(
                "/var/lib/redis/appendonly.aof",
                0o2101,
                5,
                Some(file(7, 0, 1)),
            );
            for _ in 0..20 {
                b.write(
                    5,
                    "/var/lib/redis/appendonly.aof",
                    "client closed the connection early\n",
                    true,
                );
                if sync {
                    b.call(Sys::Fdatasync, |c, b| {
                        c.fd = Some(5);
                        c.path = Some(b.s("/var/lib/redis/appendonly.aof"));
                        c.ev = ev::PATH_FROM_FD;
                    });
                }
            }
            let f = b.findings("repeated-output");
            assert_eq!(f.len(), if sync { 0 } else { 1 }, "sync {sync}: {f:#?}");
        }
    }

    #[test]
    fn records_appended_to_a_file_without_a_logs_name_are_data() {
        // ninja's .ninja_log: a line per build edge, appended (fopen "ab"), never synced,
        // alike once numbers and hashes are masked. Not a sentence, not a log record.
        let mut b = TraceBuilder::new();
        b.open("/w/build/.ninja_log", 0o2101, 5, Some(file(7, 0, 1)));
        for i in 0..20 {
            let line = format!(
                "{}\t{}\t1796011260530349763\tCMakeFiles/mods.dir/src/m{i}.c.o\t{:016x}\n",
                i * 3,
                i * 3 + 25,
                0xe21c677a6f0627e7_u64.wrapping_mul(i + 1)
            );
            b.write(5, "/w/build/.ninja_log", &line, true);
        }
        let f = b.findings("repeated-output");
        assert!(f.is_empty(), "{f:#?}");
        // A log record or a sentence appended there is a log's.
        for line in [
            "2024-05-01 12:00:00 retrying the upload of part 3\n",
            "could not reach the mirror, trying the next one\n",
        ] {
            let mut b = TraceBuilder::new();
            b.open("/w/build/.history", 0o2101, 5, Some(file(7, 0, 1)));
            for _ in 0..20 {
                b.write(5, "/w/build/.history", line, true);
            }
            assert_eq!(b.findings("repeated-output").len(), 1, "{line}");
        }
    }

    #[test]
    fn one_log_call_into_a_log_file_per_test_directory_is_one_row() {
        // A test suite's store appends the same line to data/log.log in a directory made
        // per test (fs.mkdtemp('/tmp/mt-')): one call site, one process; it had been five
        // rows, one per directory.
        let mut b = TraceBuilder::new();
        let st = b.stack(&[(
            dejavu_trace::FrameKind::Js,
            "Store.append",
            "/proj/lib/store.js",
            12,
        )]);
        b.stack = Some(st);
        for (fd, dir) in [
            (5, "h4gVNo"),
            (6, "jFsbj2"),
            (7, "Q9nEy9"),
            (8, "xhh7rC"),
            (9, "y0XbhW"),
        ] {
            let path = format!("/tmp/mt-{dir}/data/log.log");
            b.open(&path, 0o2101, fd as i64, Some(file(fd as u64, 0, 1)));
            for i in 0..12 {
                b.write(fd, &path, &format!("appended entry number {i}\n"), true);
            }
        }
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].processes, f[0].path_count), (1, 5), "{f:#?}");
        assert_eq!(f[0].redundant_calls, 5 * 11);
    }

    #[test]
    fn targets_and_processes_are_counted_apart() {
        let mut b = TraceBuilder::new();
        b.open("/var/log/app.log", 0o2101, 3, Some(file(5, 0, 1)));
        b.open("/var/log/other.log", 0o2101, 4, Some(file(6, 0, 1)));
        for _ in 0..10 {
            b.write(3, "/var/log/app.log", "flushing queue\n", true);
            b.write(4, "/var/log/other.log", "flushing queue\n", true);
        }
        b.fork(200);
        b.pid = 200;
        b.tid = 200;
        for _ in 0..5 {
            b.write(3, "/var/log/app.log", "flushing queue\n", true);
        }
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f.iter().all(|f| f.pid == 100 && f.calls == 10));
    }

    #[test]
    fn a_truncated_payload_still_counts_its_visible_line() {
        let mut b = TraceBuilder::new();
        for _ in 0..10 {
            b.call(Sys::Write, |c, b| {
                c.fd = Some(2);
                c.path = Some(b.s("/dev/pts/0"));
                c.ev = ev::PATH_FROM_FD | ev::PAYLOAD_TRUNCATED;
                c.count = 4000;
                c.ret = 4000;
                c.payload = Some(b.s("a very long stack trace header that was cut"));
            });
        }
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1);
        assert!(f[0].hazards.iter().any(|h| h.contains("lower bounds")));
    }

    #[test]
    fn a_line_cut_by_the_payload_prefix_after_another_line_is_not_a_line() {
        // A logger's batch of lines, of which the recorded prefix keeps the first and a
        // fragment of the second, cut at a place that moves with the first line's length:
        // one repeated line, not one per fragment.
        let mut b = TraceBuilder::new();
        for i in 0..40 {
            let first = format!(
                "{{\"level\":30,\"msg\":\"request completed\",\"ms\":{}}}\n",
                i * 37
            );
            let cut = 30 + i % 2;
            let second = &"{\"level\":30,\"msg\":\"incoming request\",\"url\":\"/x\"}"[..cut];
            b.call(Sys::Write, |c, b| {
                c.fd = Some(3);
                c.path = Some(b.s("/srv/app.log"));
                c.ev = ev::PATH_FROM_FD | ev::PAYLOAD_TRUNCATED;
                c.count = 4000;
                c.ret = 4000;
                c.payload = Some(b.s(&format!("{first}{second}")));
            });
        }
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1, "{f:#?}");
        // The first line's 39 repeats; the fragments (two shapes, 20 each) are no lines.
        assert_eq!(f[0].redundant_calls, 39, "{f:#?}");
        let ex = f[0].example.clone().unwrap_or_default();
        assert!(ex.contains("request completed"), "{ex}");
    }

    #[test]
    fn the_line_table_is_bounded_and_says_what_it_dropped() {
        let mut b = TraceBuilder::new();
        for i in 0..40 {
            b.write(
                1,
                "/dev/pts/0",
                &format!("unique line {}\n", "x".repeat(i + 1)),
                true,
            );
        }
        for _ in 0..12 {
            b.write(2, "/dev/pts/0", "the repeated one\n", true);
        }
        let cfg = Config {
            min_calls: 1,
            options: [("repeated-output.max_lines".to_string(), "8".to_string())]
                .into_iter()
                .collect(),
            ..Config::default()
        };
        let a = b.analyze_with(&cfg);
        let f: Vec<_> = a
            .findings
            .iter()
            .filter(|f| f.detector == "repeated-output")
            .collect();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].calls, 12);
        assert!(
            f[0].hazards.iter().any(|h| h.contains("max_lines")),
            "{:?}",
            f[0].hazards
        );
    }

    #[test]
    fn a_programs_product_on_stdout_is_not_repeated_output() {
        // git log -p: diff headers repeat per file; find: names differing in digits; a
        // filter: 10,000 rows that are one template after masking.
        let mut b = TraceBuilder::new();
        b.call(Sys::Pipe2, |c, _| {
            c.fd = Some(1);
            c.fd2 = Some(9);
        });
        for i in 0..200 {
            b.write(
                1,
                "pipe:[5]",
                &format!("diff --git a/src/f{i}.c b/src/f{i}.c\n"),
                true,
            );
            b.write(
                1,
                "pipe:[5]",
                &format!("index {:08x}..{:08x} 100644\n", i * 7919, i * 104729),
                true,
            );
            b.write(
                1,
                "pipe:[5]",
                &format!("@@ -{i},7 +{i},8 @@ static int main(void)\n"),
                true,
            );
            b.write(1, "pipe:[5]", "+    if (err != NULL) return err;\n", true);
            b.write(
                1,
                "pipe:[5]",
                &format!("./data/part-{i:05}.parquet\n"),
                true,
            );
        }
        for i in 0..10_000 {
            b.write(1, "pipe:[5]", &format!("item {i} of the list\n"), true);
        }
        let f = b.findings("repeated-output");
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn a_sentence_that_makes_up_most_of_stdout_is_reported_with_its_stream() {
        let mut b = TraceBuilder::new();
        b.call(Sys::Pipe2, |c, _| {
            c.fd = Some(1);
            c.fd2 = Some(9);
        });
        for i in 0..40 {
            b.write(
                1,
                "pipe:[5]",
                "bypassing socket.io authentication and authorization checks\n",
                true,
            );
            if i % 2 == 0 {
                b.write(1, "pipe:[5]", &format!("handled message {i}\n"), true);
            }
        }
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].calls, f[0].redundant_calls), (40, 39));
        assert_eq!(f[0].stream.as_deref(), Some("stdout (pipe)"));
        assert!(f[0].key.ends_with("|path:stdout"), "{}", f[0].key);
    }

    #[test]
    fn a_log_record_on_stdout_counts_even_as_a_minority() {
        let mut b = TraceBuilder::new();
        for i in 0..300 {
            b.write(
                1,
                "/dev/pts/0",
                &format!("row {i}: alpha beta gamma {}\n", i * 31),
                true,
            );
            if i % 10 == 0 {
                b.write(
                    1,
                    "/dev/pts/0",
                    &format!("2024-05-01 12:00:{:02} cache miss for key {i}\n", i % 60),
                    true,
                );
            }
        }
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].calls, 30);
        assert!(f[0].example.as_deref().unwrap_or("").contains("cache miss"));
    }

    #[test]
    fn stderr_to_a_regular_file_is_a_log_and_names_the_stream() {
        let mut b = TraceBuilder::new();
        // `2> err.txt`: fd 2 is a file opened without O_APPEND and not named like a log.
        b.open("/tmp/run/err.txt", 0o1101, 2, Some(file(9, 0, 1)));
        for i in 0..15 {
            b.write(
                2,
                "/tmp/run/err.txt",
                &format!("(node:4242) Warning: slow handler {i}\n"),
                true,
            );
        }
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].stream.as_deref(), Some("stderr -> /tmp/run/err.txt"));
        assert_eq!(
            f[0].example.as_deref(),
            Some("(node:4242) Warning: slow handler 0")
        );
        assert!(f[0].key.contains("stderr"), "{}", f[0].key);
    }

    #[test]
    fn fingerprints_find_log_files_whose_bytes_were_not_kept() {
        use dejavu_trace::FrameKind::Python;
        let mut b = TraceBuilder::new();
        // logging.FileHandler("app.log", mode="w"): one write per record, no bytes kept.
        b.open("/srv/app/app.log", 0o1101, 3, Some(file(9, 0, 1)));
        b.open("/srv/app/rows.jsonl", 0o1101, 4, Some(file(10, 0, 1)));
        let retry = b.stack(&[(Python, "fetch", "/srv/app/client.py", 30)]);
        let served = b.stack(&[(Python, "serve", "/srv/app/server.py", 12)]);
        let log = |b: &mut TraceBuilder, fd: i32, path: &str, line: String, st| {
            b.call(Sys::Write, |c, b| {
                c.fd = Some(fd);
                c.path = Some(b.s(path));
                c.ev = ev::PATH_FROM_FD;
                c.count = line.len() as u64;
                c.ret = line.len() as i64;
                c.fingerprint = Some(dejavu_trace::mask::fingerprint(line.as_bytes()));
                c.stack = Some(st);
            });
        };
        for i in 0..20 {
            log(
                &mut b,
                3,
                "/srv/app/app.log",
                format!("WARNING:root:retrying request {i}\n"),
                retry,
            );
            let line = format!("INFO:root:request {i} served by worker {}\n", i % 3);
            log(&mut b, 3, "/srv/app/app.log", line, served);
            let row = format!("{{\"id\": {i}, \"name\": \"row\"}}\n");
            log(&mut b, 4, "/srv/app/rows.jsonl", row, served);
        }
        let mut f = b.findings("repeated-output");
        f.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(f.len(), 2, "one per log call, the data file quiet: {f:?}");
        assert!(f.iter().all(|f| f.calls == 20 && f.example.is_none()));
        assert!(f
            .iter()
            .all(|f| f.paths == vec!["/srv/app/app.log".to_string()]));
        assert_eq!(f[0].callsites[0].function, "fetch");
        assert_eq!(f[1].callsites[0].function, "serve");
        assert!(f[0].hazards.iter().any(|h| h.contains("fingerprint")));
    }

    #[test]
    fn a_data_file_with_bytes_counts_only_log_records() {
        let mut b = TraceBuilder::new();
        b.open("/srv/app/out.txt", 0o1101, 3, Some(file(9, 0, 1)));
        for i in 0..20 {
            b.write(
                3,
                "/srv/app/out.txt",
                &format!("record {i} of kind alpha beta\n"),
                true,
            );
            b.write(
                3,
                "/srv/app/out.txt",
                &format!("[warn] disk {i} nearly full\n"),
                true,
            );
        }
        let f = b.findings("repeated-output");
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0]
            .example
            .as_deref()
            .unwrap_or("")
            .starts_with("[warn] disk"));
    }

    #[test]
    fn every_redundant_occurrence_is_in_the_runs_totals() {
        let mut b = TraceBuilder::new();
        for _ in 0..25 {
            b.write(2, "/dev/pts/0", "flushing queue now\n", true);
        }
        let a = b.analyze_with(&Config::default());
        assert_eq!(a.findings.len(), 1);
        assert_eq!(a.findings[0].redundant_calls, 24);
        assert_eq!(
            a.redundant_calls, 24,
            "occurrences 2..min_repeats are marked too"
        );
    }

    #[test]
    fn log_names_and_log_records() {
        use super::{is_access_log, is_log_name, looks_like_log};
        for p in [
            "/var/log/syslog",
            "/srv/x/logs/today",
            "/tmp/app.log",
            "/tmp/app.log.1",
            "nohup.out",
            "/tmp/build.err",
        ] {
            assert!(is_log_name(p.as_bytes()), "{p}");
        }
        for p in [
            "/tmp/catalog",
            "/tmp/x.logo",
            "/srv/data/out.csv",
            "/tmp/.log",
        ] {
            assert!(!is_log_name(p.as_bytes()), "{p}");
        }
        for l in [
            "2024-05-01T12:00:00Z started",
            "[2024/05/01 12:00:00] started",
            "12:34:56.789 [main] INFO c.x.App - up",
            "May  1 12:34:56 host app[12]: up",
            "WARNING:root:retrying",
            "npm warn: deprecated",
            "[info] listening",
            "(node:4242) DeprecationWarning: Buffer() is deprecated",
            "level=INFO msg=up",
        ] {
            assert!(looks_like_log(l.as_bytes()), "{l}");
        }
        for l in [
            "diff --git a/x b/x",
            "+    if (err) return err;",
            "./data/part-00001.parquet",
            "Date:   Mon Nov 23 12:00:00 2026",
            "information retrieval",
            "error handling in depth",
        ] {
            assert!(!looks_like_log(l.as_bytes()), "{l}");
            assert!(!is_access_log(l.as_bytes()), "{l}");
        }
        for l in [
            "127.0.0.1 - - [24/Nov/2026 00:20:44] \"GET /api/items/2 HTTP/1.1\" 200 -",
            "GET / 200 1.234 ms - 12",
            "2026-11-24T00:20:44Z INFO POST /login 302",
        ] {
            assert!(is_access_log(l.as_bytes()), "{l}");
        }
        for l in [
            "WARNING: GET requests are cached",
            "[WARN] bypassing socket.io authentication",
            "GETTING /x",
        ] {
            assert!(!is_access_log(l.as_bytes()), "{l}");
        }
    }
}
