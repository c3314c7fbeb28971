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
    explain: "Every write whose bytes were recorded (terminals, pipes, sockets, /dev/null and \
append-mode files; see payload_bytes in the trace meta) is split into lines; a line cut across \
several writes to one descriptor is joined first. Each line is masked: decimal numbers, hex runs of \
8 or more characters (and 0x... literals), UUIDs, month and weekday names and runs of blanks are \
replaced, so ISO-8601/RFC 3339 stamps, syslog and common-log stamps, request ids and counters no \
longer tell two occurrences apart. Lines are counted per process, per output target (the file, pipe \
or terminal written to) and per masked text. A masked line written at least min_repeats times is a \
finding: every occurrence after the first is redundant. A line that differs only in its timestamp IS \
repeated output. Not counted: writes to pipes and sockets other than stdout/stderr (fd 1 and 2), \
which carry protocol data rather than messages; blank lines and lines with fewer than 3 letters \
after masking (numbers, progress dots, CSV rows of numbers are data, not messages); lines written \
before --skip-startup. Calls and redundant calls count line occurrences, not write calls; the time \
counted is each write's duration shared among its lines by bytes. Only the recorded prefix of each \
write is seen, so for writes longer than payload_bytes the counts are lower bounds.",
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
            carry: FxHashMap::default(),
            scratch: Vec::with_capacity(256),
            cache: Vec::new(),
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
    Payload { id: StrId, start: u32, len: u32 },
    Owned(Box<[u8]>),
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
}

#[derive(Default)]
struct ProcLines {
    lines: FxHashMap<(PathKey, u64), Line>,
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
    /// Partial lines per (pid, fd).
    carry: FxHashMap<(u32, i32), Carry>,
    scratch: Vec<u8>,
    /// Payload id -> (masked hash, is a message), direct-mapped.
    cache: Vec<(u32, u64, bool)>,
}

/// Whether writes to this descriptor are output a person reads (messages), not protocol
/// traffic: anything on fd 1 and 2; else terminals, /dev/null and (append-mode) files.
fn is_output(fd: i32, kind: FdKind) -> bool {
    fd == 1 || fd == 2 || !matches!(kind, FdKind::Pipe | FdKind::Socket)
}

/// Slots of the cache of single-line payloads (payloads are interned, so a line written
/// again without a varying part is the same string id).
const CACHE: usize = 4096;

impl RepeatedOutput {
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

