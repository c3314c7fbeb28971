//! `dejavu export --format jsonl`: the trace as JSON Lines, one object per record, as
//! docs/trace-format.md ("JSON Lines export") specifies.
//!
//! Exports run over traces of hundreds of millions of events, so lines are formatted by
//! hand into one reused buffer instead of through a `serde_json::Value` per record, and
//! the JSON text of each path and stat answer is built once and then copied.

use crate::names::{errno_name, for_each_ev_flag, signal_label};
use dejavu_trace::{
    ev, stat_known, Exec, Exit, ExitStatus, FileStat, Lost, Mapping, MappingKind, Mark, Record,
    Signal, Spawn, StatId, StrId, Syscall, TraceError, TraceReader,
};
use std::io::{self, Read, Write};

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Records exported (one line each).
    pub records: u64,
    /// Lines written, meta and end lines included.
    pub lines: u64,
    /// Bytes written.
    pub bytes: u64,
    /// The trace was cut off: the last line is `{"type":"truncated",...}`.
    pub truncated: bool,
    /// The reader of the output went away (a broken pipe, as in `dejavu export t.dvt |
    /// head`): the export stopped early, which is not an error.
    pub output_closed: bool,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The trace is damaged or unreadable. The lines before the damage were written,
    /// followed by an `{"type":"error",...}` line.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// Writing the output failed (other than a broken pipe, which ends an export quietly).
    #[error("cannot write the export: {0}")]
    Write(#[source] io::Error),
}

/// Flush the line buffer to the output once it holds this much.
const FLUSH_BYTES: usize = 256 << 10;

/// Writes the rest of `reader` to `out` as JSON Lines: the meta line, one line per record,
/// then the end line (or a truncated line for a cut-off trace).
///
/// Output is buffered here; `out` sees large writes and is flushed at the end. A broken
/// pipe ends the export early with `Ok` and [`ExportStats::output_closed`] set.
pub fn export_jsonl<R: Read>(
    reader: &mut TraceReader<R>,
    out: &mut impl Write,
) -> Result<ExportStats, ExportError> {
    let mut x = Exporter {
        out,
        buf: Vec::with_capacity(FLUSH_BYTES + (64 << 10)),
        stats: ExportStats::default(),
        str_json: Vec::new(),
        stat_json: Vec::new(),
        cache: Vec::new(),
    };
    match x.run(reader) {
        Ok(()) => Ok(x.stats),
        Err(Stop::Closed) => {
            x.stats.output_closed = true;
            Ok(x.stats)
        }
        Err(Stop::Write(e)) => Err(ExportError::Write(e)),
        Err(Stop::Trace(e)) => {
            // Say so in the stream too: a consumer reading lines should not mistake the
            // lines so far for the whole trace.
            x.buf.extend_from_slice(br#"{"type":"error","message":"#);
            json_str(&mut x.buf, e.to_string().as_bytes());
            x.buf.extend_from_slice(b"}\n");
            x.stats.lines += 1;
            match x.flush() {
                Err(Stop::Closed) => {
                    x.stats.output_closed = true;
                    Ok(x.stats)
                }
                _ => Err(ExportError::Trace(e)),
            }
        }
    }
}

enum Stop {
    Closed,
    Write(io::Error),
    Trace(TraceError),
}

impl From<TraceError> for Stop {
    fn from(e: TraceError) -> Self {
        Stop::Trace(e)
    }
}

/// A span of `Exporter::cache`; `start == usize::MAX` means not built yet.
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    len: usize,
}

const NO_SPAN: Span = Span {
    start: usize::MAX,
    len: 0,
};

struct Exporter<'o, W: Write> {
    out: &'o mut W,
    buf: Vec<u8>,
    stats: ExportStats,
    /// JSON text of strings used as paths and executables, by string id.
    str_json: Vec<Span>,
    /// JSON text of stat answers, by stat id.
    stat_json: Vec<Span>,
    cache: Vec<u8>,
}

