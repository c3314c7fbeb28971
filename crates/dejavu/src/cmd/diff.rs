//! `dejavu diff BEFORE AFTER`: per finding (matched by detector, call site and paths, never
//! by pid or time), per syscall and per call site, before -> after, with deltas. The
//! counts come from the two traces, so a deterministic program gives the same diff every
//! time. JSON schema: docs/report-format.md ("dejavu diff --json").

use crate::cli::DiffArgs;
use crate::counts::{site_key, Counts};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A finding's identity across runs.
type Key = (String, String, String);

#[derive(Default, Clone, Copy)]
struct Side {
    calls: u64,
    redundant: u64,
}

struct Row {
    key: Key,
    function: String,
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

fn findings_by_key(c: &Counts) -> BTreeMap<Key, (Side, String)> {
    let mut m: BTreeMap<Key, (Side, String)> = BTreeMap::new();
    for f in &c.analysis.findings {
        let key = (f.detector.to_string(), site_key(f), f.paths.join(" "));
        let function = f
            .callsites
            .first()
            .map(|c| c.function.clone())
            .unwrap_or_default();
        let e = m.entry(key).or_insert((Side::default(), function));
        e.0.calls += f.calls;
        e.0.redundant += f.redundant_calls;
    }
    m
}

fn callsites(c: &Counts) -> BTreeMap<String, (u64, String)> {
    c.analysis
        .callsites
        .iter()
        .map(|s| {
            let key = if s.file.is_empty() {
                s.function.clone()
            } else {
                format!("{}:{}", s.file, s.line)
            };
            (key, (s.redundant_calls, s.function.clone()))
        })
        .collect()
}

fn fmt_delta(d: i64) -> String {
    match d {
        0 => "0".into(),
        d if d > 0 => format!("+{}", crate::counts::thousands(d as u64)),
        d => format!("-{}", crate::counts::thousands(d.unsigned_abs())),
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
    let mut rows: Vec<Row> = Vec::new();
    for key in fb
        .keys()
        .chain(fa.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let b = fb.get(key);
        let af = fa.get(key);
        rows.push(Row {
            key: key.clone(),
            function: af.or(b).map(|x| x.1.clone()).unwrap_or_default(),
            before: b.map(|x| x.0),
            after: af.map(|x| x.0),
        });
    }
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

    if a.json {
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
                "detector": r.key.0,
                "callsite": r.key.1,
                "function": r.function,
                "paths": r.key.2.split(' ').filter(|p| !p.is_empty()).collect::<Vec<_>>(),
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
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }

    let mut out = String::new();
    out.push_str(&format!(
        "dejavu diff: {} -> {}\nredundant calls {} -> {} ({}); traced calls {} -> {} ({})\n",
        a.before.display(),
        a.after.display(),
        crate::counts::thousands(rb),
        crate::counts::thousands(ra),
        fmt_delta(ra as i64 - rb as i64),
        crate::counts::thousands(tb),
        crate::counts::thousands(ta),
        fmt_delta(ta as i64 - tb as i64),
    ));
    out.push_str("\nFindings (redundant calls)\n");
    if rows.is_empty() {
        out.push_str("  none in either trace\n");
    }
    for r in rows.iter().take(a.top) {
        let where_ = if r.key.1.is_empty() {
            String::new()
        } else if r.key.1 == r.function {
            clip(&r.function, 26)
        } else {
            clip(
                &format!(
                    "{} {}",
                    r.key.1.rsplit('/').next().unwrap_or(&r.key.1),
                    r.function
                ),
                26,
            )
        };
        out.push_str(&format!(
            "  {:<6} {:<21} {:<26} {:<18} {:>7} -> {:>7} {:>8}\n",
            r.status(),
            r.key.0,
            where_,
            clip(&r.key.2, 18),
            r.before
                .map_or("-".into(), |s| crate::counts::thousands(s.redundant)),
            r.after
                .map_or("-".into(), |s| crate::counts::thousands(s.redundant)),
            fmt_delta(r.delta()),
        ));
    }
    out.push_str("\nSyscalls (calls)\n");
    for (k, b, af) in sys.iter().filter(|x| x.1 != x.2).take(a.top) {
        out.push_str(&format!(
            "  {:<20} {:>9} -> {:>9} {:>9}\n",
            k,
            crate::counts::thousands(*b),
            crate::counts::thousands(*af),
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
                crate::counts::thousands(*b),
                crate::counts::thousands(*af),
                fmt_delta(*af as i64 - *b as i64)
            ));
        }
    }
    print!("{out}");
    Ok(0)
}
