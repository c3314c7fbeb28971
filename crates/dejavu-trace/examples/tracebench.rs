//! tracebench: size and read speed of the trace format on a synthetic stat-heavy trace.
//!
//! Generates N events (default 10 million) shaped like a Node.js `statSync` loop (one
//! thread, a handful of paths, the same stat answers again and again, ts steps of 2-5 µs
//! and calls of 1-3 µs with jitter, an open/fstat/read/close now and then), writes them
//! with the default `WriterOptions`, then times reading them back with `TraceReader`
//! (best of 3) on one core. `--read FILE` times an existing trace instead.
//!
//!     cargo run --release -p dejavu-trace --example tracebench -- [-n N] [--keep FILE]
//!     cargo run --release -p dejavu-trace --example tracebench -- --read FILE
//!
//! The output is a Markdown table for bench/RESULTS.md. The "breakdown" rows re-read the
//! file block by block outside `TraceReader` to show how the read time divides between
//! I/O, checksums, decompression and record decoding.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_trace::codec::{self, codec_id};
use dejavu_trace::*;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Args {
    events: u64,
    read: Option<PathBuf>,
    keep: Option<PathBuf>,
    runs: u32,
}

fn usage() -> ! {
    eprintln!(
        "usage: tracebench [-n EVENTS] [--keep FILE] [--runs R]\n       tracebench --read FILE [--runs R]\n\n\
         -n EVENTS    events to generate (default 10000000; suffixes k, M allowed)\n\
         --keep FILE  write the generated trace to FILE and keep it (default: a temp file)\n\
         --read FILE  time reading an existing trace instead of generating one\n\
         --runs R     read passes; the best is reported (default 3)"
    );
    std::process::exit(2)
}

fn parse_count(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1_000),
        b'm' | b'M' => (&s[..s.len() - 1], 1_000_000),
        _ => (s, 1),
    };
    num.replace('_', "").parse::<u64>().ok().map(|n| n * mult)
}

fn parse_args() -> Args {
    let mut a = Args {
        events: 10_000_000,
        read: None,
        keep: None,
        runs: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "-n" | "--events" => a.events = parse_count(&val()).unwrap_or_else(|| usage()),
            "--read" => a.read = Some(val().into()),
            "--keep" => a.keep = Some(val().into()),
            "--runs" => {
                a.runs = val()
                    .parse()
                    .ok()
                    .filter(|&r| r > 0)
                    .unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }
    a
}

/// xorshift64*: deterministic, so every run measures the same trace.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in lo..=hi.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn stat_of(ino: u64, size: i64, dir: bool) -> FileStat {
    let mtime = 1_714_000_000_000_000_000 + (ino as i64) * 1_000_003;
    FileStat {
        known: stat_known::ALL,
        dev: FileStat::makedev(259, 2),
        ino,
        mode: if dir {
            mode::S_IFDIR | 0o755
        } else {
            mode::S_IFREG | 0o644
        },
        nlink: if dir { 4 } else { 1 },
        uid: 1000,
        gid: 1000,
        rdev: 0,
        size,
        mtime_ns: mtime,
        ctime_ns: mtime + 250_000,
    }
}

