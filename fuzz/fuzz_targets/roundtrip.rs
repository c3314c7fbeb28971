//! Fuzz target: whatever records a producer writes, the reader gives back exactly, with
//! the same strings, call stacks and stat answers, whatever the block size, age limit and compression.

#![no_main]

use dejavu_trace::*;
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});

fn opt<T>(
    u: &mut Unstructured<'_>,
    v: impl FnOnce(&mut Unstructured<'_>) -> Result<T>,
) -> Result<Option<T>> {
    Ok(if u.arbitrary::<bool>()? {
        Some(v(u)?)
    } else {
        None
    })
}

fn pick<T: Copy>(u: &mut Unstructured<'_>, from: &[T]) -> Result<Option<T>> {
    if from.is_empty() || !u.arbitrary::<bool>()? {
        return Ok(None);
    }
    Ok(Some(*u.choose(from)?))
}

/// A stat answer whose unknown groups are zero, as a reader would return it.
fn stat(u: &mut Unstructured<'_>) -> Result<FileStat> {
    let known = u.arbitrary::<u8>()? & stat_known::ALL;
    let mut st = FileStat {
        known,
        ..FileStat::default()
    };
    if known & stat_known::IDENTITY != 0 {
        st.dev = u.arbitrary()?;
        st.ino = u.arbitrary()?;
    }
    if known & stat_known::MODE != 0 {
        st.mode = u.arbitrary()?;
    }
    if known & stat_known::SIZE != 0 {
        st.size = u.arbitrary()?;
    }
    if known & stat_known::MTIME != 0 {
        st.mtime_ns = u.arbitrary()?;
    }
    if known & stat_known::CTIME != 0 {
        st.ctime_ns = u.arbitrary()?;
    }
    if known & stat_known::OWNER != 0 {
        st.nlink = u.arbitrary()?;
        st.uid = u.arbitrary()?;
        st.gid = u.arbitrary()?;
    }
    if known & stat_known::RDEV != 0 {
        st.rdev = u.arbitrary()?;
    }
    Ok(st)
}

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let meta = Meta {
        producer: u.arbitrary()?,
        backend: "fuzz".into(),
        command: u.arbitrary()?,
        start_unix_ns: u.arbitrary()?,
        ..Meta::default()
    };
    let opts = WriterOptions {
        block_bytes: u.int_in_range(1..=4096)?,
        block_age_ns: u.arbitrary()?,
        zstd_level: u.int_in_range(0..=3)?,
    };
    let mut w = TraceWriter::new(Vec::new(), &meta, opts).expect("writing to memory");
    let mut strings: Vec<(StrId, Vec<u8>)> = Vec::new();
    let mut stats: Vec<(StatId, FileStat)> = Vec::new();
    let mut stacks: Vec<(StackId, Vec<Frame>)> = Vec::new();
    let mut recs = Vec::new();
    let mut lost = 0u64;
    for _ in 0..u.int_in_range(0..=300)? {
        let ids: Vec<StrId> = strings.iter().map(|s| s.0).collect();
        let rec = match u.int_in_range(0..=10)? {
            10 => {
                // A mapping (format 2.1): written to the mapping block beside the data
                // block, read back in its place among the records.
                let kind = *u.choose(&[MappingKind::Map, MappingKind::Unmap])?;
                let map = kind == MappingKind::Map;
                Record::Mapping(Mapping {
                    ts: u.arbitrary()?,
                    pid: u.arbitrary()?,
                    kind,
                    start: u.arbitrary()?,
                    len: u.arbitrary()?,
                    offset: if map { u.arbitrary()? } else { 0 },
                    path: if map { pick(u, &ids)? } else { None },
                    file: if map { opt(u, |u| u.arbitrary())? } else { None },
                    build_id: if map { pick(u, &ids)? } else { None },
                })
            }
            9 => {
                // A call stack of trace strings (the writer keeps at most MAX_FRAMES).
                let mut frames = Vec::new();
                for _ in 0..u.int_in_range(0..=300)? {
                    frames.push(Frame {
                        kind: *u.choose(&[FrameKind::Native, FrameKind::Js, FrameKind::Python])?,
                        function: pick(u, &ids)?,
                        file: pick(u, &ids)?,
                        line: u.arbitrary()?,
                        column: u.arbitrary()?,
                        module: pick(u, &ids)?,
                        addr: u.arbitrary()?,
                    });
                }
                frames.truncate(codec::MAX_FRAMES);
                stacks.push((w.intern_stack(&frames), frames));
                continue;
            }
            0 => {
                let s: Vec<u8> = u.arbitrary()?;
                strings.push((w.intern(&s), s));
                continue;
            }
            1 => {
                let st = stat(u)?;
                stats.push((w.intern_stat(&st), st));
                continue;
            }
            2 => {
                let sys = *u.choose(Sys::ALL)?;
                let mut s = Syscall::new(u.arbitrary()?, u.arbitrary()?, u.arbitrary()?, sys);
                s.dur = u.arbitrary()?;
                s.ret = u.arbitrary()?;
                s.ev = u.arbitrary()?;
                s.fd = opt(u, |u| u.arbitrary())?;
                s.fd2 = opt(u, |u| u.arbitrary())?;
                s.path = pick(u, &ids)?;
                s.path2 = pick(u, &ids)?;
                s.flags = u.arbitrary()?;
                s.mode = u.arbitrary()?;
                s.offset = opt(u, |u| u.arbitrary())?;
                s.count = u.arbitrary()?;
                s.aux = u.arbitrary()?;
                let stat_ids: Vec<StatId> = stats.iter().map(|s| s.0).collect();
                s.stat = pick(u, &stat_ids)?;
                s.payload = pick(u, &ids)?;
                let stack_ids: Vec<StackId> = stacks.iter().map(|s| s.0).collect();
                s.stack = pick(u, &stack_ids)?;
                s.fingerprint = opt(u, |u| u.arbitrary())?;
                if u.arbitrary::<bool>()? {
                    // A block-local payload, as recorders write them: pushed at once.
                    let bytes: Vec<u8> = u.arbitrary()?;
                    s.payload = Some(w.intern_local(&bytes));
                    w.push(&Record::Syscall(s)).expect("writing to memory");
                    s.payload = None;
                    recs.push((Record::Syscall(s), Some(bytes)));
                    continue;
                }
                Record::Syscall(s)
            }
            3 => Record::Spawn(Spawn {
                ts: u.arbitrary()?,
                parent_pid: u.arbitrary()?,
                parent_tid: u.arbitrary()?,
                pid: u.arbitrary()?,
                tid: u.arbitrary()?,
                clone_flags: u.arbitrary()?,
            }),
            4 if !ids.is_empty() => Record::Exec(Exec {
                ts: u.arbitrary()?,
                pid: u.arbitrary()?,
                tid: u.arbitrary()?,
                exe: *u.choose(&ids)?,
                argv: *u.choose(&ids)?,
            }),
            5 => Record::Exit(Exit {
                ts: u.arbitrary()?,
                pid: u.arbitrary()?,
                tid: u.arbitrary()?,
                status: if u.arbitrary()? {
                    ExitStatus::Code(u.arbitrary()?)
                } else {
                    ExitStatus::Signal {
                        signal: u.arbitrary()?,
                        core: u.arbitrary()?,
                    }
                },
            }),
            6 => Record::Signal(Signal {
                ts: u.arbitrary()?,
                pid: u.arbitrary()?,
                tid: u.arbitrary()?,
                signal: u.arbitrary()?,
            }),
            7 => Record::Mark(Mark {
                ts: u.arbitrary()?,
                pid: u.arbitrary()?,
                tid: u.arbitrary()?,
                kind: *u.choose(&[MarkKind::AgentReady, MarkKind::MainDone])?,
            }),
            _ => {
                // Sums of fuzzed counts must not overflow the writer's total.
                let count = u.int_in_range(0..=u32::MAX as u64)?;
                lost += count;
                Record::Lost(Lost {
                    ts: u.arbitrary()?,
                    pid: u.arbitrary()?,
                    count,
                    reason: *u.choose(&[
                        LostReason::BufferFull,
                        LostReason::Unparsed,
                        LostReason::Undecodable,
                        LostReason::ForeignAbi,
                    ])?,
                })
            }
        };
        w.push(&rec).expect("writing to memory");
        recs.push((rec, None));
    }
    let end = End {
        end_ts: u.arbitrary()?,
        exit: None,
        ..End::default()
    };
    let bytes = w.finish(end).expect("writing to memory");

    let mut r = TraceReader::new(&bytes[..]).expect("a trace just written reads");
    assert_eq!(r.meta(), &meta);
    let mut got = Vec::new();
    while let Some(mut rec) = r.next_record().expect("a trace just written reads") {
        // A block-local id is renumbered by the reader and valid only now: compare bytes.
        let mut local = None;
        if let Record::Syscall(s) = &mut rec {
            if let Some(p) = s.payload.filter(|p| p.is_local()) {
                local = Some(r.str(p).to_vec());
                s.payload = None;
            }
        }
        got.push((rec, local));
    }
    assert_eq!(got, recs);
    for (id, s) in &strings {
        assert_eq!(r.str(*id), &s[..], "string {id:?}");
    }
    for (id, frames) in &stacks {
        assert_eq!(r.stack(*id), &frames[..], "stack {id:?}");
    }
    for (id, st) in &stats {
        assert_eq!(&r.stat(*id), st, "stat {id:?}");
    }
    let e = r.end().expect("the end block");
    assert_eq!(e.records, recs.len() as u64);
    assert_eq!(e.lost_events, lost);
    assert!(r.truncation().is_none());
    Ok(())
}
