//! The terminal report: a one-paragraph summary, then the findings as a ranked, aligned
//! table that fits the width (100 columns by default), each row followed by what to do
//! about it: the fix, the cache verdict, the hazards, an example and the call sites.

use crate::text::{
    fmt_count, fmt_duration_short as fmt_duration, fmt_share, ratio, sanitize, shell_join,
    shorten_end, shorten_middle, wrap,
};
use crate::{RenderOptions, Reporter, Totals};
use dejavu_detect::{Analysis, Finding, Owner, Severity};
use std::io::{self, Write};

/// Renders the analysis for people.
#[derive(Clone, Copy, Debug, Default)]
pub struct TerminalReporter;

/// Space between table columns: one, as `ps` does, to leave the paths room in 100
/// columns.
const GAP: &str = " ";
/// Call sites under a row unless `--details`.
const CALLSITES: usize = 3;
/// Paths of a pattern named under a row unless `--details`.
const EXAMPLE_PATHS: usize = 2;
/// Steps of a `loop:` line under a row unless `--details` (afero's walk lstat'ed 50 paths
/// per call: 25 lines of one row).
const LOOP_STEPS: usize = 12;
/// Longest path of a `loop:` line under a row unless `--details` (cut in its middle).
const LOOP_PATH: usize = 60;
/// Said when a cache would have served stale answers.
const UNSAFE: &str = "unsafe to cache:";
/// Narrower than this, the table cannot fit; lines then wrap in the terminal.
const MIN_WIDTH: usize = 80;

impl Reporter for TerminalReporter {
    fn render(&self, a: &Analysis, out: &mut dyn Write, opts: &RenderOptions) -> io::Result<()> {
        let r = Render {
            a,
            opts,
            st: Style(opts.color),
            width: opts.width.max(MIN_WIDTH),
            said_no_line: Default::default(),
        };
        r.summary(out)?;
        if opts.by_callsite {
            writeln!(out)?;
            r.callsite_table(out)?;
        } else if !r.shown().is_empty() {
            writeln!(out)?;
            r.table(out)?;
        } else if !a.rows().is_empty() {
            writeln!(out)?;
            // Every finding folded (a launcher's, the runtime's, tools'): said, so that
            // an empty table does not read as a report that forgot the program.
            if !opts.all_owners {
                writeln!(
                    out,
                    "The program's own code and its dependencies: no finding of {} or more \
                     redundant calls.",
                    fmt_count(opts.config.min_calls.max(1))
                )?;
            }
        }
        r.footer(out)
    }
}

/// The terminal report's summary paragraph (unwrapped, no colour) and, when there are
/// findings, what its times measure: the HTML report's headline says the same.
pub(crate) fn headline(a: &Analysis, opts: &RenderOptions) -> (String, Option<String>) {
    let r = Render {
        a,
        opts,
        st: Style(false),
        width: usize::MAX,
        said_no_line: Default::default(),
    };
    let note = (!a.rows().is_empty()).then(|| times_note(&a.meta.backend));
    (r.summary_text(), note)
}

/// The findings the terminal table lists as rows (the program's and its dependencies'
/// unless `--all`, at most `--top`): the HTML report lists the same.
pub(crate) fn shown<'a>(a: &'a Analysis, opts: &'a RenderOptions) -> &'a [Finding] {
    Render {
        a,
        opts,
        st: Style(false),
        width: 100,
        said_no_line: Default::default(),
    }
    .shown_owned()
}

struct Render<'a> {
    a: &'a Analysis,
    opts: &'a RenderOptions,
    st: Style,
    width: usize,
    /// Whether a row has said why it names no line (the next ones say it short).
    said_no_line: std::cell::Cell<bool>,
}

impl<'a> Render<'a> {
    /// The paragraph at the top: what was traced, how much of it was redundant and whose
    /// code made it, the top finding (per iteration, when its function repeats a fixed
    /// sequence), and what the times measure; or, with nothing to report, what was
    /// analysed with which thresholds.
    fn summary(&self, out: &mut dyn Write) -> io::Result<()> {
        let a = self.a;
        let text = self.summary_text();
        for line in wrap(&text, self.width, "", "") {
            writeln!(out, "{line}")?;
        }
        if !a.rows().is_empty() {
            for line in wrap(&times_note(&a.meta.backend), self.width, "", "") {
                writeln!(out, "{}", self.st.dim(&line))?;
            }
        }
        Ok(())
    }

    /// The summary paragraph, unwrapped.
    fn summary_text(&self) -> String {
        let a = self.a;
        let mut text = format!(
            "{} ({}, {} {}): ",
            shorten_end(&sanitize(&shell_join(&a.meta.command)), 60),
            if a.meta.backend.is_empty() {
                "trace"
            } else {
                &a.meta.backend
            },
            fmt_count(a.processes as u64),
            plural(a.processes as u64, "process", "processes"),
        );
        if a.rows().is_empty() {
            text.push_str(&format!(
                "no redundant work found in {} file {} ({} traced), {}.",
                fmt_count(a.syscalls),
                plural(a.syscalls, "syscall", "syscalls"),
                fmt_duration(a.syscall_ns),
                self.thresholds(),
            ));
            text.push(' ');
            text.push_str(&self.hidden_sentence(true));
        } else {
            let t = Totals::of(a);
            // How long the run was (to its last call), beside the syscalls' own time: 26 ms
            // of 87 ms traced is a small part of a two-second build.
            let span = if a.run_ns > 0 {
                format!(" in a {} run", fmt_duration(a.run_ns))
            } else {
                String::new()
            };
            text.push_str(&format!(
                "{} of {} file syscalls were redundant ({}), {} of {} traced ({}){span}. ",
                fmt_count(t.redundant_calls),
                fmt_count(a.syscalls),
                fmt_share(ratio(t.redundant_calls, a.syscalls)),
                fmt_duration(t.wasted_ns),
                fmt_duration(a.syscall_ns),
                fmt_share(ratio(t.wasted_ns, a.syscall_ns)),
            ));
            let mut split = 0;
            let parts: Vec<String> = Owner::ALL
                .iter()
                .filter_map(|&o| {
                    let (n, calls) = owner_totals(a, o);
                    split += calls;
                    (n > 0).then(|| {
                        format!(
                            "{}: {} in {} {}",
                            owner_title(o),
                            fmt_count(calls),
                            fmt_count(n),
                            plural(n, "finding", "findings")
                        )
                    })
                })
                .collect();
            // The findings under the thresholds, which the parts above leave out: named,
            // so that the parts account for the total.
            let mut parts = parts;
            if a.hidden > 0 && a.hidden_calls > 0 {
                split += a.hidden_calls;
                parts.push(format!(
                    "under {} calls (hidden): {} in {} {}",
                    fmt_count(self.opts.config.min_calls.max(1)),
                    fmt_count(a.hidden_calls),
                    fmt_count(a.hidden as u64),
                    plural(a.hidden as u64, "finding", "findings")
                ));
            }
            if !parts.is_empty() {
                // Two findings of different detectors can flag one call (a stat both
                // repeated and the check of a check-then-act) and are not always shown as
                // one: the split then adds up to more than the calls above, and says why.
                let overlap = if split > t.redundant_calls {
                    " (a call two findings flag is in both)"
                } else {
                    ""
                };
                text.push_str(&format!(
                    "Redundant calls by whose code made them{overlap}: {}. ",
                    parts.join("; ")
                ));
            }
            if let Some(f) = self.shown().first() {
                // As under the row: the function whole and the end of its file's path (a
                // cut in the middle lost both: `cmd/go/internal/…/go/internal/cache/
                // cache.go:289`). A site that made only some of the calls says how many.
                let calls = format!(
                    "{} {}",
                    fmt_count(f.redundant_calls),
                    plural(f.redundant_calls, "call", "calls")
                );
                let (at, count) = match f.callsites.first() {
                    Some(c) if c.redundant_calls < f.redundant_calls => (
                        String::new(),
                        format!(
                            "{calls}; {} at {}",
                            fmt_count(c.redundant_calls),
                            fit_site(c, 60)
                        ),
                    ),
                    Some(c) => (format!(" at {}", fit_site(c, 60)), calls),
                    None => (String::new(), calls),
                };
                text.push_str(&format!(
                    "Top: {} of {} in {}{at} ({count}).",
                    f.detector,
                    fit_label(&paths_label(f), 40),
                    program_label(f),
                ));
                if let Some(q) = &f.sequence {
                    let p = per_call(q);
                    let mut c = p.chars();
                    let first = c
                        .next()
                        .map(|c| c.to_uppercase().to_string())
                        .unwrap_or_default();
                    text.push_str(&format!(" {first}{}.", c.as_str()));
                }
            }
        }
        text
    }

    /// "with 13 detectors, at least 10 redundant calls per finding, ..." for the
    /// no-findings paragraph.
    fn thresholds(&self) -> String {
        let cfg = &self.opts.config;
        let dets = &self.a.detectors;
        let mut s = if cfg.only.is_some() {
            format!(
                "with {} {} ({})",
                dets.len(),
                plural(dets.len() as u64, "detector", "detectors"),
                dets.join(", ")
            )
        } else {
            format!("with all {} detectors", dets.len())
        };
        s.push_str(&format!(
            ", counting findings of at least {} redundant {}",
            fmt_count(cfg.min_calls.max(1)),
            plural(cfg.min_calls.max(1), "call", "calls")
        ));
        if cfg.skip_startup_ns > 0 {
            s.push_str(&format!(
                ", skipping calls in the first {}",
                fmt_duration(cfg.skip_startup_ns)
            ));
        }
        if !cfg.options.is_empty() {
            let o: Vec<String> = cfg
                .options
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            s.push_str(&format!(" and {}", o.join(", ")));
        }
        s
    }

