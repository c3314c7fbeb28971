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
    /// Compare two traces: per finding, per syscall, per call site, before -> after.
    #[command(after_help = "\
Examples:
  dejavu diff before.dvt after.dvt
  dejavu diff --json before.dvt after.dvt

Findings are matched by detector, call site and paths, never by pid or time. Exit status:
0 when both traces were read; 1 if one cannot be read; 2 for bad flags.")]
    Diff(DiffArgs),
    /// Run a program (or take a trace) and compare its counts with a budget: a CI gate on
    /// counts, never times.
    #[command(after_help = "\
Examples:
  dejavu check --budget dejavu.toml -- npm test
  dejavu check --budget dejavu.toml --update -- npm test    # write the current counts
  dejavu check --budget dejavu.toml --trace t.dvt

Exit status: 0 within budget; 1 over budget (what exceeded, by how much and where, on
stdout); 2 for bad flags, a bad budget file or a failed recording; 3 when the program
itself failed but the counts were within budget (over budget wins: 1). docs/budgets.md.")]
    Check(CheckArgs),
    /// Report the work a trace repeats for nothing: ranked findings with their fix.
    #[command(after_help = "\
Examples:
  dejavu report t.dvt
  dejavu report --json t.dvt > findings.json       # schema: docs/report-format.md
  dejavu report --detector ensure-dir,open-close-churn --min-calls 20 --skip-startup 2s t.dvt
  dejavu report -O small-writes.max_bytes=512 t.dvt
  dejavu report --list-detectors

Exit status: 0 when the trace was analysed (with or without findings); 1 if the trace
cannot be read; 2 for bad flags (an unknown detector or option: the message lists the
valid ones).")]
    Report(ReportArgs),
    /// Record a program, then report the work it repeated for nothing.
    #[command(after_help = "\
The program keeps its stdin, stdout, stderr and terminal. The report is printed after it
exits, on stderr (so the program's stdout stays its own); --report-to stdout or -o FILE
send it elsewhere. The trace goes to a temporary file, deleted afterwards, unless
--keep-trace FILE.

Examples:
  dejavu run -- node server.js
  dejavu run --json -o findings.json -- make -j4
  dejavu run --fail-on finding --keep-trace t.dvt -- npm test

Exit status: the program's own (128+N if killed by signal N). With --fail-on finding,
1 when the program succeeded but there are findings; the program's failure still wins.
77/126/127/125 as for `dejavu record`; 2 for bad flags.")]
    Run(RunArgs),
    /// What a detector finds, an example, the fix, the hazards and its options.
    #[command(after_help = "`dejavu report --list-detectors` lists the detectors.")]
    Explain(ExplainArgs),
    /// Replay a trace under a fix before writing it: calls removed, stale answers served,
    /// what a kept-open handle or an ensure-once flag would risk, and a verdict.
    #[command(after_help = "\
Examples:
  dejavu whatif t.dvt                                    # every finding's own fix, replayed
  dejavu whatif t.dvt --cache 'stat,access:/srv/app/**' --invalidate on-write
  dejavu whatif t.dvt --cache 'stat:/srv/app/**' --ttl 500ms
  dejavu whatif t.dvt --negative-cache '/usr/lib/**' --invalidate on-dir-change
  dejavu whatif t.dvt --keep-open '/data/**/*.tdb' --flush on-exit
  dejavu whatif t.dvt --ensure-dir-once '**/chats' --log-once
  dejavu whatif t.dvt --skip-unread /dev/null --batch-syncs '/var/db/*.journal'
  dejavu whatif t.dvt --finding 3 --json
  dejavu whatif t.dvt --finding 3 --invalidate never     # finding 3's own fix, changed
  dejavu whatif t.dvt --ttl 2s                           # the findings' own caches, with a TTL

Policies, answers and JSON fields: docs/whatif.md. Exit status: 0 when the trace was
replayed (whatever the verdicts); 1 if the trace cannot be read; 2 for bad flags or policy
strings (the message shows the accepted syntax).")]
    Whatif(WhatifArgs),
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
    // Last: a flattened group's help heading applies to the fields after it.
    #[command(flatten)]
    pub capture: CaptureFlags,
}

