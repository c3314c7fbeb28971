//! `dejavu summary`: per-syscall and per-path counts, errors and time.

use crate::cli::SummaryArgs;
use anyhow::Context;
use dejavu_analyze::{Summary, TextOptions};
use dejavu_trace::TraceReader;
use std::io::Write;

/// Prints the summary of one trace; a cut-off trace is summarized with a warning.
pub fn run(a: SummaryArgs) -> anyhow::Result<i32> {
    let mut reader =
        TraceReader::open(&a.trace).with_context(|| format!("reading {}", a.trace.display()))?;
    let summary = Summary::from_reader(&mut reader)
        .with_context(|| format!("reading {}", a.trace.display()))?;
    if let Some(t) = reader.truncation() {
        eprintln!("dejavu: warning: {}: {}", a.trace.display(), t.warning());
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if a.json {
        serde_json::to_writer_pretty(&mut out, &summary.to_json())?;
        writeln!(out)?;
    } else {
        let opts = TextOptions {
            top: a.top,
            ..TextOptions::default()
        };
        summary.render_text(&mut out, &opts)?;
    }
    out.flush()?;
    Ok(crate::exit::OK)
}
