//! What `dejavu diff` and `dejavu check` compare: counts from one trace, never times.
//! Per program (the basename of what a process exec'd, inherited across fork:
//! `dejavu_detect::program::ExecNames`), the calls of each syscall and of each path, and
//! the analysis's findings and call sites, all from one pass over the trace.

use dejavu_detect::profile::Collect;
use dejavu_detect::{analyze_collecting, Analysis, Config};
use dejavu_trace::TraceReader;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::path::Path;

/// The counts of one trace.
#[derive(Debug)]
pub struct Counts {
    /// (program, syscall) -> calls.
    pub syscalls: BTreeMap<(String, String), u64>,
    /// (program, path) -> calls naming it (its path argument or its descriptor's).
    pub paths: FxHashMap<(String, String), u64>,
    /// The analysis with every finding (no threshold hides any).
    pub analysis: Analysis,
}

pub use dejavu_detect::program::program_of;

/// A finding key with the line of an anonymous function's site dropped
/// (`...|<module>@app.py:12` -> `...|<module>@app.py`): a rebuilt bundle moves lines, so
/// `diff` and `check` match what is left over on it.
pub fn loose_key(key: &str) -> String {
    let mut parts: Vec<&str> = key.splitn(5, '|').collect();
    if parts.len() >= 4 && !parts[3].starts_with("path:") {
        if let Some((site, line)) = parts[3].rsplit_once(':') {
            if !line.is_empty() && line.chars().all(|c| c.is_ascii_digit()) {
                parts[3] = site;
            }
        }
    }
    parts.join("|")
}

impl Counts {
    /// Reads and analyses the trace at `path`, once: the analysis gathers the counts in
    /// the same pass.
    pub fn load(path: &Path) -> anyhow::Result<Counts> {
        use anyhow::Context;
        let mut r =
            TraceReader::open(path).with_context(|| format!("reading {}", path.display()))?;
        let cfg = Config {
            min_calls: 1,
            ..Config::default()
        };
        let collect = Collect {
            counts: true,
            ..Collect::default()
        };
        let mut analysis = analyze_collecting(&mut r, &cfg, collect, |_| {})
            .map_err(|e| anyhow::anyhow!("analysing {}: {e}", path.display()))?;
        let counts = analysis.counts.take().unwrap_or_default();
        Ok(Counts {
            syscalls: counts.syscalls,
            paths: counts.paths,
            analysis,
        })
    }

    /// Calls of `syscall` by programs `prog` accepts.
    pub fn syscall(&self, syscall: &str, prog: &dyn Fn(&str) -> bool) -> u64 {
        self.syscalls
            .iter()
            .filter(|((p, s), _)| s == syscall && prog(p))
            .map(|(_, n)| n)
            .sum()
    }

    /// Every syscall name recorded, with its calls, over programs `prog` accepts.
    pub fn syscall_totals(&self, prog: &dyn Fn(&str) -> bool) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for ((p, s), n) in &self.syscalls {
            if prog(p) {
                *m.entry(s.clone()).or_insert(0) += n;
            }
        }
        m
    }
}