    /// What `--min-calls` hid, and how to see it.
    fn hidden_sentence(&self, always: bool) -> String {
        let min = self.opts.config.min_calls.max(1);
        match self.a.hidden {
            0 if always => "No finding was hidden by the thresholds.".to_string(),
            0 => String::new(),
            n => format!(
                "{} {} with fewer than {} redundant calls {} hidden (--min-calls 1 shows {}).",
                fmt_count(n as u64),
                plural(n as u64, "finding", "findings"),
                fmt_count(min),
                if n == 1 { "was" } else { "were" },
                if n == 1 { "it" } else { "them" },
            ),
        }
    }

    /// The rows of the table: the program's own and its dependencies' findings (every
    /// owner with `--all`), at most `--top`.
    fn shown(&self) -> &'a [Finding] {
        self.shown_owned()
    }

    fn shown_owned(&self) -> &'a [Finding] {
        let f = self.a.rows();
        // Findings come ranked by owner: own, dependency, runtime, launcher, tool.
        let listed = if self.opts.all_owners {
            f.len()
        } else {
            f.iter().position(|f| f.owner.folded()).unwrap_or(f.len())
        };
        let n = self.opts.top.map_or(listed, |t| t.min(listed));
        &f[..n]
    }

    /// Findings of an owner the table folded into one line.
    fn folded(&self, owner: Owner) -> Vec<&Finding> {
        if self.opts.all_owners {
            return Vec::new();
        }
        self.a.rows().iter().filter(|f| f.owner == owner).collect()
    }

    /// `--group-by callsite`: call sites across findings, each redundant call once.
    fn callsite_table(&self, out: &mut dyn Write) -> io::Result<()> {
        let a = self.a;
        if a.callsites.is_empty() {
            writeln!(
                out,
                "No call sites: the trace has no stacks for its redundant calls (record with --stacks on, \
                 the default, to get them)."
            )?;
            return Ok(());
        }
        let limit = self.opts.top.unwrap_or(usize::MAX);
        let total = a.redundant_ns.max(1);
        let head = format!(
            "{:>3}  {:<42}  {:<20}  {:>9}  {:>8}  {:>6}",
            "#", "call site", "function", "redundant", "wasted", "share"
        );
        writeln!(
            out,
            "{}",
            self.st.bold(shorten_end(&head, self.width).trim_end())
        )?;
        for (i, c) in a.callsites.iter().take(limit).enumerate() {
            let dets = crate::callsite_detectors(a, c).join(", ");
            let row = format!(
                "{:>3}  {:<42}  {:<20}  {:>9}  {:>8}  {:>6}",
                i + 1,
                shorten_middle(&location(c), 42),
                shorten_end(&sanitize(&c.label_parts().0), 20),
                fmt_count(c.redundant_calls),
                fmt_duration(c.wasted_ns),
                // Of the redundant time, so the column adds up to 100%.
                fmt_share(c.wasted_ns as f64 / total as f64),
            );
            writeln!(out, "{}", shorten_end(&row, self.width).trim_end())?;
            if !dets.is_empty() {
                let text = format!("     found by: {dets}");
                writeln!(out, "{}", self.st.dim(&shorten_end(&text, self.width)))?;
            }
            if self.opts.stacks {
                for fr in &c.stack {
                    let mark = if fr.internal { "  " } else { "> " };
                    let text = format!(
                        "       {mark}{} {}",
                        sanitize(&fr.function),
                        frame_location(fr)
                    );
                    writeln!(out, "{}", self.st.dim(&shorten_end(&text, self.width)))?;
                }
            }
        }
        if a.callsites.len() > limit {
            writeln!(
                out,
                "\n{} more call sites (--all shows them).",
                a.callsites.len() - limit
            )?;
        }
        writeln!(out)?;
        Ok(())
    }

    fn table(&self, out: &mut dyn Write) -> io::Result<()> {
        let shown = self.shown();
        let rows: Vec<[String; 9]> = shown
            .iter()
            .enumerate()
            .map(|(i, f)| {
                [
                    (i + 1).to_string(),
                    f.severity.name().to_string(),
                    f.detector.to_string(),
                    program_label(f),
                    paths_label(f),
                    fmt_count(f.calls),
                    fmt_count(f.redundant_calls),
                    fmt_duration(f.wasted_ns),
                    fmt_share(f.share),
                ]
            })
            .collect();
        let cols = Columns::fit(&rows, self.width);
        // The header.
        let head: Vec<String> = HEADERS
            .iter()
            .enumerate()
            .map(|(i, h)| cols.cell(i, h))
            .collect();
        writeln!(out, "{}", self.st.bold(head.join(GAP).trim_end()))?;
        let indent = " ".repeat(cols.w[0] + cols.w[1] + 2 * GAP.len());
        let path_room = cols.w[Columns::PATHS];
        for (i, (f, row)) in shown.iter().zip(&rows).enumerate() {
            let mut cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(c, v)| cols.cell(c, v))
                .collect();
            cells[1] = self.st.severity(f.severity, &cells[1]);
            cells[6] = self.st.bold(&cells[6]);
            cells[7] = self.st.bold(&cells[7]);
            cells[8] = self.st.severity(f.severity, &cells[8]);
            writeln!(out, "{}", cells.join(GAP))?;
            // Under the row: what to do about it. Texts a row above already gave for the
            // same detector are referred to, not repeated.
            let above = &shown[..i];
            let refs = Refs {
                fix: above
                    .iter()
                    .position(|e| e.detector == f.detector && e.fix == f.fix),
                hazards: above.iter().position(|e| {
                    e.detector == f.detector && !f.hazards.is_empty() && e.hazards == f.hazards
                }),
                cut: row[Columns::PATHS].chars().count() > path_room,
            };
            for line in self.block(f, &refs, &indent) {
                writeln!(out, "{line}")?;
            }
            writeln!(out)?;
        }
        Ok(())
    }

    /// The lines under one row.
    fn block(&self, f: &Finding, refs: &Refs, indent: &str) -> Vec<String> {
        const LABEL: usize = 9;
        let st = &self.st;
        let mut lines = Vec::new();
        let mut field = |label: &str, text: &str, paint: &dyn Fn(&str) -> String| {
            let first = format!("{indent}{label:<LABEL$}");
            let rest = format!("{indent}{:LABEL$}", "");
            for (n, l) in wrap(text, self.width, &first, &rest)
                .into_iter()
                .enumerate()
            {
                // Colour the label only: a wrapped line must keep its width.
                lines.push(if n == 0 {
                    format!(
                        "{indent}{}{}",
                        paint(&l[indent.len()..indent.len() + LABEL]),
                        &l[indent.len() + LABEL..]
                    )
                } else {
                    l
                });
            }
        };
        let details = self.opts.details;
        let stacks = self.opts.stacks;
        let room = self.width.saturating_sub(indent.len() + LABEL);
        // Paths are single words to `wrap`: shorten each to fit a line of its own.
        let fit_paths = |ps: &[String]| {
            ps.iter()
                .map(|p| fit_label(&path_text(p), room.saturating_sub(1)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        // Where first: the line to change, and how much of the finding it covers.
        let limit = if details { usize::MAX } else { CALLSITES };
        for (n, c) in f.callsites.iter().take(limit).enumerate() {
            // A site whose code is not the finding's owner's (the runtime's import system
            // stats a directory the program's code stats too) says whose it is. (A
            // launcher's or a tool's own code is the finding's owner's: its program is
            // the launcher or the tool.)
            let own_code =
                c.owner == Owner::Own && matches!(f.owner, Owner::Launcher | Owner::Tool);
            let whose = if c.owner == f.owner || own_code {
                ""
            } else {
                match c.owner {
                    Owner::Own => ", the program's",
                    Owner::Dependency => ", a dependency's",
                    Owner::Runtime => ", the runtime's",
                    Owner::Launcher => ", a launcher's",
                    Owner::Tool => ", a tool's",
                }
            };
            let calls = format!(
                "  ({} {}, {}{whose})",
                fmt_count(c.redundant_calls),
                plural(c.redundant_calls, "call", "calls"),
                fmt_share(c.share)
            );
            let loc = fit_site(c, room.saturating_sub(calls.len()));
            field(
                if n == 0 { "at:" } else { "" },
                &format!("{loc}{calls}"),
                &|s| st.dim(s),
            );
            if stacks {
                for fr in &c.stack {
                    let mark = if fr.internal { "  " } else { "> " };
                    let text = format!("{mark}{} {}", sanitize(&fr.function), frame_location(fr));
                    field("", &shorten_end(&text, room), &|s| st.dim(s));
                }
            }
        }
        if f.callsites.is_empty() {
            // Not "no stacks": the calls had native stacks, of the runtime's code only.
            use dejavu_detect::program::Runtime;
            let runtime = dejavu_detect::program::command_runtime(&f.command);
            let short = match runtime {
                Runtime::Jvm => Some("the JVM"),
                Runtime::Script(lang) => Some(lang),
                Runtime::Shell => Some("shell scripts"),
                _ => None,
            };
            // Said in full once; the rows after it say it short (Maven's screen had
            // given every row the same two lines).
            let said = short.is_some() && self.said_no_line.replace(true);
            let why = match runtime {
                _ if said => short.map(|l| format!("no line: no agent for {l} (as above)")),
                Runtime::Jvm => Some(
                    "no line: dejavu has no agent for the JVM, and the Java code that made the \
                     calls is not on their native stacks (they end in the JDK's native code)"
                        .to_string(),
                ),
                Runtime::Script(lang) => Some(format!(
                    "no line: dejavu has no agent for {lang}, and the {lang} code that made the \
                     calls is not on their native stacks (they end in the interpreter's C code)"
                )),
                Runtime::Shell => Some(
                    "no line: dejavu has no agent for shell scripts, and the script's lines are \
                     not on the calls' native stacks (they end in the shell's C code)"
                        .to_string(),
                ),
                _ => None,
            };
            if let Some(why) = why {
                field("at:", &why, &|s| st.dim(s));
            }
        }
        if f.callsites.len() > limit {
            let more = f.callsites.len() - limit;
            field(
                "",
                &format!("and {more} more (--details shows them)"),
                &|s| s.to_string(),
            );
        }
        // The first site reached its calls through a library: the library code that made
        // them (the JSON's `via`). When the sites shown reached theirs through different
        // code, each is said with the site it is under (eslint's two sites of one finding:
        // file-entry-cache's getFileDescriptor under one, _getMetaForFileUsingMtimeAndSize
        // under the other; the first alone read as true of both).
        let shown: Vec<&dejavu_detect::Callsite> = f.callsites.iter().take(limit).collect();
        let mut vias: Vec<(&dejavu_detect::CallFrame, &str)> = Vec::new();
        for c in &shown {
            if let Some(v) = &c.via {
                if !vias
                    .iter()
                    .any(|(w, _)| w.function == v.function && w.file == v.file)
                {
                    vias.push((v, &c.function));
                }
            }
        }
        // One line when every site shown went through the same code.
        let one = vias.len() == 1 && shown.iter().all(|c| c.via.is_some());
        if let Some((v, _)) = vias.first().filter(|_| one) {
            let name = sanitize(&v.function);
            let width = room.saturating_sub(name.chars().count() + 1);
            let loc = keep_tail(&frame_location(v), width.max(24));
            field("made in:", &format!("{name} {loc}"), &|s| st.dim(s));
        } else {
            for (n, (v, site)) in vias.iter().enumerate() {
                let name = sanitize(&v.function);
                let under = format!(" (under {})", shorten_function(&sanitize(site), 30));
                let width = room.saturating_sub(name.chars().count() + 1 + under.chars().count());
                let loc = keep_tail(&frame_location(v), width.max(20));
                field(
                    if n == 0 { "made in:" } else { "" },
                    &format!("{name} {loc}{under}"),
                    &|s| st.dim(s),
                );
            }
        }
        // Where the calls the repeats repeat were made, when none of the sites above
        // made them (the JSON's `first_sites`): the other line to look at.
        for (n, c) in f.first_sites.iter().enumerate() {
            let calls = format!(
                "  (repeated by {} {})",
                fmt_count(c.redundant_calls),
                plural(c.redundant_calls, "call", "calls")
            );
            let loc = fit_site(c, room.saturating_sub(calls.len()));
            field(
                if n == 0 { "first:" } else { "" },
                &format!("{loc}{calls}"),
                &|s| st.dim(s),
            );
        }
        if let Some(q) = &f.sequence {
            field(
                "loop:",
                &format!(
                    "{}: {}",
                    per_call(q),
                    sanitize(&loop_steps_within(
                        &q.steps,
                        if details { usize::MAX } else { LOOP_STEPS }
                    ))
                ),
                &|s| st.dim(s),
            );
        }
        if details || f.processes > 1 || !f.programs.is_empty() {
            let text = sanitize(&process_line(f));
            field("process:", &shorten_end(&text, room), &|s| st.dim(s));
        }
        if details {
            field(
                "window:",
                &format!(
                    "redundant calls from {} to {} after the trace started",
                    fmt_duration(f.first_ts),
                    fmt_duration(f.last_ts)
                ),
                &|s| st.dim(s),
            );
        }
        if details || refs.cut || f.paths.len() > 1 || f.path_count > f.paths.len() as u64 {
            let mut paths = fit_paths(&f.paths);
            if f.path_count > f.paths.len() as u64 {
                // The paths with the most calls, when some have more than others: where
                // every path has its share (each probed twice), naming some says nothing.
                let even = f.top_paths.first().is_none_or(|p| {
                    p.redundant_calls.saturating_mul(f.path_count) <= f.redundant_calls
                });
                let n = if even {
                    0
                } else if details {
                    5
                } else {
                    EXAMPLE_PATHS
                };
                let top: Vec<String> = f
                    .top_paths
                    .iter()
                    .take(n)
                    .map(|p| {
                        format!(
                            "{} ({})",
                            shorten_middle(&path_text(&p.path), room.saturating_sub(12)),
                            fmt_count(p.redundant_calls)
                        )
                    })
                    .collect();
                paths.push_str(&format!(" ({} paths", fmt_count(f.path_count)));
                if !top.is_empty() {
                    paths.push_str(&format!("; most: {}", top.join(", ")));
                }
                paths.push(')');
            }
            field("paths:", &paths, &|s| st.dim(s));
        }
        match refs.fix {
            Some(e) if !details => field("fix:", &format!("as for #{}", e + 1), &|s| st.green(s)),
            _ if f.fix.is_empty() => {}
            _ => field("fix:", &sanitize(&f.fix), &|s| st.green(s)),
        }
        if let Some(c) = &f.cache {
            let text = if c.safe {
                cache_text(c)
            } else {
                format!("{UNSAFE} {}", cache_text(c))
            };
            field("cache:", &text, &|s| st.dim(s));
        }
        match refs.hazards {
            Some(e) if !details => {
                field("hazard:", &format!("as for #{}", e + 1), &|s| st.yellow(s))
            }
            _ => {
                for h in &f.hazards {
                    field("hazard:", &sanitize(h), &|s| st.yellow(s));
                }
            }
        }
        if let Some(e) = &f.example {
            // Wrapped rather than cut, but a long one (a stack of output) stops at three lines.
            let e = shorten_end(&sanitize(e), room * 3 - 12);
            field("example:", &e, &|s| st.dim(s));
        }
        // Other findings about the same calls, shown here rather than as rows of their own.
        for x in &f.also {
            let what = dejavu_detect::find_detector(x.detector).map_or("", |d| d.summary);
            if x.same_loop {
                let text = format!(
                    "{}: {} more {} in the same runs of this function ({})",
                    x.detector,
                    fmt_count(x.redundant_calls),
                    plural(x.redundant_calls, "call", "calls"),
                    what
                );
                field("also:", &text, &|s| st.dim(s));
                continue;
            }
            let text = format!(
                "{}: {} of these {} ({}){}",
                x.detector,
                fmt_count(x.shared_calls),
                plural(x.shared_calls, "call", "calls"),
                what,
                if x.redundant_calls > x.shared_calls {
                    // Its other calls have no row (it is shown here): the headline
                    // counts them with this one.
                    let more = x.redundant_calls - x.shared_calls;
                    format!(
                        "; and {} {} of its own, counted with this row (--json: shown_in)",
                        fmt_count(more),
                        plural(more, "call", "calls")
                    )
                } else {
                    String::new()
                }
            );
            field("also:", &text, &|s| st.dim(s));
        }
        if details {
            field("more:", &format!("dejavu explain {}", f.detector), &|s| {
                st.dim(s)
            });
        }
        if st.0 {
            // Coloured after wrapping, so that colour cannot change where lines break.
            for l in &mut lines {
                *l = l.replace(UNSAFE, &st.red(UNSAFE));
            }
        }
        lines
    }

    fn footer(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.a.rows().is_empty() {
            return Ok(());
        }
        // Runtime, launcher and tool findings, one line each.
        for owner in [Owner::Runtime, Owner::Launcher, Owner::Tool] {
            let folded = self.folded(owner);
            if folded.is_empty() {
                continue;
            }
            // As the headline counts them (a row's same-loop guests with it).
            let calls = owner_totals(self.a, owner).1;
            let mut what: Vec<String> = Vec::new();
            for f in &folded {
                let w = match owner {
                    Owner::Launcher | Owner::Tool => f.program.clone(),
                    _ => runtime_part(f).to_string(),
                };
                if !what.contains(&w) {
                    what.push(w);
                }
            }
            let text = format!(
                "{}: {} redundant {} in {} {} ({}); --all shows them.",
                owner_title(owner),
                fmt_count(calls),
                plural(calls, "call", "calls"),
                fmt_count(folded.len() as u64),
                plural(folded.len() as u64, "finding", "findings"),
                sanitize(&shorten_end(&what.join(", "), 80)),
            );
            for line in wrap(&text, self.width, "", "  ") {
                writeln!(out, "{}", self.st.dim(&line))?;
            }
        }
        let listed = self.shown().len()
            + self.folded(Owner::Runtime).len()
            + self.folded(Owner::Launcher).len()
            + self.folded(Owner::Tool).len();
        let omitted = self.a.rows().len().saturating_sub(listed);
        let mut text = String::new();
        if omitted > 0 {
            text.push_str(&format!(
                "{} more {} not shown (--all shows every finding). ",
                fmt_count(omitted as u64),
                plural(omitted as u64, "finding", "findings")
            ));
        }
        text.push_str(&self.hidden_sentence(false));
        if !text.trim().is_empty() {
            for line in wrap(&text, self.width, "", "") {
                writeln!(out, "{line}")?;
            }
        }
        // Native code without symbols: say how to get them, once.
        let mut stripped: Vec<String> = Vec::new();
        for c in self.shown().iter().flat_map(|f| f.callsites.iter()) {
            // No name, or the recorder's `sub_<start>` for a function without a symbol.
            let unnamed =
                c.function.is_empty() || dejavu_trace::is_unnamed_function(c.function.as_bytes());
            if unnamed && c.file.is_empty() && !c.module.is_empty() {
                let m = c.module.rsplit('/').next().unwrap_or(&c.module).to_string();
                if !stripped.contains(&m) {
                    stripped.push(m);
                }
            }
        }
        if !stripped.is_empty() {
            let text = format!(
                "{} {} no symbols, so call sites name no function (`sub_<start>`: where one starts, \
                 or module+offset): install {} debug symbols (a -dbg or -dbgsym package, or \
                 `debuginfod-find debuginfo FILE`, whose cache dejavu reads), or build with -g.",
                sanitize(&stripped.join(", ")),
                if stripped.len() == 1 { "has" } else { "have" },
                if stripped.len() == 1 { "its" } else { "their" },
            );
            for line in wrap(&text, self.width, "", "") {
                writeln!(out, "{line}")?;
            }
        }
        writeln!(
            out,
            "`dejavu explain DETECTOR` says what a finding means and how to fix it."
        )
    }
}

/// The redundant calls and findings of one owner.
fn owner_totals(a: &Analysis, o: Owner) -> (u64, u64) {
    // A finding shown in another counts with the row that shows it: its calls that row
    // does not flag too (all of them for one of the same loop, `same_loop`; the 2 of
    // rustc's 25 repeated lookups that were no check of its check-then-act row).
    a.rows()
        .iter()
        .filter(|f| f.owner == o)
        .fold((0, 0), |(n, c), f| {
            let guests: u64 = f
                .also
                .iter()
                .map(|x| {
                    if x.same_loop {
                        x.redundant_calls
                    } else {
                        x.redundant_calls.saturating_sub(x.shared_calls)
                    }
                })
                .sum();
            (n + 1, c + f.redundant_calls + guests)
        })
}

/// How the report names an owner.
pub fn owner_title(o: Owner) -> &'static str {
    match o {
        Owner::Own => "the program's own code",
        Owner::Dependency => "its dependencies",
        Owner::Runtime => "runtime start-up and loaders",
        Owner::Launcher => "launchers",
        Owner::Tool => "tools it ran",
    }
}

/// Which part of the runtime a runtime finding is, for the folded line.
pub(crate) fn runtime_part(f: &Finding) -> &'static str {
    let frames = f
        .callsites
        .first()
        .map(|c| c.stack.as_slice())
        .unwrap_or(&[]);
    let any = |p: &dyn Fn(&dejavu_detect::CallFrame) -> bool| frames.iter().any(p);
    if any(&|fr| fr.kind == "python") {
        return "CPython's import system";
    }
    if any(&|fr| fr.kind == "js") {
        return "Node.js's module loader";
    }
    if any(&|fr| fr.module.contains("ld-linux") || fr.module.contains("/ld-")) {
        return "the dynamic loader";
    }
    let path = f.paths.first().map(String::as_str).unwrap_or("");
    if path.contains(".so") || path.starts_with("/etc/ld.so") || path.contains("glibc-hwcaps") {
        "the dynamic loader"
    } else if path.contains("/locale") || path.contains("gconv") {
        "libc's locale data"
    } else if path.contains("python")
        || path.ends_with(".py")
        || path.ends_with(".pyc")
        || path.contains("-packages")
    {
        "CPython's start-up and imports"
    } else if path.contains("node_modules")
        || path.ends_with(".js")
        || path.ends_with("package.json")
    {
        "Node.js's module loader"
    } else {
        "the runtime's start-up"
    }
}

