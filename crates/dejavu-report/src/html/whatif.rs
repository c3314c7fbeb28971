//! `dejavu whatif --html FILE`: the policies replayed over a trace, as one page in the
//! style of the HTML report (same head, style and rules: self-contained, everything from
//! the trace escaped). Each policy is a section with its verdict first, then what it
//! removes per syscall, program and call site, the stale answers it would have served,
//! where it must invalidate, and what a kept-open handle would put at risk.

use super::{delta, delta_class, esc, page};
use crate::text::{fmt_count, fmt_duration_short as fmt_duration};
use dejavu_detect::whatif::{Outcome, Row, Verdict};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::{self, Write};

/// A finding that was not replayed under its own fix, and why.
#[derive(Clone, Debug)]
pub struct NotReplayedRow {
    /// Its number, as `dejavu report --all` lists it.
    pub number: usize,
    /// Its detector.
    pub detector: String,
    /// The redundant calls it counts.
    pub redundant_calls: u64,
    /// Why its fix is not modelled.
    pub why: String,
}

/// What the whatif page shows.
#[derive(Clone, Debug)]
pub struct WhatifPage<'a> {
    /// The trace, as given.
    pub trace: &'a str,
    /// Syscalls in it, and their recorded time (ns).
    pub syscalls: u64,
    pub syscall_ns: u64,
    /// What the removed calls' times measure (the backend's note).
    pub time_note: &'a str,
    /// Set when the trace was cut off.
    pub truncated: Option<&'a str>,
    /// Each policy's outcome.
    pub outcomes: &'a [Outcome],
    /// Findings whose fix is not modelled.
    pub not_replayed: &'a [NotReplayedRow],
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Safe => "safe",
        Verdict::SafeWithInvalidation => "safe-with",
        Verdict::Unsafe => "unsafe",
    }
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Safe => "safe on this recording",
        Verdict::SafeWithInvalidation => "safe with the listed invalidation points",
        Verdict::Unsafe => "unsafe",
    }
}

fn rows(b: &mut String, caption: &str, rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        b,
        "<table class=\"diff\"><caption>{}</caption><thead><tr><th scope=\"col\">{}</th>\
         <th scope=\"col\" class=\"n\">calls</th><th scope=\"col\" class=\"n\">left</th>\
         <th scope=\"col\" class=\"n\">change</th></tr></thead><tbody>",
        esc(caption),
        esc(caption.trim_start_matches("per ")),
    );
    for r in rows {
        let _ = writeln!(
            b,
            "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n {}\">{}</td></tr>",
            esc(&r.name),
            fmt_count(r.before),
            fmt_count(r.after),
            delta_class(r.before, r.after),
            delta(r.before, r.after),
        );
    }
    b.push_str("</tbody></table>\n");
}

