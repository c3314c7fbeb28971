//! `dejavu run`: record a program to a temporary trace, then report on it once the
//! program has exited. The program keeps its stdio; the report goes to stderr unless
//! told otherwise, and the exit status stays the program's own.

use super::{record, report};
use crate::cli::{FailOn, ReportTo, RunArgs};
use anyhow::Context;
use dejavu_capture::Target;
use dejavu_report::Reporter;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;

/// dejavu itself failed (docs/cli.md): here, the trace could not be analysed or the
/// report not written, after a program that succeeded.
const DEJAVU_FAILED: i32 = 125;
/// `--fail-on finding`, the program succeeded, and there are findings.
const FOUND: i32 = 1;

/// Where the report goes.
enum Dest {
    Stderr,
    Stdout,
    File(PathBuf, File),
}

/// Records, reports, and returns the exit status: the program's, or with `--fail-on
/// finding` 1 when the program succeeded and there are findings.
pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    // Everything that can be wrong with the flags is caught before the program runs: a
    // long test suite must not run for nothing.
    let config = report::config(&a.report).unwrap_or_else(|msg| report::usage_error("run", &msg));
    let dest = match &a.report_file {
        Some(p) if p.extension().is_some_and(|e| e == "dvt") => report::usage_error(
            "run",
            &format!(
                "-o/--report-file is where the report goes, not the trace; to keep the trace, \
                 use --keep-trace {}",
                p.display()
            ),
        ),
        Some(p) => Dest::File(
            p.clone(),
            File::create(p).with_context(|| {
                format!("creating the report file {} (--report-file)", p.display())
            })?,
        ),
        None if a.report_to == ReportTo::Stdout => Dest::Stdout,
        None => Dest::Stderr,
    };
    // The temporary trace lives as long as `_tmp`: it is deleted when run returns.
    let (trace, _tmp) = match &a.keep_trace {
        Some(p) => (p.clone(), None),
        None => {
            let t = tempfile::Builder::new()
                .prefix("dejavu-run-")
                .suffix(".dvt")
                .tempfile()
                .context("creating a temporary trace (set TMPDIR to a writable directory, or use --keep-trace FILE)")?;
            (t.path().to_path_buf(), Some(t))
        }
    };

    let outcome = record::capture(
        Target::Command(a.command.clone()),
        &a.capture,
        a.verbose,
        &trace,
    )?;
    let status = record::program_status(&outcome);
    // From here on, a failure of ours must not hide the program's: its failure wins.
    let ours = |err: anyhow::Error| -> i32 {
        let code = crate::exit::report(&err);
        if status != 0 {
            status
        } else if code == crate::exit::OK {
            // A closed pipe on the report's stream: nobody wants the rest.
            status
        } else {
            DEJAVU_FAILED
        }
    };
    let analysis = match report::analyse(&trace, &config, a.report.output()) {
        Ok(an) => an,
        Err(e) => return Ok(ours(e)),
    };
    report::warn(&trace, &analysis);
    // The HTML page goes beside the report the flags chose, from the same analysis.
    if let Some(p) = &a.html {
        let written = File::create(p)
            .map_err(anyhow::Error::from)
            .and_then(|f| {
                let mut opts = report::render_options(&a.report, config.clone(), &f);
                opts.top = None;
                opts.color = false;
                let mut out = io::BufWriter::new(f);
                report::html_reporter(&trace)
                    .render(&analysis, &mut out, &opts)
                    .and_then(|()| out.flush())?;
                Ok(())
            })
            .with_context(|| format!("writing the HTML report to {} (--html)", p.display()));
        match written {
            Ok(()) => eprintln!("dejavu: HTML report in {}", p.display()),
            Err(e) => return Ok(ours(e)),
        }
    }
    let written = match dest {
        Dest::Stderr => emit(&a, &trace, &analysis, config, io::stderr()),
        Dest::Stdout => emit(&a, &trace, &analysis, config, io::stdout()),
        Dest::File(p, f) => emit(&a, &trace, &analysis, config, f)
            .with_context(|| format!("writing the report to {} (--report-file)", p.display())),
    };
    if let Err(e) = written {
        return Ok(ours(e));
    }
    let findings = analysis.findings.len();
    if a.fail_on == FailOn::Finding && findings > 0 && status == 0 {
        eprintln!(
            "dejavu: exiting with status {FOUND}: {findings} finding{} (--fail-on finding)",
            if findings == 1 { "" } else { "s" }
        );
        return Ok(FOUND);
    }
    Ok(status)
}

/// Renders the report into `dest`, styled for what `dest` is.
fn emit<D: Write + std::os::fd::AsFd>(
    a: &RunArgs,
    trace: &std::path::Path,
    analysis: &dejavu_detect::Analysis,
    config: dejavu_detect::Config,
    dest: D,
) -> anyhow::Result<()> {
    let opts = report::render_options(&a.report, config, &dest);
    let tty = std::io::IsTerminal::is_terminal(&dest.as_fd());
    let mut out = io::BufWriter::new(dest);
    if tty && !a.report.machine() {
        // The program's output ends wherever it ends: start the report on a line of its own.
        writeln!(out)?;
    }
    report::render(&a.report, trace, analysis, &mut out, &opts)?;
    out.flush()?;
    Ok(())
}