/// "per call of list_directory: 7 calls, 5 redundant"; "per iteration of a loop in main:
/// ..." for a function that runs once; "per run of app.py:11: ..." for a line of a module's
/// top level.
pub(crate) fn per_call(q: &dejavu_detect::Sequence) -> String {
    let r = if q.redundant.fract() == 0.0 {
        format!("{}", q.redundant as u64)
    } else {
        format!("{:.1}", q.redundant)
    };
    let per = match q.per {
        "line" => {
            let file = q.file.rsplit('/').next().unwrap_or(&q.file);
            format!("per run of {}:{}", sanitize(file), q.line)
        }
        "iteration" => format!("per iteration of a loop in {}", sanitize(&q.function)),
        _ => format!("per call of {}", sanitize(&q.function)),
    };
    format!(
        "{per}: {} file {}, {} redundant",
        q.calls,
        if q.calls == 1 { "call" } else { "calls" },
        r
    )
}

/// What the times in a report measure, by backend.
fn times_note(backend: &str) -> String {
    match backend {
        "ebpf" => "Times are each call's own time in the kernel, measured by eBPF.".to_string(),
        "ptrace" => "Times are measured under ptrace: each includes the tracer's stop, which is \
                     most of it for a fast call. Use them to rank findings, not as what a fix saves \
                     (counts are exact)."
            .to_string(),
        "strace-import" => "Times are strace's -T, which include strace's own overhead; counts are exact."
            .to_string(),
        _ => "Times are as the trace recorded them; counts are exact.".to_string(),
    }
}

