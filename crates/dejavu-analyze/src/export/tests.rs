//! Tests of the JSON Lines export: every line parses, every record comes back with its
//! fields, and the stream ends (or stops) the way the format document says.

// A failed unwrap is a failed test, with the backtrace to find it.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::testutil::{file_stat, meta, reader, TestTrace};
use dejavu_trace::{End, LostReason, MarkKind, Sys, TraceWriter, WriterOptions};
use serde_json::{json, Value};

fn export(bytes: &[u8]) -> (Result<ExportStats, ExportError>, Vec<Value>) {
    let mut out = Vec::new();
    let res = export_jsonl(&mut reader(bytes), &mut out);
    let text = String::from_utf8(out).expect("the export is UTF-8");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "every line is terminated"
    );
    let lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (res, lines)
}

/// A trace with every record kind and every syscall field.
fn every_kind() -> Vec<u8> {
    let mut t = TestTrace::new(&meta(&["prog", "-v"]));
    let full = t.w.intern_stat(&file_stat(7, 99));
    let partial = t.w.intern_stat(&FileStat {
        known: stat_known::MODE | stat_known::SIZE,
        mode: 0o100644,
        size: 5,
        ..FileStat::default()
    });
    let mut s = t.call(100, 10, Sys::Openat, "/etc/hosts", 3, 1500);
    s.tid = 11;
    s.flags = 0o2000000;
    s.mode = 0o644;
    s.stat = Some(full);
    t.sys(s);
    let mut s = t.call(200, 10, Sys::Stat, "/missing", -2, 700);
    s.ev = ev::STAT_PARTIAL;
    t.sys(s);
    let mut s = t.call(300, 10, Sys::Pwrite64, "/var/log/app.log", 12, 900);
    s.fd = Some(4);
    s.fd2 = Some(-1);
    s.offset = Some(-8);
    s.count = 12;
    s.aux = 5;
    s.stat = Some(partial);
    s.ev = ev::PATH_FROM_FD | ev::PAYLOAD_TRUNCATED;
    s.payload = Some(t.s("line \"one\"\n\u{1}"));
    s.fingerprint = Some(0x00ab_cdef_0123_4567);
    t.sys(s);
    let mut s = t.call(400, 10, Sys::Rename, "", 0, 0);
    s.path = Some(t.s(b"/tmp/caf\xe9"));
    s.path2 = Some(t.s("/tmp/café"));
    t.sys(s);
    let mut s = t.call(500, 10, Sys::Read, "pipe:[5]", -4, 123);
    s.ev = ev::UNFINISHED | 0x200;
    t.sys(s);
    let s = t.call(550, 10, Sys::Close, "", -5000, 1);
    t.sys(s);
    t.push(Record::Spawn(Spawn {
        ts: 600,
        parent_pid: 10,
        parent_tid: 10,
        pid: 10,
        tid: 12,
        clone_flags: 0x3d0f00,
    }));
    t.push(Record::Spawn(Spawn {
        ts: 610,
        parent_pid: 10,
        parent_tid: 12,
        pid: 20,
        tid: 20,
        clone_flags: 17,
    }));
    let (exe, argv) = (t.s("/bin/echo"), t.s(b"echo\0hi there\0\xff"));
    t.push(Record::Exec(Exec {
        ts: 620,
        pid: 20,
        tid: 20,
        exe,
        argv,
    }));
    t.push(Record::Signal(Signal {
        ts: 630,
        pid: 20,
        tid: 20,
        signal: 2,
    }));
    t.push(Record::Exit(Exit {
        ts: 640,
        pid: 20,
        tid: 20,
        status: ExitStatus::Signal {
            signal: 11,
            core: true,
        },
    }));
    t.push(Record::Exit(Exit {
        ts: 650,
        pid: 10,
        tid: 12,
        status: ExitStatus::Code(0),
    }));
    t.push(Record::Lost(Lost {
        ts: 660,
        pid: 0,
        count: 3,
        reason: LostReason::ForeignAbi,
    }));
    t.push(Record::Mark(Mark {
        ts: 670,
        pid: 10,
        tid: 10,
        kind: MarkKind::AgentReady,
    }));
    t.push(Record::Mark(Mark {
        ts: 680,
        pid: 10,
        tid: 10,
        kind: MarkKind::MainDone,
    }));
    t.finish(End {
        end_ts: 1000,
        exit: Some(ExitStatus::Code(2)),
        ..End::default()
    })
}