impl<W: Write> Exporter<'_, W> {
    fn run<R: Read>(&mut self, reader: &mut TraceReader<R>) -> Result<(), Stop> {
        let meta = serde_json::to_value(reader.meta()).map_err(|e| Stop::Write(e.into()))?;
        self.object_line("meta", &meta);
        while let Some(rec) = reader.next_record()? {
            match &rec {
                Record::Syscall(s) => self.syscall(s, reader),
                Record::Spawn(s) => self.spawn(s),
                Record::Exec(e) => self.exec(e, reader),
                Record::Exit(e) => self.exit(e),
                Record::Signal(s) => self.signal(s),
                Record::Lost(l) => self.lost(l),
                Record::Mark(m) => self.mark(m),
                Record::Mapping(m) => self.mapping(m, reader),
            }
            self.stats.records += 1;
            self.stats.lines += 1;
            if self.buf.len() >= FLUSH_BYTES {
                self.flush()?;
            }
        }
        if let Some(end) = reader.end() {
            let end = serde_json::to_value(end).map_err(|e| Stop::Write(e.into()))?;
            self.object_line("end", &end);
        } else if let Some(t) = reader.truncation() {
            self.stats.truncated = true;
            self.buf
                .extend_from_slice(br#"{"type":"truncated","valid_bytes":"#);
            self.num(t.valid_bytes);
            self.buf.extend_from_slice(br#","lost_bytes":"#);
            self.num(t.lost_bytes);
            self.buf.extend_from_slice(b"}\n");
            self.stats.lines += 1;
        }
        self.flush()?;
        self.out.flush().map_err(io_stop)
    }

    fn flush(&mut self) -> Result<(), Stop> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.out.write_all(&self.buf).map_err(io_stop)?;
        self.stats.bytes += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// `{"type":"<kind>", ...the fields of obj}` for the meta and end lines, which carry
    /// every field of the trace's JSON blocks, future ones included.
    fn object_line(&mut self, kind: &str, obj: &serde_json::Value) {
        self.buf.extend_from_slice(br#"{"type":"#);
        json_str(&mut self.buf, kind.as_bytes());
        if let Some(map) = obj.as_object() {
            for (k, v) in map {
                self.buf.push(b',');
                json_str(&mut self.buf, k.as_bytes());
                self.buf.push(b':');
                // Writing JSON into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut self.buf, v);
            }
        }
        self.buf.extend_from_slice(b"}\n");
        self.stats.lines += 1;
    }

    #[inline]
    fn num(&mut self, v: impl itoa::Integer) {
        let mut b = itoa::Buffer::new();
        self.buf.extend_from_slice(b.format(v).as_bytes());
    }

    /// `,"key":` then the number.
    #[inline]
    fn field(&mut self, key: &[u8], v: impl itoa::Integer) {
        self.buf.extend_from_slice(key);
        self.num(v);
    }

    fn start(&mut self, kind: &[u8], ts: u64) {
        self.buf.extend_from_slice(br#"{"type":""#);
        self.buf.extend_from_slice(kind);
        self.buf.extend_from_slice(br#"","ts":"#);
        self.num(ts);
    }

    /// A string as cached JSON (paths repeat: a stat loop names the same few paths).
    fn cached_str<R: Read>(&mut self, id: StrId, reader: &TraceReader<R>) {
        if id.is_local() {
            // Block-local ids are reused by later blocks: never cache them.
            json_str(&mut self.buf, reader.str(id));
            return;
        }
        let i = id.0 as usize;
        if i >= self.str_json.len() {
            self.str_json
                .resize(reader.strings().len().max(i + 1), NO_SPAN);
        }
        let mut span = self.str_json[i];
        if span.start == usize::MAX {
            let start = self.cache.len();
            json_str(&mut self.cache, reader.str(id));
            span = Span {
                start,
                len: self.cache.len() - start,
            };
            self.str_json[i] = span;
        }
        self.buf
            .extend_from_slice(&self.cache[span.start..span.start + span.len]);
    }

    fn cached_stat<R: Read>(&mut self, id: StatId, reader: &TraceReader<R>) {
        let i = id.0 as usize;
        if i >= self.stat_json.len() {
            self.stat_json.resize(i + 1, NO_SPAN);
        }
        let mut span = self.stat_json[i];
        if span.start == usize::MAX {
            let start = self.cache.len();
            stat_json(&mut self.cache, &reader.stat(id));
            span = Span {
                start,
                len: self.cache.len() - start,
            };
            self.stat_json[i] = span;
        }
        self.buf
            .extend_from_slice(&self.cache[span.start..span.start + span.len]);
    }

    fn syscall<R: Read>(&mut self, s: &Syscall, reader: &TraceReader<R>) {
        self.start(b"syscall", s.ts);
        let unfinished = s.ev & ev::UNFINISHED != 0;
        if !unfinished {
            self.field(br#","dur":"#, s.dur);
        }
        self.field(br#","pid":"#, s.pid);
        self.field(br#","tid":"#, s.tid);
        self.buf.extend_from_slice(br#","sys":""#);
        self.buf.extend_from_slice(s.sys.name().as_bytes());
        self.buf.push(b'"');
        if !unfinished {
            self.field(br#","ret":"#, s.ret);
        }
        if let Some(e) = s.errno() {
            self.buf.extend_from_slice(br#","errno":"#);
            match errno_name(e) {
                Some(name) => {
                    self.buf.push(b'"');
                    self.buf.extend_from_slice(name.as_bytes());
                    self.buf.push(b'"');
                }
                None => {
                    self.buf.extend_from_slice(b"\"E");
                    self.num(e);
                    self.buf.push(b'"');
                }
            }
        }
        if s.ev != 0 {
            self.buf.extend_from_slice(br#","ev":["#);
            let mut first = true;
            let buf = &mut self.buf;
            for_each_ev_flag(s.ev, |name| {
                if !first {
                    buf.push(b',');
                }
                first = false;
                json_str(buf, name.as_bytes());
            });
            self.buf.push(b']');
        }
        if let Some(fd) = s.fd {
            self.field(br#","fd":"#, fd);
        }
        if let Some(fd) = s.fd2 {
            self.field(br#","fd2":"#, fd);
        }
        if let Some(p) = s.path {
            self.buf.extend_from_slice(br#","path":"#);
            self.cached_str(p, reader);
        }
        if let Some(p) = s.path2 {
            self.buf.extend_from_slice(br#","path2":"#);
            self.cached_str(p, reader);
        }
        if s.flags != 0 {
            self.field(br#","flags":"#, s.flags);
        }
        if s.mode != 0 {
            self.field(br#","mode":"#, s.mode);
        }
        if let Some(o) = s.offset {
            self.field(br#","offset":"#, o);
        }
        if s.count != 0 {
            self.field(br#","count":"#, s.count);
        }
        if s.aux != 0 {
            self.field(br#","aux":"#, s.aux);
        }
        if let Some(st) = s.stat {
            self.buf.extend_from_slice(br#","stat":"#);
            self.cached_stat(st, reader);
        }
        if let Some(p) = s.payload {
            // Payloads rarely repeat and can be long: not cached.
            self.buf.extend_from_slice(br#","payload":"#);
            json_str(&mut self.buf, reader.str(p));
        }
        if let Some(fp) = s.fingerprint {
            // A string: 64 bits do not fit a JSON double.
            use std::io::Write;
            let _ = write!(self.buf, r#","fingerprint":"{fp:016x}""#);
        }
        if let Some(st) = s.stack {
            self.buf.extend_from_slice(br#","stack":["#);
            for (i, f) in reader.stack(st).iter().enumerate() {
                if i > 0 {
                    self.buf.push(b',');
                }
                self.buf.extend_from_slice(br#"{"kind":""#);
                self.buf.extend_from_slice(f.kind.name().as_bytes());
                self.buf.push(b'"');
                for (key, v) in [
                    (&br#","function":"#[..], f.function),
                    (br#","file":"#, f.file),
                    (br#","module":"#, f.module),
                ] {
                    if let Some(v) = v {
                        self.buf.extend_from_slice(key);
                        self.cached_str(v, reader);
                    }
                }
                if f.line != 0 {
                    self.field(br#","line":"#, f.line);
                }
                if f.column != 0 {
                    self.field(br#","column":"#, f.column);
                }
                if f.addr != 0 {
                    self.field(br#","addr":"#, f.addr);
                }
                self.buf.push(b'}');
            }
            self.buf.push(b']');
        }
        self.buf.extend_from_slice(b"}\n");
    }

    fn spawn(&mut self, s: &Spawn) {
        self.start(b"spawn", s.ts);
        self.field(br#","parent_pid":"#, s.parent_pid);
        self.field(br#","parent_tid":"#, s.parent_tid);
        self.field(br#","pid":"#, s.pid);
        self.field(br#","tid":"#, s.tid);
        self.field(br#","clone_flags":"#, s.clone_flags);
        self.buf.extend_from_slice(if s.pid == s.parent_pid {
            br#","thread":true}"#
        } else {
            br#","thread":false}"#
        });
        self.buf.push(b'\n');
    }

    fn exec<R: Read>(&mut self, e: &Exec, reader: &TraceReader<R>) {
        self.start(b"exec", e.ts);
        self.field(br#","pid":"#, e.pid);
        self.field(br#","tid":"#, e.tid);
        self.buf.extend_from_slice(br#","exe":"#);
        self.cached_str(e.exe, reader);
        self.buf.extend_from_slice(br#","argv":["#);
        let argv = reader.str(e.argv);
        if !argv.is_empty() {
            for (i, a) in argv.split(|&b| b == 0).enumerate() {
                if i > 0 {
                    self.buf.push(b',');
                }
                json_str(&mut self.buf, a);
            }
        }
        self.buf.extend_from_slice(b"]}\n");
    }

    fn exit(&mut self, e: &Exit) {
        self.start(b"exit", e.ts);
        self.field(br#","pid":"#, e.pid);
        self.field(br#","tid":"#, e.tid);
        match e.status {
            ExitStatus::Code(c) => self.field(br#","code":"#, c),
            ExitStatus::Signal { signal, core } => {
                self.signal_fields(signal);
                self.buf.extend_from_slice(if core {
                    br#","core":true"#
                } else {
                    br#","core":false"#
                });
            }
        }
        self.buf.extend_from_slice(b"}\n");
    }

    fn mark(&mut self, m: &Mark) {
        self.start(b"mark", m.ts);
        self.field(br#","pid":"#, m.pid);
        self.field(br#","tid":"#, m.tid);
        self.buf.extend_from_slice(br#","kind":""#);
        self.buf.extend_from_slice(m.kind.name().as_bytes());
        self.buf.extend_from_slice(b"\"}\n");
    }

    fn mapping<R: Read>(&mut self, m: &Mapping, reader: &TraceReader<R>) {
        self.start(b"mapping", m.ts);
        self.field(br#","pid":"#, m.pid);
        self.buf.extend_from_slice(br#","kind":""#);
        self.buf.extend_from_slice(m.kind.name().as_bytes());
        self.buf.push(b'"');
        self.field(br#","start":"#, m.start);
        self.field(br#","len":"#, m.len);
        if m.kind == MappingKind::Map {
            self.field(br#","offset":"#, m.offset);
        }
        if let Some(p) = m.path {
            self.buf.extend_from_slice(br#","path":"#);
            self.cached_str(p, reader);
        }
        if let Some((dev, ino)) = m.file {
            self.field(br#","dev":"#, dev);
            self.field(br#","ino":"#, ino);
        }
        if let Some(b) = m.build_id {
            // Lower-case hex, as `readelf -n` and `file` print it.
            self.buf.extend_from_slice(br#","build_id":""#);
            for x in reader.str(b) {
                self.buf.extend_from_slice(format!("{x:02x}").as_bytes());
            }
            self.buf.push(b'"');
        }
        self.buf.extend_from_slice(b"}\n");
    }

    fn signal(&mut self, s: &Signal) {
        self.start(b"signal", s.ts);
        self.field(br#","pid":"#, s.pid);
        self.field(br#","tid":"#, s.tid);
        self.signal_fields(s.signal);
        self.buf.extend_from_slice(b"}\n");
    }

    fn signal_fields(&mut self, signal: i32) {
        self.field(br#","signal":"#, signal);
        self.buf.extend_from_slice(br#","name":"#);
        json_str(&mut self.buf, signal_label(signal).as_bytes());
    }

    fn lost(&mut self, l: &Lost) {
        self.start(b"lost", l.ts);
        self.field(br#","pid":"#, l.pid);
        self.field(br#","count":"#, l.count);
        self.buf.extend_from_slice(br#","reason":""#);
        self.buf.extend_from_slice(l.reason.name().as_bytes());
        self.buf.extend_from_slice(b"\"}\n");
    }
}

fn io_stop(e: io::Error) -> Stop {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Stop::Closed
    } else {
        Stop::Write(e)
    }
}

/// Appends a stat answer as a JSON object holding only its known fields.
fn stat_json(out: &mut Vec<u8>, st: &FileStat) {
    let mut b = itoa::Buffer::new();
    let mut first = true;
    let mut put = |out: &mut Vec<u8>, key: &str, v: &str| {
        out.push(if first { b'{' } else { b',' });
        first = false;
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(v.as_bytes());
    };
    let k = st.known;
    if k & stat_known::IDENTITY != 0 {
        put(out, "dev", b.format(st.dev));
        put(out, "ino", b.format(st.ino));
    }
    if k & stat_known::MODE != 0 {
        put(out, "mode", b.format(st.mode));
    }
    if k & stat_known::OWNER != 0 {
        put(out, "nlink", b.format(st.nlink));
        put(out, "uid", b.format(st.uid));
        put(out, "gid", b.format(st.gid));
    }
    if k & stat_known::RDEV != 0 {
        put(out, "rdev", b.format(st.rdev));
    }
    if k & stat_known::SIZE != 0 {
        put(out, "size", b.format(st.size));
    }
    if k & stat_known::MTIME != 0 {
        put(out, "mtime_ns", b.format(st.mtime_ns));
    }
    if k & stat_known::CTIME != 0 {
        put(out, "ctime_ns", b.format(st.ctime_ns));
    }
    if first {
        out.push(b'{');
    }
    out.push(b'}');
}

/// Appends `bytes` as a JSON string when they are UTF-8, else as `{"hex":"..."}`.
fn json_str(out: &mut Vec<u8>, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => json_escape(out, s),
        Err(_) => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(br#"{"hex":""#);
            for &b in bytes {
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
            }
            out.extend_from_slice(b"\"}");
        }
    }
}

/// Appends `s` as a quoted JSON string.
fn json_escape(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let short: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(c >> 4) as usize]);
            out.push(HEX[(c & 15) as usize]);
        } else {
            out.extend_from_slice(short);
        }
        start = i + 1;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests;