/// What a row's block can refer to instead of repeating it.
struct Refs {
    /// A row above with the same fix.
    fix: Option<usize>,
    /// A row above with the same hazards.
    hazards: Option<usize>,
    /// The table had to shorten the paths: spell them out.
    cut: bool,
}

const HEADERS: [&str; 9] = [
    "#",
    "sev",
    "detector",
    "program",
    "paths",
    "calls",
    "redundant",
    "wasted",
    "share",
];

/// Column widths fitted to the content and the terminal width.
struct Columns {
    w: [usize; 9],
}

impl Columns {
    const PROCESS: usize = 3;
    const PATHS: usize = 4;

    /// Natural widths when they fit. Otherwise the process column gives way first (down
    /// to 20), then the paths (down to 24: a path is what the row is about), then both
    /// down to 12; the other columns are short and never cut.
    fn fit(rows: &[[String; 9]], width: usize) -> Columns {
        let mut w = [0usize; 9];
        for (i, h) in HEADERS.iter().enumerate() {
            w[i] = rows
                .iter()
                .map(|r| r[i].chars().count())
                .chain(std::iter::once(h.chars().count()))
                .max()
                .unwrap_or(0);
        }
        w[Self::PROCESS] = w[Self::PROCESS].min(32);
        for (col, floor) in [
            (Self::PROCESS, 20),
            (Self::PATHS, 24),
            (Self::PROCESS, 12),
            (Self::PATHS, 12),
        ] {
            let total: usize = w.iter().sum::<usize>() + GAP.len() * (w.len() - 1);
            let over = total.saturating_sub(width);
            w[col] -= over.min(w[col].saturating_sub(floor));
        }
        Columns { w }
    }

    /// `v` fitted to column `i`: numbers right-aligned, text left-aligned and shortened
    /// (paths in the middle, the rest at the end).
    fn cell(&self, i: usize, v: &str) -> String {
        let w = self.w[i];
        match i {
            0 | 5..=8 => format!("{v:>w$}"),
            Self::PATHS => format!("{:<w$}", fit_label(v, w)),
            _ => format!("{:<w$}", shorten_end(v, w)),
        }
    }
}

/// `stat.py`, `cc1 ×24` for a finding in 24 processes of cc1, or `integration +2` for
/// one whose calls came from three programs.
pub(crate) fn program_label(f: &Finding) -> String {
    let name = sanitize(&f.program);
    if f.programs.len() > 1 {
        format!("{name} +{}", f.programs.len() - 1)
    } else if f.processes > 1 {
        format!("{name} ×{}", f.processes)
    } else {
        name
    }
}

/// A finding's `process:` line: `1234 cmd`, `24 processes of cc1, e.g. 1234 cmd`, or `2
/// programs: integration (495 calls), crt (139 calls); e.g. 1234 cmd` for one whose calls
/// came from several programs. Not sanitized.
pub(crate) fn process_line(f: &Finding) -> String {
    if f.programs.len() > 1 {
        let each: Vec<String> = f
            .programs
            .iter()
            .map(|p| {
                let n = p.redundant_calls;
                format!(
                    "{} ({} {})",
                    p.program,
                    fmt_count(n),
                    plural(n, "call", "calls")
                )
            })
            .collect();
        return format!(
            "{} programs: {}; e.g. {} {}",
            f.programs.len(),
            each.join(", "),
            f.pid,
            f.command
        );
    }
    if f.processes > 1 {
        format!(
            "{} processes of {}, e.g. {} {}",
            fmt_count(f.processes),
            f.program,
            f.pid,
            f.command
        )
    } else {
        format!("{} {}", f.pid, f.command)
    }
}

/// The path or pattern; `first (+2)` when a finding has several.
/// A path label (`paths_label`'s, or one of a finding's paths) cut to `width` characters.
/// A label with a list in parentheses (a file name searched for in several directories:
/// `eslint.config.js in 9 directories (/app/src, /app/src/cli, ...)`, then perhaps the
/// finding's other paths, ` (+2)`) loses the list's last entries first, then the list,
/// and only then its middle: a cut through the list's middle read
/// `eslint.config.cjs…/cli-engine, ...) (+2)`.
pub(crate) fn fit_label(label: &str, width: usize) -> String {
    if label.chars().count() <= width {
        return label.to_string();
    }
    // The finding's other paths, said last: kept whole.
    let (main, more) = match label.rfind(" (+") {
        Some(i) if label.ends_with(')') && label[i + 3..label.len() - 1].parse::<u64>().is_ok() => {
            label.split_at(i)
        }
        _ => (label, ""),
    };
    if let Some(open) = main.find(" (").filter(|_| main.ends_with(')')) {
        let head = &main[..open];
        let inner = &main[open + 2..main.len() - 1];
        let items: Vec<&str> = inner.split(", ").filter(|i| *i != "...").collect();
        for k in (1..items.len()).rev() {
            let cand = format!("{head} ({}, ...){more}", items[..k].join(", "));
            if cand.chars().count() <= width {
                return cand;
            }
        }
        let cand = format!("{head}{more}");
        if cand.chars().count() <= width {
            return cand;
        }
        return shorten_middle(&cand, width);
    }
    // A walk up a path ("DEEPEST and N more under TOP"): its top goes, then its count,
    // before the deepest path is cut in the middle.
    if let Some((deepest, rest)) = main.split_once(" and ") {
        if let Some((n, _top)) = rest.split_once(" more under ") {
            if let Ok(n) = n.parse::<u64>() {
                let cand = format!("{deepest} and {n} more{more}");
                if cand.chars().count() <= width {
                    return cand;
                }
                // Then the walk's paths join the others' count, which stays whole: without
                // it, an 11-path walk read as 808 lookups of one directory.
                let others = n + more
                    .strip_prefix(" (+")
                    .and_then(|m| m.strip_suffix(')'))
                    .and_then(|m| m.parse::<u64>().ok())
                    .unwrap_or(0);
                let tail = format!(" (+{others})");
                let room = width.saturating_sub(tail.chars().count()).max(1);
                return format!("{}{tail}", shorten_middle(deepest, room));
            }
        }
    }
    shorten_middle(label, width)
}

