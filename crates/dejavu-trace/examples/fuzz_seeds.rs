//! fuzz_seeds: writes the small valid traces that seed the fuzz targets in fuzz/.
//!
//!     cargo run -p dejavu-trace --example fuzz_seeds -- fuzz/seeds
//!
//! Each seed is small (fuzzers mutate small inputs best) and together they cover every
//! record kind, every syscall field (stacks of every frame kind and write fingerprints
//! included), mmap, stat answers with some groups unknown, several
//! blocks, raw and zstd blocks, an empty trace, and a trace cut off mid-block. Most are
//! uncompressed so that the mutate_trace target's mutations land in decodable bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_trace::*;
use std::path::PathBuf;

fn meta() -> Meta {
    Meta {
        producer: "fuzz_seeds".into(),
        backend: "synthetic".into(),
        arch: "x86_64".into(),
        command: vec!["node".into(), "app.js".into()],
        cwd: "/app".into(),
        payload_bytes: 64,
        ..Meta::default()
    }
}

/// Every record kind and every syscall field, in `records` records.
fn every_kind(opts: WriterOptions, records: u64) -> Result<Vec<u8>> {
    let mut w = TraceWriter::new(Vec::new(), &meta(), opts)?;
    let full = FileStat {
        known: stat_known::ALL,
        dev: FileStat::makedev(259, 2),
        ino: 77,
        mode: mode::S_IFREG | 0o644,
        nlink: 1,
        uid: 1000,
        gid: 1000,
        rdev: 0,
        size: 1234,
        mtime_ns: 1_714_000_000_123_456_789,
        ctime_ns: 1_714_000_000_223_456_789,
    };
    let partial = FileStat {
        known: stat_known::MODE | stat_known::SIZE,
        mode: mode::S_IFDIR | 0o755,
        size: 4096,
        ..FileStat::default()
    };
    let st = [w.intern_stat(&full), w.intern_stat(&partial)];
    let paths = [
        w.intern(b"/app/config.json"),
        w.intern(b"/app/missing.js"),
        w.intern(b"pipe:[42]"),
    ];
    let payload = w.intern(b"hello\n");
    // Call stacks: native (module + address), JS and Python frames, some fields unknown,
    // an empty stack and a shared prefix.
    let (libc, app, main_js, py) = (
        w.intern(b"/lib/x86_64-linux-gnu/libc.so.6"),
        w.intern(b"/app/bin/app"),
        w.intern(b"/app/main.js"),
        w.intern(b"/app/tool.py"),
    );
    let (open64, load, run) = (
        w.intern(b"__open64"),
        w.intern(b"load_config"),
        w.intern(b"run"),
    );
    let native = |module, function, addr, line| Frame {
        kind: FrameKind::Native,
        function,
        file: None,
        line,
        column: 0,
        module: Some(module),
        addr,
    };
    let script = |kind, file, function, line, column| Frame {
        kind,
        function,
        file: Some(file),
        line,
        column,
        module: None,
        addr: 0,
    };
    let stacks = [
        w.intern_stack(&[
            native(libc, Some(open64), 0x11_4a20, 0),
            native(app, Some(load), 0x1234, 42),
            native(app, None, 0x1300, 0),
        ]),
        w.intern_stack(&[
            script(FrameKind::Js, main_js, Some(load), 12, 7),
            script(FrameKind::Js, main_js, None, 30, 1),
        ]),
        w.intern_stack(&[script(FrameKind::Python, py, Some(run), 5, 0)]),
        w.intern_stack(&[]),
    ];
    let (exe, argv) = (w.intern(b"/bin/sh"), w.intern(b"sh\0-c\0true"));
    w.push(&Record::Spawn(Spawn {
        ts: 10,
        parent_pid: 100,
        parent_tid: 100,
        pid: 100,
        tid: 101,
        clone_flags: 0x3d0f00,
    }))?;
    for i in 0..records {
        let mut s = Syscall::new(
            1_000 + i * 3_000,
            100,
            100 + (i % 2) as u32,
            if i == 1 {
                // A file-backed mapping (format 2.0).
                Sys::Mmap
            } else {
                Sys::ALL[(i as usize * 7) % Sys::ALL.len()]
            },
        );
        s.dur = 1_000 + i % 2_000;
        s.ret = if i % 3 == 0 { -2 } else { i as i64 % 5 };
        s.ev = (i % 256) as u16;
        s.fd = (i % 2 == 0).then_some(3);
        s.fd2 = (i % 5 == 0).then_some(-100);
        s.path = Some(paths[i as usize % 3]);
        s.path2 = (i % 4 == 0).then_some(paths[0]);
        s.flags = i * 0o1001;
        s.mode = 0o644;
        s.offset = (i % 3 == 1).then_some(-(i as i64));
        s.count = 4096;
        s.aux = 0xfff;
        s.stat = Some(st[i as usize % 2]);
        s.stack = (i % 5 != 4).then_some(stacks[i as usize % stacks.len()]);
        s.fingerprint = (i % 3 == 2).then_some(0x9e37_79b9_7f4a_7c15 ^ i);
        s.payload = (i % 6 == 0).then_some(payload);
        if i % 6 == 3 {
            // Write payloads are block-local in real traces.
            s.payload = Some(w.intern_local(format!("line {i}\n").as_bytes()));
        }
        w.push(&Record::Syscall(s))?;
    }
    w.push(&Record::Spawn(Spawn {
        ts: 20,
        parent_pid: 100,
        parent_tid: 101,
        pid: 200,
        tid: 200,
        clone_flags: 17,
    }))?;
    w.push(&Record::Exec(Exec {
        ts: 30,
        pid: 200,
        tid: 200,
        exe,
        argv,
    }))?;
    // Its code (format 2.1): the program with a build id and identity, a library
    // without, and that library unmapped again.
    let bid = w.intern(&[0x5a; 20]);
    let lib = w.intern(b"/usr/lib/libx.so.1");
    for (kind, start, path, file, build_id) in [
        (
            MappingKind::Map,
            0x5555_0000_0000,
            Some(exe),
            Some((0x801, 42)),
            Some(bid),
        ),
        (MappingKind::Map, 0x7f00_0000_0000, Some(lib), None, None),
        (MappingKind::Unmap, 0x7f00_0000_0000, None, None, None),
    ] {
        w.push(&Record::Mapping(Mapping {
            ts: 31,
            pid: 200,
            kind,
            start,
            len: 0x3000,
            offset: 0x1000,
            path,
            file,
            build_id,
        }))?;
    }
    w.push(&Record::Signal(Signal {
        ts: 40,
        pid: 200,
        tid: 200,
        signal: 15,
    }))?;
    w.push(&Record::Exit(Exit {
        ts: 50,
        pid: 200,
        tid: 200,
        status: ExitStatus::Signal {
            signal: 15,
            core: false,
        },
    }))?;
    w.push(&Record::Mark(Mark {
        ts: 25,
        pid: 200,
        tid: 200,
        kind: MarkKind::AgentReady,
    }))?;
    w.push(&Record::Mark(Mark {
        ts: 35,
        pid: 200,
        tid: 200,
        kind: MarkKind::MainDone,
    }))?;
    w.push(&Record::Lost(Lost {
        ts: 60,
        pid: 0,
        count: 7,
        reason: LostReason::Unparsed,
    }))?;
    w.push(&Record::Exit(Exit {
        ts: 70,
        pid: 100,
        tid: 101,
        status: ExitStatus::Code(0),
    }))?;
    w.finish(End {
        end_ts: 100_000,
        exit: Some(ExitStatus::Code(0)),
        ..End::default()
    })
}

fn main() -> Result<()> {
    let dir: PathBuf = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/seeds".into())
        .into();
    std::fs::create_dir_all(&dir)?;
    let raw = WriterOptions {
        zstd_level: 0,
        ..WriterOptions::default()
    };
    let small_blocks = WriterOptions {
        block_bytes: 96,
        zstd_level: 0,
        ..WriterOptions::default()
    };
    let zstd = WriterOptions::default();
    let empty = TraceWriter::new(Vec::new(), &meta(), raw)?.finish(End::default())?;
    let blocks = every_kind(small_blocks, 24)?;
    // Cut inside the last data block: the reader must report a truncation.
    let cut = blocks[..blocks.len() - 70].to_vec();
    let seeds = [
        ("every-kind-raw.trace", every_kind(raw, 12)?),
        ("many-blocks-raw.trace", blocks),
        ("every-kind-zstd.trace", every_kind(zstd, 12)?),
        ("empty.trace", empty),
        ("cut-off-raw.trace", cut),
    ];
    for (name, bytes) in seeds {
        let path = dir.join(name);
        std::fs::write(&path, &bytes)?;
        println!("{} ({} bytes)", path.display(), bytes.len());
    }
    Ok(())
}