/// Writes the synthetic trace to `path`; returns (events, seconds spent).
fn generate(path: &Path, events: u64) -> Result<(u64, f64)> {
    const PID: u32 = 48_211;
    let meta = Meta {
        producer: "tracebench".into(),
        backend: "synthetic".into(),
        arch: "x86_64".into(),
        command: vec!["node".into(), "watch-config.js".into()],
        cwd: "/home/dev/app".into(),
        payload_bytes: 256,
        ..Meta::default()
    };
    let t0 = Instant::now();
    let mut w = TraceWriter::create(path, &meta, WriterOptions::default())?;
    // (path, stat answer or None for ENOENT, weight)
    let targets: Vec<(StrId, Option<StatId>, u64)> = [
        (
            "/home/dev/app/config/settings.json",
            Some(stat_of(1_310_722, 2_184, false)),
            40,
        ),
        (
            "/home/dev/app/package.json",
            Some(stat_of(1_310_700, 1_422, false)),
            20,
        ),
        (
            "/home/dev/app/node_modules/lodash/package.json",
            Some(stat_of(1_442_001, 2_467, false)),
            10,
        ),
        (
            "/home/dev/app/config",
            Some(stat_of(1_310_720, 4_096, true)),
            10,
        ),
        ("/home/dev/app/.env.local", None, 10),
        ("/home/dev/app/node_modules/.cache/config.json", None, 10),
    ]
    .iter()
    .map(|(p, st, weight)| {
        (
            w.intern(p.as_bytes()),
            st.map(|s| w.intern_stat(&s)),
            *weight,
        )
    })
    .collect();
    let total_weight: u64 = targets.iter().map(|t| t.2).sum();
    let data = w.intern(b"/home/dev/app/data/feature-flags.json");
    let data_stat = w.intern_stat(&stat_of(1_310_790, 9_812, false));
    let stdout = w.intern(b"pipe:[2291187]");
    let line: &[u8] = b"config unchanged\n";

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ts: u64 = 25_000_000;
    let mut n = 0u64;
    let push = |w: &mut TraceWriter<File>, s: Syscall, n: &mut u64| -> Result<()> {
        *n += 1;
        w.push(&Record::Syscall(s))
    };
    while n < events {
        ts += rng.range(2_000, 5_000);
        // Mostly the main thread; now and then a libuv pool thread.
        let tid = if rng.next() % 100 == 0 {
            PID + 1 + (rng.next() % 4) as u32
        } else {
            PID
        };
        let roll = rng.next() % 1_000;
        if roll < 5 && events - n >= 5 {
            // Re-read the data file: openat, fstat, read, read (EOF), close.
            let fd = 21;
            let mut s = Syscall::new(ts, PID, tid, Sys::Openat);
            s.path = Some(data);
            s.flags = 0o2_000_000; // O_CLOEXEC
            s.stat = Some(data_stat);
            s.ret = fd as i64;
            s.dur = rng.range(4_000, 9_000);
            push(&mut w, s, &mut n)?;
            for (sys, ret, count) in [
                (Sys::Fstat, 0, 0),
                (Sys::Read, 9_812, 65_536),
                (Sys::Read, 0, 65_536),
            ] {
                ts += s.dur + rng.range(500, 2_000);
                s = Syscall::new(ts, PID, tid, sys);
                s.fd = Some(fd);
                s.path = Some(data);
                s.ev = ev::PATH_FROM_FD;
                s.stat = Some(data_stat);
                s.ret = ret;
                s.count = count;
                s.dur = rng.range(1_000, 3_000);
                push(&mut w, s, &mut n)?;
            }
            ts += s.dur + rng.range(500, 2_000);
            let mut c = Syscall::new(ts, PID, tid, Sys::Close);
            c.fd = Some(fd);
            c.path = Some(data);
            c.ev = ev::PATH_FROM_FD;
            c.dur = rng.range(500, 1_500);
            push(&mut w, c, &mut n)?;
        } else if roll < 7 {
            let mut s = Syscall::new(ts, PID, tid, Sys::Write);
            s.fd = Some(1);
            s.path = Some(stdout);
            s.ev = ev::PATH_FROM_FD;
            s.count = 17;
            s.ret = 17;
            // Payloads are block-local, as the recorder writes them.
            s.payload = Some(w.intern_local(line));
            s.dur = rng.range(2_000, 6_000);
            push(&mut w, s, &mut n)?;
        } else {
            let mut pick = rng.next() % total_weight;
            let (path, stat, _) = *targets
                .iter()
                .find(|t| {
                    let hit = pick < t.2;
                    pick = pick.saturating_sub(t.2);
                    hit
                })
                .unwrap_or(&targets[0]);
            // What fs.statSync does on x86_64: statx(AT_FDCWD, path, 0, STATX_BASIC_STATS|STATX_BTIME).
            let mut s = Syscall::new(ts, PID, tid, Sys::Statx);
            s.path = Some(path);
            s.aux = 0xfff;
            match stat {
                Some(st) => s.stat = Some(st),
                None => s.ret = -2,
            }
            s.dur = rng.range(1_000, 3_000);
            push(&mut w, s, &mut n)?;
        }
    }
    w.finish(End {
        end_ts: ts + 1_000_000,
        exit: Some(ExitStatus::Code(0)),
        ..End::default()
    })?;
    Ok((n, t0.elapsed().as_secs_f64()))
}

/// One full pass with `TraceReader`; returns (records, elapsed). Folds every record into
/// a checksum so the optimizer cannot skip decoding.
fn read_pass(path: &Path) -> Result<(u64, Duration, u64)> {
    let t0 = Instant::now();
    let mut r = TraceReader::open(path)?;
    let mut n = 0u64;
    let mut fold = 0u64;
    while let Some(rec) = r.next_record()? {
        n += 1;
        fold = fold.rotate_left(5)
            ^ match rec {
                Record::Syscall(s) => {
                    s.ts ^ s.dur ^ s.ret as u64 ^ s.path.map_or(0, |p| p.0 as u64)
                }
                other => other.ts(),
            };
    }
    Ok((n, t0.elapsed(), fold))
}

/// Time spent per phase when the file is re-read block by block, outside `TraceReader`.
#[derive(Default)]
struct Breakdown {
    io: Duration,
    crc: Duration,
    zstd: Duration,
    blocks: u64,
    raw_bytes: u64,
}

