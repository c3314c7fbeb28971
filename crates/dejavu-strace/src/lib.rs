//! Imports strace logs into dejavu traces.
//!
//! `strace -f -tt -T -y -o log PROGRAM` (or `-ff`, `-ttt`, `-yy`, `-v`, `-x`, ...) output
//! becomes the same records the ptrace backend writes: syscalls of dejavu's traced set
//! with absolute paths, flags as numbers, stat answers, write payload prefixes; the
//! process tree (spawn, exec, exit) and signals. Lines that cannot be parsed are reported
//! with their line numbers and written as `Lost` records, so the trace says it is
//! incomplete. docs/import-strace.md describes what is supported and what is lost.
//!
//! [`import_files`] does the whole job; [`parse_line`] and [`Importer`] are the pieces.

mod args;
mod consts;
mod importer;
mod input;
mod line;
mod paths;
mod sink;

pub use importer::{Finished, Importer, SourceId, TsUnroller, UNKNOWN_ERRNO};
pub use line::{parse_line, parse_line_bytes, Body, Call, Line, ParseError, Ret, Timestamp};
pub use sink::{MemorySink, Sink};

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// How to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Working directory of the first process, for relative paths before strace shows
    /// one (`AT_FDCWD</cwd>` with `-y`). None: inferred from the log when it can be,
    /// otherwise relative paths stay relative and are counted.
    pub cwd: Option<PathBuf>,
    /// Prefix limit of recorded write payloads, bytes; 0 records none.
    pub payload_bytes: u32,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            cwd: None,
            payload_bytes: 256,
        }
    }
}

/// A line that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unparsed {
    /// The input it came from.
    pub file: String,
    /// 1-based line number in that input.
    pub line: u64,
    /// The line (at most 512 bytes of it, invalid UTF-8 replaced).
    pub text: String,
    /// Why it could not be parsed.
    pub reason: String,
}

/// What an import read, wrote and could not use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Lines read (all inputs).
    pub lines: u64,
    /// Records written.
    pub records: u64,
    /// Of which syscall records.
    pub syscalls: u64,
    /// Every line that could not be parsed (each also written as a `Lost` record).
    pub unparsed: Vec<Unparsed>,
    /// Calls outside dejavu's traced set, by name (counted, not written).
    pub ignored_syscalls: BTreeMap<String, u64>,
    /// `<... resumed>` lines without their `<unfinished ...>` half (the trace started
    /// mid-call, or the entry line was lost); traced ones are written `undecoded`.
    pub unmatched_resumed: u64,
    /// `<unfinished ...>` calls whose exit never came (written `unfinished`).
    pub unfinished_never_resumed: u64,
    /// strace's own messages, `-k` stack frames, `--- stopped by ---` lines.
    pub info_lines: u64,
    /// Lines of a `-c`/`-C` summary table (skipped).
    pub summary_lines: u64,
    /// Relative paths that stayed relative because the working directory was unknown.
    pub relative_paths_unresolved: u64,
    /// Descriptor arguments whose target was unknown (no `-y` and not opened in the log).
    pub fd_unknown: u64,
    /// Symbolic flag names this importer does not know (their bits are missing).
    pub unknown_symbols: u64,
    /// Failures whose errno name this importer does not know (recorded as errno 4095).
    pub unknown_errno: u64,
    /// Remarks on the input (detected options, inferred pids and directories).
    pub notes: Vec<String>,
}

/// Errors of an import. Unparsable lines are not errors: they are reported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// An input could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The input.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Writing the trace failed.
    #[error("cannot write the trace: {0}")]
    Trace(#[from] dejavu_trace::TraceError),
    /// No input was given.
    #[error("no input files")]
    NoInput,
}

/// Imports strace logs (`-` is standard input) and writes a complete trace (meta block
/// with backend `strace-import`, records, end block) to `out`. Several inputs (`-ff`
/// files) are merged in timestamp order.
pub fn import_files<W: Write>(
    inputs: &[PathBuf],
    opts: &ImportOptions,
    out: W,
) -> Result<ImportReport, ImportError> {
    input::import_files(inputs, opts, out)
}
