//! `dejavu report --format pprof`: a gzipped profile.proto that `go tool pprof`, Pyroscope
//! and speedscope read. A sample is a (stack, syscall) pair with three values: syscalls
//! (count), redundant syscalls (count) and syscall time (nanoseconds). The syscall itself
//! is the leaf frame (`[statx]`), so `pprof -top` ranks syscalls and `-peek`/flame graphs
//! show the code above them; calls recorded without a stack hang under their program
//! (`[node]`). The samples come from the analysis's one pass over the trace
//! (`Collect { samples: true }`). docs/report-format.md, "pprof".
//!
//! The messages are the subset of github.com/google/pprof/proto/profile.proto dejavu
//! writes, with the same field numbers.

use crate::{RenderOptions, Reporter};
use dejavu_detect::Analysis;
use prost::Message;
use std::collections::HashMap as FxHashMap;
use std::io::{self, Write};

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

/// Renders the analysis as a gzipped pprof profile. The analysis must have been made
/// with [`dejavu_detect::profile::Collect`]`{ samples: true }`: the profile holds every
/// call, not only the redundant ones.
#[derive(Clone, Copy, Debug, Default)]
pub struct PprofReporter;

impl Reporter for PprofReporter {
    fn render(&self, a: &Analysis, out: &mut dyn Write, _opts: &RenderOptions) -> io::Result<()> {
        let Some(samples) = &a.samples else {
            return Err(io::Error::other(
                "the analysis gathered no samples for a pprof profile (analyze_collecting with Collect { samples: true })",
            ));
        };
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
        let stacks: Vec<Vec<u64>> = samples
            .stacks
            .iter()
            .map(|frames| {
                frames
                    .iter()
                    .map(|f| b.location(&f.function, &f.file, f.line))
                    .collect()
            })
            .collect();
        let mut sample = Vec::with_capacity(samples.samples.len());
        for s in &samples.samples {
            // Leaf first: the syscall, then the stack innermost first, or the program.
            let mut ids = vec![b.location(&format!("[{}]", s.syscall), "", 0)];
            match s.stack.and_then(|i| stacks.get(i as usize)) {
                Some(frames) => ids.extend(frames),
                None => ids.push(b.location(&format!("[{}]", s.program), "", 0)),
            }
            sample.push(Sample {
                location_id: ids,
                value: vec![s.calls as i64, s.redundant as i64, s.ns as i64],
            });
        }
        let comment = vec![b.s(&format!(
            "dejavu {} ({} backend): {}",
            env!("CARGO_PKG_VERSION"),
            a.meta.backend,
            a.meta.command.join(" ")
        ))];
        let default_sample_type = sample_type[0].r#type;
        let p = Profile {
            default_sample_type,
            sample_type,
            sample,
            location: std::mem::take(&mut b.locations),
            function: std::mem::take(&mut b.functions),
            time_nanos: a.meta.start_unix_ns as i64,
            duration_nanos: a.timeline.end_ns as i64,
            comment,
            string_table: std::mem::take(&mut b.strings),
        };
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        gz.write_all(&p.encode_to_vec())?;
        gz.finish()?;
        Ok(())
    }
}