/// How to record: shared by `record` and `run`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Recording")]
pub struct CaptureFlags {
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
    /// Never run a hot thread and the tracer on one CPU. By default, while one thread
    /// makes most of the traced calls, both share a CPU (several times faster in VMs; the
    /// program still sees its own affinity; docs/ptrace-backend.md, "CPU placement").
    #[arg(long)]
    pub no_pin: bool,
    /// Record the call stack of every recorded call: `on` unwinds native code and loads
    /// the Node.js and Python agents (through NODE_OPTIONS and PYTHONPATH) so findings name
    /// the line that made the calls, except in the system tools the program runs (a
    /// compiler under make, git, `sh -c`: their findings are folded as the tools'); `all`
    /// takes those too; `off` is the cheapest recording.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "on")]
    pub stacks: StacksWhen,
    /// How to record: `ebpf` in the kernel, near native speed (root, or CAP_BPF and
    /// CAP_PERFMON); `ptrace`, for any user, stopping the program at each traced call;
    /// `auto` (default, or $DEJAVU_BACKEND): eBPF when permitted, else ptrace, saying which
    /// on stderr (docs/ebpf-backend.md).
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub backend: Option<Backend>,
    /// eBPF ring buffer size, e.g. 4M (default), 256M, 1G; rounded up to a power of two.
    /// Records that do not fit are counted as lost and reported, never silently dropped.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "4M")]
    pub buffer_size: u64,
}

/// `--backend` values.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// eBPF when permitted, else ptrace.
    Auto,
    /// In the kernel (root, or CAP_BPF and CAP_PERFMON).
    Ebpf,
    /// ptrace and seccomp (any user).
    Ptrace,
}

/// A byte size: a number with an optional K, M or G suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(format!("unknown unit {c:?} in {s:?}: use K, M or G")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("not a size: {s:?} (e.g. 64M)"))?;
    let bytes = n
        .checked_mul(mult)
        .filter(|&b| (4096..=1 << 31).contains(&b))
        .ok_or_else(|| format!("{s:?} is out of range: from 4K to 2G"))?;
    Ok(bytes)
}

/// `--stacks` values.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StacksWhen {
    /// Native unwinding and language agents, except native stacks in the system tools the
    /// program runs (a compiler under make, git, `sh -c`) and in a Python or Node.js
    /// start-up before its agent is loaded.
    On,
    /// No stacks.
    Off,
    /// As `on`, with native stacks in the system tools and start-ups too.
    All,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The trace to analyse.
    #[arg(required_unless_present = "list_detectors")]
    pub trace: Option<PathBuf>,
    /// List every detector (id and what it finds) and exit.
    #[arg(long, exclusive = true)]
    pub list_detectors: bool,
    #[command(flatten)]
    pub report: ReportFlags,
    /// Under each call site, its full stack (user frames marked with `>`). (`run` has no
    /// such flag: there `--stacks` says whether to record stacks; keep the trace with
    /// --keep-trace and report it.)
    #[arg(long, help_heading = "Report")]
    pub stacks: bool,
    /// Write the report to FILE instead of stdout (e.g. -o report.html with --format html).
    #[arg(short, long, value_name = "FILE", help_heading = "Report")]
    pub output: Option<PathBuf>,
}

