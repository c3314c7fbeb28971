//! The trace format round-trips every record kind, survives truncation at every byte, and
//! never panics on damaged input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_trace::*;

fn sample_meta() -> Meta {
    Meta {
        producer: "test".into(),
        backend: "synthetic".into(),
        arch: "x86_64".into(),
        command: vec!["prog".into(), "--flag".into()],
        payload_bytes: 256,
        ..Meta::default()
    }
}

/// Writes a trace with every record kind; returns its bytes and the records as written.
fn sample_trace(n: usize, opts: WriterOptions) -> (Vec<u8>, Vec<Record>, Vec<Vec<u8>>) {
    let mut w = TraceWriter::new(Vec::new(), &sample_meta(), opts).unwrap();
    let mut recs = Vec::new();
    let mut strs = Vec::new();
    let st = FileStat {
        known: stat_known::ALL,
        dev: FileStat::makedev(8, 1),
        ino: 1234,
        mode: mode::S_IFREG | 0o644,
        nlink: 1,
        uid: 1000,
        gid: 1000,
        rdev: 0,
        size: 4096,
        mtime_ns: 1_700_000_000_123_456_789,
        ctime_ns: 1_700_000_000_123_456_789,
    };
    let sid = w.intern_stat(&st);
    let argv = w.intern(b"prog\0--flag");
    let exe = w.intern(b"/usr/bin/prog");
    strs.push(b"prog\0--flag".to_vec());
    recs.push(Record::Spawn(Spawn {
        ts: 0,
        parent_pid: 0,
        parent_tid: 0,
        pid: 100,
        tid: 100,
        clone_flags: 0,
    }));
    recs.push(Record::Exec(Exec {
        ts: 5,
        pid: 100,
        tid: 100,
        exe,
        argv,
    }));
    for i in 0..n {
        let path = format!("/tmp/file{}", i % 17);
        let p = w.intern(path.as_bytes());
        strs.push(path.into_bytes());
        let mut s = Syscall::new(
            10 + i as u64 * 1000,
            100,
            100 + (i % 3) as u32,
            Sys::ALL[i % Sys::ALL.len()],
        );
        s.dur = 700 + (i % 5) as u64;
        s.ret = if i % 7 == 0 { -2 } else { 0 };
        s.path = Some(p);
        s.flags = 0o2000000;
        s.stat = (i % 2 == 0).then_some(sid);
        s.fd = (i % 3 == 0).then_some(3);
        s.fd2 = (i % 11 == 0).then_some(-100);
        s.offset = (i % 13 == 0).then_some(-5);
        s.count = (i % 4) as u64 * 4096;
        s.aux = i as u64;
        s.mode = 0o755;
        s.ev = if i % 9 == 0 { ev::PAYLOAD_TRUNCATED } else { 0 };
        if i % 10 == 0 {
            s.payload = Some(w.intern(b"hello\n"));
        }
        recs.push(Record::Syscall(s));
    }
    recs.push(Record::Signal(Signal {
        ts: 99,
        pid: 100,
        tid: 101,
        signal: 2,
    }));
    recs.push(Record::Mark(Mark {
        ts: 98,
        pid: 100,
        tid: 100,
        kind: MarkKind::AgentReady,
    }));
    recs.push(Record::Mark(Mark {
        ts: 99,
        pid: 100,
        tid: 100,
        kind: MarkKind::MainDone,
    }));
    recs.push(Record::Lost(Lost {
        ts: 100,
        pid: 100,
        count: 3,
        reason: LostReason::Unparsed,
    }));
    recs.push(Record::Exit(Exit {
        ts: 200,
        pid: 100,
        tid: 101,
        status: ExitStatus::Signal {
            signal: 9,
            core: true,
        },
    }));
    recs.push(Record::Exit(Exit {
        ts: 201,
        pid: 100,
        tid: 100,
        status: ExitStatus::Code(-1),
    }));
    for r in &recs[2..] {
        w.push(r).unwrap();
    }
    // The first two were pushed before the loop interned its strings; push them now too so
    // both orders are exercised.
    w.push(&recs[0]).unwrap();
    w.push(&recs[1]).unwrap();
    let first_two: Vec<Record> = recs.drain(..2).collect();
    recs.extend(first_two);
    let bytes = w
        .finish(End {
            end_ts: 300,
            exit: Some(ExitStatus::Code(0)),
            ..End::default()
        })
        .unwrap();
    (bytes, recs, strs)
}