fn breakdown(path: &Path) -> Result<Breakdown> {
    let mut b = Breakdown::default();
    let mut f = BufReader::with_capacity(64 << 10, File::open(path)?);
    let mut hdr = [0u8; codec::FILE_HEADER_LEN];
    f.read_exact(&mut hdr)?;
    let mut dec = zstd::bulk::Decompressor::new()?;
    let mut stored = Vec::new();
    let mut raw = Vec::new();
    loop {
        let t = Instant::now();
        let mut bh = [0u8; codec::BLOCK_HEADER_LEN];
        if f.read_exact(&mut bh).is_err() {
            break;
        }
        let len = u32::from_le_bytes([bh[8], bh[9], bh[10], bh[11]]) as usize;
        let raw_len = u32::from_le_bytes([bh[12], bh[13], bh[14], bh[15]]) as usize;
        stored.resize(len, 0);
        f.read_exact(&mut stored)?;
        b.io += t.elapsed();
        let t = Instant::now();
        let mut h = crc32fast::Hasher::new();
        h.update(&bh[4..16]);
        h.update(&stored);
        std::hint::black_box(h.finalize());
        b.crc += t.elapsed();
        if bh[5] == codec_id::ZSTD {
            let t = Instant::now();
            raw.clear();
            raw.reserve(raw_len);
            dec.decompress_to_buffer(&stored, &mut raw)?;
            b.zstd += t.elapsed();
        }
        b.blocks += 1;
        b.raw_bytes += raw_len as u64;
    }
    Ok(b)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn main() -> Result<()> {
    let args = parse_args();
    let mut _tmp = None;
    let (path, generated) = match (&args.read, &args.keep) {
        (Some(p), _) => (p.clone(), None),
        (None, keep) => {
            let path = match keep {
                Some(k) => k.clone(),
                None => {
                    let t = tempfile::Builder::new()
                        .prefix("tracebench-")
                        .suffix(".dvt")
                        .tempfile()?;
                    let p = t.path().to_path_buf();
                    _tmp = Some(t); // deleted on exit
                    p
                }
            };
            eprintln!(
                "generating {} events into {} ...",
                thousands(args.events),
                path.display()
            );
            let (n, secs) = generate(&path, args.events)?;
            (path, Some((n, secs)))
        }
    };
    let size = std::fs::metadata(&path)?.len();

    let mut best: Option<(u64, Duration)> = None;
    let mut folds = Vec::new();
    for run in 1..=args.runs {
        let (n, d, fold) = read_pass(&path)?;
        eprintln!(
            "read pass {run}: {} records in {:.3} s",
            thousands(n),
            d.as_secs_f64()
        );
        folds.push(fold);
        if best.is_none_or(|(_, b)| d < b) {
            best = Some((n, d));
        }
    }
    let Some((records, read)) = best else { usage() };
    let bd = breakdown(&path)?;

    let per_s = |d: Duration| records as f64 / d.as_secs_f64().max(1e-9);
    let ns_per = |d: Duration| d.as_nanos() as f64 / records.max(1) as f64;
    let what = match &args.read {
        Some(p) => format!("`{}`", p.display()),
        None => "synthetic statSync loop (`tracebench`)".to_string(),
    };
    println!("### tracebench: {what}, {} records", thousands(records));
    println!();
    println!("| metric | value |");
    println!("| --- | --- |");
    println!("| machine | {}, 1 core |", cpu_model());
    println!(
        "| file size | {} bytes ({} blocks) |",
        thousands(size),
        thousands(bd.blocks)
    );
    println!(
        "| bytes per event | {:.2} (decompressed: {:.2}) |",
        size as f64 / records.max(1) as f64,
        bd.raw_bytes as f64 / records.max(1) as f64
    );
    if let Some((n, secs)) = generated {
        println!(
            "| write (generate + encode + zstd) | {:.2} M events/s |",
            n as f64 / secs / 1e6
        );
    }
    println!(
        "| read, `TraceReader` (best of {}) | **{:.2} M events/s** ({:.1} ns/event) |",
        args.runs,
        per_s(read) / 1e6,
        ns_per(read)
    );
    println!("| breakdown: file I/O | {:.1} ns/event |", ns_per(bd.io));
    println!("| breakdown: CRC-32 | {:.1} ns/event |", ns_per(bd.crc));
    println!(
        "| breakdown: zstd decompression | {:.1} ns/event |",
        ns_per(bd.zstd)
    );
    let rest = read.saturating_sub(bd.io + bd.crc + bd.zstd);
    println!(
        "| breakdown: record decoding (the rest) | {:.1} ns/event |",
        ns_per(rest)
    );
    // Every pass must have decoded the same records.
    if folds.windows(2).any(|w| w[0] != w[1]) {
        eprintln!("warning: read passes disagree: {folds:?}");
    }
    Ok(())
}
