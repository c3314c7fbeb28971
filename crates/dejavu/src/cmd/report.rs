//! `dejavu report`: analyse a trace and print its findings, or list the detectors. The
//! pieces `dejavu run` shares (flags to settings, analysis with a progress bar, choosing
//! colour and width, rendering) live here too.

use crate::cli::{ColorWhen, ReportArgs, ReportFlags, ReportFormat};
use anyhow::Context;
use dejavu_detect::{registry, validate_options, Analysis, Config};
use dejavu_report::{
    HtmlReporter, JsonReporter, PprofReporter, Progress, RenderOptions, Reporter, SarifReporter,
    TerminalReporter,
};
use dejavu_trace::TraceReader;
use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

/// Rows in the terminal report unless --top or --all.
const DEFAULT_TOP: usize = 20;

/// Prints the report of one trace; a cut-off trace is reported with a warning.
pub fn run(a: ReportArgs) -> anyhow::Result<i32> {
    if a.list_detectors {
        list_detectors(&mut io::stdout().lock())?;
        return Ok(crate::exit::OK);
    }
    let Some(trace) = a.trace else {
        // clap requires TRACE unless --list-detectors.
        usage_error("report", "give the trace to report on: dejavu report TRACE");
    };
    let config = config(&a.report).unwrap_or_else(|msg| usage_error("report", &msg));
    let analysis = analyse(&trace, &config, a.report.output())?;
    warn(&trace, &analysis);
    if let Some(path) = &a.output {
        let file = std::fs::File::create(path)
            .with_context(|| format!("creating {} (-o/--output)", path.display()))?;
        let mut opts = render_options(&a.report, config, &file);
        opts.stacks = a.stacks;
        let mut out = io::BufWriter::new(file);
        render(&a.report, &trace, &analysis, &mut out, &opts)
            .and_then(|()| out.flush())
            .with_context(|| format!("writing {} (-o/--output)", path.display()))?;
        return Ok(crate::exit::OK);
    }
    let stdout = io::stdout();
    let mut opts = render_options(&a.report, config, &stdout);
    opts.stacks = a.stacks;
    let mut out = io::BufWriter::new(stdout.lock());
    if stdout.is_terminal() {
        match a.report.output() {
            ReportFormat::Pprof => usage_error(
                "report",
                "--format pprof writes gzipped binary data: redirect it to a file (dejavu report --format pprof TRACE > profile.pb.gz)",
            ),
            ReportFormat::Html => usage_error(
                "report",
                "--format html writes a web page: give it a file with -o (dejavu report --format html -o report.html TRACE)",
            ),
            _ => {}
        }
    }
    render(&a.report, &trace, &analysis, &mut out, &opts)?;
    out.flush()?;
    Ok(crate::exit::OK)
}

/// `--list-detectors`: one line per detector, id then what it finds, from the registry.
fn list_detectors(out: &mut dyn Write) -> io::Result<()> {
    let w = registry().iter().map(|d| d.id.len()).max().unwrap_or(0);
    for d in registry() {
        let first = format!("{:<w$}  ", d.id);
        let rest = " ".repeat(w + 2);
        for line in dejavu_report::text::wrap(d.summary, 100, &first, &rest) {
            writeln!(out, "{}", line.trim_end())?;
        }
    }
    Ok(())
}

/// The analysis settings from the flags, checked against the registry. The error names
/// the flag to fix and lists what is valid.
pub fn config(f: &ReportFlags) -> Result<Config, String> {
    let mut options = BTreeMap::new();
    for o in &f.options {
        let Some((k, v)) = o.split_once('=') else {
            return Err(format!(
                "-O `{o}`: expected DETECTOR.OPTION=VALUE, e.g. -O small-writes.max_bytes=512"
            ));
        };
        options.insert(k.trim().to_string(), v.trim().to_string());
    }
    let only = (!f.detectors.is_empty()).then(|| f.detectors.clone());
    // Checked in two steps so the message can name the flag that is wrong.
    let ids_only = Config {
        only: only.clone(),
        ..Config::default()
    };
    validate_options(&ids_only).map_err(|e| format!("--detector: {e}"))?;
    let cfg = Config {
        min_calls: f.min_calls,
        skip_startup_ns: f.skip_startup.unwrap_or(0),
        only,
        options,
        programs: f.programs.clone(),
    };
    validate_options(&cfg).map_err(|e| format!("-O: {e}"))?;
    cfg.program_matcher()
        .map_err(|e| format!("--program: {e}"))?;
    Ok(cfg)
}