fn read_all(bytes: &[u8]) -> Result<(Vec<Record>, TraceReader<&[u8]>)> {
    let mut r = TraceReader::new(bytes)?;
    let mut out = Vec::new();
    while let Some(rec) = r.next_record()? {
        out.push(rec);
    }
    Ok((out, r))
}

#[test]
fn every_record_kind_round_trips_compressed_and_raw() {
    for opts in [
        WriterOptions::default(),
        WriterOptions {
            zstd_level: 0,
            ..WriterOptions::default()
        },
        WriterOptions {
            block_bytes: 64,
            ..WriterOptions::default()
        },
    ] {
        let (bytes, recs, _) = sample_trace(500, opts);
        let (got, r) = read_all(&bytes).unwrap();
        assert_eq!(got, recs);
        assert_eq!(r.meta(), &sample_meta());
        let end = r.end().expect("end block");
        assert_eq!(end.records, recs.len() as u64);
        assert_eq!(end.lost_events, 3);
        assert_eq!(r.lost_events(), 3);
        assert!(r.truncation().is_none());
        // Strings resolve to what was interned.
        if let Record::Syscall(s) = got[3] {
            assert_eq!(r.str(s.path.unwrap()), b"/tmp/file3");
        }
        let Record::Exec(e) = got[got.len() - 1] else {
            panic!("exec last")
        };
        assert_eq!(r.str(e.argv), b"prog\0--flag");
    }
}

#[test]
fn a_trace_cut_at_any_byte_reads_up_to_its_last_complete_block() {
    let opts = WriterOptions {
        block_bytes: 200,
        ..WriterOptions::default()
    };
    let (bytes, recs, _) = sample_trace(60, opts);
    let mut saw_partial = false;
    for cut in 0..bytes.len() {
        match read_all(&bytes[..cut]) {
            Ok((got, r)) => {
                // A prefix of what was written, never anything else.
                assert_eq!(&recs[..got.len()], &got[..], "cut at {cut}");
                let t = r.truncation().expect("a cut trace reports truncation");
                assert!(
                    t.valid_bytes + t.lost_bytes == cut as u64,
                    "cut at {cut}: {t:?}"
                );
                saw_partial |= t.lost_bytes > 0 && !got.is_empty();
                assert!(!t.warning().is_empty());
            }
            Err(e) => {
                // Only cuts inside the file header or the meta block may fail outright.
                assert!(cut < 200, "cut at {cut} failed: {e}");
                assert!(
                    e.to_string().contains("offset") || e.to_string().contains("empty"),
                    "{e}"
                );
            }
        }
    }
    assert!(saw_partial);
}

