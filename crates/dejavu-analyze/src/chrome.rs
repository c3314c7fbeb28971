//! `dejavu export --format chrome`: the trace as Chrome trace event JSON, which Perfetto
//! (ui.perfetto.dev) and chrome://tracing open as a timeline: one complete event ("X") per
//! syscall on its process and thread track, process names from exec, and instant events
//! for signals, exits, lost events and the runtimes' marks. docs/trace-format.md, "Chrome
//! trace export".

use crate::export::{ExportError, ExportStats};
use crate::names::{errno_name, signal_label};
use dejavu_trace::{Record, TraceReader};
use serde_json::{json, Value};
use std::io::{self, Read, Write};

fn us(ns: u64) -> f64 {
    // Microseconds, the format's unit, to the nanosecond.
    ns as f64 / 1000.0
}

struct Out<'o, W: Write> {
    out: io::BufWriter<&'o mut W>,
    first: bool,
    stats: ExportStats,
}

impl<W: Write> Out<'_, W> {
    fn event(&mut self, v: &Value) -> io::Result<()> {
        let sep: &[u8] = if self.first { b"\n" } else { b",\n" };
        self.first = false;
        self.out.write_all(sep)?;
        let text = serde_json::to_vec(v).map_err(io::Error::other)?;
        self.stats.bytes += (sep.len() + text.len()) as u64;
        self.stats.lines += 1;
        self.out.write_all(&text)
    }
}

/// Writes the rest of `reader` to `out` as one Chrome trace JSON object. A broken pipe ends
/// the export early with `Ok` and `output_closed` set.
pub fn export_chrome<R: Read>(
    reader: &mut TraceReader<R>,
    out: &mut impl Write,
) -> Result<ExportStats, ExportError> {
    let mut o = Out {
        out: io::BufWriter::with_capacity(256 << 10, out),
        first: true,
        stats: ExportStats::default(),
    };
    match run(reader, &mut o) {
        Ok(()) => {}
        Err(ExportError::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
            o.stats.output_closed = true;
            return Ok(o.stats);
        }
        Err(e) => return Err(e),
    }
    Ok(o.stats)
}

