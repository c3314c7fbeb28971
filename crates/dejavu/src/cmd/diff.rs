//! `dejavu diff BEFORE AFTER`: per finding (matched by the finding's key: program,
//! detector, owner, call site function and file, or path pattern, with per-run parts such
//! as pipe inodes masked; never by pid, line or time), per syscall and per call site,
//! before -> after, with deltas. The counts come from the two traces, so a deterministic
//! program gives the same diff every time. JSON schema: docs/report-format.md ("dejavu
//! diff --json").

use crate::cli::{DiffArgs, DiffFormat};
use crate::counts::Counts;
use anyhow::Context;
use dejavu_report::text::fmt_count;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};

/// A finding's identity across runs: its key (`Finding::key`).
type Key = String;

/// How a finding is shown in the diff.
#[derive(Clone, Default)]
struct Label {
    detector: String,
    program: String,
    owner: String,
    site: String,
    paths: String,
}

#[derive(Default, Clone, Copy)]
struct Side {
    calls: u64,
    redundant: u64,
}

struct Row {
    key: Key,
    label: Label,
    before: Option<Side>,
    after: Option<Side>,
}

impl Row {
    fn status(&self) -> &'static str {
        match (self.before, self.after) {
            (None, Some(_)) => "new",
            (Some(_), None) => "gone",
            (Some(b), Some(a)) if a.redundant < b.redundant => "better",
            (Some(b), Some(a)) if a.redundant > b.redundant => "worse",
            _ => "same",
        }
    }
    fn delta(&self) -> i64 {
        self.after.map_or(0, |s| s.redundant as i64) - self.before.map_or(0, |s| s.redundant as i64)
    }
}

fn findings_by_key(c: &Counts) -> BTreeMap<Key, (Side, Label)> {
    let mut m: BTreeMap<Key, (Side, Label)> = BTreeMap::new();
    for f in &c.analysis.findings {
        let label = Label {
            detector: f.detector.to_string(),
            program: f.program.clone(),
            owner: f.owner.name().to_string(),
            site: f.callsites.first().map(|c| c.label()).unwrap_or_default(),
            paths: f.paths.join(" "),
        };
        let e = m.entry(f.key.clone()).or_insert((Side::default(), label));
        e.0.calls += f.calls;
        e.0.redundant += f.redundant_calls;
    }
    m
}

/// Before and after side by side: exact keys first, then the unmatched ones on their
/// loose keys.
fn pair(fb: BTreeMap<Key, (Side, Label)>, mut fa: BTreeMap<Key, (Side, Label)>) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut gone = Vec::new();
    for (k, (b, lb)) in fb {
        match fa.remove(&k) {
            Some((a, la)) => rows.push(Row {
                key: k,
                label: la,
                before: Some(b),
                after: Some(a),
            }),
            None => gone.push((k, b, lb)),
        }
    }
    let mut by_loose: BTreeMap<String, Vec<Key>> = BTreeMap::new();
    for k in fa.keys() {
        by_loose
            .entry(crate::counts::loose_key(k))
            .or_default()
            .push(k.clone());
    }
    for (k, b, lb) in gone {
        let hit = by_loose
            .get_mut(&crate::counts::loose_key(&k))
            .and_then(|v| (!v.is_empty()).then(|| v.remove(0)));
        match hit.and_then(|ka| fa.remove(&ka).map(|x| (ka, x))) {
            Some((ka, (a, la))) => rows.push(Row {
                key: ka,
                label: la,
                before: Some(b),
                after: Some(a),
            }),
            None => rows.push(Row {
                key: k,
                label: lb,
                before: Some(b),
                after: None,
            }),
        }
    }
    for (k, (a, la)) in fa {
        rows.push(Row {
            key: k,
            label: la,
            before: None,
            after: Some(a),
        });
    }
    rows
}

fn callsites(c: &Counts) -> BTreeMap<String, (u64, String)> {
    c.analysis
        .callsites
        .iter()
        .fold(BTreeMap::new(), |mut m, s| {
            // A named function is matched by name and file (a rebuilt bundle moves its
            // lines); anonymous code by its line.
            let key =
                if !s.function.is_empty() && !s.function.starts_with('<') && !s.file.is_empty() {
                    format!("{} ({})", s.file, s.function)
                } else {
                    s.label()
                };
            let e = m.entry(key).or_insert((0, s.function.clone()));
            e.0 += s.redundant_calls;
            m
        })
}

