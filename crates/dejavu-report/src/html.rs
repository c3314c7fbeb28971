//! The HTML report: one self-contained file (inline style and script, no network, opens
//! from file://). The headline and the findings are rendered here as HTML, so they read
//! and print without the script; the flame graph of redundant calls by stack and the
//! per-thread timeline are drawn by a small script (html/report.js) from one embedded
//! JSON blob. Everything from the trace is escaped: in the markup by [`esc`], in the blob
//! by [`json_for_script`]. `dejavu diff --format html` has its own page ([`render_diff`]).

use crate::text::{fmt_count, fmt_duration_short as fmt_duration, fmt_share, shell_join};
use crate::{RenderOptions, Reporter};
use dejavu_detect::{Analysis, CallFrame, Callsite, Finding, Owner};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

mod whatif;
pub use whatif::{render_whatif, NotReplayedRow, WhatifPage};

const CSS: &str = include_str!("html/report.css");
const JS: &str = include_str!("html/report.js");

/// No request may leave the page: scripts and styles are inline, images data: URLs.
const CSP: &str =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:";

/// Lines of source shown before and after a call site's line.
const CONTEXT: u32 = 3;
/// Source files larger than this are not read for excerpts.
const MAX_SOURCE_BYTES: u64 = 8 << 20;
/// Call sites shown per finding.
const CALLSITES: usize = 5;

/// Renders the analysis as one HTML page.
#[derive(Clone, Debug, Default)]
pub struct HtmlReporter {
    /// What the page is about (the trace's file name): its title.
    pub title: String,
}

impl Reporter for HtmlReporter {
    fn render(&self, a: &Analysis, out: &mut dyn Write, opts: &RenderOptions) -> io::Result<()> {
        let mut frames = FrameTable::default();
        let flame = flame_data(a, &mut frames);
        let mut sources = Sources::new(&a.meta.cwd);
        let mut body = String::new();
        header(&mut body, a, opts);
        body.push_str(PICTURES);
        // The terminal's rows first (a prefix of the rows), the rest folded below them.
        let shown = crate::terminal::shown(a, opts);
        let rest: Vec<&Finding> = a.rows().iter().skip(shown.len()).collect();
        body.push_str(
            "<section id=\"findings-section\" aria-labelledby=\"findings-h\">\n\
             <h2 id=\"findings-h\">Findings</h2>\n\
             <p id=\"filter-status\" role=\"status\" aria-live=\"polite\"></p>\n\
             <button type=\"button\" id=\"clear-filter\" hidden>Show every finding</button>\n\
             <ol id=\"findings\" class=\"findings\">\n",
        );
        if a.rows().is_empty() {
            body.push_str("<li class=\"none\">No findings over the thresholds.</li>\n");
        }
        for (i, f) in shown.iter().enumerate() {
            finding(&mut body, f, i + 1, &mut frames, &mut sources);
        }
        body.push_str("</ol>\n");
        if !rest.is_empty() {
            let calls: u64 = rest.iter().map(|f| f.redundant_calls).sum();
            let _ = write!(
                body,
                "<details class=\"folded\"><summary>{} more {} ({} redundant calls): runtime \
                 start-up, launchers, tools it ran, or over the limit of rows</summary>\n<ol class=\"findings\" start=\"{}\">\n",
                rest.len(),
                plural(rest.len() as u64, "finding", "findings"),
                fmt_count(calls),
                shown.len() + 1
            );
            for (i, f) in rest.iter().enumerate() {
                finding(&mut body, f, shown.len() + i + 1, &mut frames, &mut sources);
            }
            body.push_str("</ol></details>\n");
        }
        body.push_str("</section>\n");
        let data = Data {
            kind: "report",
            flame,
            frames: &frames.list,
            timeline: timeline_data(&a.timeline),
            skip_startup_ns: opts.config.skip_startup_ns,
        };
        page(out, &format!("dejavu: {}", self.title), &body, &data)
    }
}