#[test]
fn foreign_input_is_named_with_its_offset() {
    let e = TraceReader::new(&b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0"[..]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "not a dejavu trace: expected magic \"DEJAVUTR\", found \".ELF....\" at byte offset 0"
    );
    let e = TraceReader::new(&b""[..]).unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let mut v = b"DEJAVUTR".to_vec();
    v.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
    let e = TraceReader::new(&v[..]).unwrap_err();
    assert!(
        matches!(e, TraceError::Version { major: 3, minor: 0 }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "unsupported trace format version 3.0 (byte offset 8): this dejavu reads versions 1.x to 2.x"
    );
    v[8] = 0;
    let e = TraceReader::new(&v[..]).unwrap_err();
    assert!(e.to_string().contains("version 0.0"), "{e}");
}

/// Rewrites the CRC of every complete block, so a deliberate change to a payload reaches
/// the decoders instead of the checksum.
fn fix_checksums(buf: &mut [u8]) {
    let mut at = 16;
    while at + 20 <= buf.len() {
        let len = u32::from_le_bytes(buf[at + 8..at + 12].try_into().unwrap()) as usize;
        let end = at + 20 + len;
        let mut h = crc32fast::Hasher::new();
        h.update(&buf[at + 4..at + 16]);
        h.update(&buf[at + 20..end]);
        buf[at + 16..at + 20].copy_from_slice(&h.finalize().to_le_bytes());
        at = end;
    }
}

/// A raw (uncompressed) trace with one syscall and one mark of `kind`, and the offset of
/// the mark's kind byte.
fn trace_with_a_mark(kind: MarkKind) -> (Vec<u8>, usize) {
    let opts = WriterOptions {
        zstd_level: 0,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &sample_meta(), opts).unwrap();
    let p = w.intern(b"/app/main.js");
    let mut s = Syscall::new(1_000, 7, 7, Sys::Newfstatat);
    s.path = Some(p);
    w.push(&Record::Syscall(s)).unwrap();
    w.push(&Record::Mark(Mark {
        ts: 2_000,
        pid: 7,
        tid: 7,
        kind,
    }))
    .unwrap();
    let bytes = w.finish(End::default()).unwrap();
    // The mark is the last record of the only data block: tag 6, ts delta 1000 (zigzag
    // 2000: two varint bytes), pid 7, tid 7, kind; the end block (20 + JSON) follows.
    let end_json = serde_json::to_vec(&End {
        records: 2,
        ..End::default()
    })
    .unwrap();
    let kind_at = bytes.len() - 20 - end_json.len() - 1;
    assert_eq!(
        &bytes[kind_at - 5..=kind_at],
        &[6, 0xd0, 0x0f, 7, 7, kind as u8]
    );
    (bytes, kind_at)
}

#[test]
fn a_mark_round_trips_through_writer_and_reader() {
    for kind in [MarkKind::AgentReady, MarkKind::MainDone] {
        let (bytes, _) = trace_with_a_mark(kind);
        assert_eq!(&bytes[8..12], &[2, 0, 1, 0], "written as format 2.1");
        let (got, r) = read_all(&bytes).unwrap();
        assert_eq!(r.version(), (2, 1));
        assert_eq!(
            got[1],
            Record::Mark(Mark {
                ts: 2_000,
                pid: 7,
                tid: 7,
                kind
            })
        );
        assert_eq!(got[1].ts(), 2_000);
        assert_eq!(r.end().unwrap().records, 2);
    }
    assert_eq!(MarkKind::from_u8(1), Some(MarkKind::AgentReady));
    assert_eq!(MarkKind::from_u8(2), Some(MarkKind::MainDone));
    assert_eq!(MarkKind::AgentReady.name(), "agent_ready");
    assert_eq!(MarkKind::MainDone.name(), "main_done");
}

#[test]
fn a_bad_mark_kind_is_an_error_naming_its_offset() {
    for bad in [0u8, 3, 0xff] {
        let (mut bytes, kind_at) = trace_with_a_mark(MarkKind::MainDone);
        bytes[kind_at] = bad;
        fix_checksums(&mut bytes);
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        assert!(matches!(r.next_record(), Ok(Some(Record::Syscall(_)))));
        let e = r.next_record().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, TraceError::Corrupt { .. }), "{e:?}");
        assert!(msg.contains("corrupt trace at byte offset "), "{msg}");
        assert!(msg.contains("record 1 (payload byte "), "{msg}");
        assert!(msg.ends_with("unknown mark kind"), "{msg}");
    }
}

#[test]
fn a_version_2_0_trace_still_reads() {
    // Written by dejavu's 2.0 writer (the fuzz seed every-kind-zstd.trace before format
    // 2.1): every record kind but mappings, zstd blocks.
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/v2.0-every-kind.trace"
    ))
    .unwrap();
    assert_eq!(&bytes[8..12], &[2, 0, 0, 0]);
    let (got, r) = read_all(&bytes).unwrap();
    assert_eq!(r.version(), (2, 0));
    assert_eq!(r.end().unwrap().records, got.len() as u64);
    assert!(got.iter().any(|rec| matches!(rec, Record::Mark(_))));
    assert!(got.iter().all(|rec| !matches!(rec, Record::Mapping(_))));
}

