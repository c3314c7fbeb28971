//! `dejavu check --budget FILE (-- COMMAND | --trace T)`: counts against a budget, a CI
//! gate that never looks at times (docs/budgets.md).

use super::record;
use crate::budget::{self, Budget};
use crate::cli::CheckArgs;
use crate::counts::Counts;
use anyhow::Context;
use dejavu_capture::Target;
use dejavu_report::text::fmt_count;
use serde_json::json;

/// Within budget.
const OK: i32 = 0;
/// Over budget.
const OVER: i32 = 1;
/// Bad flags, a bad budget file, a failed recording.
const USAGE: i32 = 2;
/// The program failed; the counts were within budget.
const PROGRAM_FAILED: i32 = 3;

fn usage(msg: &str) -> i32 {
    eprintln!("dejavu check: {msg}");
    USAGE
}

pub fn run(a: CheckArgs) -> anyhow::Result<i32> {
    // The budget is read before the program runs: a long test suite must not run for a
    // typo in the budget.
    let budget = if a.update && !a.budget.exists() {
        None
    } else {
        match Budget::load(&a.budget) {
            Ok(b) => Some(b),
            Err(e) => return Ok(usage(&format!("{e:#}"))),
        }
    };
    if a.trace.is_none() && a.command.is_empty() {
        return Ok(usage(
            "nothing to check: give a command after `--` (dejavu check --budget FILE -- CMD), or --trace FILE",
        ));
    }
    let (trace, _tmp, status) = match &a.trace {
        Some(t) => (t.clone(), None, 0),
        None => {
            let (path, tmp) = match &a.keep_trace {
                Some(p) => (p.clone(), None),
                None => {
                    let t = tempfile::Builder::new()
                        .prefix("dejavu-check-")
                        .suffix(".dvt")
                        .tempfile()
                        .context(
                            "creating a temporary trace (set TMPDIR, or use --keep-trace FILE)",
                        )?;
                    (t.path().to_path_buf(), Some(t))
                }
            };
            let outcome =
                match record::capture(Target::Command(a.command.clone()), &a.capture, false, &path)
                {
                    Ok(o) => o,
                    Err(e) => {
                        crate::exit::report(&e);
                        return Ok(USAGE);
                    }
                };
            (path, tmp, record::program_status(&outcome))
        }
    };
    let counts = match Counts::load(&trace) {
        Ok(c) => c,
        Err(e) => {
            crate::exit::report(&e);
            return Ok(USAGE);
        }
    };
    if counts.analysis.lost_events > 0 {
        eprintln!(
            "dejavu check: warning: {} events were lost while recording; counts may be low",
            counts.analysis.lost_events
        );
    }

    if a.update {
        let text = match budget {
            None => budget::fresh(&counts),
            Some(mut b) => {
                for e in b.entries.clone() {
                    let m = budget::measure(&e, &counts);
                    budget::update(&mut b.doc, &e, m.count);
                }
                b.doc.to_string()
            }
        };
        std::fs::write(&a.budget, text)
            .with_context(|| format!("writing the budget {}", a.budget.display()))?;
        eprintln!(
            "dejavu check: wrote the current counts to {}",
            a.budget.display()
        );
        return Ok(if status != 0 { PROGRAM_FAILED } else { OK });
    }

    let Some(b) = budget else {
        return Ok(usage("no budget"));
    };
    let mut results = Vec::new();
    for e in &b.entries {
        let m = budget::measure(e, &counts);
        let limit = e.limit();
        results.push((e, m, limit));
    }
    let over: Vec<_> = results.iter().filter(|(_, m, l)| m.count > *l).collect();
    if a.json {
        let v = json!({
            "version": 1,
            "budget": a.budget.display().to_string(),
            "trace": a.trace.as_ref().map(|t| t.display().to_string()),
            "program_status": status,
            "over": over.len(),
            "entries": results.iter().map(|(e, m, l)| json!({
                "kind": e.kind.table(),
                "name": e.name,
                "process": e.process,
                "count": m.count,
                "limit": l,
                "over": m.count > *l,
                "where": m.where_,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "dejavu check: {} of {} budgets exceeded ({})",
            over.len(),
            results.len(),
            a.budget.display()
        );
        let mut rows = results.iter().collect::<Vec<_>>();
        // What exceeded first, most over first.
        rows.sort_by_key(|(_, m, l)| std::cmp::Reverse(m.count.saturating_sub(*l)));
        for (e, m, l) in rows {
            if m.count > *l {
                let pct = if *l > 0 {
                    format!(", {:+.0}%", (m.count - l) as f64 * 100.0 / *l as f64)
                } else {
                    String::new()
                };
                println!(
                    "  OVER  {:<40} {:>9} > {:<9} (+{}{pct})",
                    e.label(),
                    fmt_count(m.count),
                    fmt_count(*l),
                    fmt_count(m.count - l)
                );
                for w in &m.where_ {
                    println!("          at {w}");
                }
            } else {
                println!(
                    "  ok    {:<40} {:>9} <= {}",
                    e.label(),
                    fmt_count(m.count),
                    fmt_count(*l)
                );
            }
        }
    }
    if status != 0 {
        eprintln!("dejavu check: the program itself failed (exit status {status})");
    }
    Ok(if !over.is_empty() {
        OVER
    } else if status != 0 {
        PROGRAM_FAILED
    } else {
        OK
    })
}