fn run<R: Read, W: Write>(
    reader: &mut TraceReader<R>,
    o: &mut Out<'_, W>,
) -> Result<(), ExportError> {
    let meta = reader.meta().clone();
    let head = json!({
        "producer": meta.producer,
        "backend": meta.backend,
        "command": meta.command,
        "start_unix_ns": meta.start_unix_ns,
    });
    let w = |e: io::Error| ExportError::Write(e);
    o.out
        .write_all(
            format!("{{\"displayTimeUnit\":\"ns\",\"otherData\":{head},\"traceEvents\":[")
                .as_bytes(),
        )
        .map_err(w)?;
    let root = meta.command.join(" ");
    let mut names: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
    loop {
        let rec = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                // What was written stays a valid JSON document.
                o.out.write_all(b"\n]}\n").map_err(w)?;
                o.out.flush().map_err(w)?;
                return Err(ExportError::Trace(e));
            }
        };
        o.stats.records += 1;
        match rec {
            Record::Spawn(s) => {
                if s.pid == s.tid {
                    // A new process: its parent's program until it execs its own.
                    let name = names
                        .get(&s.parent_pid)
                        .cloned()
                        .unwrap_or_else(|| root.clone());
                    names.insert(s.pid, name.clone());
                    o.event(
                        &json!({"name": "process_name", "ph": "M", "pid": s.pid, "tid": s.tid,
                        "args": {"name": format!("{name} ({})", s.pid)}}),
                    )
                    .map_err(w)?;
                }
            }
            Record::Exec(e) => {
                let argv = String::from_utf8_lossy(reader.str(e.argv)).replace('\0', " ");
                names.insert(e.pid, argv.clone());
                o.event(
                    &json!({"name": "process_name", "ph": "M", "pid": e.pid, "tid": e.tid,
                    "args": {"name": format!("{argv} ({})", e.pid)}}),
                )
                .map_err(w)?;
                o.event(
                    &json!({"name": "exec", "ph": "i", "s": "t", "ts": us(e.ts), "pid": e.pid,
                    "tid": e.tid, "args": {"exe": String::from_utf8_lossy(reader.str(e.exe))}}),
                )
                .map_err(w)?;
            }
            Record::Syscall(c) => {
                let mut args = serde_json::Map::new();
                if let Some(p) = c.path {
                    args.insert("path".into(), json!(String::from_utf8_lossy(reader.str(p))));
                }
                if let Some(p) = c.path2 {
                    args.insert(
                        "path2".into(),
                        json!(String::from_utf8_lossy(reader.str(p))),
                    );
                }
                if let Some(fd) = c.fd {
                    args.insert("fd".into(), json!(fd));
                }
                if c.count > 0 {
                    args.insert("count".into(), json!(c.count));
                }
                args.insert("ret".into(), json!(c.ret));
                if c.ret < 0 {
                    if let Some(n) = errno_name(-c.ret as i32) {
                        args.insert("errno".into(), json!(n));
                    }
                }
                o.event(
                    &json!({"name": c.sys.name(), "cat": "syscall", "ph": "X", "ts": us(c.ts),
                    "dur": us(c.dur), "pid": c.pid, "tid": c.tid, "args": args}),
                )
                .map_err(w)?;
            }
            Record::Signal(s) => {
                o.event(
                    &json!({"name": signal_label(s.signal), "cat": "signal", "ph": "i", "s": "t",
                    "ts": us(s.ts), "pid": s.pid, "tid": s.tid}),
                )
                .map_err(w)?;
            }
            Record::Exit(e) => {
                o.event(
                    &json!({"name": "exit", "ph": "i", "s": "t", "ts": us(e.ts), "pid": e.pid,
                    "tid": e.tid, "args": {"status": crate::names::exit_label(&e.status)}}),
                )
                .map_err(w)?;
            }
            Record::Mark(m) => {
                // Where the runtime said its start-up ended: an instant on the thread
                // that reported it.
                o.event(
                    &json!({"name": m.kind.name(), "cat": "mark", "ph": "i", "s": "p",
                    "ts": us(m.ts), "pid": m.pid, "tid": m.tid}),
                )
                .map_err(w)?;
            }
            // Where code was mapped is not a moment on the timeline (jsonl has them).
            Record::Mapping(_) => {}
            Record::Lost(l) => {
                o.event(
                    &json!({"name": format!("{} events lost", l.count), "ph": "i", "s": "g",
                    "ts": us(l.ts), "pid": l.pid, "tid": 0}),
                )
                .map_err(w)?;
            }
        }
    }
    o.stats.truncated = reader.truncation().is_some();
    o.out.write_all(b"\n]}\n").map_err(w)?;
    o.out.flush().map_err(w)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    // A failed unwrap is a failed test, with the backtrace to find it.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::{meta, reader, TestTrace};
    use dejavu_trace::{End, Mark, MarkKind, Sys};

    #[test]
    fn a_mark_is_an_instant_event_on_its_process() {
        let mut t = TestTrace::new(&meta(&["node", "app.js"]));
        let s = t.call(1_000, 10, Sys::Stat, "/app/app.js", 0, 500);
        t.sys(s);
        t.push(Record::Mark(Mark {
            ts: 2_500,
            pid: 10,
            tid: 10,
            kind: MarkKind::MainDone,
        }));
        let bytes = t.finish(End::default());
        let mut out = Vec::new();
        let stats = export_chrome(&mut reader(&bytes), &mut out).unwrap();
        assert_eq!(stats.records, 2);
        let doc: Value = serde_json::from_slice(&out).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[1],
            json!({"name": "main_done", "cat": "mark", "ph": "i", "s": "p", "ts": 2.5,
                   "pid": 10, "tid": 10})
        );
    }
}