#[test]
fn every_record_kind_exports_with_the_documented_fields() {
    let (res, lines) = export(&every_kind());
    let stats = res.unwrap();
    assert_eq!(stats.records, 15);
    assert_eq!(stats.lines, 17);
    assert_eq!(lines.len(), 17);
    assert!(!stats.truncated && !stats.output_closed);

    assert_eq!(lines[0]["type"], "meta");
    assert_eq!(lines[0]["command"], json!(["prog", "-v"]));
    assert_eq!(lines[0]["backend"], "synthetic");
    assert_eq!(lines[0]["cwd"], "/app");

    assert_eq!(
        lines[1],
        json!({"type": "syscall", "ts": 100, "dur": 1500, "pid": 10, "tid": 11, "sys": "openat",
               "ret": 3, "path": "/etc/hosts", "flags": 524288, "mode": 420,
               "stat": {"dev": FileStat::makedev(8, 1), "ino": 7, "mode": 0o100644, "nlink": 1,
                        "uid": 1000, "gid": 1000, "rdev": 0, "size": 99,
                        "mtime_ns": 1_700_000_000_000_000_007i64,
                        "ctime_ns": 1_700_000_000_000_000_007i64}})
    );
    assert_eq!(
        lines[2],
        json!({"type": "syscall", "ts": 200, "dur": 700, "pid": 10, "tid": 10, "sys": "stat",
               "ret": -2, "errno": "ENOENT", "ev": ["stat_partial"], "path": "/missing"})
    );
    assert_eq!(
        lines[3],
        json!({"type": "syscall", "ts": 300, "dur": 900, "pid": 10, "tid": 10, "sys": "pwrite64",
               "ret": 12, "ev": ["payload_truncated", "path_from_fd"], "fd": 4, "fd2": -1,
               "path": "/var/log/app.log", "offset": -8, "count": 12, "aux": 5,
               "stat": {"mode": 0o100644, "size": 5}, "payload": "line \"one\"\n\u{1}",
               "fingerprint": "00abcdef01234567"})
    );
    assert_eq!(lines[4]["path"], json!({"hex": "2f746d702f636166e9"}));
    assert_eq!(lines[4]["path2"], "/tmp/café");
    // Unfinished: ret and dur mean nothing and are left out; unknown flag bits are kept.
    assert_eq!(
        lines[5],
        json!({"type": "syscall", "ts": 500, "pid": 10, "tid": 10, "sys": "read",
               "ev": ["unfinished", "bit9"], "path": "pipe:[5]"})
    );
    // Not an errno (below -4095): a plain return value.
    assert_eq!(lines[6]["ret"], -5000);
    assert!(lines[6].get("errno").is_none());
    assert_eq!(
        lines[7],
        json!({"type": "spawn", "ts": 600, "parent_pid": 10, "parent_tid": 10, "pid": 10,
               "tid": 12, "clone_flags": 0x3d0f00, "thread": true})
    );
    assert_eq!(lines[8]["thread"], false);
    assert_eq!(
        lines[9],
        json!({"type": "exec", "ts": 620, "pid": 20, "tid": 20, "exe": "/bin/echo",
               "argv": ["echo", "hi there", {"hex": "ff"}]})
    );
    assert_eq!(
        lines[10],
        json!({"type": "signal", "ts": 630, "pid": 20, "tid": 20, "signal": 2, "name": "SIGINT"})
    );
    assert_eq!(
        lines[11],
        json!({"type": "exit", "ts": 640, "pid": 20, "tid": 20, "signal": 11, "name": "SIGSEGV",
               "core": true})
    );
    assert_eq!(
        lines[12],
        json!({"type": "exit", "ts": 650, "pid": 10, "tid": 12, "code": 0})
    );
    assert_eq!(
        lines[13],
        json!({"type": "lost", "ts": 660, "pid": 0, "count": 3, "reason": "foreign_abi"})
    );
    assert_eq!(
        lines[14],
        json!({"type": "mark", "ts": 670, "pid": 10, "tid": 10, "kind": "agent_ready"})
    );
    assert_eq!(
        lines[15],
        json!({"type": "mark", "ts": 680, "pid": 10, "tid": 10, "kind": "main_done"})
    );
    assert_eq!(
        lines[16],
        json!({"type": "end", "end_ts": 1000, "records": 15, "lost_events": 3,
               "exit": {"code": 2}})
    );
}