/// The flame graph's and timeline's places on the page (drawn by the script).
const PICTURES: &str = "\
<section id=\"flame-section\" aria-labelledby=\"flame-h\">
<h2 id=\"flame-h\">Redundant calls by stack</h2>
<p class=\"hint\">The program's own frames are highlighted; runtime and library frames are \
folded. Select a frame to list only the findings whose calls pass through it.</p>
<div class=\"controls\"><button type=\"button\" id=\"fold\" aria-pressed=\"true\">Fold runtime frames</button></div>
<div id=\"flame\" class=\"flame\" role=\"group\" aria-label=\"Flame graph of redundant calls by stack\"><noscript>The flame graph needs JavaScript.</noscript></div>
</section>
<section id=\"timeline-section\" aria-labelledby=\"timeline-h\">
<h2 id=\"timeline-h\">Timeline</h2>
<p class=\"hint\">Each thread's traced calls (grey) and redundant calls (red) over the recording.</p>
<div class=\"controls\" role=\"toolbar\" aria-label=\"Timeline zoom\">\
<button type=\"button\" id=\"tl-in\">Zoom in</button> \
<button type=\"button\" id=\"tl-out\">Zoom out</button> \
<button type=\"button\" id=\"tl-left\" aria-label=\"Earlier\">&larr;</button> \
<button type=\"button\" id=\"tl-right\" aria-label=\"Later\">&rarr;</button> \
<button type=\"button\" id=\"tl-reset\">Whole recording</button> \
<span id=\"tl-range\" aria-live=\"polite\"></span></div>
<div id=\"timeline\" class=\"timeline\"><noscript>The timeline needs JavaScript.</noscript></div>
</section>
";

/// The embedded data the script draws from.
#[derive(Serialize)]
struct Data<'a> {
    kind: &'static str,
    flame: Flame,
    /// [function, file, line, module, own (1) or runtime (0)].
    frames: &'a [(String, String, u32, String, u8)],
    timeline: Timeline<'a>,
    skip_startup_ns: u64,
}

/// The timeline as the script reads it: each thread's buckets flattened to
/// `[gap, calls, redundant, gap, ...]`, `gap` the distance from the previous bucket (the
/// first from -1), which keeps a busy thread's row short.
#[derive(Serialize)]
struct Timeline<'a> {
    end_ns: u64,
    bucket_ns: u64,
    buckets: u32,
    other_threads: usize,
    threads: Vec<ThreadRow<'a>>,
}

#[derive(Serialize)]
struct ThreadRow<'a> {
    pid: u32,
    tid: u32,
    program: &'a str,
    calls: u64,
    redundant_calls: u64,
    b: Vec<u32>,
}

fn timeline_data(t: &dejavu_detect::profile::Timeline) -> Timeline<'_> {
    Timeline {
        end_ns: t.end_ns,
        bucket_ns: t.bucket_ns,
        buckets: t.buckets,
        other_threads: t.other_threads,
        threads: t
            .threads
            .iter()
            .map(|th| {
                let mut prev: i64 = -1;
                let mut b = Vec::with_capacity(th.buckets.len() * 3);
                for &(i, n, r) in &th.buckets {
                    b.push((i as i64 - prev) as u32);
                    b.push(n);
                    b.push(r);
                    prev = i as i64;
                }
                ThreadRow {
                    pid: th.pid,
                    tid: th.tid,
                    program: &th.program,
                    calls: th.calls,
                    redundant_calls: th.redundant_calls,
                    b,
                }
            })
            .collect(),
    }
}

/// Redundant calls by stack, stacks as frame indices, outermost first, each with its
/// program (an index into `programs`), redundant calls and time.
#[derive(Serialize, Default)]
struct Flame {
    programs: Vec<String>,
    stacks: Vec<(Vec<u32>, u64, u64, u32)>,
    total: u64,
    other: u64,
    unstacked: u64,
}

/// Frames by identity (function, file, module; the line only for code without a
/// function name of its own), so the flame graph merges the calls of one function and a
/// finding can name the frames it passes through.
#[derive(Default)]
struct FrameTable {
    list: Vec<(String, String, u32, String, u8)>,
    index: HashMap<(String, String, u32, String), u32>,
}

impl FrameTable {
    fn id(&mut self, f: &CallFrame) -> u32 {
        let anonymous = f.function.is_empty() || f.function.starts_with('<');
        let line = if anonymous { f.line } else { 0 };
        let key = (f.function.clone(), f.file.clone(), line, f.module.clone());
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push((
            f.function.clone(),
            f.file.clone(),
            f.line,
            f.module.clone(),
            u8::from(!f.internal),
        ));
        self.index.insert(key, i);
        i
    }
}