/// A loop's calls (`verb PATH`, `verb PATH -> ERRNO`, `verb`) as one line: a path is said
/// at the first of the calls in a row on it (a read loop's open, fcntl, fstat, read and
/// close each named the same 70-character path: 16 lines of `go build`'s first screen),
/// and the same call repeated in a row once, with its count (`fcntl ×4`).
#[cfg(test)]
pub(crate) fn loop_steps(steps: &[String]) -> String {
    loop_steps_within(steps, usize::MAX)
}

/// [`loop_steps`], its first `max` steps (a run of one call counts once), then how many
/// calls are left out: `..., and 38 more calls (--details lists them)`.
pub(crate) fn loop_steps_within(steps: &[String], max: usize) -> String {
    let mut out: Vec<(String, usize)> = Vec::new();
    let mut last_path: Option<&str> = None;
    for step in steps {
        let (verb, rest) = step.split_once(' ').unwrap_or((step.as_str(), ""));
        // (`verb -> ERRNO`: a call without a path that failed.)
        let (path, err) = match rest.rfind(" -> ") {
            Some(i) => (&rest[..i], &rest[i..]),
            None if rest.starts_with("-> ") => ("", &step[verb.len()..]),
            None => (rest, ""),
        };
        let text = if path.is_empty() || last_path == Some(path) {
            format!("{verb}{err}")
        } else if max < usize::MAX {
            // Under a row: a long path cut in its middle (its start and its file name).
            format!("{verb} {}{err}", fit_label(path, LOOP_PATH))
        } else {
            format!("{verb} {path}{err}")
        };
        if !path.is_empty() {
            last_path = Some(path);
        }
        match out.last_mut() {
            Some((t, n)) if *t == text => *n += 1,
            _ => out.push((text, 1)),
        }
    }
    let left: usize = out.iter().skip(max).map(|(_, n)| n).sum();
    let mut text = out
        .iter()
        .take(max)
        .map(|(t, n)| {
            if *n > 1 {
                format!("{t} ×{n}")
            } else {
                t.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    if left > 0 {
        text.push_str(&format!(
            ", and {} more {} (--details lists them)",
            fmt_count(left as u64),
            plural(left as u64, "call", "calls")
        ));
    }
    text
}

pub(crate) fn paths_label(f: &Finding) -> String {
    if let Some(s) = &f.stream {
        return sanitize(s);
    }
    match f.paths.as_slice() {
        [] => "-".to_string(),
        [one] => path_text(one),
        [first, rest @ ..] => format!("{} (+{})", path_text(first), rest.len()),
    }
}

/// A path as the report shows it: an empty one (`mkdir("")`, which fails with ENOENT) said
/// so, not a blank cell.
fn path_text(p: &str) -> String {
    if p.is_empty() {
        "\"\" (empty path)".to_string()
    } else {
        sanitize(p)
    }
}

/// The sentence of a finding's cache verdict, the same in the terminal and HTML reports
/// (each marks an unsafe one its own way).
pub(crate) fn cache_text(c: &dejavu_detect::CacheVerdict) -> String {
    // Answers stale only in a directory's times (another program made entries in it): said
    // apart, since a cache of what the path is stays right (the hazard says which).
    let times = match c.stale_times {
        0 => String::new(),
        n if c.safe => format!(
            ", but for a directory's times (stale {} {}: see the hazard)",
            fmt_count(n),
            plural(n, "time", "times")
        ),
        n => format!(
            " (and {} with only a directory's times stale)",
            fmt_count(n)
        ),
    };
    if c.safe {
        format!(
            "a cache would have saved {} {} and served no stale answers{times}",
            fmt_count(c.saved_calls),
            plural(c.saved_calls, "call", "calls")
        )
    } else {
        format!(
            "a cache would have saved {} {} but served {} stale {}{times}",
            fmt_count(c.saved_calls),
            plural(c.saved_calls, "call", "calls"),
            fmt_count(c.stale_answers),
            plural(c.stale_answers, "answer", "answers")
        )
    }
}

pub(crate) fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// ANSI styles, or none.
#[derive(Clone, Copy)]
struct Style(bool);

impl Style {
    fn paint(&self, s: &str, code: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.paint(s, "1")
    }
    fn dim(&self, s: &str) -> String {
        self.paint(s, "2")
    }
    fn red(&self, s: &str) -> String {
        self.paint(s, "31")
    }
    fn green(&self, s: &str) -> String {
        self.paint(s, "32")
    }
    fn yellow(&self, s: &str) -> String {
        self.paint(s, "33")
    }
    fn severity(&self, sev: Severity, s: &str) -> String {
        match sev {
            Severity::High => self.paint(s, "1;31"),
            Severity::Medium => self.paint(s, "33"),
            Severity::Low => s.to_string(),
        }
    }
}

/// `file:line[:column]` of a call site, or the module for native code without debug info.
pub(crate) fn location(c: &dejavu_detect::Callsite) -> String {
    let mut loc = if c.file.is_empty() {
        let m = c.module.rsplit('/').next().unwrap_or(&c.module);
        if c.function.is_empty() && !m.is_empty() {
            // Nothing but the module names it (stripped code): its offset tells the
            // module's sites apart, as in the findings' call-site lines.
            format!("{m}+{:#x}", c.addr)
        } else {
            format!("({m})")
        }
    } else {
        sanitize(&c.file)
    };
    if c.line != 0 {
        loc += &format!(":{}", c.line);
        if c.column != 0 {
            loc += &format!(":{}", c.column);
        }
    }
    loc
}

pub(crate) fn frame_location(f: &dejavu_detect::CallFrame) -> String {
    match (f.file.is_empty(), f.line) {
        (false, 0) => sanitize(&f.file),
        (false, l) => format!("{}:{l}", sanitize(&f.file)),
        (true, _) if !f.module.is_empty() => {
            format!("({})", f.module.rsplit('/').next().unwrap_or(&f.module))
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    fn render(a: &Analysis, opts: &RenderOptions) -> String {
        let mut out = Vec::new();
        TerminalReporter
            .render(a, &mut out, opts)
            .expect("render to memory");
        String::from_utf8(out).expect("UTF-8")
    }

    fn opts() -> RenderOptions {
        RenderOptions::default()
    }

    #[test]
    fn snapshot_terminal() {
        insta::assert_snapshot!(render(&fixture::analysis(), &opts()));
    }

    #[test]
    fn an_empty_path_is_said_not_left_blank() {
        // cmake's 27 failed mkdir("") had shown an empty paths cell.
        let mut a = fixture::analysis();
        let f = a
            .findings
            .iter_mut()
            .find(|f| f.stream.is_none())
            .expect("a path finding");
        f.paths = vec![String::new()];
        let label = paths_label(f);
        assert_eq!(label, "\"\" (empty path)");
        let text = render(&a, &opts());
        assert!(text.contains("\"\" (empty path)"), "{text}");
    }

    #[test]
    fn rows_without_a_line_say_why_once_in_full() {
        // Maven: every row "no line: dejavu has no agent for the JVM, ..." on two lines.
        let mut a = fixture::analysis();
        let mut n = 0;
        for f in a
            .findings
            .iter_mut()
            .filter(|f| f.shown_in.is_none() && !f.owner.folded())
        {
            f.callsites.clear();
            f.command = "/usr/lib/jvm/java-17/bin/java Main".into();
            n += 1;
        }
        assert!(n >= 2, "{n}");
        let text = render(&a, &opts());
        assert_eq!(
            text.matches("no line: dejavu has no agent for the JVM")
                .count(),
            1,
            "{text}"
        );
        assert_eq!(
            text.matches("no line: no agent for the JVM (as above)")
                .count(),
            n - 1,
            "{text}"
        );
    }

    #[test]
    fn a_stripped_programs_sites_say_how_to_get_symbols() {
        // rsync, cmake and git from Debian: every site `sub_32a90 (rsync)`, and no word of
        // where symbols come from (the hint had looked for sites without a function).
        let mut a = fixture::analysis();
        let i = a
            .findings
            .iter()
            .position(|f| f.shown_in.is_none() && !f.owner.folded() && !f.callsites.is_empty())
            .expect("a row with a site");
        let text = render(&a, &opts());
        assert!(!text.contains("rsync has no symbols"), "{text}");
        let c = &mut a.findings[i].callsites[0];
        c.function = "sub_32a90".into();
        c.file = String::new();
        c.line = 0;
        c.module = "/usr/bin/rsync".into();
        let text = render(&a, &opts());
        assert!(
            text.contains("rsync, libidx.so.1 have no symbols, so call sites name no function"),
            "{text}"
        );
    }

    #[test]
    fn a_report_whose_findings_are_all_folded_says_the_program_has_none() {
        let mut a = fixture::analysis();
        a.findings
            .retain(|f| f.owner.folded() && f.shown_in.is_none());
        assert!(!a.findings.is_empty());
        let text = render(&a, &opts());
        assert!(
            text.contains(
                "The program's own code and its dependencies: no finding of 10 or more redundant \
                 calls.\nruntime start-up and loaders: "
            ),
            "{text}"
        );
        // Not when a row is shown.
        let text = render(&fixture::analysis(), &opts());
        assert!(!text.contains("no finding of"), "{text}");
    }

    #[test]
    fn the_headlines_top_names_the_sites_own_calls_and_the_parts_the_hidden_ones() {
        let mut a = fixture::analysis();
        let (text, _) = headline(&a, &opts());
        // The first site made 800 of the finding's 1,000 calls.
        assert!(
            text.contains(
                "Top: repeated-lookup of /etc/app.conf in server.js (1,000 calls; 800 at \
                 loadConfig /srv/app/lib/config.js:12)."
            ),
            "{text}"
        );
        // The parts account for the total: 1,000 + 164 + 25 + 40 + 23 = 1,252.
        assert!(text.contains("1,252 of 1,530 file syscalls"), "{text}");
        assert!(
            text.contains("; under 10 calls (hidden): 23 in 7 findings."),
            "{text}"
        );
        // Without a timeline no run length is said; with one, its length.
        assert!(text.contains("traced (75.2%). "), "{text}");
        a.timeline.end_ns = 2_130_000_000;
        a.run_ns = 2_130_000_000;
        let (text, _) = headline(&a, &opts());
        assert!(text.contains("traced (75.2%) in a 2.13s run. "), "{text}");
        // A site that made all of them is named before the count.
        a.findings[0].callsites.truncate(1);
        a.findings[0].callsites[0].redundant_calls = 1_000;
        a.hidden = 0;
        let (text, _) = headline(&a, &opts());
        assert!(
            text.contains("in server.js at loadConfig /srv/app/lib/config.js:12 (1,000 calls)."),
            "{text}"
        );
        assert!(!text.contains("hidden"), "{text}");
    }

    #[test]
    fn an_owner_split_adding_up_to_more_than_the_calls_says_why() {
        let mut a = fixture::analysis();
        let (plain, _) = headline(&a, &opts());
        assert!(
            plain.contains("Redundant calls by whose code made them: "),
            "{plain}"
        );
        // Two rows' calls overlap: the distinct calls are fewer than the rows' sum.
        let rows: u64 = a.rows().iter().map(|f| f.redundant_calls).sum();
        a.redundant_calls = rows - 10;
        let (text, _) = headline(&a, &opts());
        assert!(
            text.contains(
                "Redundant calls by whose code made them (a call two findings flag is in both): "
            ),
            "{text}"
        );
    }

    #[test]
    fn a_finding_shown_in_another_counts_the_calls_the_row_does_not_flag() {
        // rustc's 25 repeated lookups shown in its check-then-act row, 23 of them the
        // checks: the other 2 are in no row, and count with the one that shows them.
        let mut a = fixture::analysis();
        let host = a.findings.iter().position(|f| !f.also.is_empty()).unwrap();
        let owner = a.findings[host].owner;
        a.findings[host].also[0].same_loop = false;
        let x = &mut a.findings[host].also[0];
        x.shared_calls = x.redundant_calls;
        let all_shared = owner_totals(&a, owner);
        a.findings[host].also[0].shared_calls -= 2;
        assert_eq!(owner_totals(&a, owner), (all_shared.0, all_shared.1 + 2));
        // The row says where those 2 went (the finding has no row of its own).
        let text = render(&a, &opts())
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            text.contains("and 2 calls of its own, counted with this row"),
            "{text}"
        );
    }

    #[test]
    fn a_finding_shown_for_its_loop_counts_with_the_row_that_shows_it() {
        let mut a = fixture::analysis();
        let host = a.findings.iter().position(|f| !f.also.is_empty()).unwrap();
        let owner = a.findings[host].owner;
        let before = owner_totals(&a, owner);
        let guest = a.findings[host].also[0].redundant_calls;
        a.findings[host].also[0].same_loop = true;
        a.findings[host].also[0].shared_calls = 0;
        assert_eq!(owner_totals(&a, owner), (before.0, before.1 + guest));
        let text = render(&a, &opts());
        assert!(
            text.contains(&format!(
                "{} more calls in the same runs of this function",
                fmt_count(guest)
            )),
            "{text}"
        );
        // Folded (the runtime's), the line below the table counts them as the headline.
        for f in &mut a.findings {
            if f.owner == owner {
                f.owner = Owner::Runtime;
            }
        }
        let (_, calls) = owner_totals(&a, Owner::Runtime);
        let text = render(&a, &opts());
        assert!(
            text.contains(&format!(
                "runtime start-up and loaders: {} redundant calls in",
                fmt_count(calls)
            )),
            "{text}"
        );
    }

    #[test]
    fn snapshot_terminal_details() {
        let o = RenderOptions {
            details: true,
            ..opts()
        };
        insta::assert_snapshot!(render(&fixture::analysis(), &o));
    }

    #[test]
    fn snapshot_terminal_by_callsite_with_stacks() {
        let o = RenderOptions {
            by_callsite: true,
            stacks: true,
            ..opts()
        };
        let text = render(&fixture::analysis(), &o);
        // The detectors that name each site, and the stack under it, user frame marked.
        assert!(text.contains("repeated-lookup"), "{text}");
        assert!(
            text.contains("> loadConfig /srv/app/lib/config.js:12"),
            "{text}"
        );
        insta::assert_snapshot!(text);
    }

    #[test]
    fn by_callsite_without_stacks_says_how_to_get_them() {
        let mut a = fixture::analysis();
        a.callsites.clear();
        let text = render(
            &a,
            &RenderOptions {
                by_callsite: true,
                ..opts()
            },
        );
        assert!(text.contains("--stacks on"), "{text}");
    }

    #[test]
    fn the_paths_with_most_calls_are_named_only_when_some_have_more() {
        // The fixture's finding of 40 paths: 120 redundant calls, 30 of them on one.
        let mut a = fixture::analysis();
        let text = render(&a, &opts());
        assert!(text.contains("(40 paths;"), "{text}");
        assert!(text.contains("most: "), "{text}");
        // Every path with its share (three each): which ones come first says nothing.
        let f = a
            .findings
            .iter_mut()
            .find(|f| f.path_count == 40)
            .expect("the fixture's finding of 40 paths");
        for p in &mut f.top_paths {
            p.redundant_calls = 3;
        }
        let text = render(&a, &opts());
        assert!(text.contains("(40 paths)"), "{text}");
        assert!(!text.contains("most:"), "{text}");
    }

    #[test]
    fn the_top_findings_site_keeps_its_function_and_file_name() {
        let mut a = fixture::analysis();
        a.findings[0].callsites[0] = fixture::site(
            "cmd/go/internal/cache.GetBytes",
            "/usr/local/go/src/cmd/go/internal/cache/cache.go",
            289,
            800,
        );
        let text = render(&a, &opts());
        let top: String = text
            .split("Top: ")
            .nth(1)
            .expect("the Top sentence")
            .split(").")
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            top.contains("at cmd/go/internal/cache.GetBytes …/internal/cache/cache.go:289"),
            "{top}"
        );
    }

    #[test]
    fn snapshot_terminal_without_findings() {
        let mut o = opts();
        o.config.skip_startup_ns = 2_000_000_000;
        o.config.min_calls = 1000;
        insta::assert_snapshot!(render(&fixture::empty(), &o));
    }

    #[test]
    fn every_line_fits_the_width() {
        for width in [80, 100, 120] {
            for details in [false, true] {
                let o = RenderOptions {
                    width,
                    details,
                    ..opts()
                };
                let text = render(&fixture::analysis(), &o);
                for line in text.lines() {
                    assert!(
                        line.chars().count() <= width,
                        "{width}: {line:?} is {}",
                        line.chars().count()
                    );
                }
            }
        }
    }

    #[test]
    fn colour_only_when_asked() {
        assert!(!render(&fixture::analysis(), &opts()).contains('\x1b'));
        let o = RenderOptions {
            color: true,
            ..opts()
        };
        let text = render(&fixture::analysis(), &o);
        assert!(text.contains("\x1b[1;31mhigh"), "severity is coloured");
        // Colour must not change the layout: strip it and get the plain report back.
        assert_eq!(strip_ansi(&text), render(&fixture::analysis(), &opts()));
    }

    #[test]
    fn all_lists_runtime_and_launcher_findings_as_rows() {
        let o = RenderOptions {
            all_owners: true,
            top: None,
            ..opts()
        };
        let text = render(&fixture::analysis(), &o);
        assert!(text.contains("\n5 low    repeated-output"), "{text}");
        assert!(!text.contains("--all shows them"), "{text}");
    }

    #[test]
    fn a_tools_or_launchers_own_code_is_not_called_the_programs() {
        let mut a = fixture::analysis();
        let i = a
            .findings
            .iter()
            .position(|f| f.owner == Owner::Launcher)
            .expect("the fixture's launcher finding");
        a.findings[i].callsites = vec![fixture::site("main", "/bin/sh-main.c", 9, 40)];
        let o = RenderOptions {
            all_owners: true,
            top: None,
            ..opts()
        };
        let text = render(&a, &o);
        let line = text
            .lines()
            .find(|l| l.contains("sh-main.c:9"))
            .unwrap_or_default();
        assert!(line.ends_with("(40 calls, 0%)"), "{text}");
        // A tool's the same; a dependency's site in it is still said.
        a.findings[i].owner = Owner::Tool;
        a.findings[i].callsites[0].owner = Owner::Dependency;
        assert!(render(&a, &o).contains("a dependency's"));
    }

    #[test]
    fn top_limits_rows_and_says_how_to_see_the_rest() {
        let o = RenderOptions {
            top: Some(2),
            ..opts()
        };
        let text = render(&fixture::analysis(), &o);
        // Three findings of the program and its dependencies; the runtime's and the
        // launcher's are one line each below the table.
        assert!(
            text.contains("1 more finding not shown (--all shows every finding)"),
            "{text}"
        );
        assert!(!text.contains("\n3 "), "{text}");
        assert!(
            text.contains("launchers: 40 redundant calls in 1 finding (sh -c)"),
            "{text}"
        );
    }

    #[test]
    fn nothing_found_says_what_was_analysed_and_what_was_hidden() {
        let mut o = opts();
        o.config.min_calls = 1000;
        let text = render(&fixture::empty(), &o).replace('\n', " ");
        assert!(
            text.contains("no redundant work found in 1,530 file syscalls"),
            "{text}"
        );
        assert!(text.contains("at least 1,000 redundant calls"), "{text}");
        assert!(
            text.contains("3 findings with fewer than 1,000 redundant calls were hidden"),
            "{text}"
        );
    }

    #[test]
    fn a_fix_and_hazards_given_above_are_referred_to_not_repeated() {
        let mut a = fixture::analysis();
        a.findings[1].hazards = a.findings[0].hazards.clone();
        let text = render(&a, &opts());
        let second = text.split("\n2 ").nth(1).expect("row 2");
        let second = &second[..second.find("\n\n").unwrap_or(second.len())];
        assert!(second.contains("fix:     as for #1"), "{second}");
        assert!(second.contains("hazard:  as for #1"), "{second}");
        // --details always spells everything out.
        let o = RenderOptions {
            details: true,
            ..opts()
        };
        assert!(!render(&a, &o).contains("as for #"));
    }

    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut it = s.chars();
        while let Some(c) = it.next() {
            if c == '\x1b' {
                for d in it.by_ref() {
                    if d == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// A call site's label in `width` characters: whole when it fits; else its location is
/// shortened first (down to the file name and line: `cmd/…/cache/hash.go:168`), then the
/// function, so that a long path does not take the function's name with it.
fn fit_site(c: &dejavu_detect::Callsite, width: usize) -> String {
    let (f, loc) = c.label_parts();
    let (f, loc) = (sanitize(&f), sanitize(&loc));
    let whole = c.label();
    let whole = sanitize(&whole);
    if whole.chars().count() <= width || f.is_empty() || loc.is_empty() {
        return shorten_middle(&whole, width);
    }
    // A module named with its build's hash (`(librustc_driver-6108105cd7e839cf.so)`): the
    // hash goes first, before the function is cut.
    let loc = without_build_hash(&loc);
    let flen = f.chars().count();
    // The location down to its last path component (file name and line).
    let tail = loc.rsplit('/').next().unwrap_or(&loc);
    let min_loc = if tail.len() < loc.len() {
        tail.chars().count() + 2 // "…/" before it
    } else {
        loc.chars().count()
    };
    if flen + 1 + min_loc <= width {
        return format!("{f} {}", keep_tail(&loc, width - flen - 1));
    }
    let loc = keep_tail(&loc, min_loc.min(width));
    let room = width.saturating_sub(loc.chars().count() + 1);
    if room < 8 {
        return shorten_middle(&whole, width);
    }
    format!("{} {loc}", shorten_function(&f, room))
}

/// A function name cut to `width` characters at whole `::` segments: its first segment,
/// `…`, then as many of its last ones as fit (`rg::…::HiArgs::from_low_args::{{closure}}`),
/// never inside an identifier (`grep_printer::hype…nk::HyperlinkPath` could not be searched
/// for). A closure called through its `FnOnce` shim is named as the closure
/// (`<cargo::…::link_targets::{closure#1} as core::ops::function::FnOnce<...>>::call_once
/// ::{shim:vtable#0}`). Cut in the middle when its last segment alone does not fit.
fn shorten_function(f: &str, width: usize) -> String {
    let f = match fn_shim_target(f) {
        Some(inner) => inner,
        None => f,
    };
    if f.chars().count() <= width {
        return f.to_string();
    }
    // `<Type>::method` (an inherent method): the type's path is cut, the method kept.
    if let Some((inner, rest)) = type_and_method(f) {
        let room = width.saturating_sub(rest.chars().count() + 2);
        let cut = shorten_function(inner, room);
        // (Too little room for the type's first segment: cut the whole name instead; a
        // bare `<>::find_library_crate` said nothing.)
        // Only a cut at whole segments (or none) will do.
        if cut == inner || cut.contains("::…") || cut.starts_with("…::") {
            let out = format!("<{cut}>{rest}");
            if out.chars().count() <= width {
                return out;
            }
        }
    }
    let segs = split_path_segments(f);
    if segs.len() >= 3 {
        let first = segs[0];
        let kept = last_segments(&segs[1..], width, first.chars().count() + 3);
        if !kept.is_empty() && kept.len() < segs.len() - 1 {
            return format!("{first}::…::{}", kept.join("::"));
        }
        // Not even the first segment and the last: the last ones alone.
        let kept = last_segments(&segs[1..], width, 1);
        if !kept.is_empty() {
            return format!("…::{}", kept.join("::"));
        }
    }
    // `Class.method` (JavaScript, Python): the method whole, the class's name cut at its
    // end (`LintResultCa….setCachedLintResults`: the middle cut lost set from get).
    if segs.len() == 1 {
        if let Some((head, last)) = f.rsplit_once('.') {
            let keep = width.saturating_sub(last.chars().count() + 2);
            if keep >= 4 && !head.is_empty() {
                let head: String = head.chars().take(keep).collect();
                return format!("{head}….{last}");
            }
        }
    }
    shorten_middle(f, width)
}

/// The last of `segs`, in order, that fit in `width` characters after `used` others, each
/// with its `::`.
fn last_segments<'a>(segs: &[&'a str], width: usize, used: usize) -> Vec<&'a str> {
    let mut kept: Vec<&str> = Vec::new();
    let mut len = used;
    for s in segs.iter().rev() {
        len += 2 + s.chars().count();
        if len > width {
            break;
        }
        kept.push(s);
    }
    kept.reverse();
    kept
}

/// (`Type`, `::method...`) of `<Type>::method...`, the path of an inherent method's type;
/// None for a trait's (`<X as T>`).
fn type_and_method(f: &str) -> Option<(&str, &str)> {
    let b = f.as_bytes();
    if b.first() != Some(&b'<') {
        return None;
    }
    let mut depth = 0i32;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'<' => depth += 1,
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    let (inner, rest) = (&f[1..i], &f[i + 1..]);
                    return (rest.starts_with("::") && !inner.contains(" as "))
                        .then_some((inner, rest));
                }
            }
            _ => {}
        }
    }
    None
}

