//! Mapping records (format 2.1): they round-trip in order with the records around them,
//! a 2.0 reader's view (the mapping blocks skipped) is the same trace without them, and a
//! cut-off or garbled mapping block is an error naming its offset, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_trace::*;

fn meta() -> Meta {
    Meta {
        producer: "test".into(),
        backend: "synthetic".into(),
        arch: "x86_64".into(),
        ..Meta::default()
    }
}

fn raw() -> WriterOptions {
    WriterOptions {
        zstd_level: 0,
        ..WriterOptions::default()
    }
}

/// A trace of `n` stats with mappings among them (first in a block, last, several in a
/// row, unmaps, some without build id or identity), in blocks of `block_bytes`.
fn trace(n: u64, opts: WriterOptions) -> (Vec<u8>, Vec<Record>) {
    let mut w = TraceWriter::new(Vec::new(), &meta(), opts).unwrap();
    let mut recs = Vec::new();
    let libc = w.intern(b"/usr/lib/x86_64-linux-gnu/libc.so.6");
    let bid = w.intern(&[
        0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    ]);
    let mut push = |w: &mut TraceWriter<Vec<u8>>, r: Record| {
        w.push(&r).unwrap();
        recs.push(r);
    };
    push(
        &mut w,
        Record::Mapping(Mapping {
            ts: 0,
            pid: 10,
            kind: MappingKind::Map,
            start: 0x5555_5555_4000,
            len: 0x2000,
            offset: 0x1000,
            path: Some(libc),
            file: Some((FileStat::makedev(8, 1), 1234)),
            build_id: Some(bid),
        }),
    );
    for i in 0..n {
        let p = w.intern(format!("/tmp/f{}", i % 7).as_bytes());
        let mut s = Syscall::new(
            10 + i * 100,
            10 + (i % 3) as u32,
            10 + (i % 3) as u32,
            Sys::Stat,
        );
        s.path = Some(p);
        push(&mut w, Record::Syscall(s));
        if i % 13 == 0 {
            let lib = w.intern(format!("/opt/lib{}.so", i % 5).as_bytes());
            push(
                &mut w,
                Record::Mapping(Mapping {
                    ts: 10 + i * 100 + 1,
                    pid: 10 + (i % 3) as u32,
                    kind: MappingKind::Map,
                    start: 0x7f00_0000_0000 + i * 0x10000,
                    len: 0x3000,
                    offset: 0,
                    path: Some(lib),
                    file: (i % 2 == 0).then_some((5, i)),
                    build_id: (i % 3 == 0).then_some(bid),
                }),
            );
            push(
                &mut w,
                Record::Mapping(Mapping {
                    ts: 10 + i * 100 + 2,
                    pid: 10 + (i % 3) as u32,
                    kind: MappingKind::Unmap,
                    start: 0x7f00_0000_0000 + i * 0x10000,
                    len: 0x1000,
                    offset: 0,
                    path: None,
                    file: None,
                    build_id: None,
                }),
            );
        }
    }
    let bytes = w.finish(End::default()).unwrap();
    (bytes, recs)
}

fn read_all(bytes: &[u8]) -> Result<(Vec<Record>, TraceReader<&[u8]>)> {
    let mut r = TraceReader::new(bytes)?;
    let mut out = Vec::new();
    while let Some(rec) = r.next_record()? {
        out.push(rec);
    }
    Ok((out, r))
}

/// The blocks of a trace: (offset, kind, total length).
fn blocks(bytes: &[u8]) -> Vec<(usize, u8, usize)> {
    let mut at = 16;
    let mut out = Vec::new();
    while at + 20 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push((at, bytes[at + 4], 20 + len));
        at += 20 + len;
    }
    out
}

fn fix_checksums(buf: &mut [u8]) {
    for (at, _, len) in blocks(buf) {
        let mut h = crc32fast::Hasher::new();
        h.update(&buf[at + 4..at + 16]);
        h.update(&buf[at + 20..at + len]);
        buf[at + 16..at + 20].copy_from_slice(&h.finalize().to_le_bytes());
    }
}

