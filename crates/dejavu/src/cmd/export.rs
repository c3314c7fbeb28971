//! `dejavu export`: a trace in a format other tools read.

use crate::cli::{ExportArgs, ExportFormat};
use anyhow::Context;
use dejavu_trace::TraceReader;
use std::io::Write;

/// Exports; a closed stdout (`| head`) is success.
pub fn run(a: ExportArgs) -> anyhow::Result<i32> {
    let mut reader =
        TraceReader::open(&a.trace).with_context(|| format!("reading {}", a.trace.display()))?;
    if a.format == ExportFormat::Parquet {
        // The Parquet writer needs an owned, sendable destination.
        let stats = match &a.output {
            Some(p) => {
                let f = std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
                dejavu_analyze::parquet_export::export_parquet(&mut reader, f)
            }
            None => {
                if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                    super::report::usage_error(
                        "export",
                        "--format parquet writes binary data: give -o FILE or redirect it (> t.parquet)",
                    );
                }
                dejavu_analyze::parquet_export::export_parquet(&mut reader, std::io::stdout())
            }
        }
        .with_context(|| format!("exporting {}", a.trace.display()))?;
        if stats.truncated {
            if let Some(t) = reader.truncation() {
                eprintln!("dejavu: warning: {}", t.warning());
            }
        }
        return Ok(crate::exit::OK);
    }
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let stats = match a.format {
        ExportFormat::Jsonl => dejavu_analyze::export::export_jsonl(&mut reader, &mut out)
            .with_context(|| format!("exporting {}", a.trace.display()))?,
        ExportFormat::Chrome => dejavu_analyze::chrome::export_chrome(&mut reader, &mut out)
            .with_context(|| format!("exporting {}", a.trace.display()))?,
        // Written above; here only to keep the match whole.
        ExportFormat::Parquet => return Ok(crate::exit::OK),
    };
    if stats.truncated {
        if let Some(t) = reader.truncation() {
            eprintln!("dejavu: warning: {}", t.warning());
        }
    }
    Ok(crate::exit::OK)
}