/// `X` of `<X as core::ops::function::Fn*<...>>::call*...`: a closure or function called
/// through a trait object's shim.
fn fn_shim_target(f: &str) -> Option<&str> {
    let rest = f.strip_prefix('<')?;
    let (inner, tail) = rest.split_once(" as core::ops::function::Fn")?;
    (tail.contains(">::call") && !inner.contains(" as ")).then_some(inner)
}

/// A name's `::` segments, outside `<...>` and `(...)` (generic arguments and tuples hold
/// `::` of their own).
fn split_path_segments(f: &str) -> Vec<&str> {
    let b = f.as_bytes();
    let (mut depth, mut start, mut i) = (0i32, 0, 0);
    let mut out = Vec::new();
    while i < b.len() {
        match b[i] {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth -= 1,
            b':' if depth == 0 && b.get(i + 1) == Some(&b':') => {
                out.push(&f[start..i]);
                i += 2;
                start = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&f[start..]);
    out
}

/// A module's name in a site's location without the hash its build put in it
/// (`(librustc_driver-6108105cd7e839cf.so)` -> `(librustc_driver.so)`): 16 or more hex
/// digits after a `-`. Other locations unchanged.
fn without_build_hash(loc: &str) -> String {
    if !(loc.starts_with('(') && loc.ends_with(')')) {
        return loc.to_string();
    }
    let inner = &loc[1..loc.len() - 1];
    // A Python extension module: its ABI tag (`.cpython-311-x86_64-linux-gnu.so`), and
    // mypyc's shared object's hash (`6ec57f84c680d3a3778b__mypyc`): `(__mypyc.so)`.
    if let Some(at) = inner.find(".cpython-").filter(|_| inner.ends_with(".so")) {
        let hex = inner.bytes().take_while(u8::is_ascii_hexdigit).count();
        let start = if hex >= 16 && inner[hex..].starts_with("__") {
            hex
        } else {
            0
        };
        return format!("({}.so)", &inner[start..at]);
    }
    if let Some(dash) = inner.rfind('-') {
        let rest = &inner[dash + 1..];
        let hex = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
        if hex >= 16 {
            return format!("({}{})", &inner[..dash], &rest[hex..]);
        }
    }
    loc.to_string()
}

/// `loc` cut to `width` characters from its start (`…/jest-runtime/build/index.js:2291`):
/// the end of a path names its file; cut at a `/` when one is near.
fn keep_tail(loc: &str, width: usize) -> String {
    let chars: Vec<char> = loc.chars().collect();
    if chars.len() <= width {
        return loc.to_string();
    }
    if width < 2 {
        return "…".chars().take(width).collect();
    }
    let keep = width - 1;
    let start = chars.len() - keep;
    // The first '/' in what is kept, if that does not cost more than half of it.
    let snap = (start..chars.len())
        .find(|&i| chars[i] == '/')
        .filter(|&i| i - start <= keep / 2)
        .unwrap_or(start);
    let mut out = String::from("…");
    out.extend(&chars[snap..]);
    out
}

#[cfg(test)]
mod shorten_function_tests {
    use super::shorten_function;

    #[test]
    fn a_modules_build_hash_goes_before_the_function_is_cut() {
        assert_eq!(
            super::without_build_hash("(librustc_driver-6108105cd7e839cf.so)"),
            "(librustc_driver.so)"
        );
        assert_eq!(
            super::without_build_hash("(libfoo-1.2.so)"),
            "(libfoo-1.2.so)"
        );
        // A Python extension module's ABI tag, and mypyc's shared object's hash.
        assert_eq!(
            super::without_build_hash(
                "(6ec57f84c680d3a3778b__mypyc.cpython-311-x86_64-linux-gnu.so)"
            ),
            "(__mypyc.so)"
        );
        assert_eq!(
            super::without_build_hash("(_yaml.cpython-311-x86_64-linux-gnu.so)"),
            "(_yaml.so)"
        );
        assert_eq!(
            super::without_build_hash("src/a-0123456789abcdef0.rs:3"),
            "src/a-0123456789abcdef0.rs:3"
        );
        let c = dejavu_detect::Callsite {
            function: "<rustc_metadata::locator::CrateLocator>::find_library_crate".into(),
            module: "/t/lib/librustc_driver-6108105cd7e839cf.so".into(),
            ..crate::fixture::site("", "", 0, 1)
        };
        assert_eq!(
            super::fit_site(&c, 70),
            "<…::locator::CrateLocator>::find_library_crate (librustc_driver.so)"
        );
    }

    #[test]
    fn a_function_is_cut_at_whole_segments() {
        let f = "rg::flags::hiargs::HiArgs::from_low_args::{{closure}}";
        assert_eq!(shorten_function(f, 80), f);
        assert_eq!(
            shorten_function(f, 42),
            "rg::…::HiArgs::from_low_args::{{closure}}"
        );
        assert_eq!(
            shorten_function("grep_printer::hyperlink::HyperlinkPath::from_path", 41),
            "grep_printer::…::HyperlinkPath::from_path"
        );
        // A closure behind its FnOnce shim is the closure.
        let shim = "<cargo::core::compiler::link_targets::{closure#1} as core::ops::function::\
                    FnOnce<(&cargo::core::compiler::job_queue::job_state::JobState,)>>::call_once::\
                    {shim:vtable#0}";
        assert_eq!(
            shorten_function(shim, 60),
            "cargo::core::compiler::link_targets::{closure#1}"
        );
        assert_eq!(
            shorten_function(shim, 40),
            "cargo::…::link_targets::{closure#1}"
        );
        // An inherent method: its type's path is cut at segments, the method kept.
        assert_eq!(
            shorten_function(
                "<cargo::core::compiler::custom_build::BuildOutput>::parse_file",
                49
            ),
            "<cargo::…::custom_build::BuildOutput>::parse_file"
        );
        // A method of a class: the method whole.
        assert_eq!(
            shorten_function("LintResultCache.setCachedLintResults", 30),
            "LintResu….setCachedLintResults"
        );
        // No room for the type's path: the whole name cut, never `<>::method`.
        let cut = shorten_function(
            "<rustc_metadata::locator::CrateLocator>::find_library_crate",
            24,
        );
        assert!(!cut.starts_with("<>"), "{cut}");
        assert!(cut.chars().count() <= 24, "{cut}");
        // No segments to drop: cut in the middle, to the width.
        let cut = shorten_function("a_very_long_function_name_without_parts", 20);
        assert_eq!(cut.chars().count(), 20, "{cut}");
    }
}

#[cfg(test)]
mod fit_label_tests {
    use super::fit_label;

    #[test]
    fn a_long_loop_is_cut_after_its_first_steps_and_says_how_many_are_left() {
        // A walk that lstats 50 paths per call, each path said once.
        let steps: Vec<String> = (0..50).map(|i| format!("lstat /w/p{i}")).collect();
        let text = super::loop_steps_within(&steps, 12);
        assert!(text.starts_with("lstat /w/p0, lstat /w/p1, "), "{text}");
        assert!(
            text.ends_with("lstat /w/p11, and 38 more calls (--details lists them)"),
            "{text}"
        );
        // A run of one call counts once; nothing is cut at or under the limit.
        let mut steps = vec!["open /w/a".to_string()];
        steps.extend(std::iter::repeat_n("fcntl /w/a".to_string(), 4));
        assert_eq!(super::loop_steps_within(&steps, 2), "open /w/a, fcntl ×4");
        assert_eq!(
            super::loop_steps_within(&steps, 1),
            "open /w/a, and 4 more calls (--details lists them)"
        );
        // A long path is cut in its middle under a row, kept whole with --details.
        let long = format!(
            "/venv/lib/python3.11/site-packages/{}/lunr/min/x.js",
            "a/".repeat(30)
        );
        let steps = vec![format!("open {long}"), format!("fstat {long}")];
        let cut = super::loop_steps_within(&steps, 12);
        assert!(
            cut.len() < long.len() && cut.contains('…') && cut.ends_with("x.js, fstat"),
            "{cut}"
        );
        assert_eq!(
            super::loop_steps_within(&steps, usize::MAX),
            format!("open {long}, fstat")
        );
    }

    #[test]
    fn a_loops_path_is_said_once_per_run_of_calls_on_it() {
        let p = "/root/.cache/go-build/e3/e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855-d";
        let steps: Vec<String> = [
            "open", "fcntl", "fcntl", "fcntl", "fcntl", "fstat", "read", "close",
        ]
        .iter()
        .map(|v| format!("{v} {p}"))
        .collect();
        assert_eq!(
            super::loop_steps(&steps),
            format!("open {p}, fcntl ×4, fstat, read, close")
        );
        // Another path is said where it starts; errors stay with their call; a call
        // without a path is as it was.
        let steps: Vec<String> = [
            "stat /srv/guest/* -> ENOENT",
            "stat /srv/host/*",
            "lstat /srv/host/*",
            "getcwd",
            "close -> EBADF",
            "stat /srv/guest/* -> ENOENT",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            super::loop_steps(&steps),
            "stat /srv/guest/* -> ENOENT, stat /srv/host/*, lstat, getcwd, close -> EBADF, \
             stat /srv/guest/* -> ENOENT"
        );
    }

    #[test]
    fn a_searched_names_directories_go_before_its_middle_is_cut() {
        let l = "eslint.config.cjs in 9 directories (/tmp/rw/npmt/src1, /tmp/rw/npmt/src1/cli-engine, /tmp/rw/npmt/src1/config, ...) (+2)";
        assert_eq!(fit_label(l, 200), l);
        assert_eq!(
            fit_label(l, 70),
            "eslint.config.cjs in 9 directories (/tmp/rw/npmt/src1, ...) (+2)"
        );
        assert_eq!(fit_label(l, 40), "eslint.config.cjs in 9 directories (+2)");
        let cut = fit_label(l, 24);
        assert_eq!(cut.chars().count(), 24, "{cut}");
        assert!(!cut.contains(')') || cut.ends_with("(+2)"), "{cut}");
        // Without the other paths' count, and a plain path: cut in the middle as before.
        assert_eq!(
            fit_label(
                "cc in 3 directories (/root/.cargo/bin, /usr/local/go/bin, /usr/sbin)",
                45
            ),
            "cc in 3 directories (/root/.cargo/bin, ...)"
        );
        // A walk up a path: its top, then its count go first (`go build`'s first screen read
        // "/tmp/gohello a…1 more under /tmp (+2)").
        let w = "/tmp/gohello and 1 more under /tmp (+2)";
        assert_eq!(fit_label(w, 40), w);
        assert_eq!(fit_label(w, 38), "/tmp/gohello and 1 more (+2)");
        // Then the walk's other path joins the count: three more paths in all.
        assert_eq!(fit_label(w, 20), "/tmp/gohello (+3)");
        let cut = fit_label(w, 12);
        assert!(cut.chars().count() <= 12, "{cut}");
        assert!(!cut.contains("more") && cut.ends_with(" (+3)"), "{cut}");
        // A walk alone keeps its count too (black's first row read
        // "/tmp/triage28/python/clean/src": 808 lookups of one directory, it seemed).
        let w = "/tmp/triage28/python/clean/src and 10 more under /tmp";
        assert_eq!(
            fit_label(w, 42),
            "/tmp/triage28/python/clean/src and 10 more"
        );
        assert_eq!(fit_label(w, 40), "/tmp/triage28/python/clean/src (+10)");
        let cut = fit_label(w, 24);
        assert!(cut.chars().count() <= 24, "{cut}");
        assert!(cut.ends_with(" (+10)"), "{cut}");
        assert_eq!(
            fit_label("/home/u/project/node_modules/pkg/index.js", 30),
            dejavu_analyze::text::shorten_middle("/home/u/project/node_modules/pkg/index.js", 30)
        );
    }
}

#[cfg(test)]
mod fit_tests {
    use super::{fit_site, keep_tail};
    use dejavu_detect::Callsite;

    fn site(function: &str, file: &str, line: u32) -> Callsite {
        crate::fixture::site(function, file, line, 1)
    }

    #[test]
    fn a_stripped_modules_sites_are_told_apart_by_their_offset() {
        // Two sites in a stripped program: no function, no file, only the module. The call
        // site ranking's column said "(cc1)" for both.
        let mut a = site("", "", 0);
        a.module = "/usr/libexec/gcc/x86_64-linux-gnu/12/cc1".into();
        a.addr = 0x4d2f10;
        let mut b = a.clone();
        b.addr = 0x4d3000;
        assert_eq!(super::location(&a), "cc1+0x4d2f10");
        assert_ne!(super::location(&a), super::location(&b));
        // With a function (from the symbol table), the function column tells them apart.
        let mut c = a.clone();
        c.function = "lrealpath".into();
        assert_eq!(super::location(&c), "(cc1)");
    }

    #[test]
    fn a_minified_bundles_site_names_its_column() {
        // npm's tar is one 102 KB line of index.min.js: line 3 names nothing, column 43005
        // is the mkdir helper. A line written by hand keeps file:line.
        let mut c = site(
            "Sr",
            "/usr/lib/node_modules/npm/node_modules/tar/dist/commonjs/index.min.js",
            3,
        );
        c.column = 43005;
        assert!(c.label().ends_with("index.min.js:3:43005"), "{}", c.label());
        assert!(
            fit_site(&c, 40).ends_with("index.min.js:3:43005"),
            "{}",
            fit_site(&c, 40)
        );
        c.column = 12;
        assert!(c.label().ends_with("index.min.js:3"), "{}", c.label());
    }

    #[test]
    fn a_long_location_is_cut_before_the_function() {
        let c = site(
            "cmd/go/internal/cache.FileHash",
            "/usr/local/go/src/cmd/go/internal/cache/hash.go",
            168,
        );
        let s = fit_site(&c, 60);
        assert!(s.chars().count() <= 60, "{s}");
        assert!(s.starts_with("cmd/go/internal/cache.FileHash "), "{s}");
        assert!(s.ends_with("/hash.go:168"), "{s}");
        // Room for little: the function is cut, the file name and line stay.
        let s = fit_site(&c, 36);
        assert!(s.chars().count() <= 36, "{s}");
        assert!(s.ends_with("…/hash.go:168"), "{s}");
        // Fits: as it is.
        let c = site("main", "/a/b.go", 3);
        assert_eq!(fit_site(&c, 60), "main /a/b.go:3");
    }

    #[test]
    fn a_tail_keeps_the_end_of_a_path() {
        assert_eq!(
            keep_tail(
                "/tmp/rp/jt/node_modules/jest-runtime/build/index.js:2291",
                36
            ),
            "…/jest-runtime/build/index.js:2291"
        );
        assert_eq!(keep_tail("short", 10), "short");
        assert!(keep_tail("abcdefghijklmnop", 5).chars().count() <= 5);
    }
}
