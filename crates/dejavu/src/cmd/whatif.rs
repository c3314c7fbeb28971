//! `dejavu whatif`: replay a trace under a fix before writing it. With policies given as
//! flags, replays them; with none, replays each finding's own fix (the finding's number
//! and what it says it saves beside the replay's count). Terminal text or one JSON object
//! (docs/whatif.md).

use super::report::{usage_error, warn};
use crate::cli::{parse_duration, WhatifArgs};
use anyhow::Context;
use dejavu_detect::whatif::Verdict;
use dejavu_detect::whatif::{evaluate, own_fix, policy, Evaluation, Flags, Outcome, Policy};
use dejavu_detect::whatif::{not_modelled, own_exec_fix, own_log_fix, FindingRef};
use dejavu_detect::{analyze_covered, Analysis, Config, Covered, Owner};
use dejavu_report::text::fmt_duration;
use dejavu_report::Progress;
use dejavu_trace::TraceReader;
use serde::Serialize;
use std::io::{self, Write};

/// A finding whose fix no policy models yet: listed, not replayed.
#[derive(Debug, Serialize)]
struct NotReplayed {
    number: usize,
    detector: &'static str,
    key: String,
    redundant_calls: u64,
    why: String,
}

/// The JSON object `--json` prints.
#[derive(Debug, Serialize)]
struct Json<'a> {
    version: u32,
    trace: String,
    syscalls: u64,
    syscall_ns: u64,
    lost_events: u64,
    /// Set when the trace was cut off.
    truncated: Option<&'a str>,
    outcomes: &'a [Outcome],
    not_replayed: &'a [NotReplayed],
}