/// What to report and how: shared by `report` and `run`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Report")]
pub struct ReportFlags {
    /// Machine-readable output: one JSON object (docs/report-format.md); the same as
    /// --format json.
    #[arg(long)]
    pub json: bool,
    /// Output format: terminal (default), json, sarif (SARIF 2.1.0 for GitHub code
    /// scanning: findings on the source lines of their call sites), pprof (for go tool
    /// pprof, Pyroscope: syscalls and redundant syscalls by stack), or html (one
    /// self-contained page with a flame graph and a timeline).
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with = "json")]
    pub format: Option<ReportFormat>,
    /// With --format sarif: the directory (the repository's root) that result locations
    /// are relative to; call sites outside it become run-level notifications. Default: the
    /// current directory.
    #[arg(long, value_name = "DIR")]
    pub source_root: Option<PathBuf>,
    /// Under each finding, also every path, the time window, every call site and the full
    /// command line.
    #[arg(long)]
    pub details: bool,
    /// Run only these detectors (comma-separated ids; `dejavu report --list-detectors`
    /// lists them).
    #[arg(long = "detector", value_name = "ID,...", value_delimiter = ',')]
    pub detectors: Vec<String>,
    /// Hide findings with fewer redundant calls than this.
    #[arg(long, value_name = "N", default_value_t = dejavu_detect::Config::default().min_calls)]
    pub min_calls: u64,
    /// Do not count calls made in the first DUR of the trace (start-up), e.g. 2s, 500ms,
    /// 1.5s; they still update what is known about files.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub skip_startup: Option<u64>,
    /// Set a detector option, e.g. -O small-writes.max_bytes=512 (repeatable; `dejavu
    /// explain DETECTOR` lists a detector's options).
    #[arg(short = 'O', long = "option", value_name = "DETECTOR.OPTION=VALUE")]
    pub options: Vec<String>,
    /// Colour: auto (when the report goes to a terminal and NO_COLOR is not set), always,
    /// never.
    #[arg(long, value_name = "WHEN", value_enum, default_value = "auto")]
    pub color: ColorWhen,
    /// Show this many findings (terminal default 20; --json lists all unless given).
    #[arg(long, value_name = "N", conflicts_with = "all")]
    pub top: Option<usize>,
    /// Show every finding over the thresholds, runtime start-up and launcher findings
    /// included (by default each of those owners is one line under the table).
    #[arg(long)]
    pub all: bool,
    /// Only findings of these programs (comma-separated names or globs, as the report's
    /// `program` column names them: `tsc`, `cc1`, `stat.py`, `python*`).
    #[arg(long = "program", value_name = "NAME,...", value_delimiter = ',')]
    pub programs: Vec<String>,
    /// Rank findings (default), or call sites across findings: which lines of code waste
    /// the most, each redundant call counted once.
    #[arg(long, value_name = "WHAT", value_enum, default_value = "finding")]
    pub group_by: GroupBy,
}

/// `--group-by` values.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBy {
    /// One row per finding (detector, process, paths).
    Finding,
    /// One row per call site (file:line), across detectors.
    Callsite,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorWhen {
    /// When the report goes to a terminal and NO_COLOR is unset or empty.
    Auto,
    /// Always, even into a file or a pipe.
    Always,
    /// Never.
    Never,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Where the report goes: stderr (the program's stdout stays its own) or stdout.
    #[arg(long, value_name = "STREAM", value_enum, default_value = "stderr")]
    pub report_to: ReportTo,
    /// Write the report to FILE instead of a stream.
    #[arg(short = 'o', long, value_name = "FILE", conflicts_with = "report_to")]
    pub report_file: Option<PathBuf>,
    /// Also write the HTML report (flame graph, timeline, findings) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Keep the trace in FILE (by default it goes to a temporary file, deleted after the
    /// report).
    #[arg(long, value_name = "FILE")]
    pub keep_trace: Option<PathBuf>,
    /// `finding`: exit with 1 when the program succeeded but there are findings (the
    /// program's own failure status still wins); `never`: always the program's status.
    #[arg(long, value_name = "WHEN", value_enum, default_value = "never")]
    pub fail_on: FailOn,
    /// Print what was recorded when done.
    #[arg(short, long)]
    pub verbose: bool,
    /// The command to run, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
    // Last: a flattened group's help heading applies to the fields after it.
    #[command(flatten)]
    pub capture: CaptureFlags,
    #[command(flatten)]
    pub report: ReportFlags,
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The trace before the change.
    pub before: PathBuf,
    /// The trace after it.
    pub after: PathBuf,
    /// Machine-readable output: one JSON object (docs/budgets.md); the same as --format
    /// json.
    #[arg(long)]
    pub json: bool,
    /// Output format: terminal (default), json, or html (one self-contained page).
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with = "json")]
    pub format: Option<DiffFormat>,
    /// Write the diff to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Rows shown per section in the terminal.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The budget file (TOML; docs/budgets.md).
    #[arg(long, value_name = "FILE", required = true)]
    pub budget: PathBuf,
    /// Write the current counts into the budget (creating it if missing) instead of
    /// checking: each limit's baseline, or its max, becomes the current count.
    #[arg(long)]
    pub update: bool,
    /// Check this trace instead of running a command.
    #[arg(long, value_name = "TRACE", conflicts_with = "command")]
    pub trace: Option<PathBuf>,
    /// Keep the trace of the run in FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    pub keep_trace: Option<PathBuf>,
    /// Machine-readable output: one JSON object (docs/budgets.md).
    #[arg(long)]
    pub json: bool,
    /// The command to run, after `--`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
    #[command(flatten)]
    pub capture: CaptureFlags,
}

