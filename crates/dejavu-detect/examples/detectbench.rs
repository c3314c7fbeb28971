//! detectbench: how fast `analyze` (replay + every detector) runs over a large trace, on
//! one core, best of 3, and how much memory it needs at its peak.
//!
//! Generates N events (default 10 million) in a separate process, so the generator's
//! memory does not count, shaped like a busy service and its helpers: stat loops on a few
//! hot paths (some of them missing), open/fstat/read/close cycles, writes with payloads to
//! a pipe and an append-mode log, writes that change a file followed by stats of it, and a
//! long tail of distinct paths each looked up a few times (a module resolver, a git
//! status). Four processes, deterministic (a fixed xorshift seed).
//!
//!     cargo run --release -p dejavu-detect --example detectbench -- [-n N] [--keep FILE]
//!     cargo run --release -p dejavu-detect --example detectbench -- --read FILE
//!     taskset -c 0 target/release/examples/detectbench        # pin to one core
//!
//! Prints events/s (from the time on CPU, /proc/thread-self/schedstat, so that other load
//! on the machine does not count; the wall time is printed too) and the peak resident
//! memory (VmHWM) of the analysing process. Run it
//! with two sizes (`-n 1M`, `-n 10M`): memory is meant to follow the distinct paths and
//! descriptors, which stay the same, not the event count. `--detector ID` runs one
//! detector alone, to see what each costs in time and memory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_detect::{analyze, Config};
use dejavu_trace::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Distinct paths in the long tail.
const TAIL: u64 = 200_000;

struct Args {
    events: u64,
    read: Option<PathBuf>,
    keep: Option<PathBuf>,
    generate: Option<PathBuf>,
    runs: u32,
    only: Option<Vec<String>>,
}