fn outcome(b: &mut String, i: usize, o: &Outcome) {
    let id = format!("p{}", i + 1);
    let _ = write!(
        b,
        "<section class=\"policy\" id=\"{id}\" aria-labelledby=\"{id}-h\">\n\
         <h2 id=\"{id}-h\">{}. <code>{}</code></h2>\n",
        i + 1,
        esc(&o.policy)
    );
    if let Some(f) = &o.finding {
        let _ = writeln!(
            b,
            "<p class=\"of\">The fix of finding {} ({}), which says {} redundant calls.</p>",
            f.number,
            esc(f.detector),
            fmt_count(f.redundant_calls)
        );
    }
    // The verdict's sentence starts with its word (most do): said once, in bold.
    let word = verdict_word(o.verdict);
    let rest = o
        .verdict_text
        .strip_prefix(word)
        .map(|r| r.trim_start_matches([':', ' ']))
        .unwrap_or(&o.verdict_text);
    let _ = writeln!(
        b,
        "<p class=\"verdict {}\"><strong>{}</strong>{}{}</p>",
        verdict_class(o.verdict),
        word,
        if rest.is_empty() { "" } else { ": " },
        esc(rest)
    );
    b.push_str("<dl>\n");
    let _ = writeln!(
        b,
        "<dt>calls</dt><dd>{} → {} ({} removed; they took {} in this recording)</dd>",
        fmt_count(o.calls_before),
        fmt_count(o.calls_after),
        fmt_count(o.removed_calls),
        fmt_duration(o.removed_ns)
    );
    if let Some(x) = &o.execs {
        let _ = writeln!(
            b,
            "<dt>runs</dt><dd>{} → {} ({} removed; the calls are every call those runs \
             made)</dd>",
            fmt_count(x.before),
            fmt_count(x.after),
            fmt_count(x.removed)
        );
    }
    if let Some(l) = &o.lines {
        let _ = writeln!(
            b,
            "<dt>lines</dt><dd>{} → {} ({} removed; the calls are the writes that carried \
             them)</dd>",
            fmt_count(l.before),
            fmt_count(l.after),
            fmt_count(l.removed)
        );
    }
    if let Some(f) = &o.finding {
        // A repeated-output finding counts lines.
        let saves = match (&o.lines, &o.execs) {
            (Some(l), _) => l.removed,
            (_, Some(x)) => x.removed,
            _ => o.removed_calls.saturating_sub(o.stale_answers),
        };
        let _ = writeln!(
            b,
            "<dt>agreement</dt><dd>{}</dd>",
            if saves == f.redundant_calls {
                format!(
                    "the finding says its fix saves {}: the replay agrees",
                    fmt_count(saves)
                )
            } else {
                format!(
                    "the finding says its fix saves {}, the replay {} (removed less stale)",
                    fmt_count(f.redundant_calls),
                    fmt_count(saves)
                )
            }
        );
    }
    let _ = writeln!(
        b,
        "<dt>stale answers</dt><dd class=\"{}\">{}</dd>",
        if o.stale_answers > 0 { "unsafe" } else { "" },
        fmt_count(o.stale_answers)
    );
    b.push_str("</dl>\n");
    if !o.stale_examples.is_empty() {
        b.push_str("<h3>Stale answers it would have served</h3>\n<ul class=\"stale\">\n");
        for s in &o.stale_examples {
            let _ = writeln!(
                b,
                "<li>at {} pid {}: <code>{} {}</code> from <code>{}</code>: served {}, the call \
                 returned {}; {}</li>",
                fmt_duration(s.ts),
                s.pid,
                esc(s.call),
                esc(&s.path),
                esc(&s.site),
                esc(&s.served),
                esc(&s.actual),
                esc(&s.cause.text)
            );
        }
        b.push_str("</ul>\n");
    }
    if !o.invalidation_points.is_empty() {
        b.push_str("<h3>Invalidation points</h3>\n<ul>\n");
        for p in &o.invalidation_points {
            let _ = writeln!(
                b,
                "<li><code>{}</code> ({}×)</li>",
                esc(&p.at),
                fmt_count(p.times)
            );
        }
        b.push_str("</ul>\n");
    }
    if let Some(k) = &o.keep_open {
        b.push_str("<h3>At risk if the process dies before the final flush</h3>\n<ul>\n");
        if k.bytes_at_risk > 0 {
            let _ = writeln!(
                b,
                "<li>{} bytes in {} writes{}</li>",
                fmt_count(k.bytes_at_risk),
                fmt_count(k.records_at_risk),
                match (&k.worst_path, k.worst_ts) {
                    (Some(p), Some(ts)) =>
                        format!(" (at {}, <code>{}</code>)", fmt_duration(ts), esc(p)),
                    _ => String::new(),
                }
            );
        } else {
            b.push_str("<li>nothing: writes go through at once</li>\n");
        }
        if k.writes_before > 0 {
            let _ = writeln!(
                b,
                "<li>writes if merged in a 64 KiB buffer: {} → {} (not counted in the calls \
                 removed)</li>",
                fmt_count(k.writes_before),
                fmt_count(k.writes_after)
            );
        }
        for w in &k.writers {
            let _ = writeln!(
                b,
                "<li>writer of <code>{}</code>: pid {} tid {} ({}): {} writes, {} bytes{}</li>",
                esc(&w.path),
                w.pid,
                w.tid,
                esc(&w.command),
                fmt_count(w.writes),
                fmt_count(w.bytes),
                if w.holder { "" } else { " (another process)" }
            );
        }
        for pid in &k.killed {
            let _ = writeln!(
                b,
                "<li class=\"unsafe\">pid {pid} was killed by a signal: its buffer would have \
                 been lost</li>"
            );
        }
        b.push_str("</ul>\n");
    }
    if let Some(r) = &o.at_risk {
        b.push_str("<h3>At risk</h3>\n<ul>\n");
        let _ = writeln!(
            b,
            "<li>{} bytes in {} writes{}: {}</li>",
            fmt_count(r.bytes),
            fmt_count(r.records),
            match (&r.worst_path, r.worst_ts) {
                (Some(p), Some(ts)) =>
                    format!(" (at {}, <code>{}</code>)", fmt_duration(ts), esc(p)),
                _ => String::new(),
            },
            esc(&r.text)
        );
        b.push_str("</ul>\n");
    }
    if !o.hazards.is_empty() {
        b.push_str("<h3>Hazards</h3>\n<ul>\n");
        for h in &o.hazards {
            let _ = writeln!(b, "<li>{}</li>", esc(h));
        }
        b.push_str("</ul>\n");
    }
    if o.moments_total > 0 {
        let _ = writeln!(
            b,
            "<h3>Moments the policy was wrong: {}</h3>\n<ul>",
            fmt_count(o.moments_total)
        );
        for m in &o.moments {
            let at = if m.ts > 0 {
                format!("at {}: ", fmt_duration(m.ts))
            } else {
                String::new()
            };
            let _ = writeln!(b, "<li>{at}{}</li>", esc(&m.text));
        }
        b.push_str("</ul>\n");
    }
    rows(b, "per syscall", &o.by_syscall);
    rows(b, "per program", &o.by_program);
    rows(b, "per call site", &o.by_callsite);
    b.push_str("</section>\n");
}

