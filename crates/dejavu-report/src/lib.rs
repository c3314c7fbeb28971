//! dejavu's reports: an [`Analysis`] rendered for people ([`TerminalReporter`], and
//! [`HtmlReporter`]: one self-contained page with a flame graph and a timeline) and for
//! programs ([`JsonReporter`], documented field by field in docs/report-format.md;
//! [`SarifReporter`] for code scanning, [`PprofReporter`] for profilers), one
//! file per format behind the [`Reporter`] trait; plus the progress bar the CLI shows
//! while a long analysis runs.

pub mod html;
mod json;
mod pprof;
mod progress;
pub mod sarif;
mod terminal;
pub mod text;

pub use html::HtmlReporter;
pub use json::{JsonReporter, FORMAT_VERSION};
pub use pprof::PprofReporter;
pub use progress::Progress;
pub use sarif::SarifReporter;
pub use terminal::{owner_title, TerminalReporter};

use dejavu_detect::{Analysis, Config};
use std::ffi::OsStr;
use std::io::{self, Write};

/// How to render: the settings the analysis ran with (reports state them, so a reader
/// knows what was hidden) and presentation choices.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// The settings the analysis ran with.
    pub config: Config,
    /// Show at most this many findings; None shows all.
    pub top: Option<usize>,
    /// Everything about each finding: all paths, the time window, every call site.
    pub details: bool,
    /// Under each call site, its full stack (`--stacks`).
    pub stacks: bool,
    /// Rank call sites across findings instead of findings (`--group-by callsite`).
    pub by_callsite: bool,
    /// List runtime and launcher findings too, instead of one line each (`--all`).
    pub all_owners: bool,
    /// ANSI colours (decide with [`color_enabled`]).
    pub color: bool,
    /// Columns the terminal report may use.
    pub width: usize,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            config: Config::default(),
            top: Some(20),
            details: false,
            stacks: false,
            by_callsite: false,
            all_owners: false,
            color: false,
            width: 100,
        }
    }
}

/// One output format.
pub trait Reporter {
    /// Writes the report of `analysis` to `out`.
    fn render(
        &self,
        analysis: &Analysis,
        out: &mut dyn Write,
        opts: &RenderOptions,
    ) -> io::Result<()>;
}

/// The redundant calls of the whole analysis, each counted once however many findings
/// name it (the engine marks calls, not findings: the writes of one log line repeated
/// per request are both small-writes and repeated-output). They include findings below
/// the thresholds, which the report counts as hidden.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Totals {
    /// Redundant calls.
    pub redundant_calls: u64,
    /// Time in them, ns.
    pub wasted_ns: u64,
}

impl Totals {
    /// The totals of `a`.
    pub fn of(a: &Analysis) -> Totals {
        Totals {
            redundant_calls: a.redundant_calls.min(a.syscalls),
            wasted_ns: a.redundant_ns.min(a.syscall_ns),
        }
    }
}

/// The detectors whose findings name call site `c` (for the `--group-by callsite` view).
pub fn callsite_detectors(a: &Analysis, c: &dejavu_detect::Callsite) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = a
        .findings
        .iter()
        .filter(|f| {
            f.callsites.iter().any(|s| {
                s.function == c.function
                    && s.file == c.file
                    && s.line == c.line
                    && s.module == c.module
            })
        })
        .map(|f| f.detector)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// What a user must know about the trace before trusting the counts: lost events and a
/// cut-off trace. One line each, for stderr.
pub fn warnings(a: &Analysis) -> Vec<String> {
    let mut w = Vec::new();
    if a.lost_events > 0 {
        w.push(format!(
            "{} events were lost while recording: counts are lower bounds",
            text::fmt_count(a.lost_events)
        ));
    }
    if let Some(t) = &a.truncated {
        w.push(t.warning());
    }
    if !a.agentless.is_empty() {
        let n: u64 = a.agentless.iter().map(|x| x.processes).sum();
        let names: Vec<String> = a
            .agentless
            .iter()
            .take(3)
            .map(|x| format!("{} ({})", x.program, text::fmt_count(x.processes)))
            .collect();
        let more = if a.agentless.len() > 3 { ", ..." } else { "" };
        w.push(format!(
            "dejavu's language agent did not load in {} {} ({}{more}): their environment or \
             flags dropped it (PYTHONPATH or NODE_OPTIONS replaced, python -I, -E or -S), so \
             their calls name no line of Python or JavaScript and are judged by their paths",
            text::fmt_count(n),
            if n == 1 { "process" } else { "processes" },
            names.join(", ")
        ));
    }
    w
}

/// When to colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorWhen {
    /// When the output is a terminal and NO_COLOR is unset or empty.
    Auto,
    /// Always (overrides NO_COLOR, as an explicit flag should).
    Always,
    /// Never.
    Never,
}

/// Whether to colour output going to a terminal (`is_terminal`) given the `NO_COLOR`
/// variable's value (https://no-color.org: set and not empty means no colour).
pub fn color_enabled(when: ColorWhen, is_terminal: bool, no_color: Option<&OsStr>) -> bool {
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            let no_color_set = matches!(no_color, Some(v) if !v.is_empty());
            is_terminal && !no_color_set
        }
    }
}

#[cfg(test)]
pub(crate) mod fixture;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_and_non_terminals_turn_colour_off_unless_forced() {
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert!(color_enabled(ColorWhen::Auto, true, None));
        assert!(color_enabled(ColorWhen::Auto, true, empty));
        assert!(!color_enabled(ColorWhen::Auto, true, set));
        assert!(!color_enabled(ColorWhen::Auto, false, None));
        assert!(color_enabled(ColorWhen::Always, false, set));
        assert!(!color_enabled(ColorWhen::Never, true, None));
    }

    #[test]
    fn warnings_name_lost_events_and_truncation() {
        let mut a = fixture::analysis();
        let agentless = std::mem::take(&mut a.agentless);
        assert!(warnings(&a).is_empty());
        // Processes that ran without the agent: one line, naming them.
        a.agentless = agentless;
        let w = warnings(&a);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "dejavu's language agent did not load in 3 processes (_in_process.py (3))"
            ),
            "{w:?}"
        );
        a.agentless.clear();
        a.lost_events = 1200;
        a.truncated = Some(dejavu_trace::Truncation {
            valid_bytes: 4096,
            lost_bytes: 17,
        });
        let w = warnings(&a);
        assert_eq!(w.len(), 2);
        assert!(w[0].contains("1,200 events were lost"), "{w:?}");
        assert!(w[1].contains("4096"), "{w:?}");
    }
}