/// Analyses the trace at `path` for a report in `format`, with a progress bar on stderr
/// when it takes a while. One pass over the trace gives every format what it needs.
pub fn analyse(path: &Path, config: &Config, format: ReportFormat) -> anyhow::Result<Analysis> {
    let mut reader =
        TraceReader::open(path).with_context(|| format!("reading {}", path.display()))?;
    let total = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut bar = Progress::new("analysing", total);
    let collect = dejavu_detect::profile::Collect {
        samples: format == ReportFormat::Pprof,
        ..Default::default()
    };
    let analysis =
        dejavu_detect::analyze_collecting(&mut reader, config, collect, |n| bar.update(n))
            .with_context(|| format!("reading {}", path.display()))?;
    bar.finish();
    Ok(analysis)
}

/// Lost events and a cut-off trace, on stderr: the counts are lower bounds then.
pub fn warn(trace: &Path, analysis: &Analysis) {
    for w in dejavu_report::warnings(analysis) {
        eprintln!("dejavu: warning: {}: {w}", trace.display());
    }
}

/// Presentation settings for a report going to `dest` (colour and width follow it).
pub fn render_options(f: &ReportFlags, config: Config, dest: &impl AsFd) -> RenderOptions {
    let fd = dest.as_fd();
    render_options_for(f, config, fd.is_terminal().then(|| fd.as_raw_fd()))
}

/// As [`render_options`]; `tty` is the destination's descriptor when it is a terminal,
/// None for files and pipes.
pub fn render_options_for(f: &ReportFlags, config: Config, tty: Option<i32>) -> RenderOptions {
    let when = match f.color {
        ColorWhen::Auto => dejavu_report::ColorWhen::Auto,
        ColorWhen::Always => dejavu_report::ColorWhen::Always,
        ColorWhen::Never => dejavu_report::ColorWhen::Never,
    };
    let no_color = std::env::var_os("NO_COLOR");
    let top = match (f.all, f.top) {
        (true, _) => None,
        (false, Some(n)) => Some(n),
        // JSON is for programs: every finding unless they asked for fewer.
        (false, None) if f.machine() => None,
        (false, None) => Some(DEFAULT_TOP),
    };
    RenderOptions {
        config,
        top,
        details: f.details,
        stacks: false,
        by_callsite: f.group_by == crate::cli::GroupBy::Callsite,
        all_owners: f.all,
        color: !f.machine()
            && dejavu_report::color_enabled(when, tty.is_some(), no_color.as_deref()),
        width: tty.and_then(terminal_width).unwrap_or(100).min(100),
    }
}

/// Columns of the terminal on `fd`.
fn terminal_width(fd: i32) -> Option<usize> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize through the pointer and touches nothing else.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws as *mut libc::winsize) } == 0;
    (ok && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// Renders in the chosen format.
pub fn render(
    f: &ReportFlags,
    trace: &Path,
    analysis: &Analysis,
    out: &mut dyn Write,
    opts: &RenderOptions,
) -> io::Result<()> {
    match f.output() {
        ReportFormat::Pprof => PprofReporter.render(analysis, out, opts),
        ReportFormat::Json => JsonReporter.render(analysis, out, opts),
        ReportFormat::Terminal => TerminalReporter.render(analysis, out, opts),
        ReportFormat::Html => html_reporter(trace).render(analysis, out, opts),
        ReportFormat::Sarif => {
            let root = match &f.source_root {
                Some(r) => r.clone(),
                None => std::env::current_dir()?,
            };
            SarifReporter {
                root: root.canonicalize().unwrap_or(root),
                version: env!("CARGO_PKG_VERSION").to_string(),
            }
            .render(analysis, out, opts)
        }
    }
}

/// The HTML report of `trace`, titled with its file name.
pub fn html_reporter(trace: &Path) -> HtmlReporter {
    HtmlReporter {
        title: trace.file_name().map_or_else(
            || trace.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
    }
}

/// Exits with a usage error (status 2) in clap's format, for `dejavu SUB`.
pub fn usage_error(sub: &str, msg: &str) -> ! {
    use clap::CommandFactory;
    let mut cmd = crate::cli::Cli::command();
    cmd.build();
    match cmd.find_subcommand_mut(sub) {
        Some(c) => c.error(clap::error::ErrorKind::ValueValidation, msg).exit(),
        None => cmd
            .error(clap::error::ErrorKind::ValueValidation, msg)
            .exit(),
    }
}