#[test]
fn a_version_1_trace_still_reads() {
    // Written by dejavu's 1.0 writer (the fuzz seed every-kind-raw.trace before format
    // 2.0): every record kind 1.0 had, raw blocks.
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/v1.0-every-kind.trace"
    ))
    .unwrap();
    assert_eq!(&bytes[8..12], &[1, 0, 0, 0]);
    let (got, r) = read_all(&bytes).unwrap();
    assert_eq!(r.version(), (1, 0));
    assert_eq!(got.len(), 19);
    assert_eq!(r.end().unwrap().records, 19);
    assert!(got.iter().all(|rec| !matches!(rec, Record::Mark(_))));
    assert_eq!(
        got.iter()
            .filter(|r| matches!(r, Record::Syscall(_)))
            .count(),
        12
    );
    let Some(Record::Exec(e)) = got.iter().find(|r| matches!(r, Record::Exec(_))) else {
        panic!("an exec")
    };
    assert_eq!(r.str(e.exe), b"/bin/sh");
    assert_eq!(r.meta().producer, "fuzz_seeds");

    // Today's writer's bytes with the header patched to 1.0 read the same when they hold
    // no mark ...
    let opts = WriterOptions {
        zstd_level: 0,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &sample_meta(), opts).unwrap();
    let p = w.intern(b"/x");
    let mut s = Syscall::new(5, 1, 1, Sys::Stat);
    s.path = Some(p);
    w.push(&Record::Syscall(s)).unwrap();
    let mut bytes = w.finish(End::default()).unwrap();
    bytes[8] = 1;
    bytes[10] = 0;
    let (got, r) = read_all(&bytes).unwrap();
    assert_eq!(r.version(), (1, 0));
    assert_eq!(got, vec![Record::Syscall(s)]);
    // ... and a 1.x trace never holds a mark: tag 6 there is an unknown tag, as any other.
    let (mut bytes, recs, _) = sample_trace(50, opts);
    assert_eq!(read_all(&bytes).unwrap().0, recs);
    bytes[8] = 1;
    let e = read_all(&bytes).unwrap_err().to_string();
    assert!(
        e.contains("offset") && e.ends_with("unknown record tag"),
        "{e}"
    );
}

#[test]
fn a_flipped_byte_is_an_error_naming_an_offset_never_a_panic() {
    let opts = WriterOptions {
        block_bytes: 300,
        ..WriterOptions::default()
    };
    for level in [0, 3] {
        let (bytes, _, _) = sample_trace(
            80,
            WriterOptions {
                zstd_level: level,
                ..opts
            },
        );
        let mut errors = 0;
        // Deterministic xorshift so failures reproduce.
        let mut x: u64 = 0x9e3779b97f4a7c15;
        for i in 0..bytes.len() * 3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut b = bytes.clone();
            let at = i % b.len();
            b[at] ^= (x as u8) | 1;
            match read_all(&b) {
                Ok(_) => {} // a flip in a JSON string may still parse; checksums catch the rest
                Err(e) => {
                    errors += 1;
                    let msg = e.to_string();
                    assert!(msg.contains("offset"), "flip at {at}: {msg}");
                }
            }
        }
        assert!(errors > bytes.len(), "checksums must catch most flips");
    }
}

#[test]
fn checksums_are_verified_so_a_damaged_record_is_caught() {
    let (bytes, _, _) = sample_trace(
        10,
        WriterOptions {
            zstd_level: 0,
            ..WriterOptions::default()
        },
    );
    // Damage the last data byte before the end block: the data block's checksum fails.
    let end_block = bytes.len() - 20 - serde_json::to_vec(&End::default()).unwrap().len();
    let mut b = bytes.clone();
    let at = end_block - 60;
    b[at] ^= 0xff;
    let e = read_all(&b).expect_err("damage is detected");
    assert!(e.to_string().contains("checksum"), "{e}");
}

#[test]
fn random_bytes_after_a_valid_header_never_panic() {
    let (bytes, _, _) = sample_trace(3, WriterOptions::default());
    let mut x: u64 = 42;
    let mut outcomes = [0u32; 2]; // errors, reads
    for len in 0..2000 {
        let mut b = bytes[..16].to_vec();
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.push(x as u8);
        }
        // Also a valid meta block followed by garbage.
        let mut c = bytes[..bytes.len() / 2].to_vec();
        c.extend_from_slice(&b[16..]);
        for input in [&b, &c] {
            // Never a panic, and never a silent answer: an error that names where the
            // bytes went wrong, or (random bytes that happen to read) a trace that says it
            // has no end block.
            match read_all(input) {
                Err(e) => {
                    let m = e.to_string();
                    assert!(m.contains("offset"), "len {len}: {m}");
                    outcomes[0] += 1;
                }
                Ok((_, r)) => {
                    // (a checksummed end block does not come out of random bytes)
                    assert!(
                        r.end().is_none() && r.truncation().is_some(),
                        "len {len}: read without saying it was cut off"
                    );
                    outcomes[1] += 1;
                }
            }
        }
    }
    // Random bytes are nearly always a corrupt trace; the few that read are short tails
    // the reader takes for a block cut off mid-write.
    assert!(outcomes[0] > 3500, "{outcomes:?}");
}