fn flame_data(a: &Analysis, frames: &mut FrameTable) -> Flame {
    let s = &a.stacks;
    let mut programs: Vec<String> = Vec::new();
    Flame {
        stacks: s
            .stacks
            .iter()
            .map(|st| {
                let ids = st.frames.iter().rev().map(|f| frames.id(f)).collect();
                let p = match programs.iter().position(|p| *p == st.program) {
                    Some(p) => p,
                    None => {
                        programs.push(st.program.clone());
                        programs.len() - 1
                    }
                };
                (ids, st.calls, st.ns, p as u32)
            })
            .collect(),
        programs,
        total: a.redundant_calls.min(a.syscalls),
        other: s.other_calls,
        unstacked: s.unstacked_calls,
    }
}

/// Reads source files once each, for the lines around call sites.
struct Sources {
    cwd: PathBuf,
    files: HashMap<String, Option<Vec<String>>>,
}

impl Sources {
    fn new(cwd: &str) -> Sources {
        Sources {
            cwd: PathBuf::from(cwd),
            files: HashMap::new(),
        }
    }

    /// Lines `line - CONTEXT ..= line + CONTEXT` of `file` with their numbers, when the
    /// file is readable now (it may have changed since the recording: the page says so).
    fn around(&mut self, file: &str, line: u32) -> Option<Vec<(u32, String)>> {
        if file.is_empty() || line == 0 || file.starts_with('<') || file.starts_with("node:") {
            return None;
        }
        let cwd = &self.cwd;
        let lines = self
            .files
            .entry(file.to_string())
            .or_insert_with(|| {
                let p = Path::new(file);
                let p = if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    cwd.join(p)
                };
                let md = std::fs::metadata(&p).ok()?;
                if !md.is_file() || md.len() > MAX_SOURCE_BYTES {
                    return None;
                }
                let bytes = std::fs::read(&p).ok()?;
                Some(
                    String::from_utf8_lossy(&bytes)
                        .lines()
                        .map(str::to_string)
                        .collect(),
                )
            })
            .as_ref()?;
        let at = line as usize;
        if at > lines.len() {
            return None;
        }
        let lo = at.saturating_sub(CONTEXT as usize).max(1);
        let hi = (at + CONTEXT as usize).min(lines.len());
        Some(
            (lo..=hi)
                .map(|n| (n as u32, lines[n - 1].clone()))
                .collect(),
        )
    }
}

fn header(b: &mut String, a: &Analysis, opts: &RenderOptions) {
    let (headline, note) = crate::terminal::headline(a, opts);
    let _ = write!(
        b,
        "<header>\n<h1>dejavu report</h1>\n<p class=\"cmd\"><code>{}</code> \
         <span class=\"dim\">({} backend, {} {}, {} syscalls)</span></p>\n<p id=\"headline\">{}</p>\n",
        esc(&shell_join(&a.meta.command)),
        esc(&a.meta.backend),
        fmt_count(a.processes as u64),
        plural(a.processes as u64, "process", "processes"),
        fmt_count(a.syscalls),
        esc(&headline)
    );
    if let Some(n) = note {
        let _ = writeln!(b, "<p class=\"note\">{}</p>", esc(&n));
    }
    for w in crate::warnings(a) {
        let _ = writeln!(b, "<p class=\"warning\" role=\"alert\">{}</p>", esc(&w));
    }
    b.push_str("</header>\n");
}

