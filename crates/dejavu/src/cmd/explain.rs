//! `dejavu explain ID`: what a detector finds, an example, the fix, the hazards and its
//! options, all from the detector's own documentation in the registry.

use super::report::usage_error;
use crate::cli::ExplainArgs;
use dejavu_detect::{find_detector, registry, DetectorInfo};
use dejavu_report::text::wrap;
use std::io::{self, Write};

const WIDTH: usize = 100;
const INDENT: &str = "  ";

/// Prints the explanation; an unknown id is a usage error that lists the ids.
pub fn run(a: ExplainArgs) -> anyhow::Result<i32> {
    let Some(info) = find_detector(a.id.trim()) else {
        let ids: Vec<&str> = registry().iter().map(|d| d.id).collect();
        usage_error(
            "explain",
            &format!(
                "unknown detector `{}`; the detectors are: {}",
                a.id,
                ids.join(", ")
            ),
        );
    };
    let mut out = io::BufWriter::new(io::stdout().lock());
    explain(info, &mut out)?;
    out.flush()?;
    Ok(crate::exit::OK)
}

fn explain(d: &DetectorInfo, out: &mut dyn Write) -> io::Result<()> {
    for line in wrap(&format!("{}: {}", d.id, d.summary), WIDTH, "", INDENT) {
        writeln!(out, "{line}")?;
    }
    section(out, "What it finds", d.explain, true)?;
    // An example is often code: keep its lines as they are.
    section(out, "Example", d.example, false)?;
    section(out, "Fix", d.fix, true)?;
    section(out, "Hazards", d.hazards, true)?;
    writeln!(out, "\nOptions")?;
    if d.options.is_empty() {
        writeln!(out, "{INDENT}none")?;
    } else {
        for (name, default, meaning) in d.options {
            let first = format!("{INDENT}{name} (default {default}): ");
            for line in wrap(meaning, WIDTH, &first, &format!("{INDENT}{INDENT}")) {
                writeln!(out, "{line}")?;
            }
        }
        let (name, default, _) = d.options[0];
        writeln!(
            out,
            "{INDENT}Set with -O, e.g. dejavu report -O {}.{name}={default} TRACE",
            d.id
        )?;
    }
    Ok(())
}

/// A titled section; left out when the detector has nothing to say there.
fn section(out: &mut dyn Write, title: &str, text: &str, wrap_it: bool) -> io::Result<()> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n{title}")?;
    if wrap_it {
        for (i, para) in text.split("\n\n").enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            for line in wrap(para, WIDTH, INDENT, INDENT) {
                writeln!(out, "{line}")?;
            }
        }
    } else {
        for line in text.lines() {
            writeln!(out, "{INDENT}{line}")?;
        }
    }
    Ok(())
}