#[test]
fn block_local_payloads_round_trip_and_stay_bounded() {
    let opts = WriterOptions {
        block_bytes: 512,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &sample_meta(), opts).unwrap();
    let path = w.intern(b"/dev/pts/0");
    let mut want = Vec::new();
    for i in 0..2000u64 {
        let text = format!("line {} of the log\n", i % 300);
        let mut s = Syscall::new(i * 10, 1, 1, Sys::Write);
        s.path = Some(path);
        s.payload = Some(w.intern_local(text.as_bytes()));
        assert!(s.payload.unwrap().is_local());
        w.push(&Record::Syscall(s)).unwrap();
        want.push(text);
    }
    let bytes = w.finish(End::default()).unwrap();
    let mut r = TraceReader::new(&bytes[..]).unwrap();
    let mut got = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Syscall(s) = rec {
            // Resolved while the record is current, as the API says.
            got.push(String::from_utf8(r.str(s.payload.unwrap()).to_vec()).unwrap());
            assert_eq!(r.str(s.path.unwrap()), b"/dev/pts/0");
        }
    }
    assert_eq!(got, want);
    // Only the global strings are kept for the whole trace.
    assert_eq!(r.strings().len(), 1);
}

#[test]
fn a_block_local_id_from_an_earlier_block_is_refused() {
    let mut w = TraceWriter::new(Vec::new(), &sample_meta(), WriterOptions::default()).unwrap();
    let stale = w.intern_local(b"x");
    w.flush_block().unwrap();
    let mut s = Syscall::new(0, 1, 1, Sys::Write);
    s.payload = Some(stale);
    assert!(w.push(&Record::Syscall(s)).is_err());
}

#[test]
fn stacks_round_trip_and_are_interned_once() {
    let opts = WriterOptions {
        block_bytes: 256,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &sample_meta(), opts).unwrap();
    let (f, file, module) = (
        w.intern(b"appendRecord"),
        w.intern(b"/app/rec.js"),
        w.intern(b"/usr/bin/node"),
    );
    let js = Frame {
        kind: FrameKind::Js,
        function: Some(f),
        file: Some(file),
        line: 18,
        column: 7,
        module: None,
        addr: 0,
    };
    let native = Frame {
        kind: FrameKind::Native,
        function: None,
        file: None,
        line: 0,
        column: 0,
        module: Some(module),
        addr: 0x1234,
    };
    let a = w.intern_stack(&[js, native]);
    let b = w.intern_stack(&[native]);
    assert_eq!(w.intern_stack(&[js, native]), a, "interned by value");
    assert_ne!(a, b);
    for i in 0..100u64 {
        let mut s = Syscall::new(i, 1, 1, Sys::Newfstatat);
        s.stack = Some(if i % 2 == 0 { a } else { b });
        w.push(&Record::Syscall(s)).unwrap();
    }
    let bytes = w.finish(End::default()).unwrap();
    let mut r = TraceReader::new(&bytes[..]).unwrap();
    let mut n = 0;
    while let Some(rec) = r.next_record().unwrap() {
        let Record::Syscall(s) = rec else { continue };
        let st = r.stack(s.stack.unwrap()).to_vec();
        if n % 2 == 0 {
            assert_eq!(st, vec![js, native]);
            assert_eq!(r.str(st[0].function.unwrap()), b"appendRecord");
            assert_eq!(st[0].line, 18);
        } else {
            assert_eq!(st, vec![native]);
        }
        n += 1;
    }
    assert_eq!(n, 100);
    assert_eq!(r.stack_count(), 2);
}
