//! Command-line flags. Each subcommand's flags become a plain options struct before any
//! backend or analysis sees them.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

/// dejavu finds the work a program repeats for nothing: the stat of an unchanged file,
/// open/close around every small write, the mkdir of an existing directory.
#[derive(Parser, Debug)]
#[command(name = "dejavu", version, about, long_about = None, max_term_width = 100)]
#[command(
    after_help = "Exit codes and examples: see docs/cli.md. Report bugs with the output of `dejavu --version`."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a program (or attach to one) and record its file-related system calls.
    #[command(after_help = "\
Examples:
  dejavu record -o t.dvt -- python3 app.py --flag
  dejavu record -o t.dvt -p 1234          # Ctrl-C detaches; the process keeps running

Exit status: the program's own (128+N if killed by signal N); 77 if tracing is not
permitted here; 126/127 if the command cannot be executed / is not found; 125 if dejavu
itself failed; 2 for bad flags.")]
    Record(RecordArgs),
    /// Per-syscall and per-path counts, errors and time (like strace -c, per path too).
    Summary(SummaryArgs),
    /// Convert a trace to another format (jsonl: one JSON object per event).
    Export(ExportArgs),
    /// Import another tool's log into a dejavu trace.
    #[command(subcommand)]
    Import(ImportCommand),
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Write the trace here.
    #[arg(short, long, value_name = "FILE", default_value = "dejavu.dvt")]
    pub output: PathBuf,
    /// Attach to this running process and all its threads instead of starting a command
    /// (repeat or separate with commas for several).
    #[arg(
        short,
        long = "pid",
        value_name = "PID",
        value_delimiter = ',',
        conflicts_with = "command"
    )]
    pub pids: Vec<i32>,
    /// Keep this many bytes of each write to a terminal, pipe, socket, /dev/null or
    /// append-mode file (the only writes whose bytes are kept).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(0..=65536))]
    pub payload_bytes: u32,
    /// Record no payload bytes at all.
    #[arg(long, conflicts_with = "payload_bytes")]
    pub no_payload: bool,
    /// Do not stat newly opened files to record their identity (faster on open-heavy
    /// programs; re-reads of unchanged files can then not be proven).
    #[arg(long)]
    pub no_file_identity: bool,
    /// Do not move the tracer onto the program's CPU (see docs/ptrace-backend.md).
    #[arg(long, hide = true)]
    pub no_follow_cpu: bool,
    /// Print what was recorded when done.
    #[arg(short, long)]
    pub verbose: bool,
    /// The command to run, after `--`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// The trace to summarize.
    pub trace: PathBuf,
    /// Machine-readable output (schema in docs/summary-format.md).
    #[arg(long)]
    pub json: bool,
    /// Show this many paths.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ExportFormat {
    /// One JSON object per line (docs/trace-format.md, "JSON Lines export").
    Jsonl,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The trace to export.
    pub trace: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value = "jsonl")]
    pub format: ExportFormat,
    /// Write here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum ImportCommand {
    /// Import strace output (-f, -tt/-ttt, -T, -y/-yy, -ff files) into a trace.
    #[command(after_help = "\
Record the log with, for example:
  strace -f -tt -T -yy -v -s 256 -o app.strace -- python3 app.py
  strace -ff -tt -T -yy -o app.strace -- make     # one file per process: pass them all
Lines dejavu cannot parse are counted, listed with their line numbers, and marked in
the trace as lost events.")]
    Strace(ImportStraceArgs),
}

#[derive(Args, Debug)]
pub struct ImportStraceArgs {
    /// strace output files (several for -ff runs).
    #[arg(required = true)]
    pub logs: Vec<PathBuf>,
    /// Write the trace here.
    #[arg(short, long, value_name = "FILE", default_value = "dejavu.dvt")]
    pub output: PathBuf,
    /// Working directory of the traced program, to make relative paths absolute (default:
    /// learned from the log's `AT_FDCWD</dir>` annotations with -y; else they stay relative).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Keep this many bytes of write payloads from the log.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub payload_bytes: u32,
    /// List every unparsed line, not just the first ten.
    #[arg(short, long)]
    pub verbose: bool,
}