/// One finding: a summary line, and under it everything about it.
fn finding(
    b: &mut String,
    f: &Finding,
    rank: usize,
    frames: &mut FrameTable,
    sources: &mut Sources,
) {
    // The frames its calls pass through, for the flame graph's filter.
    let mut ids: Vec<u32> = f
        .callsites
        .iter()
        .flat_map(|c| c.stack.iter())
        .map(|fr| frames.id(fr))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
    let _ = write!(
        b,
        "<li class=\"finding sev-{sev}\" id=\"finding-{rank}\" data-detector=\"{det}\" data-program=\"{program}\" data-frames=\"{frames}\">\n\
         <details{open}><summary><span class=\"rank\">#{rank}</span> \
         <span class=\"sev\">{sev}</span> <span class=\"detector\">{det}</span> \
         <span class=\"program\">{prog}</span> <span class=\"paths\">{paths}</span> \
         <span class=\"nums\"><b>{red}</b> of {calls} calls redundant, {time}, {share}</span></summary>\n",
        // The top finding opens with the page.
        open = if rank == 1 { " open" } else { "" },
        sev = f.severity.name(),
        det = esc(f.detector),
        program = esc(&f.program),
        frames = ids.join(" "),
        prog = esc(&crate::terminal::program_label(f)),
        paths = esc(&crate::terminal::paths_label(f)),
        red = fmt_count(f.redundant_calls),
        calls = fmt_count(f.calls),
        time = fmt_duration(f.wasted_ns),
        share = fmt_share(f.share),
    );
    b.push_str("<dl>\n");
    let what = dejavu_detect::find_detector(f.detector).map_or("", |d| d.summary);
    dd(b, "detector", &format!("{} — {what}", f.detector));
    dd(b, "whose code", owner_name(f.owner));
    if !f.fix.is_empty() {
        dd_class(b, "fix", "fix", &f.fix);
    }
    for h in &f.hazards {
        dd_class(b, "hazard", "hazard", h);
    }
    if let Some(c) = &f.cache {
        let text = if c.safe {
            crate::terminal::cache_text(c)
        } else {
            format!("unsafe to cache: {}", crate::terminal::cache_text(c))
        };
        dd_class(
            b,
            "cache",
            if c.safe { "cache" } else { "cache unsafe" },
            &text,
        );
    }
    if let Some(q) = &f.sequence {
        let _ = write!(
            b,
            "<dt>loop</dt><dd>{}<ol class=\"steps\">",
            esc(&crate::terminal::per_call(q))
        );
        for s in &q.steps {
            let _ = write!(b, "<li><code>{}</code></li>", esc(s));
        }
        b.push_str("</ol></dd>\n");
    }
    let process = crate::terminal::process_line(f);
    dd(b, "process", &process);
    dd(
        b,
        "window",
        &format!(
            "redundant calls from {} to {} after the trace started",
            fmt_duration(f.first_ts),
            fmt_duration(f.last_ts)
        ),
    );
    if let Some(s) = &f.stream {
        dd(b, "stream", s);
    }
    if !f.top_paths.is_empty() || !f.paths.is_empty() {
        let _ = write!(
            b,
            "<dt>paths</dt><dd>{} {}<ul class=\"paths\">",
            fmt_count(f.path_count),
            plural(f.path_count, "path", "paths")
        );
        if f.top_paths.is_empty() {
            for p in &f.paths {
                let _ = write!(b, "<li><code>{}</code></li>", esc(p));
            }
        }
        for p in &f.top_paths {
            let _ = write!(
                b,
                "<li><code>{}</code> <span class=\"dim\">({})</span></li>",
                esc(&p.path),
                fmt_count(p.redundant_calls)
            );
        }
        b.push_str("</ul></dd>\n");
    }
    if let Some(e) = &f.example {
        let _ = writeln!(b, "<dt>example</dt><dd><pre>{}</pre></dd>", esc(e));
    }
    for x in &f.also {
        let what = dejavu_detect::find_detector(x.detector).map_or("", |d| d.summary);
        let text = if x.same_loop {
            format!(
                "{}: {} more calls in the same runs of this function ({what})",
                x.detector,
                fmt_count(x.redundant_calls)
            )
        } else {
            format!(
                "{}: {} of these calls ({what})",
                x.detector,
                fmt_count(x.shared_calls)
            )
        };
        dd(b, "also", &text);
    }
    if !f.callsites.is_empty() {
        b.push_str("<dt>call sites</dt><dd><ol class=\"callsites\">\n");
        for c in f.callsites.iter().take(CALLSITES) {
            callsite(b, c, sources);
        }
        b.push_str("</ol></dd>\n");
    }
    dd(
        b,
        "more",
        &format!(
            "dejavu explain {} says what it means and how to fix it",
            f.detector
        ),
    );
    b.push_str("</dl></details></li>\n");
}