/// A larger trace spread over many blocks, compared record by record with the reader.
#[test]
fn a_many_block_trace_round_trips_record_by_record() {
    let opts = WriterOptions {
        block_bytes: 300,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &meta(&["loop"]), opts).unwrap();
    let mut x: u64 = 0x2545f4914f6cdd1d;
    for i in 0..5000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut s = Syscall::new(
            i * 3000,
            1 + (x % 3) as u32,
            1 + (x % 5) as u32,
            Sys::ALL[(x % 74) as usize],
        );
        s.dur = x % 5000;
        s.ret = if x % 4 == 0 {
            -((x % 140) as i64)
        } else {
            (x % 100) as i64
        };
        s.path = (x % 3 != 0).then(|| w.intern(format!("/p/{}\n\"q\"", x % 37).as_bytes()));
        s.stat = (x % 2 == 0).then(|| w.intern_stat(&file_stat(x % 11, (x % 13) as i64)));
        w.push(&Record::Syscall(s)).unwrap();
    }
    let bytes = w.finish(End::default()).unwrap();
    let (res, lines) = export(&bytes);
    assert_eq!(res.unwrap().records, 5000);
    assert_eq!(lines.len(), 5002);
    let mut r = reader(&bytes);
    let mut i = 1;
    while let Some(rec) = r.next_record().unwrap() {
        let Record::Syscall(s) = rec else {
            panic!("only syscalls")
        };
        let l = &lines[i];
        assert_eq!(l["ts"], s.ts);
        assert_eq!(l["pid"], s.pid);
        assert_eq!(l["tid"], s.tid);
        assert_eq!(l["sys"], s.sys.name());
        assert_eq!(l["ret"], s.ret);
        assert_eq!(l["dur"], s.dur);
        assert_eq!(l.get("errno").is_some(), s.is_error());
        match s.path {
            Some(p) => assert_eq!(l["path"].as_str().unwrap().as_bytes(), r.str(p)),
            None => assert!(l.get("path").is_none()),
        }
        match s.stat {
            Some(st) => assert_eq!(l["stat"]["size"], r.stat(st).size),
            None => assert!(l.get("stat").is_none()),
        }
        i += 1;
    }
}

#[test]
fn a_cut_off_trace_ends_with_a_truncated_line() {
    let mut t = TestTrace::new(&meta(&["prog"]));
    for i in 0..100 {
        let s = t.call(i, 1, Sys::Stat, "/x", 0, 10);
        t.sys(s);
    }
    let full = t.cut_off();
    // Cut once more inside the last block, so bytes are lost too.
    let bytes = &full[..full.len() - 5];
    let (res, lines) = export(bytes);
    let stats = res.unwrap();
    assert!(stats.truncated);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "truncated");
    assert!(last["lost_bytes"].as_u64().unwrap() > 0);
    assert_eq!(
        last["valid_bytes"].as_u64().unwrap() + last["lost_bytes"].as_u64().unwrap(),
        bytes.len() as u64
    );
    assert_eq!(lines.len() as u64, stats.records + 2);
    assert!(lines[1..lines.len() - 1]
        .iter()
        .all(|l| l["type"] == "syscall"));
}

#[test]
fn a_damaged_trace_ends_with_an_error_line_and_an_error() {
    let mut t = TestTrace::new(&meta(&["prog"]));
    for i in 0..100 {
        let s = t.call(i, 1, Sys::Stat, "/x", 0, 10);
        t.sys(s);
    }
    let mut bytes = t.finish(End::default());
    let n = bytes.len();
    bytes[n - 60] ^= 0x55; // inside the last data block: its checksum fails
    let (res, lines) = export(&bytes);
    let err = res.unwrap_err();
    assert!(matches!(err, ExportError::Trace(_)), "{err}");
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "error");
    assert!(
        last["message"].as_str().unwrap().contains("offset"),
        "{last}"
    );
}

/// Accepts `room` bytes, then fails every write with `kind`.
struct Closing {
    room: usize,
    kind: io::ErrorKind,
    got: Vec<u8>,
}

