//! `dejavu report --format pprof`: a gzipped profile.proto that `go tool pprof`, Pyroscope
//! and speedscope read. A sample is a (stack, syscall) pair with three values: syscalls
//! (count), redundant syscalls (count) and syscall time (nanoseconds). The syscall itself
//! is the leaf frame (`[statx]`), so `pprof -top` ranks syscalls and `-peek`/flame graphs
//! show the code above them; calls recorded without a stack hang under their program
//! (`[node]`). docs/report-format.md, "pprof".
//!
//! The messages are the subset of github.com/google/pprof/proto/profile.proto dejavu
//! writes, with the same field numbers.

use dejavu_detect::Analysis;
use dejavu_trace::{Record, TraceReader};
use prost::Message;
use rustc_hash::FxHashMap;
use std::io::Write;
use std::path::Path;

#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

#[derive(Default)]
struct Builder {
    strings: Vec<String>,
    string_ids: FxHashMap<String, i64>,
    functions: Vec<Function>,
    function_ids: FxHashMap<(i64, i64), u64>,
    locations: Vec<Location>,
    /// (function, line) -> location id.
    location_ids: FxHashMap<(u64, i64), u64>,
}

impl Builder {
    fn s(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    fn location(&mut self, function: &str, file: &str, line: u32) -> u64 {
        let (name, file) = (self.s(function), self.s(file));
        let fid = match self.function_ids.get(&(name, file)) {
            Some(&id) => id,
            None => {
                let id = self.functions.len() as u64 + 1;
                self.functions.push(Function {
                    id,
                    name,
                    system_name: name,
                    filename: file,
                });
                self.function_ids.insert((name, file), id);
                id
            }
        };
        let key = (fid, line as i64);
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            line: vec![Line {
                function_id: fid,
                line: line as i64,
            }],
        });
        self.location_ids.insert(key, id);
        id
    }
}

/// Writes the gzipped profile of the trace at `path` (analysed as `analysis`) to `out`.
pub fn write(path: &Path, analysis: &Analysis, out: &mut dyn Write) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut r = TraceReader::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut b = Builder::default();
    b.s("");
    let types = [
        ("syscalls", "count"),
        ("redundant_syscalls", "count"),
        ("syscall_time", "nanoseconds"),
    ];
    let sample_type: Vec<ValueType> = types
        .iter()
        .map(|(t, u)| ValueType {
            r#type: b.s(t),
            unit: b.s(u),
        })
        .collect();
    let mut programs = crate::counts::Programs::new(r.meta());
    // (stack, syscall name, program when stackless) -> values.
    let mut samples: FxHashMap<(Option<u32>, &'static str, String), [i64; 3]> =
        FxHashMap::default();
    let mut stacks: std::collections::HashMap<u32, Vec<u64>> = std::collections::HashMap::new();
    let mut seq = 0u64;
    let mut end = 0u64;
    while let Some(rec) = r
        .next_record()
        .with_context(|| format!("reading {}", path.display()))?
    {
        programs.record(&rec, &r);
        if let Record::Syscall(c) = rec {
            let redundant = analysis.is_redundant(seq);
            seq += 1;
            end = end.max(c.ts + c.dur);
            let stack = c.stack.map(|s| s.0);
            if let Some(st) = stack {
                if let std::collections::hash_map::Entry::Vacant(slot) = stacks.entry(st) {
                    let frames: Vec<(String, String, u32)> = r
                        .stack(dejavu_trace::StackId(st))
                        .iter()
                        .map(|f| {
                            let func = f
                                .function
                                .map(|s| String::from_utf8_lossy(r.str(s)).into_owned())
                                .or_else(|| {
                                    f.module.map(|m| {
                                        format!(
                                            "{}+{:#x}",
                                            String::from_utf8_lossy(r.str(m)),
                                            f.addr
                                        )
                                    })
                                })
                                .unwrap_or_else(|| format!("{:#x}", f.addr));
                            let file = f
                                .file
                                .map(|s| String::from_utf8_lossy(r.str(s)).into_owned())
                                .unwrap_or_default();
                            (func, file, f.line)
                        })
                        .collect();
                    let ids = frames
                        .iter()
                        .map(|(f, file, l)| b.location(f, file, *l))
                        .collect();
                    slot.insert(ids);
                }
            }
            let prog = if stack.is_none() {
                programs.of(c.pid).to_string()
            } else {
                String::new()
            };
            let v = samples.entry((stack, c.sys.name(), prog)).or_insert([0; 3]);
            v[0] += 1;
            v[1] += redundant as i64;
            v[2] += c.dur as i64;
        }
    }
    let mut keys: Vec<_> = samples.keys().cloned().collect();
    keys.sort();
    let mut sample = Vec::with_capacity(keys.len());
    for key in keys {
        let v = samples[&key];
        let (stack, sys, prog) = key;
        // Leaf first: the syscall, then the stack innermost first, or the program.
        let mut ids = vec![b.location(&format!("[{sys}]"), "", 0)];
        match stack.and_then(|s| stacks.get(&s)) {
            Some(frames) => ids.extend(frames),
            None => ids.push(b.location(&format!("[{prog}]"), "", 0)),
        }
        sample.push(Sample {
            location_id: ids,
            value: v.to_vec(),
        });
    }
    let comment = vec![b.s(&format!(
        "dejavu {} ({} backend): {}",
        env!("CARGO_PKG_VERSION"),
        r.meta().backend,
        r.meta().command.join(" ")
    ))];
    let default_sample_type = sample_type[0].r#type;
    let p = Profile {
        default_sample_type,
        sample_type,
        sample,
        location: std::mem::take(&mut b.locations),
        function: std::mem::take(&mut b.functions),
        time_nanos: r.meta().start_unix_ns as i64,
        duration_nanos: end as i64,
        comment,
        string_table: std::mem::take(&mut b.strings),
    };
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&p.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}