fn callsite(b: &mut String, c: &Callsite, sources: &mut Sources) {
    let _ = write!(
        b,
        "<li class=\"callsite\"><code class=\"site\">{}</code> <span class=\"dim\">({} {}, {})</span>",
        esc(&c.label()),
        fmt_count(c.redundant_calls),
        plural(c.redundant_calls, "call", "calls"),
        fmt_share(c.share)
    );
    if let Some(v) = &c.via {
        // The library code the site's calls were made in (the text report's `made in:`).
        let _ = write!(
            b,
            " <span class=\"dim\">made in</span> <code class=\"via\">{}</code> <span class=\"dim\">{}</span>",
            esc(&v.function),
            esc(&crate::terminal::frame_location(v))
        );
    }
    if let Some(lines) = sources.around(&c.file, c.line) {
        let _ = write!(
            b,
            "<pre class=\"src\" aria-label=\"{} around line {}\"><code>",
            esc(&c.file),
            c.line
        );
        for (n, text) in lines {
            if n == c.line {
                let _ = writeln!(
                    b,
                    "<mark class=\"line\"><span class=\"ln\">{n:>5}</span> {}</mark>",
                    esc(&text)
                );
            } else {
                let _ = writeln!(b, "<span class=\"ln\">{n:>5}</span> {}", esc(&text));
            }
        }
        b.push_str("</code></pre>\n");
    }
    if !c.stack.is_empty() {
        b.push_str("<details class=\"stack\"><summary>stack</summary><ol class=\"frames\">");
        for fr in &c.stack {
            let _ = write!(
                b,
                "<li class=\"{}\"><code>{}</code> <span class=\"dim\">{}</span></li>",
                if fr.internal { "rt" } else { "own" },
                esc(&fr.function),
                esc(&crate::terminal::frame_location(fr))
            );
        }
        b.push_str("</ol></details>\n");
    }
    b.push_str("</li>\n");
}

fn dd(b: &mut String, term: &str, text: &str) {
    let _ = writeln!(b, "<dt>{}</dt><dd>{}</dd>", esc(term), esc(text));
}

fn dd_class(b: &mut String, term: &str, class: &str, text: &str) {
    let _ = writeln!(
        b,
        "<dt>{}</dt><dd class=\"{class}\">{}</dd>",
        esc(term),
        esc(text)
    );
}

fn owner_name(o: Owner) -> &'static str {
    match o {
        Owner::Own => "the program's own code",
        Owner::Dependency => "a dependency",
        Owner::Runtime => "the runtime's start-up or loader",
        Owner::Launcher => "a launcher",
        Owner::Tool => "a tool the program ran",
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    crate::terminal::plural(n, one, many)
}

/// Writes the page: head with the style, `body`, the data and the script.
fn page(out: &mut dyn Write, title: &str, body: &str, data: &impl Serialize) -> io::Result<()> {
    let json = serde_json::to_string(data)?;
    write!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <title>{}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n<main>\n{body}</main>\n\
         <footer><p>Made by dejavu {}. This file is self-contained: it loads nothing.</p></footer>\n\
         <script type=\"application/json\" id=\"dejavu-data\">{}</script>\n\
         <script>\n{JS}</script>\n</body>\n</html>\n",
        esc(title),
        env!("CARGO_PKG_VERSION"),
        json_for_script(&json),
    )
}

/// Text for HTML markup, in an element or a quoted attribute.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            // Control characters (a newline in a file name is fine; a NUL is not).
            c if c.is_control() && c != '\n' && c != '\t' => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

/// JSON that is safe inside a `<script>` element: no `<`, `>` or `&` (so no `</script>`
/// or `<!--`), and no line separators some parsers take for line ends. Each is escaped
/// as `\uXXXX`, which JSON reads back as the same character (they only occur inside
/// strings).
pub fn json_for_script(json: &str) -> String {
    let mut o = String::with_capacity(json.len());
    for ch in json.chars() {
        match ch {
            '<' => o.push_str("\\u003c"),
            '>' => o.push_str("\\u003e"),
            '&' => o.push_str("\\u0026"),
            '\u{2028}' => o.push_str("\\u2028"),
            '\u{2029}' => o.push_str("\\u2029"),
            c => o.push(c),
        }
    }
    o
}

/// One side of a diff.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DiffSide {
    /// The trace.
    pub trace: String,
    /// Its syscalls.
    pub syscalls: u64,
    /// Its redundant calls.
    pub redundant_calls: u64,
}

/// A finding in a diff, matched across the traces by its key.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DiffFinding {
    /// `new`, `gone`, `better`, `worse` or `same`.
    pub status: &'static str,
    /// Detector id.
    pub detector: String,
    /// Program.
    pub program: String,
    /// Whose code.
    pub owner: String,
    /// Its first call site's label.
    pub callsite: String,
    /// Its paths.
    pub paths: String,
    /// Redundant calls before (None: not in that trace).
    pub before: Option<u64>,
    /// Redundant calls after.
    pub after: Option<u64>,
}

