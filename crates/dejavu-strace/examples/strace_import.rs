//! Imports strace logs into a trace file and prints the import report; with `--dump`,
//! prints every record of the written trace (a debugging aid and the speed benchmark:
//! `cargo run --release -p dejavu-strace --example strace_import -- OUT.dvt LOG...`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_strace::{import_files, ImportOptions};
use dejavu_trace::{Record, TraceReader};
use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dump = args.iter().any(|a| a == "--dump");
    args.retain(|a| a != "--dump");
    if args.len() < 2 {
        eprintln!("usage: strace_import [--dump] OUT.dvt LOG...");
        std::process::exit(2);
    }
    let out = PathBuf::from(&args[0]);
    let inputs: Vec<PathBuf> = args[1..].iter().map(PathBuf::from).collect();
    let start = Instant::now();
    let file = std::io::BufWriter::new(std::fs::File::create(&out)?);
    let report = import_files(&inputs, &ImportOptions::default(), file)?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{} lines, {} records ({} syscalls) in {:.3}s: {:.0} lines/s",
        report.lines,
        report.records,
        report.syscalls,
        secs,
        report.lines as f64 / secs
    );
    eprintln!(
        "unparsed {}, unmatched resumed {}, never resumed {}, fd unknown {}, relative unresolved {}, unknown symbols {}",
        report.unparsed.len(),
        report.unmatched_resumed,
        report.unfinished_never_resumed,
        report.fd_unknown,
        report.relative_paths_unresolved,
        report.unknown_symbols
    );
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    for u in report.unparsed.iter().take(20) {
        eprintln!("unparsed {}:{}: {} ({})", u.file, u.line, u.text, u.reason);
    }
    if dump {
        let mut r = TraceReader::open(&out)?;
        println!("{:?}", r.meta());
        while let Some(rec) = r.next_record()? {
            match rec {
                Record::Syscall(s) => {
                    let p = |id: Option<dejavu_trace::StrId>| {
                        id.map(|i| r.strings().lossy(i).into_owned())
                    };
                    println!(
                        "{} {}/{} {} ret={} dur={} ev={:#x} fd={:?} fd2={:?} path={:?} path2={:?} flags={:#o} mode={:#o} off={:?} count={} aux={:#x} stat={:?} payload={:?}",
                        s.ts, s.pid, s.tid, s.sys, s.ret, s.dur, s.ev, s.fd, s.fd2, p(s.path), p(s.path2),
                        s.flags, s.mode, s.offset, s.count, s.aux, s.stat.map(|i| r.stat(i)), p(s.payload)
                    );
                }
                other => println!("{other:?}"),
            }
        }
        println!("{:?}", r.end());
    }
    Ok(())
}