/// Runs the command; bad policy strings are usage errors (2) that show the syntax.
pub fn run(a: WhatifArgs) -> anyhow::Result<i32> {
    let flags = flags(&a);
    let given = policy::parse(&flags).unwrap_or_else(|e| usage_error("whatif", &e.to_string()));
    let own = given.is_empty();
    let analysed = own || a.finding.is_some();
    let (policies, refs, skipped) = if own {
        own_fixes(&a, &flags)?
    } else if let Some(n) = a.finding {
        // Policies with --finding: instead of the finding's own fix, limited to what the
        // finding covers, its count beside theirs.
        for_finding(&a, n, given)?
    } else {
        let n = given.len();
        (given, vec![None; n], Vec::new())
    };
    let eval = replay(&a.trace, &policies)?;
    if !analysed {
        warn_cut(&a, &eval);
    }
    let mut outcomes = eval.outcomes.clone();
    for (o, r) in outcomes.iter_mut().zip(refs) {
        o.finding = r;
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    if a.json {
        let j = Json {
            version: 1,
            trace: a.trace.display().to_string(),
            syscalls: eval.syscalls,
            syscall_ns: eval.syscall_ns,
            lost_events: eval.lost_events,
            truncated: eval.truncated.as_deref(),
            outcomes: &outcomes,
            not_replayed: &skipped,
        };
        serde_json::to_writer_pretty(&mut out, &j)?;
        writeln!(out)?;
    } else {
        // One finding asked for is shown whoever owns it.
        let all = a.all || a.finding.is_some();
        text(&a.trace, &eval, &outcomes, &skipped, all, &mut out)?;
    }
    out.flush()?;
    if let Some(p) = &a.html {
        html(&a, p, &eval, &outcomes, &skipped)
            .with_context(|| format!("writing the whatif page to {} (--html)", p.display()))?;
        eprintln!("dejavu: whatif page in {}", p.display());
    }
    Ok(crate::exit::OK)
}

/// The policy flags as given (`--ttl` read as a duration).
fn flags(a: &WhatifArgs) -> Flags {
    let ttl = a.ttl.as_deref().map(|t| {
        parse_duration(t)
            .unwrap_or_else(|e| usage_error("whatif", &format!("--ttl: {e}\n\n{}", policy::SYNTAX)))
    });
    Flags {
        cache: a.cache.clone(),
        negative_cache: a.negative_cache.clone(),
        invalidate: a.invalidate.clone(),
        ttl,
        keep_open: a.keep_open.clone(),
        flush: a.flush.clone(),
        ensure_dir_once: a.ensure_dir_once.clone(),
        log_once: a.log_once.clone(),
        skip_unread: a.skip_unread.clone(),
        batch_syncs: a.batch_syncs.clone(),
        batch_writes: a.batch_writes.clone(),
        skip_checks: a.skip_checks.clone(),
        track_size: a.track_size.clone(),
    }
}

/// Each finding's own fix (or finding `--finding`'s), changed by --invalidate, --ttl and
/// --flush; the findings whose fix no policy models, apart.
type OwnFixes = (Vec<Policy>, Vec<Option<FindingRef>>, Vec<NotReplayed>);

fn own_fixes(a: &WhatifArgs, flags: &Flags) -> anyhow::Result<OwnFixes> {
    let (analysis, covered) = analyse_covered(&a.trace)?;
    warn(&a.trace, &analysis);
    let rows = analysis.rows();
    if let Some(n) = a.finding {
        if n == 0 || n > rows.len() {
            usage_error("whatif", &out_of_range(n, rows.len()));
        }
    }
    let (mut policies, mut refs, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    for (i, f) in rows.iter().enumerate() {
        let number = i + 1;
        if a.finding.is_some_and(|n| n != number) {
            continue;
        }
        let fix = own_fix(f, covered.get(&f.key).map(|v| v.as_slice())).or_else(|| {
            match f.detector {
                // repeated-output's: its lines, once.
                "repeated-output" => covered.lines(&f.key).map(|l| own_log_fix(f, l)),
                // repeated-exec's: its commands run once, or its PATH probes made once.
                "repeated-exec" => {
                    let (c, p) = (covered.execs(&f.key), covered.probes(&f.key));
                    (c.is_some() || p.is_some())
                        .then(|| own_exec_fix(f, c.unwrap_or(&[]), p.unwrap_or(&[])))
                }
                _ => None,
            }
        });
        match fix {
            Some(mut p) => {
                if a.finding.is_some() {
                    // One finding: a modifier its fix has no use for is a mistake.
                    policy::applies(&p, flags).unwrap_or_else(|e| {
                        usage_error("whatif", &format!("--finding {number}: {e}"))
                    });
                }
                // --invalidate, --ttl, --flush without a policy: "and with this?"
                policy::modify(&mut p, flags)
                    .unwrap_or_else(|e| usage_error("whatif", &e.to_string()));
                policies.push(p);
                refs.push(Some(FindingRef {
                    number,
                    detector: f.detector,
                    key: f.key.clone(),
                    redundant_calls: f.redundant_calls,
                    owner: f.owner,
                }));
            }
            None if a.finding.is_some() && flags.modifies() => usage_error(
                "whatif",
                &format!(
                    "--finding {number}: {} has no fix to change with --invalidate, --ttl or --flush: \
                     {}",
                    f.detector,
                    not_modelled(f.detector)
                ),
            ),
            None => skipped.push(NotReplayed {
                number,
                detector: f.detector,
                key: f.key.clone(),
                redundant_calls: f.redundant_calls,
                why: not_modelled(f.detector),
            }),
        }
    }
    Ok((policies, refs, skipped))
}

/// `--finding N` with policies: each policy limited to finding N's program and to the
/// (process, path) pairs behind it that its globs match (a policy without a glob: all of
/// them), each outcome beside the finding's count.
fn for_finding(a: &WhatifArgs, n: usize, given: Vec<Policy>) -> anyhow::Result<OwnFixes> {
    let (analysis, covered) = analyse_covered(&a.trace)?;
    warn(&a.trace, &analysis);
    let rows = analysis.rows();
    let Some(f) = n.checked_sub(1).and_then(|i| rows.get(i)) else {
        usage_error("whatif", &out_of_range(n, rows.len()));
    };
    let fref = FindingRef {
        number: n,
        detector: f.detector,
        key: f.key.clone(),
        redundant_calls: f.redundant_calls,
        owner: f.owner,
    };
    let pairs = covered.get(&f.key);
    let mut policies = Vec::new();
    for mut p in given {
        p.scope.programs = f.program_names();
        // A finding that does not list its (process, path) pairs (repeated-output,
        // repeated-exec): its program, and the policy's own globs.
        if let Some(pairs) = pairs {
            let exact: rustc_hash::FxHashSet<(u32, String)> = pairs
                .iter()
                .filter(|(_, path)| p.scope.matches(path.as_bytes()))
                .cloned()
                .collect();
            if exact.is_empty() {
                usage_error(
                    "whatif",
                    &format!(
                        "--finding {n} with {}: none of the finding's paths matches the policy's \
                             glob ({}): give a glob that matches them, or none",
                        p.kind.flag(),
                        p.scope.globs.join(",")
                    ),
                );
            }
            p.scope.exact = Some(exact);
        }
        policies.push(p);
    }
    let refs = vec![Some(fref); policies.len()];
    Ok((policies, refs, Vec::new()))
}

fn out_of_range(n: usize, len: usize) -> String {
    format!(
        "--finding {n}: the trace has {len} finding{} (numbered from 1, as `dejavu report --all` lists them)",
        if len == 1 { "" } else { "s" }
    )
}

/// A cut-off trace and lost events, on stderr (in the no-policy mode the analysis said it
/// already).
fn warn_cut(a: &WhatifArgs, eval: &Evaluation) {
    if let Some(w) = &eval.truncated {
        eprintln!("dejavu: warning: {}: {w}", a.trace.display());
    }
    if eval.lost_events > 0 {
        eprintln!(
            "dejavu: warning: {}: the recorder lost {} events: every count is a lower bound",
            a.trace.display(),
            eval.lost_events
        );
    }
}

/// The analysis `dejavu report` makes (default settings), and what each finding covers.
fn analyse_covered(path: &std::path::Path) -> anyhow::Result<(Analysis, Covered)> {
    let mut reader =
        TraceReader::open(path).with_context(|| format!("reading {}", path.display()))?;
    let total = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut bar = Progress::new("analysing", total);
    let out = analyze_covered(&mut reader, &Config::default(), |n| bar.update(n))
        .with_context(|| format!("reading {}", path.display()))?;
    bar.finish();
    Ok(out)
}

/// The evaluation pass, with a progress bar on stderr when it takes a while.
fn replay(path: &std::path::Path, policies: &[Policy]) -> anyhow::Result<Evaluation> {
    let mut reader =
        TraceReader::open(path).with_context(|| format!("reading {}", path.display()))?;
    let total = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut bar = Progress::new("replaying", total);
    let eval = evaluate(&mut reader, policies, |n| bar.update(n))
        .with_context(|| format!("reading {}", path.display()))?;
    bar.finish();
    Ok(eval)
}

/// `text` wrapped at the report's width, `first` before its first line and `rest` before
/// the others.
fn wrapped(out: &mut dyn Write, text: &str, first: &str, rest: &str) -> io::Result<()> {
    for line in dejavu_report::text::wrap(text, WIDTH, first, rest) {
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Columns of the terminal text, as `dejavu explain` wraps.
const WIDTH: usize = 100;

fn count(n: u64) -> String {
    dejavu_detect::group::count(n)
}

/// What the removed calls' times measure, as the report says it.
fn time_note(backend: &str) -> &'static str {
    match backend {
        "ebpf" => "The removed calls' times are their own time in the kernel, measured by eBPF.",
        "ptrace" => {
            "The removed calls' times were measured under ptrace: each includes the tracer's \
             stop, most of it for a fast call; counts are exact, times are not what a fix saves."
        }
        _ => "The removed calls' times are the durations the trace recorded.",
    }
}

/// Writes the page `--html FILE` asks for: the same outcomes as the text.
fn html(
    a: &WhatifArgs,
    path: &std::path::Path,
    eval: &Evaluation,
    outcomes: &[Outcome],
    skipped: &[NotReplayed],
) -> anyhow::Result<()> {
    use dejavu_report::html::{render_whatif, NotReplayedRow, WhatifPage};
    let rows: Vec<NotReplayedRow> = skipped
        .iter()
        .map(|s| NotReplayedRow {
            number: s.number,
            detector: s.detector.to_string(),
            redundant_calls: s.redundant_calls,
            why: s.why.clone(),
        })
        .collect();
    let trace = a.trace.display().to_string();
    let page = WhatifPage {
        trace: &trace,
        syscalls: eval.syscalls,
        syscall_ns: eval.syscall_ns,
        time_note: time_note(&eval.backend),
        truncated: eval.truncated.as_deref(),
        outcomes,
        not_replayed: &rows,
    };
    let f = std::fs::File::create(path)?;
    let mut out = io::BufWriter::new(f);
    render_whatif(&page, &mut out)?;
    out.flush()?;
    Ok(())
}

fn text(
    trace: &std::path::Path,
    eval: &Evaluation,
    outcomes: &[Outcome],
    skipped: &[NotReplayed],
    all: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "whatif {}: {} polic{} replayed over {} syscalls ({} traced)",
        trace.display(),
        outcomes.len(),
        if outcomes.len() == 1 { "y" } else { "ies" },
        count(eval.syscalls),
        fmt_duration(eval.syscall_ns)
    )?;
    if eval.lost_events > 0 {
        writeln!(
            out,
            "the recorder lost {} events: every count below is a lower bound",
            count(eval.lost_events)
        )?;
    }
    if outcomes.is_empty() && skipped.is_empty() {
        writeln!(
            out,
            "\nno findings: nothing to replay (give a policy, e.g. --cache stat)"
        )?;
    }
    // The runtime's and launchers' findings' fixes: one line per owner, as the report
    // folds those findings (--all shows them).
    let mut folded: Vec<(Owner, Vec<&Outcome>)> = Vec::new();
    for (i, o) in outcomes.iter().enumerate() {
        if let Some(f) = o.finding.as_ref().filter(|f| !all && is_folded(f.owner)) {
            match folded.iter_mut().find(|(w, _)| *w == f.owner) {
                Some((_, v)) => v.push(o),
                None => folded.push((f.owner, vec![o])),
            }
            continue;
        }
        writeln!(out)?;
        write!(out, "{}. {}", i + 1, o.policy)?;
        if let Some(f) = &o.finding {
            write!(
                out,
                "   [finding {}: {}, which says {} {}]",
                f.number,
                f.detector,
                count(f.redundant_calls),
                match (&o.lines, &o.execs) {
                    (Some(_), _) => "lines",
                    (_, Some(_)) => "runs",
                    _ => "calls",
                }
            )?;
        }
        writeln!(out)?;
        writeln!(
            out,
            "   calls: {} -> {} ({} removed; they took {} in this recording)",
            count(o.calls_before),
            count(o.calls_after),
            count(o.removed_calls),
            fmt_duration(o.removed_ns)
        )?;
        if let Some(x) = &o.execs {
            writeln!(
                out,
                "   runs: {} -> {} ({} removed; the calls above are every call those runs made)",
                count(x.before),
                count(x.after),
                count(x.removed)
            )?;
        }
        if let Some(l) = &o.lines {
            writeln!(
                out,
                "   lines: {} -> {} ({} removed; the calls above are the writes that carried them)",
                count(l.before),
                count(l.after),
                count(l.removed)
            )?;
        }
        if let Some(f) = &o.finding {
            // The replay counts on its own; say whether it agrees with the finding (a
            // repeated-output finding counts lines).
            let saves = match (&o.lines, &o.execs) {
                (Some(l), _) => l.removed,
                (_, Some(x)) => x.removed,
                _ => o.removed_calls - o.stale_answers,
            };
            if saves == f.redundant_calls {
                writeln!(
                    out,
                    "   the finding says its fix saves {}: the replay agrees",
                    count(f.redundant_calls)
                )?;
            } else {
                writeln!(
                    out,
                    "   the finding says its fix saves {}, the replay {} (removed less stale): see docs/whatif.md",
                    count(f.redundant_calls),
                    count(saves)
                )?;
            }
        }
        let rows = |title: &str, rows: &[dejavu_detect::whatif::Row], out: &mut dyn Write| {
            let shown: Vec<String> = rows
                .iter()
                .take(5)
                .map(|r| format!("{} {} -> {}", r.name, count(r.before), count(r.after)))
                .collect();
            if shown.is_empty() {
                return Ok(());
            }
            writeln!(out, "   {title}: {}", shown.join(", "))
        };
        rows("per syscall", &o.by_syscall, out)?;
        rows("per program", &o.by_program, out)?;
        if !o.by_callsite.is_empty() {
            writeln!(out, "   per call site:")?;
            for r in o.by_callsite.iter().take(5) {
                writeln!(
                    out,
                    "     {} -> {}  {}",
                    count(r.before),
                    count(r.after),
                    r.name
                )?;
            }
        }
        writeln!(out, "   stale answers: {}", count(o.stale_answers))?;
        for s in &o.stale_examples {
            let line = format!(
                "at {} pid {}: {} {} from {}: served {}, the call returned {}; {}",
                fmt_duration(s.ts),
                s.pid,
                s.call,
                s.path,
                s.site,
                s.served,
                s.actual,
                s.cause.text
            );
            wrapped(out, &line, "     ", "       ")?;
        }
        if !o.invalidation_points.is_empty() {
            writeln!(out, "   invalidation points:")?;
            for p in &o.invalidation_points {
                writeln!(out, "     {} ({}x)", p.at, count(p.times))?;
            }
        }
        if let Some(k) = &o.keep_open {
            if k.bytes_at_risk > 0 {
                writeln!(
                    out,
                    "   at risk: {} bytes in {} writes buffered before the final flush{}",
                    count(k.bytes_at_risk),
                    count(k.records_at_risk),
                    match (&k.worst_path, k.worst_ts) {
                        (Some(p), Some(ts)) => format!(" (at {}, {p})", fmt_duration(ts)),
                        _ => String::new(),
                    }
                )?;
            } else {
                writeln!(out, "   at risk: nothing (writes go through at once)")?;
            }
            if k.writes_before > 0 {
                writeln!(
                    out,
                    "   writes if merged in a 64 KiB buffer: {} -> {} (not counted above)",
                    count(k.writes_before),
                    count(k.writes_after)
                )?;
            }
            for w in &k.writers {
                writeln!(
                    out,
                    "     writer of {}: pid {} tid {} ({}): {} writes, {} bytes{}",
                    w.path,
                    w.pid,
                    w.tid,
                    w.command,
                    count(w.writes),
                    count(w.bytes),
                    if w.holder { "" } else { " (another process)" }
                )?;
            }
            for pid in &k.killed {
                writeln!(
                    out,
                    "     pid {pid} was killed by a signal: its buffer would have been lost"
                )?;
            }
        }
        if let Some(r) = &o.at_risk {
            let line = format!(
                "at risk: {} bytes in {} writes{}: {}",
                count(r.bytes),
                count(r.records),
                match (&r.worst_path, r.worst_ts) {
                    (Some(p), Some(ts)) => format!(" (at {}, {p})", fmt_duration(ts)),
                    _ => String::new(),
                },
                r.text
            );
            wrapped(out, &line, "   ", "     ")?;
        }
        for h in &o.hazards {
            wrapped(out, &format!("hazard: {h}"), "   ", "     ")?;
        }
        if o.moments_total > 0 {
            writeln!(
                out,
                "   moments the policy was wrong: {}",
                count(o.moments_total)
            )?;
            for m in &o.moments {
                let line = if m.ts > 0 {
                    format!("at {}: {}", fmt_duration(m.ts), m.text)
                } else {
                    m.text.clone()
                };
                wrapped(out, &line, "     ", "       ")?;
            }
        }
        wrapped(out, &format!("verdict: {}", o.verdict_text), "   ", "     ")?;
    }
    if !folded.is_empty() {
        writeln!(out)?;
    }
    for (owner, v) in &folded {
        wrapped(out, &folded_line(*owner, v), "", "  ")?;
    }
    if !outcomes.is_empty() {
        // What "they took" measures, as the report says it.
        let note = time_note(&eval.backend);
        writeln!(out)?;
        wrapped(out, note, "", "")?;
    }
    if !skipped.is_empty() {
        writeln!(out, "\nnot replayed:")?;
        for s in skipped {
            writeln!(
                out,
                "  finding {} ({}, {} calls): {}",
                s.number,
                s.detector,
                count(s.redundant_calls),
                s.why
            )?;
        }
    }
    Ok(())
}

/// Owners whose findings' fixes are one line each unless --all.
fn is_folded(o: Owner) -> bool {
    o.folded()
}

/// "runtime start-up and loaders: the fixes of findings 3, 4 and 7 remove 191 of 240
/// calls; 2 safe, 1 unsafe; --all shows them."
fn folded_line(owner: Owner, v: &[&Outcome]) -> String {
    let numbers: Vec<String> = v
        .iter()
        .filter_map(|o| o.finding.as_ref().map(|f| f.number.to_string()))
        .collect();
    let before: u64 = v.iter().map(|o| o.calls_before).sum();
    let removed: u64 = v.iter().map(|o| o.removed_calls).sum();
    let n = |w: Verdict| v.iter().filter(|o| o.verdict == w).count();
    let mut verdicts = Vec::new();
    for (w, name) in [
        (Verdict::Safe, "safe on this recording"),
        (
            Verdict::SafeWithInvalidation,
            "safe with invalidation points",
        ),
        (Verdict::Unsafe, "unsafe"),
    ] {
        match n(w) {
            0 => {}
            k if k == v.len() => verdicts.push(format!("all {name}")),
            k => verdicts.push(format!("{k} {name}")),
        }
    }
    format!(
        "{}: the fix{} of finding{} {} remove{} {} of {} calls; {}; --all shows {}.",
        dejavu_report::owner_title(owner),
        if v.len() == 1 { "" } else { "es" },
        if numbers.len() == 1 { "" } else { "s" },
        numbers.join(", "),
        if v.len() == 1 { "s" } else { "" },
        count(removed),
        count(before),
        verdicts.join(", "),
        if v.len() == 1 { "it" } else { "them" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use dejavu_detect::whatif::{Cause, Point, RiskKeepOpen, Row, Stale, Verdict};

    fn outcome() -> Outcome {
        Outcome {
            policy: "--cache 'stat:/srv/app/**' --invalidate on-write".into(),
            kind: "cache",
            finding: Some(FindingRef {
                number: 2,
                detector: "repeated-lookup",
                key: "k".into(),
                redundant_calls: 4,
                owner: Owner::Own,
            }),
            calls_before: 6,
            calls_after: 1,
            removed_calls: 5,
            removed_ns: 34_000,
            by_syscall: vec![Row {
                name: "newfstatat".into(),
                before: 11,
                after: 6,
            }],
            by_program: vec![Row {
                name: "app".into(),
                before: 46,
                after: 41,
            }],
            by_callsite: vec![Row {
                name: "stats@app.c:29".into(),
                before: 6,
                after: 1,
            }],
            stale_answers: 1,
            stale_examples: vec![Stale {
                ts: 28_880_000,
                pid: 10,
                path: "/srv/app/config.json".into(),
                call: "newfstatat",
                site: "stats@app.c:29".into(),
                served: "size 3, inode 9".into(),
                actual: "size 34, inode 9".into(),
                cause: Cause {
                    kind: "other_process",
                    pid: Some(11),
                    command: Some("app --rewrite".into()),
                    call: Some("write"),
                    site: None,
                    ts: Some(28_000_000),
                    text: "another traced process changed it: pid 11 (app --rewrite), write".into(),
                },
            }],
            invalidation_points: vec![Point {
                at: "write at save@app.c:21".into(),
                times: 1,
            }],
            moments: Vec::new(),
            moments_total: 0,
            lines: None,
            execs: None,
            keep_open: Some(RiskKeepOpen {
                bytes_at_risk: 400,
                records_at_risk: 50,
                worst_ts: Some(11_380_000),
                worst_path: Some("/data/t.tdb".into()),
                writers: Vec::new(),
                killed: Vec::new(),
                writes_before: 50,
                writes_after: 1,
            }),
            at_risk: Some(dejavu_detect::whatif::AtRisk {
                bytes: 3_100,
                records: 100,
                worst_ts: Some(79_230_000),
                worst_path: Some("/db/journal.log".into()),
                text: "not yet synced".into(),
            }),
            hazards: vec!["group commit".into()],
            verdict: Verdict::Unsafe,
            verdict_text: "unsafe: the counter-example".into(),
        }
    }

    #[test]
    fn the_terminal_text_says_each_answer_in_its_place() {
        let eval = Evaluation {
            outcomes: vec![outcome()],
            syscalls: 46,
            syscall_ns: 1_900_000,
            lost_events: 0,
            backend: "ebpf".into(),
            truncated: None,
        };
        let skipped = vec![NotReplayed {
            number: 3,
            detector: "small-writes",
            key: "k3".into(),
            redundant_calls: 7,
            why: "no policy models small-writes's fix yet".into(),
        }];
        let mut out = Vec::new();
        text(
            std::path::Path::new("t.dvt"),
            &eval,
            &eval.outcomes,
            &skipped,
            false,
            &mut out,
        )
        .unwrap();
        let want = "\
whatif t.dvt: 1 policy replayed over 46 syscalls (1.90ms traced)

1. --cache 'stat:/srv/app/**' --invalidate on-write   [finding 2: repeated-lookup, which says 4 calls]
   calls: 6 -> 1 (5 removed; they took 34.0µs in this recording)
   the finding says its fix saves 4: the replay agrees
   per syscall: newfstatat 11 -> 6
   per program: app 46 -> 41
   per call site:
     6 -> 1  stats@app.c:29
   stale answers: 1
     at 28.88ms pid 10: newfstatat /srv/app/config.json from stats@app.c:29: served size 3, inode 9,
       the call returned size 34, inode 9; another traced process changed it: pid 11 (app
       --rewrite), write
   invalidation points:
     write at save@app.c:21 (1x)
   at risk: 400 bytes in 50 writes buffered before the final flush (at 11.38ms, /data/t.tdb)
   writes if merged in a 64 KiB buffer: 50 -> 1 (not counted above)
   at risk: 3,100 bytes in 100 writes (at 79.23ms, /db/journal.log): not yet synced
   hazard: group commit
   verdict: unsafe: the counter-example

The removed calls' times are their own time in the kernel, measured by eBPF.

not replayed:
  finding 3 (small-writes, 7 calls): no policy models small-writes's fix yet
";
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    /// The runtime's and launchers' findings' fixes are one line per owner, as in the
    /// report; --all (or --finding) shows them in full.
    #[test]
    fn runtime_and_launcher_fixes_fold_to_a_line_each_unless_all() {
        let mine = outcome();
        let of = |number, owner, verdict| {
            let mut o = outcome();
            o.policy = format!("--cache 'stat:/usr/lib/{number}/**'");
            o.verdict = verdict;
            if let Some(f) = o.finding.as_mut() {
                f.number = number;
                f.owner = owner;
            }
            o
        };
        let outcomes = vec![
            mine,
            of(3, Owner::Runtime, Verdict::Safe),
            of(4, Owner::Runtime, Verdict::Unsafe),
            of(5, Owner::Launcher, Verdict::Safe),
        ];
        let eval = Evaluation {
            outcomes: outcomes.clone(),
            syscalls: 46,
            syscall_ns: 1_900_000,
            lost_events: 0,
            backend: "ebpf".into(),
            truncated: None,
        };
        let show = |all| {
            let mut out = Vec::new();
            text(
                std::path::Path::new("t.dvt"),
                &eval,
                &outcomes,
                &[],
                all,
                &mut out,
            )
            .unwrap();
            String::from_utf8(out).unwrap()
        };
        // (Wrapped at 100 columns with a two-space hanging indent: read unwrapped.)
        let folded = show(false).replace("\n  ", " ");
        assert!(folded.contains("1. --cache 'stat:/srv/app/**'"), "{folded}");
        assert!(!folded.contains("/usr/lib/3/"), "{folded}");
        assert!(
            folded.contains(
                "runtime start-up and loaders: the fixes of findings 3, 4 remove 10 of 12 calls; 1 \
                 safe on this recording, 1 unsafe; --all shows them."
            ),
            "{folded}"
        );
        assert!(
            folded.contains(
                "launchers: the fix of finding 5 removes 5 of 6 calls; all safe on this recording; \
                 --all shows it."
            ),
            "{folded}"
        );
        let all = show(true);
        assert!(all.contains("2. --cache 'stat:/usr/lib/3/**'"), "{all}");
        assert!(all.contains("4. --cache 'stat:/usr/lib/5/**'"), "{all}");
        assert!(!all.contains("--all shows"), "{all}");
    }
}