/// Calls of one syscall or call site, before and after.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DiffCount {
    /// The syscall or call site.
    pub name: String,
    /// Before.
    pub before: u64,
    /// After.
    pub after: u64,
}

/// What `dejavu diff` compares, for its HTML page.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Diff {
    /// The trace before the change.
    pub before: DiffSide,
    /// The trace after it.
    pub after: DiffSide,
    /// Per finding, biggest change first.
    pub findings: Vec<DiffFinding>,
    /// Per syscall (calls), biggest change first.
    pub syscalls: Vec<DiffCount>,
    /// Per call site (redundant calls), biggest change first.
    pub callsites: Vec<DiffCount>,
}

fn delta(before: u64, after: u64) -> String {
    let d = after as i64 - before as i64;
    match d {
        0 => "0".into(),
        d if d > 0 => format!("+{}", fmt_count(d as u64)),
        d => format!("−{}", fmt_count(d.unsigned_abs())),
    }
}

fn delta_class(before: u64, after: u64) -> &'static str {
    match after.cmp(&before) {
        std::cmp::Ordering::Less => "better",
        std::cmp::Ordering::Greater => "worse",
        std::cmp::Ordering::Equal => "same",
    }
}

/// Renders `dejavu diff` as one HTML page: before and after per finding, per call site
/// and per syscall.
pub fn render_diff(d: &Diff, out: &mut dyn Write) -> io::Result<()> {
    let mut b = String::new();
    let _ = write!(
        b,
        "<header>\n<h1>dejavu diff</h1>\n<p class=\"cmd\"><code>{}</code> → <code>{}</code></p>\n\
         <p id=\"headline\">Redundant calls {} → {} (<span class=\"{}\">{}</span>); traced calls {} → {} ({}).</p>\n</header>\n",
        esc(&d.before.trace),
        esc(&d.after.trace),
        fmt_count(d.before.redundant_calls),
        fmt_count(d.after.redundant_calls),
        delta_class(d.before.redundant_calls, d.after.redundant_calls),
        delta(d.before.redundant_calls, d.after.redundant_calls),
        fmt_count(d.before.syscalls),
        fmt_count(d.after.syscalls),
        delta(d.before.syscalls, d.after.syscalls),
    );
    b.push_str(
        "<section aria-labelledby=\"df-h\"><h2 id=\"df-h\">Findings (redundant calls)</h2>\n",
    );
    if d.findings.is_empty() {
        b.push_str("<p>None in either trace.</p>\n");
    } else {
        b.push_str(
            "<table class=\"diff\" id=\"diff-findings\"><thead><tr><th scope=\"col\">status</th>\
             <th scope=\"col\">detector</th><th scope=\"col\">program</th><th scope=\"col\">call site or paths</th>\
             <th scope=\"col\" class=\"n\">before</th><th scope=\"col\" class=\"n\">after</th>\
             <th scope=\"col\" class=\"n\">change</th></tr></thead><tbody>\n",
        );
        for f in &d.findings {
            let (bv, av) = (f.before.unwrap_or(0), f.after.unwrap_or(0));
            let show = |v: Option<u64>| v.map_or("–".to_string(), fmt_count);
            let place = if f.callsite.is_empty() {
                &f.paths
            } else {
                &f.callsite
            };
            let _ = writeln!(
                b,
                "<tr class=\"{st}\"><td><span class=\"status {st}\">{st}</span></td><td>{}</td><td>{}</td>\
                 <td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(&f.detector),
                esc(&f.program),
                esc(place),
                show(f.before),
                show(f.after),
                delta(bv, av),
                st = f.status,
            );
        }
        b.push_str("</tbody></table>\n");
    }
    b.push_str("</section>\n");
    for (id, title, rows) in [
        ("ds", "Call sites (redundant calls)", &d.callsites),
        ("dy", "Syscalls (calls)", &d.syscalls),
    ] {
        let _ = write!(
            b,
            "<section aria-labelledby=\"{id}-h\"><h2 id=\"{id}-h\">{title}</h2>"
        );
        let changed: Vec<&DiffCount> = rows.iter().filter(|r| r.before != r.after).collect();
        if changed.is_empty() {
            b.push_str("<p>No change.</p>\n</section>\n");
            continue;
        }
        let _ = write!(
            b,
            "<table class=\"diff\" id=\"diff-{id}\"><thead><tr><th scope=\"col\">{}</th>\
             <th scope=\"col\" class=\"n\">before</th><th scope=\"col\" class=\"n\">after</th>\
             <th scope=\"col\" class=\"n\">change</th><th scope=\"col\">before → after</th></tr></thead><tbody>",
            if id == "ds" { "call site" } else { "syscall" }
        );
        let max = changed
            .iter()
            .map(|r| r.before.max(r.after))
            .max()
            .unwrap_or(1)
            .max(1);
        for r in changed {
            let _ = writeln!(
                b,
                "<tr class=\"{cls}\"><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td><span class=\"bar before\" style=\"width:{:.1}%\"></span>\
                 <span class=\"bar after\" style=\"width:{:.1}%\"></span></td></tr>",
                esc(&r.name),
                fmt_count(r.before),
                fmt_count(r.after),
                delta(r.before, r.after),
                r.before as f64 * 100.0 / max as f64,
                r.after as f64 * 100.0 / max as f64,
                cls = delta_class(r.before, r.after),
            );
        }
        b.push_str("</tbody></table>\n</section>\n");
    }
    #[derive(Serialize)]
    struct DiffData {
        kind: &'static str,
    }
    page(
        out,
        &format!("dejavu diff: {} → {}", d.before.trace, d.after.trace),
        &b,
        &DiffData { kind: "diff" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    fn render(a: &Analysis) -> String {
        let mut out = Vec::new();
        let opts = RenderOptions {
            top: None,
            ..RenderOptions::default()
        };
        HtmlReporter {
            title: "t.dvt".into(),
        }
        .render(a, &mut out, &opts)
        .expect("render to memory");
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn escaping_covers_markup_and_script_breakouts() {
        assert_eq!(
            esc("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(esc("a\u{0}b"), "a\u{fffd}b");
        let j = json_for_script(r#"{"p":"</script><!--&"}"#);
        assert!(
            !j.contains('<') && !j.contains('>') && !j.contains('&'),
            "{j}"
        );
        let back: serde_json::Value = serde_json::from_str(&j).expect("still JSON");
        assert_eq!(back["p"], "</script><!--&");
    }

    #[test]
    fn paths_from_the_trace_are_escaped_everywhere() {
        let mut a = fixture::analysis();
        let evil = "/srv/<script>alert(1)</script>/\"x\".json";
        a.findings[0].paths = vec![evil.into()];
        a.findings[0].top_paths[0].path = evil.into();
        a.findings[0].callsites[0].stack[0].function = "<img src=x onerror=alert(1)>".into();
        a.stacks.stacks.push(dejavu_detect::profile::StackCost {
            program: "<b>node</b>".into(),
            frames: a.findings[0].callsites[0].stack.clone(),
            calls: 10,
            ns: 100,
        });
        let html = render(&a);
        assert!(!html.contains("<script>alert"), "raw path in the page");
        assert!(
            !html.contains("<img src=x"),
            "raw function name in the page"
        );
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        // Exactly two script elements: the data and the code.
        assert_eq!(html.matches("<script").count(), 2);
        assert_eq!(html.matches("</script>").count(), 2);
    }

    #[test]
    fn the_page_has_every_finding_its_fix_and_no_network_loads() {
        let a = fixture::analysis();
        let html = render(&a);
        for f in a.rows() {
            assert!(html.contains(&format!("data-detector=\"{}\"", f.detector)));
            assert!(html.contains(&esc(&f.fix)), "{}", f.fix);
        }
        // The first finding's site reached its calls through a library (Callsite::via).
        assert!(
            html.contains("made in</span> <code class=\"via\">readJsonSync</code>"),
            "{html}"
        );
        assert!(html.contains("Content-Security-Policy"));
        assert!(html.contains("default-src 'none'"));
        for load in [
            "src=\"http",
            "href=\"http",
            "url(http",
            "@import",
            "fetch(",
            "XMLHttpRequest",
        ] {
            assert!(!html.contains(load), "{load}");
        }
    }

    #[test]
    fn a_trace_without_findings_says_so() {
        let html = render(&fixture::empty());
        assert!(html.contains("No findings over the thresholds."));
        assert_eq!(finding_count(&html), 0);
        assert!(html.contains("id=\"headline\">"));
    }

    fn finding_count(html: &str) -> usize {
        html.matches("<li class=\"finding ").count()
    }

    #[test]
    fn runtime_findings_are_folded_below_the_programs_own() {
        let a = fixture::analysis();
        let html = render(&a);
        assert_eq!(finding_count(&html), a.rows().len());
        // The fixture has a launcher's and a runtime's finding among its rows.
        let shown = crate::terminal::shown(&a, &RenderOptions::default()).len();
        assert!(shown < a.rows().len());
        let at = html
            .find("<details class=\"folded\">")
            .expect("a folded group");
        assert_eq!(finding_count(&html[..at]), shown);
    }

    #[test]
    fn a_source_excerpt_marks_the_call_sites_line() {
        let dir = tempfile_dir();
        let src = dir.join("app.py");
        let text: String = (1..=20).map(|i| format!("line {i} <{i}>\n")).collect();
        std::fs::write(&src, text).expect("write source");
        let mut a = fixture::analysis();
        a.findings[0].callsites[0].file = src.display().to_string();
        a.findings[0].callsites[0].line = 10;
        let html = render(&a);
        assert!(
            html.contains(
                "<mark class=\"line\"><span class=\"ln\">   10</span> line 10 &lt;10&gt;</mark>"
            ),
            "{html}"
        );
        assert!(html.contains("line 7 &lt;7&gt;") && html.contains("line 13 &lt;13&gt;"));
        assert!(!html.contains("line 6 &lt;6&gt;") && !html.contains("line 14 &lt;14&gt;"));
        std::fs::remove_dir_all(&dir).ok();
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("dejavu-html-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    #[test]
    fn a_big_profile_stays_under_two_megabytes() {
        use dejavu_detect::profile::{StackCost, ThreadLine, BUCKETS, MAX_STACKS, MAX_THREADS};
        let mut a = fixture::analysis();
        // The most the analysis keeps: MAX_STACKS stacks of 40 frames over 400 functions,
        // MAX_THREADS threads with a call in every bucket.
        for s in 0..MAX_STACKS {
            let frames = (0..40)
                .map(|d| CallFrame {
                    kind: "python",
                    function: format!("function_{}", (s * 7 + d * 13) % 400),
                    file: format!("/srv/app/module_{}.py", (s + d) % 50),
                    line: (d * 10) as u32,
                    module: String::new(),
                    internal: d < 10,
                })
                .collect();
            a.stacks.stacks.push(StackCost {
                program: format!("program{}", s % 3),
                frames,
                calls: 1000 - (s as u64 % 1000),
                ns: 5000,
            });
        }
        for t in 0..MAX_THREADS as u32 {
            a.timeline.threads.push(ThreadLine {
                pid: 1000,
                tid: 1000 + t,
                program: "python3".into(),
                calls: 1_000_000,
                redundant_calls: 500_000,
                buckets: (0..BUCKETS).map(|b| (b, 500 + b, 250 + b)).collect(),
            });
        }
        let html = render(&a);
        assert!(html.len() < 2 << 20, "{} bytes", html.len());
    }

    #[test]
    fn the_diff_page_shows_before_and_after_per_finding_site_and_syscall() {
        let d = Diff {
            before: DiffSide {
                trace: "before.dvt".into(),
                syscalls: 1000,
                redundant_calls: 110,
            },
            after: DiffSide {
                trace: "after<1>.dvt".into(),
                syscalls: 900,
                redundant_calls: 10,
            },
            findings: vec![DiffFinding {
                status: "better",
                detector: "repeated-lookup".into(),
                program: "app".into(),
                owner: "own".into(),
                callsite: "load app.py:3".into(),
                paths: "/etc/app.conf".into(),
                before: Some(110),
                after: Some(10),
            }],
            syscalls: vec![DiffCount {
                name: "newfstatat".into(),
                before: 200,
                after: 100,
            }],
            callsites: vec![DiffCount {
                name: "app.py (load)".into(),
                before: 110,
                after: 10,
            }],
        };
        let mut out = Vec::new();
        render_diff(&d, &mut out).expect("render");
        let html = String::from_utf8(out).expect("UTF-8");
        assert!(html.contains("after&lt;1&gt;.dvt"));
        assert!(html
            .contains("<td class=\"n\">110</td><td class=\"n\">10</td><td class=\"n\">−100</td>"));
        assert!(html.contains("newfstatat") && html.contains("app.py (load)"));
        assert!(html.contains("status better"));
    }
}