/// Writes the whatif page.
pub fn render_whatif(p: &WhatifPage<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut b = String::new();
    let removed: u64 = p.outcomes.iter().map(|o| o.removed_calls).sum();
    let unsafe_n = p
        .outcomes
        .iter()
        .filter(|o| o.verdict == Verdict::Unsafe)
        .count();
    let _ = write!(
        b,
        "<header>\n<h1>dejavu whatif</h1>\n<p class=\"cmd\"><code>{}</code></p>\n\
         <p id=\"headline\">{} {} replayed over {} syscalls ({} traced): {} calls removed in \
         all, {} unsafe.</p>\n",
        esc(p.trace),
        p.outcomes.len(),
        if p.outcomes.len() == 1 {
            "policy"
        } else {
            "policies"
        },
        fmt_count(p.syscalls),
        fmt_duration(p.syscall_ns),
        fmt_count(removed),
        unsafe_n
    );
    if let Some(t) = p.truncated {
        let _ = writeln!(
            b,
            "<p class=\"unsafe\">The trace was cut off: {}</p>",
            esc(t)
        );
    }
    let _ = writeln!(b, "<p class=\"note\">{}</p>\n</header>", esc(p.time_note));
    if p.outcomes.is_empty() {
        b.push_str("<p>No policy to replay: no finding has a fix dejavu models.</p>\n");
    }
    for (i, o) in p.outcomes.iter().enumerate() {
        outcome(&mut b, i, o);
    }
    if !p.not_replayed.is_empty() {
        b.push_str("<section aria-labelledby=\"nr-h\"><h2 id=\"nr-h\">Not replayed</h2>\n<ul>\n");
        for n in p.not_replayed {
            let _ = writeln!(
                b,
                "<li>finding {} ({}, {} calls): {}</li>",
                n.number,
                esc(&n.detector),
                fmt_count(n.redundant_calls),
                esc(&n.why)
            );
        }
        b.push_str("</ul>\n</section>\n");
    }
    #[derive(Serialize)]
    struct Data {
        kind: &'static str,
    }
    page(
        out,
        &format!("dejavu whatif: {}", p.trace),
        &b,
        &Data { kind: "whatif" },
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use dejavu_detect::whatif::{Cause, FindingRef, Point, Stale};

    fn outcome(verdict: Verdict) -> Outcome {
        Outcome {
            policy: "--cache 'stat:/srv/<app>/**' --invalidate on-write".into(),
            kind: "cache",
            finding: Some(FindingRef {
                number: 1,
                detector: "repeated-lookup",
                key: "k".into(),
                redundant_calls: 4,
                owner: dejavu_detect::Owner::Own,
            }),
            calls_before: 6,
            calls_after: 1,
            removed_calls: 5,
            removed_ns: 1234,
            by_syscall: vec![Row {
                name: "newfstatat".into(),
                before: 6,
                after: 1,
            }],
            by_program: vec![],
            by_callsite: vec![Row {
                name: "stats@app.c:29".into(),
                before: 6,
                after: 1,
            }],
            stale_answers: 1,
            stale_examples: vec![Stale {
                ts: 28_880_000,
                pid: 10,
                path: "/srv/<app>/config.json".into(),
                call: "newfstatat",
                site: "stats@app.c:29".into(),
                served: "size 3".into(),
                actual: "size 4".into(),
                cause: Cause {
                    kind: "other_process",
                    pid: Some(11),
                    command: Some("writer".into()),
                    call: Some("write"),
                    site: None,
                    ts: Some(20_000_000),
                    text: "a write by pid 11 (writer)".into(),
                },
            }],
            invalidation_points: vec![Point {
                at: "write at save@app.c:40".into(),
                times: 2,
            }],
            moments: vec![],
            moments_total: 0,
            keep_open: None,
            lines: None,
            execs: None,
            at_risk: None,
            hazards: Vec::new(),
            verdict,
            verdict_text: "unsafe: a write by pid 11".into(),
        }
    }

    #[test]
    fn the_page_has_each_policy_its_verdict_and_its_stale_answers_escaped() {
        let mut synced = outcome(Verdict::Safe);
        synced.at_risk = Some(dejavu_detect::whatif::AtRisk {
            bytes: 3100,
            records: 100,
            worst_ts: Some(79_000_000),
            worst_path: Some("/db/<j>.log".into()),
            text: "not yet synced".into(),
        });
        synced.hazards = vec!["group commit <per record>".into()];
        let outs = [outcome(Verdict::Unsafe), synced];
        let nr = [NotReplayedRow {
            number: 3,
            detector: "small-writes".into(),
            redundant_calls: 9,
            why: "not modelled <yet>".into(),
        }];
        let mut out = Vec::new();
        render_whatif(
            &WhatifPage {
                trace: "t<1>.dvt",
                syscalls: 100,
                syscall_ns: 5_000_000,
                time_note: "Times are eBPF's.",
                truncated: None,
                outcomes: &outs,
                not_replayed: &nr,
            },
            &mut out,
        )
        .unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("2 policies replayed over 100 syscalls"), "{s}");
        assert!(s.contains("10 calls removed in all, 1 unsafe"), "{s}");
        assert_eq!(s.matches("<section class=\"policy\"").count(), 2);
        assert!(s.contains("class=\"verdict unsafe\""));
        assert!(s.contains("class=\"verdict safe\""));
        assert!(s.contains("the finding says its fix saves 4: the replay agrees"));
        assert!(s.contains("/srv/&lt;app&gt;/config.json"));
        assert!(!s.contains("/srv/<app>"), "unescaped path");
        assert!(s.contains("not modelled &lt;yet&gt;"));
        assert!(s.contains("write at save@app.c:40"));
        // What a fix that drops or delays writes puts at risk, and its hazards, escaped.
        assert!(s.contains("<h3>At risk</h3>"), "{s}");
        assert!(s.contains("3,100 bytes in 100 writes"), "{s}");
        assert!(s.contains("<code>/db/&lt;j&gt;.log</code>"), "{s}");
        assert!(
            s.contains("<li>group commit &lt;per record&gt;</li>"),
            "{s}"
        );
        assert!(s.contains("Content-Security-Policy"));
        // Nothing loaded: no src or href to another place (the SVG namespace is not a load).
        assert!(!s.contains("src=\"http") && !s.contains("href=\"http"));
    }
}