fn fmt_delta(d: i64) -> String {
    match d {
        0 => "0".into(),
        d if d > 0 => format!("+{}", fmt_count(d as u64)),
        d => format!("-{}", fmt_count(d.unsigned_abs())),
    }
}

fn clip(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(w - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

pub fn run(a: DiffArgs) -> anyhow::Result<i32> {
    let before = Counts::load(&a.before)?;
    let after = Counts::load(&a.after)?;
    let (fb, fa) = (findings_by_key(&before), findings_by_key(&after));
    let mut rows = pair(fb, fa);
    // Biggest changes first, then the rest by name.
    rows.sort_by(|x, y| {
        y.delta()
            .unsigned_abs()
            .cmp(&x.delta().unsigned_abs())
            .then(x.key.cmp(&y.key))
    });
    let all = |_: &str| true;
    let (sb, sa) = (before.syscall_totals(&all), after.syscall_totals(&all));
    let mut sys: Vec<(String, u64, u64)> = sb
        .keys()
        .chain(sa.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|k| {
            (
                k.clone(),
                *sb.get(k).unwrap_or(&0),
                *sa.get(k).unwrap_or(&0),
            )
        })
        .collect();
    sys.sort_by(|x, y| {
        let dx = (x.2 as i64 - x.1 as i64).unsigned_abs();
        let dy = (y.2 as i64 - y.1 as i64).unsigned_abs();
        dy.cmp(&dx).then(x.0.cmp(&y.0))
    });
    let (cb, ca) = (callsites(&before), callsites(&after));
    let mut sites: Vec<(String, String, u64, u64)> = cb
        .keys()
        .chain(ca.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|k| {
            let f = ca
                .get(k)
                .or(cb.get(k))
                .map(|x| x.1.clone())
                .unwrap_or_default();
            (
                k.clone(),
                f,
                cb.get(k).map_or(0, |x| x.0),
                ca.get(k).map_or(0, |x| x.0),
            )
        })
        .collect();
    sites.sort_by(|x, y| {
        let dx = (x.3 as i64 - x.2 as i64).unsigned_abs();
        let dy = (y.3 as i64 - y.2 as i64).unsigned_abs();
        dy.cmp(&dx).then(x.0.cmp(&y.0))
    });
    let (rb, ra) = (
        before.analysis.redundant_calls,
        after.analysis.redundant_calls,
    );
    let (tb, ta) = (before.analysis.syscalls, after.analysis.syscalls);

    let format = match (a.json, a.format) {
        (true, _) => DiffFormat::Json,
        (false, f) => f.unwrap_or(DiffFormat::Terminal),
    };
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p)
                .with_context(|| format!("creating {} (-o/--output)", p.display()))?,
        )),
        None => {
            if format == DiffFormat::Html && std::io::stdout().is_terminal() {
                crate::cmd::report::usage_error(
                    "diff",
                    "--format html writes a web page: give it a file with -o (dejavu diff --format html -o diff.html BEFORE AFTER)",
                );
            }
            Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
        }
    };
    if format == DiffFormat::Html {
        use dejavu_report::html::{Diff, DiffCount, DiffFinding, DiffSide};
        let d = Diff {
            before: DiffSide {
                trace: a.before.display().to_string(),
                syscalls: tb,
                redundant_calls: rb,
            },
            after: DiffSide {
                trace: a.after.display().to_string(),
                syscalls: ta,
                redundant_calls: ra,
            },
            findings: rows
                .iter()
                .map(|r| DiffFinding {
                    status: r.status(),
                    detector: r.label.detector.clone(),
                    program: r.label.program.clone(),
                    owner: r.label.owner.clone(),
                    callsite: r.label.site.clone(),
                    paths: r.label.paths.clone(),
                    before: r.before.map(|s| s.redundant),
                    after: r.after.map(|s| s.redundant),
                })
                .collect(),
            syscalls: sys
                .iter()
                .map(|(k, b, af)| DiffCount {
                    name: k.clone(),
                    before: *b,
                    after: *af,
                })
                .collect(),
            callsites: sites
                .iter()
                .map(|(k, f, b, af)| DiffCount {
                    name: if k == f || f.is_empty() {
                        k.clone()
                    } else {
                        format!("{k} {f}")
                    },
                    before: *b,
                    after: *af,
                })
                .collect(),
        };
        dejavu_report::html::render_diff(&d, &mut out)
            .and_then(|()| out.flush())
            .context("writing the diff")?;
        return Ok(0);
    }

    if format == DiffFormat::Json {
        let side = |s: Option<Side>| match s {
            Some(s) => json!({"calls": s.calls, "redundant_calls": s.redundant}),
            None => Value::Null,
        };
        let v = json!({
            "version": 1,
            "before": {"trace": a.before.display().to_string(), "syscalls": tb, "redundant_calls": rb},
            "after": {"trace": a.after.display().to_string(), "syscalls": ta, "redundant_calls": ra},
            "findings": rows.iter().map(|r| json!({
                "status": r.status(),
                "key": r.key,
                "detector": r.label.detector,
                "program": r.label.program,
                "owner": r.label.owner,
                "callsite": r.label.site,
                "paths": r.label.paths.split(' ').filter(|p| !p.is_empty()).collect::<Vec<_>>(),
                "before": side(r.before),
                "after": side(r.after),
                "delta": r.delta(),
            })).collect::<Vec<_>>(),
            "syscalls": sys.iter().map(|(k, b, a)| json!({
                "syscall": k, "before": b, "after": a, "delta": *a as i64 - *b as i64,
            })).collect::<Vec<_>>(),
            "callsites": sites.iter().map(|(k, f, b, a)| json!({
                "callsite": k, "function": f, "before": b, "after": a, "delta": *a as i64 - *b as i64,
            })).collect::<Vec<_>>(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        out.flush()?;
        return Ok(0);
    }

    let mut w = out;
    let mut out = String::new();
    out.push_str(&format!(
        "dejavu diff: {} -> {}\nredundant calls {} -> {} ({}); traced calls {} -> {} ({})\n",
        a.before.display(),
        a.after.display(),
        fmt_count(rb),
        fmt_count(ra),
        fmt_delta(ra as i64 - rb as i64),
        fmt_count(tb),
        fmt_count(ta),
        fmt_delta(ta as i64 - tb as i64),
    ));
    out.push_str("\nFindings (redundant calls)\n");
    if rows.is_empty() {
        out.push_str("  none in either trace\n");
    }
    for r in rows.iter().take(a.top) {
        let where_ = if r.label.site.is_empty() {
            r.label.paths.clone()
        } else {
            r.label
                .site
                .rsplit('/')
                .next()
                .unwrap_or(&r.label.site)
                .to_string()
        };
        out.push_str(&format!(
            "  {:<6} {:<21} {:<14} {:<30} {:>7} -> {:>7} {:>8}\n",
            r.status(),
            r.label.detector,
            clip(&r.label.program, 14),
            clip(&where_, 30),
            r.before.map_or("-".into(), |s| fmt_count(s.redundant)),
            r.after.map_or("-".into(), |s| fmt_count(s.redundant)),
            fmt_delta(r.delta()),
        ));
    }
    out.push_str("\nSyscalls (calls)\n");
    for (k, b, af) in sys.iter().filter(|x| x.1 != x.2).take(a.top) {
        out.push_str(&format!(
            "  {:<20} {:>9} -> {:>9} {:>9}\n",
            k,
            fmt_count(*b),
            fmt_count(*af),
            fmt_delta(*af as i64 - *b as i64)
        ));
    }
    if sys.iter().all(|x| x.1 == x.2) {
        out.push_str("  no change\n");
    }
    if !sites.is_empty() {
        out.push_str("\nCall sites (redundant calls)\n");
        for (k, f, b, af) in sites.iter().filter(|x| x.2 != x.3).take(a.top) {
            out.push_str(&format!(
                "  {:<44} {:>8} -> {:>8} {:>8}\n",
                clip(
                    &if k == f {
                        f.clone()
                    } else {
                        format!("{} {f}", k.rsplit('/').next().unwrap_or(k))
                    },
                    44,
                ),
                fmt_count(*b),
                fmt_count(*af),
                fmt_delta(*af as i64 - *b as i64)
            ));
        }
    }
    write!(w, "{out}")?;
    w.flush()?;
    Ok(0)
}
