//! `dejavu export`: a trace in a format other tools read.

use crate::cli::{ExportArgs, ExportFormat};
use anyhow::Context;
use dejavu_trace::TraceReader;
use std::io::Write;

/// Exports; a closed stdout (`| head`) is success.
pub fn run(a: ExportArgs) -> anyhow::Result<i32> {
    let mut reader =
        TraceReader::open(&a.trace).with_context(|| format!("reading {}", a.trace.display()))?;
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
    };
    if stats.truncated {
        if let Some(t) = reader.truncation() {
            eprintln!("dejavu: warning: {}", t.warning());
        }
    }
    Ok(crate::exit::OK)
}