impl Write for Closing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.room == 0 {
            return Err(io::Error::from(self.kind));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        self.got.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn big_trace() -> Vec<u8> {
    let mut t = TestTrace::new(&meta(&["prog"]));
    for i in 0..20_000 {
        let s = t.call(
            i,
            1,
            Sys::Stat,
            "/a/rather/long/path/to/make/the/export/big",
            0,
            10,
        );
        t.sys(s);
    }
    t.finish(End::default())
}

#[test]
fn a_broken_pipe_ends_the_export_quietly() {
    let bytes = big_trace();
    let mut out = Closing {
        room: 1000,
        kind: io::ErrorKind::BrokenPipe,
        got: Vec::new(),
    };
    let stats = export_jsonl(&mut reader(&bytes), &mut out).unwrap();
    assert!(stats.output_closed);
    assert!(stats.records < 20_000, "it stopped early");
    assert_eq!(out.got.len(), 1000);
}

#[test]
fn other_write_errors_are_errors() {
    let bytes = big_trace();
    let mut out = Closing {
        room: 0,
        kind: io::ErrorKind::StorageFull,
        got: Vec::new(),
    };
    let err = export_jsonl(&mut reader(&bytes), &mut out).unwrap_err();
    assert!(
        matches!(err, ExportError::Write(ref e) if e.kind() == io::ErrorKind::StorageFull),
        "{err}"
    );
}

#[test]
fn strings_escape_to_json_that_parses_back() {
    let cases: [&[u8]; 7] = [
        b"plain",
        b"quote\" backslash\\ slash/",
        b"\n\r\t\x08\x0c\x00\x1f\x7f",
        "ünïcödé ✓ \u{2028}".as_bytes(),
        b"",
        b"\xc3\x28",
        b"\xff\xfe\x00",
    ];
    for c in cases {
        let mut out = Vec::new();
        json_str(&mut out, c);
        let v: Value = serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        match std::str::from_utf8(c) {
            Ok(s) => assert_eq!(v, s),
            Err(_) => {
                let hex = v["hex"].as_str().unwrap();
                let back: Vec<u8> = (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect();
                assert_eq!(back, c);
            }
        }
    }
}

#[test]
fn an_unknown_stat_is_an_empty_object() {
    let mut out = Vec::new();
    stat_json(&mut out, &FileStat::default());
    assert_eq!(out, b"{}");
}

#[test]
fn block_local_strings_export_their_own_bytes_in_every_block() {
    // One record per block, so every block numbers its local strings from 0 again.
    let opts = WriterOptions {
        block_bytes: 1,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &meta(&["prog"]), opts).unwrap();
    let words = ["first\n", "second\n", "first\n", "third\n"];
    for (i, word) in words.iter().enumerate() {
        let mut s = Syscall::new(i as u64, 1, 1, Sys::Write);
        s.path = Some(w.intern_local(format!("/log/{i}").as_bytes()));
        s.payload = Some(w.intern_local(word.as_bytes()));
        w.push(&Record::Syscall(s)).unwrap();
    }
    let bytes = w.finish(End::default()).unwrap();
    let (res, lines) = export(&bytes);
    assert_eq!(res.unwrap().records, 4);
    for (i, word) in words.iter().enumerate() {
        assert_eq!(lines[i + 1]["payload"], *word);
        assert_eq!(lines[i + 1]["path"], format!("/log/{i}"));
    }
}

#[test]
fn mappings_export_with_their_path_identity_and_build_id_in_hex() {
    let mut t = TestTrace::new(&meta(&["prog"]));
    let path = t.s("/usr/lib/libc.so.6");
    let bid = t.s([0x93, 0xac, 0x00, 0x0f]);
    t.push(Record::Mapping(Mapping {
        ts: 5,
        pid: 10,
        kind: MappingKind::Map,
        start: 0x7f00_0000_0000,
        len: 0x2000,
        offset: 0x1000,
        path: Some(path),
        file: Some((0xfe00, 42)),
        build_id: Some(bid),
    }));
    t.push(Record::Mapping(Mapping {
        ts: 6,
        pid: 10,
        kind: MappingKind::Unmap,
        start: 0x7f00_0000_0000,
        len: 0x1000,
        offset: 0,
        path: None,
        file: None,
        build_id: None,
    }));
    let (res, lines) = export(&t.finish(End::default()));
    assert_eq!(res.unwrap().records, 2);
    assert_eq!(
        lines[1],
        json!({"type": "mapping", "ts": 5, "pid": 10, "kind": "map",
            "start": 0x7f00_0000_0000u64, "len": 0x2000, "offset": 0x1000,
            "path": "/usr/lib/libc.so.6", "dev": 0xfe00, "ino": 42, "build_id": "93ac000f"})
    );
    assert_eq!(
        lines[2],
        json!({"type": "mapping", "ts": 6, "pid": 10, "kind": "unmap",
            "start": 0x7f00_0000_0000u64, "len": 0x1000})
    );
}