fn usage() -> ! {
    eprintln!(
        "usage: detectbench [-n EVENTS] [--keep FILE] [--runs R]\n       detectbench --read FILE [--runs R]\n\n\
         -n EVENTS    events to generate (default 10M; suffixes k, M)\n\
         --keep FILE  write the generated trace to FILE and keep it\n\
         --read FILE  analyse an existing trace instead of generating one\n\
         --runs R     analysis passes; the best is reported (default 3)\n\
         --detector ID[,ID...]  run only these detectors (to see what each costs)"
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
        generate: None,
        runs: 3,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "-n" | "--events" => a.events = parse_count(&val()).unwrap_or_else(|| usage()),
            "--read" => a.read = Some(val().into()),
            "--keep" => a.keep = Some(val().into()),
            "--generate" => a.generate = Some(val().into()),
            "--detector" => a.only = Some(val().split(',').map(str::to_string).collect()),
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

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn file(ino: u64, size: i64, mtime: i64) -> FileStat {
    FileStat {
        known: stat_known::ALL,
        dev: FileStat::makedev(259, 2),
        ino,
        mode: mode::S_IFREG | 0o644,
        nlink: 1,
        uid: 1000,
        gid: 1000,
        rdev: 0,
        size,
        mtime_ns: 1_714_000_000_000_000_000 + mtime,
        ctime_ns: 1_714_000_000_000_000_000 + mtime,
    }
}

/// Writes the synthetic trace; runs in its own process (see `main`).
fn generate(path: &Path, events: u64) -> Result<u64> {
    let meta = Meta {
        producer: "detectbench".into(),
        backend: "synthetic".into(),
        arch: "x86_64".into(),
        command: vec!["node".into(), "server.js".into()],
        cwd: "/srv/app".into(),
        payload_bytes: 256,
        ..Meta::default()
    };
    let mut w = TraceWriter::create(path, &meta, WriterOptions::default())?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ts: u64 = 1_000_000;
    let mut n = 0u64;
    const PIDS: [u32; 4] = [4000, 4001, 4002, 4003];
    // The process tree: node, two workers, a python helper.
    let node = w.intern(b"/usr/bin/node");
    let node_argv = w.intern(b"node\0server.js");
    let py = w.intern(b"/usr/bin/python3");
    let py_argv = w.intern(b"python3\0tools/reindex.py");
    for (i, &pid) in PIDS.iter().enumerate() {
        let parent = if i == 0 { 0 } else { PIDS[0] };
        w.push(&Record::Spawn(Spawn {
            ts,
            parent_pid: parent,
            parent_tid: parent,
            pid,
            tid: pid,
            clone_flags: 17,
        }))?;
        let (exe, argv) = if i == 3 {
            (py, py_argv)
        } else {
            (node, node_argv)
        };
        w.push(&Record::Exec(Exec {
            ts,
            pid,
            tid: pid,
            exe,
            argv,
        }))?;
        n += 2;
    }
    // Hot paths: (path, answer or ENOENT).
    let hot: Vec<(StrId, Option<StatId>)> = (0..8)
        .map(|i| {
            let p = w.intern(format!("/srv/app/config/hot{i}.json").as_bytes());
            let st = (i % 4 != 3).then(|| w.intern_stat(&file(100 + i, 1_000 + i as i64, 1)));
            (p, st)
        })
        .collect();
    let data: Vec<(StrId, StatId)> = (0..50)
        .map(|i| {
            let p = w.intern(format!("/srv/app/data/table{i}.csv").as_bytes());
            (p, w.intern_stat(&file(1_000 + i, 9_000, 2)))
        })
        .collect();
    let pipe = w.intern(b"pipe:[99123]");
    let log = w.intern(b"/var/log/app/server.log");
    let state = w.intern(b"/srv/app/state/counter");
    let lines: Vec<StrId> = (0..1_000)
        .map(|i| w.intern(format!("GET /api/items/{i} 200 in {}ms\n", i % 17).as_bytes()))
        .collect();
    let mut state_size: i64 = 0;
    let mut tail_next: u64 = 0;
    let mut tail_ids: Vec<Option<(StrId, StatId)>> = vec![None; TAIL as usize];

    macro_rules! push {
        ($s:expr) => {{
            let s: Syscall = $s;
            ts = s.ts + s.dur + rng.range(200, 2_000);
            w.push(&Record::Syscall(s))?;
            n += 1;
        }};
    }
    while n < events {
        let pid = PIDS[(rng.next() % 4) as usize];
        let roll = rng.next() % 1_000;
        let dur = rng.range(800, 3_000);
        if roll < 450 {
            // A stat loop on a hot path.
            let (p, st) = hot[(rng.next() % hot.len() as u64) as usize];
            let mut s = Syscall::new(ts, pid, pid, Sys::Statx);
            s.path = Some(p);
            s.aux = 0xfff;
            match st {
                Some(st) => s.stat = Some(st),
                None => s.ret = -2,
            }
            s.dur = dur;
            push!(s);
        } else if roll < 490 && events - n >= 5 {
            // open, fstat, read, read (EOF), close.
            let (p, st) = data[(rng.next() % data.len() as u64) as usize];
            let fd = 20;
            let mut s = Syscall::new(ts, pid, pid, Sys::Openat);
            s.path = Some(p);
            s.flags = 0o2_000_000;
            s.stat = Some(st);
            s.ret = fd as i64;
            s.dur = dur;
            push!(s);
            for (sys, ret) in [(Sys::Fstat, 0), (Sys::Read, 9_000), (Sys::Read, 0)] {
                let mut s = Syscall::new(ts, pid, pid, sys);
                s.fd = Some(fd);
                s.path = Some(p);
                s.ev = ev::PATH_FROM_FD;
                s.stat = Some(st);
                s.ret = ret;
                s.count = if sys == Sys::Read { 65_536 } else { 0 };
                s.dur = rng.range(500, 2_000);
                push!(s);
            }
            let mut s = Syscall::new(ts, pid, pid, Sys::Close);
            s.fd = Some(fd);
            s.path = Some(p);
            s.ev = ev::PATH_FROM_FD;
            s.dur = 600;
            push!(s);
        } else if roll < 640 {
            // A log line, to the pipe on fd 1 or the append-mode log on fd 7.
            let line = lines[(rng.next() % lines.len() as u64) as usize];
            let to_log = rng.next() % 2 == 0;
            let mut s = Syscall::new(ts, pid, pid, Sys::Write);
            s.fd = Some(if to_log { 7 } else { 1 });
            s.path = Some(if to_log { log } else { pipe });
            s.ev = ev::PATH_FROM_FD;
            s.count = 30;
            s.ret = 30;
            s.payload = Some(line);
            s.dur = dur;
            push!(s);
        } else if roll < 670 && events - n >= 4 {
            // Change a file, then look at it: not redundant (an invalidation point).
            let mut s = Syscall::new(ts, pid, pid, Sys::Openat);
            s.path = Some(state);
            s.flags = 0o2_001_101; // O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC
            s.ret = 21;
            s.dur = dur;
            push!(s);
            let mut s = Syscall::new(ts, pid, pid, Sys::Write);
            s.fd = Some(21);
            s.path = Some(state);
            s.ev = ev::PATH_FROM_FD;
            s.count = 8;
            s.ret = 8;
            s.dur = dur;
            push!(s);
            state_size += 8;
            let mut s = Syscall::new(ts, pid, pid, Sys::Close);
            s.fd = Some(21);
            s.path = Some(state);
            s.ev = ev::PATH_FROM_FD;
            s.dur = 600;
            push!(s);
            let st = w.intern_stat(&file(7_777, state_size, state_size));
            let mut s = Syscall::new(ts, pid, pid, Sys::Newfstatat);
            s.path = Some(state);
            s.stat = Some(st);
            s.dur = dur;
            push!(s);
        } else if roll < 700 {
            let mut s = Syscall::new(ts, pid, pid, Sys::Access);
            s.path = Some(hot[0].0);
            s.mode = 4; // R_OK
            s.dur = dur;
            push!(s);
        } else {
            // The long tail: each distinct path looked up a few times over the run.
            let i = (tail_next % TAIL) as usize;
            tail_next += 1 + rng.next() % 3;
            let (p, st) = match tail_ids[i] {
                Some(v) => v,
                None => {
                    let p = w.intern(
                        format!("/srv/app/node_modules/pkg{}/lib/file{}.js", i / 64, i % 64)
                            .as_bytes(),
                    );
                    let st = w.intern_stat(&file(1_000_000 + i as u64, 2_000, 3));
                    tail_ids[i] = Some((p, st));
                    (p, st)
                }
            };
            let mut s = Syscall::new(ts, pid, pid, Sys::Newfstatat);
            s.path = Some(p);
            s.stat = Some(st);
            s.flags = 0x100; // AT_SYMLINK_NOFOLLOW: an lstat
            s.dur = dur;
            push!(s);
        }
    }
    w.finish(End {
        end_ts: ts + 1_000_000,
        exit: Some(ExitStatus::Code(0)),
        ..End::default()
    })?;
    Ok(n)
}

/// Time this thread has spent on a CPU, ns (/proc/thread-self/schedstat). On a shared
/// machine the wall time also counts waiting for a CPU; this does not.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Peak resident memory of this process so far, kB.
fn vm_hwm_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
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

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let args = parse_args();
    if let Some(path) = &args.generate {
        let n = generate(path, args.events)?;
        println!("{n}");
        return Ok(());
    }
    let mut remove = None;
    let path = match (&args.read, &args.keep) {
        (Some(p), _) => p.clone(),
        (None, keep) => {
            let path = keep.clone().unwrap_or_else(|| {
                std::env::temp_dir().join(format!("detectbench-{}.dvt", std::process::id()))
            });
            if keep.is_none() {
                remove = Some(path.clone());
            }
            eprintln!(
                "generating {} events into {} ...",
                args.events,
                path.display()
            );
            let t = Instant::now();
            // In a child, so that the generator's memory is not in our VmHWM.
            let st = Command::new(std::env::current_exe()?)
                .arg("--generate")
                .arg(&path)
                .arg("-n")
                .arg(args.events.to_string())
                .status()?;
            if !st.success() {
                return Err(format!("generating the trace failed: {st}").into());
            }
            eprintln!("generated in {:.1} s", t.elapsed().as_secs_f64());
            path
        }
    };
    let size = std::fs::metadata(&path)?.len();
    let base_kb = vm_hwm_kb();
    let cfg = Config {
        only: args.only.clone(),
        ..Config::default()
    };
    let mut best: Option<(Duration, Duration)> = None;
    let mut summary = String::new();
    let mut records = 0u64;
    for run in 1..=args.runs {
        let t = Instant::now();
        let c = cpu_ns();
        let mut r = TraceReader::open(&path)?;
        let a = analyze(&mut r, &cfg, |_| {})?;
        let wall = t.elapsed();
        let cpu = Duration::from_nanos(cpu_ns().saturating_sub(c));
        records = r.records_read();
        eprintln!(
            "pass {run}: {:.3} s wall, {:.3} s on CPU, {} findings ({} hidden), {} syscalls",
            wall.as_secs_f64(),
            cpu.as_secs_f64(),
            a.findings.len(),
            a.hidden,
            a.syscalls
        );
        summary = a
            .findings
            .iter()
            .take(4)
            .map(|f| {
                format!(
                    "{} {} ({} redundant)",
                    f.detector,
                    f.paths.join(","),
                    f.redundant_calls
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        match best {
            Some((b, _)) if b <= cpu => {}
            _ => best = Some((cpu, wall)),
        }
    }
    if let Some(p) = remove {
        let _ = std::fs::remove_file(p);
    }
    let Some((cpu, wall)) = best else { usage() };
    let peak_kb = vm_hwm_kb();
    println!(
        "### detectbench: {records} records, {:.1} MB trace, {}, load average {}",
        size as f64 / 1e6,
        cpu_model(),
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    );
    println!();
    println!("| what | result |");
    println!("| --- | --- |");
    println!(
        "| analyze (replay + all detectors), best of {} by CPU time | {:.3} s on CPU ({:.2} M events/s), {:.3} s wall |",
        args.runs,
        cpu.as_secs_f64(),
        records as f64 / cpu.as_secs_f64() / 1e6,
        wall.as_secs_f64(),
    );
    println!(
        "| peak RSS (VmHWM) | {:.1} MB (before analysing: {:.1} MB) |",
        peak_kb as f64 / 1024.0,
        base_kb as f64 / 1024.0
    );
    println!("| top findings | {summary} |");
    Ok(())
}