    /// Counts one occurrence of a line. `src` locates its first bytes for the example;
    /// `call` is the write carrying it (`View::seq`, duration), marked redundant once the
    /// line has been written often enough to be a finding.
    #[allow(clippy::too_many_arguments)]
    fn count(
        &mut self,
        pid: u32,
        key: (PathKey, u64),
        src: impl FnOnce() -> Src,
        ns: u64,
        ts: u64,
        call: (u64, u64, Option<dejavu_trace::StackId>),
        cx: &Cx<'_>,
    ) {
        let max = self.max_lines;
        let p = self.procs.entry(pid).or_default();
        if let Some(l) = p.lines.get_mut(&key) {
            l.count += 1;
            l.sites.add(call.2, 1, ns);
            if l.count >= self.min_repeats {
                cx.mark(call.0, call.1, call.2);
            }
            l.ns += ns;
            if l.count == 2 {
                l.second_ts = ts;
            }
            l.last_ts = l.last_ts.max(ts);
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
        p.lines.insert(
            key,
            Line {
                count: 1,
                ns,
                first_ns: ns,
                second_ts: 0,
                last_ts: ts,
                src: src(),
                sites: crate::group::Sites::default(),
            },
        );
    }
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
            Sys::Write | Sys::Pwrite64 | Sys::Writev | Sys::Pwritev | Sys::Pwritev2 | Sys::Close
        )
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let Some(fd) = s.fd else { return };
        if s.sys == Sys::Close {
            if !self.carry.is_empty() {
                self.carry.remove(&(s.pid, fd));
            }
            return;
        }
        let (Some(payload), Some(target)) = (s.payload, v.path) else {
            return;
        };
        if s.ret <= 0 || s.ev & ev::UNFINISHED != 0 || !cx.config.counts(s.ts) {
            return;
        }
        let kind = match v.fd {
            Some(f) => f.kind,
            None => FdKind::classify(cx.replay.paths.bytes(target), None),
        };
        if !is_output(fd, kind) {
            return;
        }
        let open_id = v.fd.map_or(0, |f| f.open_id);
        let all = cx.strings.get(payload);
        let data = &all[..all.len().min(s.ret as usize)];
        let truncated = s.ev & ev::PAYLOAD_TRUNCATED != 0 || data.len() < s.ret as usize;
        if truncated {
            self.procs.entry(v.image).or_default().truncated_writes += 1;
        }
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
            if let Some(h) = self.hash_payload(payload, data) {
                let keep = data.len().min(KEEP) as u32;
                let src = || src_of(payload, data, 0, keep);
                self.count(
                    v.image,
                    (target, h),
                    src,
                    s.dur,
                    s.ts,
                    (v.seq, s.dur, s.stack),
                    cx,
                );
            }
            return;
        }
        let mut pos = 0usize;
        while pos < data.len() {
            let (end, next) = match data[pos..].iter().position(|&b| b == b'\n') {
                Some(i) => (pos + i, pos + i + 1),
                None => (data.len(), data.len()),
            };
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
                if let Some(h) = self.hash(&text) {
                    let keep = text.len().min(KEEP);
                    let src = || Src::Owned(text[..keep].into());
                    self.count(
                        v.image,
                        (target, h),
                        src,
                        c.ns + ns,
                        s.ts,
                        (v.seq, s.dur, s.stack),
                        cx,
                    );
                }
            } else if let Some(h) = self.hash(&data[pos..end]) {
                let keep = (end - pos).min(KEEP) as u32;
                let src = || src_of(payload, data, pos as u32, keep);
                self.count(
                    v.image,
                    (target, h),
                    src,
                    ns,
                    s.ts,
                    (v.seq, s.dur, s.stack),
                    cx,
                );
            }
            pos = next;
        }
    }

    fn on_record(&mut self, rec: &dejavu_trace::Record, _cx: &Cx<'_>) {
        // A process that is gone leaves no partial lines behind.
        if let dejavu_trace::Record::Exit(e) = rec {
            if e.pid == e.tid && !self.carry.is_empty() {
                self.carry.retain(|(pid, _), _| *pid != e.pid);
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
            for (&(target, _), l) in &p.lines {
                if l.count < self.min_repeats {
                    continue;
                }
                let redundant = l.count - 1;
                let wasted = l.ns.saturating_sub(l.first_ns);
                let text: &[u8] = match &l.src {
                    Src::Payload { id, start, len } => {
                        let b = cx.strings.get(*id);
                        let (a, z) = (*start as usize, (*start + *len) as usize);
                        b.get(a..z).unwrap_or(&[])
                    }
                    Src::Owned(b) => b,
                };
                let share = cx.share(wasted);
                let mut hazards = vec![format!(
                    "written {} times to {}; if each occurrence carries detail someone needs, \
                     aggregate it (a counter per interval) rather than drop it",
                    l.count,
                    cx.path(target)
                )];
                hazards.extend(notes.iter().cloned());
                let mut f = Finding {
                    detector: INFO.id,
                    severity: Severity::grade(share, redundant),
                    owner: crate::Owner::Own,
                    program: String::new(),
                    key: String::new(),
                    processes: 1,
                    pid: 0,
                    command: String::new(),
                    paths: vec![cx.path(target)],
                    path_count: 1,
                    top_paths: vec![crate::PathCount {
                        path: cx.path(target),
                        redundant_calls: redundant,
                    }],
                    calls: l.count,
                    redundant_calls: redundant,
                    wasted_ns: wasted,
                    share,
                    first_ts: l.second_ts,
                    last_ts: l.last_ts,
                    fix: INFO.fix.to_string(),
                    hazards,
                    cache: None,
                    example: Some(shorten(text, 120)),
                    callsites: cx.callsites(&l.sites, image, redundant),
                    sequence: None,
                };
                let mut template = Vec::new();
                mask(text, &mut template);
                template.truncate(80);
                for b in &mut template {
                    if *b < b' ' {
                        *b = b'#'; // the mask's markers, readable in a key
                    }
                }
                let subject = format!(
                    "{} {}",
                    crate::pattern::mask(cx.replay.paths.bytes(target)),
                    String::from_utf8_lossy(&template)
                );
                cx.label(&mut f, image, &subject);
                out.push(f);
            }
        }
        out
    }
}

/// Where a line's first bytes are: in the trace's payload string when it is a trace-wide
/// one, else copied (a block-local id means other bytes in a later block).
fn src_of(payload: StrId, data: &[u8], start: u32, len: u32) -> Src {
    if payload.is_local() {
        let (a, z) = (start as usize, (start + len) as usize);
        Src::Owned(data.get(a..z).unwrap_or(&[]).into())
    } else {
        Src::Payload {
            id: payload,
            start,
            len,
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
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(
            f[0].example.as_deref(),
            Some("deprecated: use --foo instead")
        );
        assert_eq!((f[0].calls, f[0].redundant_calls), (12, 11));
        assert_eq!(f[1].example.as_deref(), Some("request 0 ok"));
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
            b.write(9, "/var/log/app.log", "same line again\n", false);
        }
        assert!(b.findings("repeated-output").is_empty());
    }

    #[test]
    fn targets_and_processes_are_counted_apart() {
        let mut b = TraceBuilder::new();
        b.open("/var/log/app.log", 0o2101, 3, Some(file(5, 0, 1)));
        b.open("/dev/null", 0o1, 4, Some(chardev(1, 3)));
        for _ in 0..10 {
            b.write(3, "/var/log/app.log", "flushing queue\n", true);
            b.write(4, "/dev/null", "flushing queue\n", true);
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
            b.write(1, "/dev/pts/0", "the repeated one\n", true);
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
}
