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
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
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
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    memory_start: u64,
    #[prost(uint64, tag = "3")]
    memory_limit: u64,
    #[prost(uint64, tag = "4")]
    file_offset: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
    #[prost(int64, tag = "6")]
    build_id: i64,
    #[prost(bool, tag = "7")]
    has_functions: bool,
    #[prost(bool, tag = "8")]
    has_filenames: bool,
    #[prost(bool, tag = "9")]
    has_line_numbers: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    mapping_id: u64,
    #[prost(uint64, tag = "3")]
    address: u64,
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
    /// (function, line, mapping, address) -> location id.
    location_ids: FxHashMap<(u64, i64, u64, u64), u64>,
    mappings: Vec<Mapping>,
    /// Module path -> mapping id.
    mapping_ids: FxHashMap<String, u64>,
    /// Module path -> build id (hex), from the trace's Mapping records.
    build_ids: FxHashMap<String, String>,
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

    /// The mapping of native frames in `module`: one per module, starting at 0 with file
    /// offset 0 (a frame's address is its file offset in the module), named by its path
    /// and the build id the trace's Mapping records give it.
    fn mapping(&mut self, module: &str, addr: u64, named: bool) -> u64 {
        let id = match self.mapping_ids.get(module) {
            Some(&id) => id,
            None => {
                let id = self.mappings.len() as u64 + 1;
                let filename = self.s(module);
                let build_id = match self.build_ids.get(module).cloned() {
                    Some(b) if !b.is_empty() => self.s(&b),
                    _ => 0,
                };
                self.mappings.push(Mapping {
                    id,
                    filename,
                    build_id,
                    has_functions: true,
                    has_filenames: true,
                    has_line_numbers: true,
                    ..Mapping::default()
                });
                self.mapping_ids.insert(module.to_string(), id);
                id
            }
        };
        let m = &mut self.mappings[id as usize - 1];
        m.memory_limit = m.memory_limit.max(addr.saturating_add(1));
        if !named {
            // A stripped module's frames: a symbolizer may name them from the file.
            m.has_functions = false;
            m.has_filenames = false;
            m.has_line_numbers = false;
        }
        id
    }

    fn location(&mut self, function: &str, file: &str, line: u32) -> u64 {
        self.frame_location(function, file, line, "", 0)
    }

    fn frame_location(
        &mut self,
        function: &str,
        file: &str,
        line: u32,
        module: &str,
        addr: u64,
    ) -> u64 {
        let (mapping_id, address) = if module.is_empty() {
            (0, 0)
        } else {
            let named = function != format!("{module}+{addr:#x}");
            (self.mapping(module, addr, named), addr)
        };
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
        let key = (fid, line as i64, mapping_id, address);
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            mapping_id,
            address,
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
        let mut b = Builder {
            build_ids: samples
                .modules
                .iter()
                .map(|m| (m.path.clone(), m.build_id.clone()))
                .collect(),
            ..Builder::default()
        };
        b.s("");
        // The modules frames name, in the order the trace mapped them: the program first,
        // as pprof takes the first mapping for the main binary.
        let used: std::collections::HashSet<&str> = samples
            .stacks
            .iter()
            .flatten()
            .map(|f| f.module.as_str())
            .filter(|m| !m.is_empty())
            .collect();
        for m in &samples.modules {
            if used.contains(m.path.as_str()) {
                b.mapping(&m.path, 0, true);
            }
        }
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
                    .map(|f| b.frame_location(&f.function, &f.file, f.line, &f.module, f.addr))
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
            mapping: std::mem::take(&mut b.mappings),
            location: std::mem::take(&mut b.locations),
            function: std::mem::take(&mut b.functions),
            time_nanos: a.meta.start_unix_ns as i64,
            duration_nanos: a.run_ns as i64,
            comment,
            string_table: std::mem::take(&mut b.strings),
        };
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        gz.write_all(&p.encode_to_vec())?;
        gz.finish()?;
        Ok(())
    }
}
