//! The fuzz targets start from the seeds in fuzz/seeds (fuzz/README.md): they must be
//! traces of today's format that reach every decoder, the stack section's included, or the
//! fuzzers spend their time on the first bytes of an "unknown frame kind" error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dejavu_trace::*;
use std::path::Path;

fn seeds() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds")
}

/// Reads every record; `Err` only for a corrupt trace (a cut-off one reads to its cut).
fn read(name: &str) -> (Vec<Record>, TraceReader<std::fs::File>) {
    let f = std::fs::File::open(seeds().join(name)).unwrap();
    let mut r = TraceReader::new(f).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap_or_else(|e| panic!("{name}: {e}")) {
        out.push(rec);
    }
    (out, r)
}

#[test]
fn the_seeds_are_traces_of_this_format_that_reach_every_decoder() {
    for name in [
        "every-kind-raw.trace",
        "every-kind-zstd.trace",
        "many-blocks-raw.trace",
    ] {
        let (recs, r) = read(name);
        assert_eq!(
            r.version(),
            (codec::FORMAT_MAJOR, codec::FORMAT_MINOR),
            "{name}: regenerate the seeds (fuzz/README.md)"
        );
        assert!(r.end().is_some(), "{name} ends with its end block");
        let calls: Vec<&Syscall> = recs
            .iter()
            .filter_map(|x| match x {
                Record::Syscall(s) => Some(s),
                _ => None,
            })
            .collect();
        let stacks: Vec<&[Frame]> = calls
            .iter()
            .filter_map(|s| s.stack.map(|id| r.stack(id)))
            .collect();
        for kind in [FrameKind::Native, FrameKind::Js, FrameKind::Python] {
            assert!(
                stacks.iter().flat_map(|s| s.iter()).any(|f| f.kind == kind),
                "{name}: a {} frame",
                kind.name()
            );
        }
        assert!(
            stacks.iter().any(|s| s.is_empty()),
            "{name}: an empty stack"
        );
        assert!(calls.iter().any(|s| s.fingerprint.is_some()), "{name}");
        assert!(calls.iter().any(|s| s.sys == Sys::Mmap), "{name}");
        assert!(calls.iter().any(|s| s.stat.is_some()), "{name}");
        for kind in ["spawn", "exec", "signal", "exit", "mark", "lost", "mapping"] {
            assert!(
                recs.iter()
                    .any(|x| format!("{x:?}").to_lowercase().starts_with(kind)),
                "{name}: a {kind} record"
            );
        }
    }
    let (recs, r) = read("cut-off-raw.trace");
    assert!(r.end().is_none() && r.truncation().is_some());
    assert!(!recs.is_empty());
    let (recs, r) = read("empty.trace");
    assert!(recs.is_empty() && r.end().is_some());
}