/// `--format` values of report and run.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    /// The ranked, aligned table.
    Terminal,
    /// One JSON object (docs/report-format.md).
    Json,
    /// SARIF 2.1.0 (docs/report-format.md, "SARIF").
    Sarif,
    /// A gzipped pprof profile: syscalls, redundant syscalls and syscall time by stack
    /// (docs/report-format.md, "pprof"); binary, so redirect it to a file.
    Pprof,
    /// One self-contained HTML page: findings, a flame graph of redundant calls by stack
    /// and a timeline (docs/report-format.md, "HTML").
    Html,
}

/// `dejavu diff --format` values.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffFormat {
    /// Aligned tables.
    Terminal,
    /// One JSON object.
    Json,
    /// One self-contained HTML page.
    Html,
}

impl ReportFlags {
    /// The output format, --json included.
    pub fn output(&self) -> ReportFormat {
        match (self.json, self.format) {
            (true, _) => ReportFormat::Json,
            (false, Some(f)) => f,
            (false, None) => ReportFormat::Terminal,
        }
    }

    /// Whether the output is for programs (no colour, every finding).
    pub fn machine(&self) -> bool {
        self.output() != ReportFormat::Terminal
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportTo {
    /// Standard error (the default: the program's stdout stays untouched).
    Stderr,
    /// Standard output, after everything the program wrote there.
    Stdout,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOn {
    /// Exit with 1 when there are findings (unless the program itself failed).
    Finding,
    /// Exit with the program's status whatever the findings.
    Never,
}

#[derive(Args, Debug)]
pub struct WhatifArgs {
    /// The trace to replay.
    pub trace: PathBuf,
    /// Cache successful lookups, or with `read` files' content once read in full:
    /// CALLS[:GLOB], CALLS among stat, access, readlink, read (comma-separated) or all, e.g.
    /// 'stat,access:/srv/app/**', 'read:/etc/app/*.json'; without a glob, every path.
    /// Repeatable.
    #[arg(long, value_name = "CALLS[:GLOB]", help_heading = "Policies")]
    pub cache: Vec<String>,
    /// Cache failed lookups (ENOENT, ENOTDIR, EACCES ...) of paths matching GLOB.
    /// Repeatable.
    #[arg(long, value_name = "GLOB", help_heading = "Policies")]
    pub negative_cache: Vec<String>,
    /// When the caches drop an entry: on-write (the process's own change of the path;
    /// default for --cache), on-dir-change (of the path or its directory; default for
    /// --negative-cache), never.
    #[arg(long, value_name = "WHEN", help_heading = "Policies")]
    pub invalidate: Option<String>,
    /// Cache entries expire after DURATION (500ms, 2s). Without a policy, --ttl,
    /// --invalidate and --flush change each finding's own fix.
    #[arg(long, value_name = "DURATION", help_heading = "Policies")]
    pub ttl: Option<String>,
    /// Open each file matching GLOB once per process and keep the handle. Repeatable.
    #[arg(long, value_name = "GLOB", help_heading = "Policies")]
    pub keep_open: Vec<String>,
    /// With --keep-open: on-exit (writes buffered until the process exits; default) or
    /// each-write (written through: nothing at risk).
    #[arg(long, value_name = "WHEN", help_heading = "Policies")]
    pub flush: Option<String>,
    /// Remember per process that a directory matching GLOB exists once mkdir said so; its
    /// later mkdirs and their existence checks go. Repeatable.
    #[arg(long, value_name = "GLOB", help_heading = "Policies")]
    pub ensure_dir_once: Vec<String>,
    /// Write each line (numbers and ids masked) to the same output only once per process;
    /// outputs: the standard streams, terminals and append-mode files, or with
    /// --log-once=GLOB the files matching GLOB.
    #[arg(
        long,
        value_name = "GLOB",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "",
        help_heading = "Policies"
    )]
    pub log_once: Option<String>,
    /// Don't make the writes nobody reads to paths matching GLOB: writes to /dev/null, and
    /// writes failing with EPIPE (e.g. '/dev/null', '/**'). Repeatable.
    #[arg(long, value_name = "GLOB", help_heading = "Policies")]
    pub skip_unread: Vec<String>,
    /// Sync each file matching GLOB once per batch: syncs with at most 16 KiB written
    /// between them are one batch, and only its last sync is made. Repeatable.
    #[arg(long, value_name = "GLOB", help_heading = "Policies")]
    pub batch_syncs: Vec<String>,
    /// Don't check a path matching GLOB (access, a stat following links, an O_DIRECTORY
    /// probe) right before the open or stat that answers the same question: just do the
    /// act and handle its error. Repeatable.
    #[arg(long, value_name = "GLOB", help_heading = "Policies")]
    pub skip_checks: Vec<String>,
    /// Keep the size (and offset) of each file matching GLOB the process writes in a
    /// variable: its size and position lookups after its own writes are answered from it.
    /// Repeatable.
    #[arg(long, value_name = "GLOB", help_heading = "Policies")]
    pub track_size: Vec<String>,
    /// Buffer the runs of tiny writes (512 bytes or less, to one descriptor, no other call
    /// on it and no pause over 100 ms between them) to paths matching GLOB: each run goes
    /// out in one write per 64 KiB. Repeatable.
    #[arg(long, value_name = "GLOB", help_heading = "Policies")]
    pub batch_writes: Vec<String>,
    /// Replay only the own fix of finding N (numbered as `dejavu report --all` lists
    /// them); with --invalidate, --ttl or --flush, that fix changed; with policies, those
    /// policies instead, limited to the finding's processes and paths.
    #[arg(long, value_name = "N")]
    pub finding: Option<usize>,
    /// Show the replayed fixes of runtime and launcher findings in full, as the program's
    /// own (without it each of those owners is one line, as in `dejavu report`).
    #[arg(long)]
    pub all: bool,
    /// Machine-readable output: one JSON object (docs/whatif.md).
    #[arg(long)]
    pub json: bool,
    /// Also write the outcomes as one self-contained HTML page to FILE (docs/whatif.md).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The detector's id (`dejavu report --list-detectors` lists them).
    pub id: String,
}

/// `2s`, `500ms`, `1.5s`, `250us`, `1m` -> nanoseconds. A bare number is refused: `2`
/// could mean seconds or milliseconds, and guessing wrong skips the wrong calls.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "" if num.parse::<f64>() == Ok(0.0) => 0.0,
        "" => return Err(format!("`{s}` needs a unit: 2s, 500ms, 1.5s")),
        u => {
            return Err(format!(
                "unknown unit `{u}` in `{s}`: use ns, us, ms, s or m (2s, 500ms, 1.5s)"
            ))
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: use 2s, 500ms, 1.5s"))?;
    let ns = n * scale;
    if !ns.is_finite() || ns >= u64::MAX as f64 {
        return Err(format!("`{s}` is too long"));
    }
    Ok(ns.round() as u64)
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

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// One JSON object per line (docs/trace-format.md, "JSON Lines export").
    Jsonl,
    /// Chrome trace event JSON: a timeline for Perfetto and chrome://tracing
    /// (docs/trace-format.md, "Chrome trace export").
    Chrome,
    /// Parquet: one row per syscall for DuckDB, Polars, Spark (docs/trace-format.md,
    /// "Parquet export"); binary, so give -o FILE or redirect it.
    Parquet,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_startup_takes_durations_with_units() {
        assert_eq!(parse_duration("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration("250us"), Ok(250_000));
        assert_eq!(parse_duration("1m"), Ok(60_000_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert!(parse_duration("2").is_err_and(|e| e.contains("needs a unit")));
        assert!(parse_duration("2h").is_err_and(|e| e.contains("unknown unit")));
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1.2.3s").is_err());
    }

    #[test]
    fn the_flags_are_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