#[test]
fn mappings_round_trip_in_order_with_the_records_around_them() {
    for opts in [
        raw(),
        WriterOptions::default(),
        WriterOptions {
            block_bytes: 64,
            zstd_level: 0,
            ..WriterOptions::default()
        },
        WriterOptions {
            block_bytes: 200,
            ..WriterOptions::default()
        },
    ] {
        let (bytes, want) = trace(300, opts);
        assert_eq!(&bytes[8..12], &[2, 0, 1, 0], "format 2.1");
        let (got, r) = read_all(&bytes).unwrap();
        assert_eq!(got, want, "{opts:?}");
        assert_eq!(r.end().unwrap().records, want.len() as u64);
        assert_eq!(r.records_read(), want.len() as u64);
        let m = got.iter().find_map(|r| match r {
            Record::Mapping(m) => Some(*m),
            _ => None,
        });
        let m = m.unwrap();
        assert_eq!(
            r.str(m.path.unwrap()),
            b"/usr/lib/x86_64-linux-gnu/libc.so.6"
        );
        assert_eq!(r.str(m.build_id.unwrap())[..4], [0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(m.end(), 0x5555_5555_6000);
        let kinds = blocks(&bytes).iter().filter(|b| b.1 == 128).count();
        assert!(kinds >= 1, "mapping blocks written");
    }
}

/// What a 2.0 reader does (it skips blocks of kind >= 128): the same trace without the
/// mappings; every string id the other records use still means the same string.
#[test]
fn without_its_mapping_blocks_a_trace_is_the_same_trace_without_mappings() {
    let (bytes, want) = trace(
        300,
        WriterOptions {
            block_bytes: 200,
            ..WriterOptions::default()
        },
    );
    let mut old = bytes[..16].to_vec();
    old[10] = 0; // minor 0: a 2.0 trace
    for (at, kind, len) in blocks(&bytes) {
        if kind != 128 {
            old.extend_from_slice(&bytes[at..at + len]);
        }
    }
    let (got, r) = read_all(&old).unwrap();
    let (full, full_r) = read_all(&bytes).unwrap();
    let want: Vec<Record> = want
        .into_iter()
        .filter(|r| !matches!(r, Record::Mapping(_)))
        .collect();
    assert_eq!(got, want);
    for (a, b) in got
        .iter()
        .zip(full.iter().filter(|r| !matches!(r, Record::Mapping(_))))
    {
        if let (Record::Syscall(a), Record::Syscall(b)) = (a, b) {
            assert_eq!(r.str(a.path.unwrap()), full_r.str(b.path.unwrap()));
        }
    }
    // And a 2.0 trace's block 128 (none was ever written) is skipped as before.
    let mut v20 = bytes.clone();
    v20[10] = 0;
    let (got, _) = read_all(&v20).unwrap();
    assert_eq!(got, want);
}

#[test]
fn a_trace_cut_anywhere_in_a_mapping_block_never_panics() {
    let (bytes, want) = trace(40, raw());
    for cut in 16..bytes.len() {
        let res = read_all(&bytes[..cut]);
        if let Ok((got, r)) = res {
            assert!(r.truncation().is_some(), "cut at {cut}");
            assert!(want.starts_with(&got), "cut at {cut}: a prefix");
        }
    }
}

#[test]
fn a_garbled_mapping_block_is_an_error_naming_its_offset() {
    let (bytes, _) = trace(40, raw());
    let (mat, _, mlen) = *blocks(&bytes).iter().find(|b| b.1 == 128).unwrap();
    let mut errors = 0;
    for i in mat + 20..mat + mlen {
        for v in [0u8, 0x7f, 0x80, 0xff, 2] {
            let mut b = bytes.clone();
            b[i] = v;
            fix_checksums(&mut b);
            match read_all(&b) {
                Ok(_) => {}
                Err(e) => {
                    let msg = e.to_string();
                    assert!(matches!(e, TraceError::Corrupt { .. }), "{e:?}");
                    assert!(msg.contains("corrupt trace at byte offset "), "{msg}");
                    if msg.contains("mapping block") {
                        assert!(msg.contains(&format!("offset {mat}")), "{msg}");
                        errors += 1;
                    }
                }
            }
        }
    }
    assert!(errors > 10, "{errors}");
    // Cut short inside an entry: the payload ends early, checksums still right.
    let mut b = bytes[..mat].to_vec();
    let payload = &bytes[mat + 20..mat + mlen];
    let short = &payload[..payload.len() - 3];
    let mut hdr = bytes[mat..mat + 20].to_vec();
    hdr[8..12].copy_from_slice(&(short.len() as u32).to_le_bytes());
    hdr[12..16].copy_from_slice(&(short.len() as u32).to_le_bytes());
    b.extend_from_slice(&hdr);
    b.extend_from_slice(short);
    b.extend_from_slice(&bytes[mat + mlen..]);
    fix_checksums(&mut b);
    let e = read_all(&b).unwrap_err().to_string();
    assert!(
        e.contains(&format!("offset {mat}")) && e.contains("mapping block, entry"),
        "{e}"
    );
    // A mapping block with no data block after it, before the end block.
    let mut b = bytes[..mat + mlen].to_vec();
    let (eat, _, elen) = *blocks(&bytes).last().unwrap();
    b.extend_from_slice(&bytes[eat..eat + elen]);
    let e = read_all(&b).unwrap_err().to_string();
    assert!(e.contains("without its data block"), "{e}");
}

#[test]
fn a_mapping_with_a_block_local_string_is_refused() {
    let mut w = TraceWriter::new(Vec::new(), &meta(), raw()).unwrap();
    let p = w.intern_local(b"/lib/x.so");
    let m = Mapping {
        ts: 0,
        pid: 1,
        kind: MappingKind::Map,
        start: 0,
        len: 4096,
        offset: 0,
        path: Some(p),
        file: None,
        build_id: None,
    };
    assert!(w.push(&Record::Mapping(m)).is_err());
    assert_eq!(MappingKind::from_u8(1), Some(MappingKind::Unmap));
    assert_eq!(MappingKind::from_u8(2), None);
    assert_eq!(MappingKind::Map.name(), "map");
}
