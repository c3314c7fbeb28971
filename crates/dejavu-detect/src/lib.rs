//! dejavu's detectors. Each detector is one file in `detectors/` with its documentation
//! (`INFO`, which feeds `--list-detectors`, `dejavu explain`, and later SARIF rules), its
//! logic, and its unit tests. [`analyze`] replays a trace once and feeds every detector.

mod callsite;
mod config;
pub mod detectors;
mod engine;
mod finding;
pub mod group;
pub mod owner;
pub mod pattern;
pub mod portable;
pub mod profile;
pub mod program;
mod sequence;
#[doc(hidden)]
pub mod testkit;
pub mod whatif;

pub use config::Config;
pub use engine::{analyze, analyze_collecting, analyze_covered, Analysis, Covered, Cx};
pub use finding::{
    Agentless, Aspect, CacheVerdict, CallFrame, Callsite, Finding, PathCount, ProgramCount,
    Sequence, Severity,
};
pub use owner::Owner;

use dejavu_replay::View;
use dejavu_trace::{Record, Sys, Syscall};

/// A detector's documentation, shared by every place a user reads about it.
#[derive(Debug)]
pub struct DetectorInfo {
    /// Stable id, e.g. `repeated-lookup`.
    pub id: &'static str,
    /// One line: what it finds.
    pub summary: &'static str,
    /// What it means precisely, when a call counts as redundant and when not.
    pub explain: &'static str,
    /// A small example of the pattern.
    pub example: &'static str,
    /// How to fix it.
    pub fix: &'static str,
    /// What a fix must be careful about.
    pub hazards: &'static str,
    /// Settable options: (name, default, meaning).
    pub options: &'static [(&'static str, u64, &'static str)],
    /// Builds the detector.
    pub make: fn(&Config) -> Box<dyn Detector>,
}

/// A detector: sees the calls it asks for, each with the replay's view from before the
/// call, and the process records; reports findings at the end.
pub trait Detector {
    /// Whether this detector wants to see calls of `sys` (asked once per call kind).
    fn wants(&self, sys: Sys) -> bool;
    /// One call.
    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>);
    /// A spawn, exec, exit, signal or lost record.
    fn on_record(&mut self, _rec: &Record, _cx: &Cx<'_>) {}
    /// The findings, once the trace is over.
    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding>;
}

/// Every detector, in the order of DESIGN.md's table.
static REGISTRY: [&DetectorInfo; 13] = {
    use detectors::*;
    [
        &repeated_lookup::INFO,
        &negative_probe::INFO,
        &ensure_dir::INFO,
        &check_then_act::INFO,
        &open_close_churn::INFO,
        &small_writes::INFO,
        &reread_unchanged::INFO,
        &self_inflicted_lookup::INFO,
        &repeated_output::INFO,
        &no_reader::INFO,
        &fsync_per_op::INFO,
        &repeated_exec::INFO,
        &sync_io_main_thread::INFO,
    ]
};

/// Every detector, in the order of DESIGN.md's table.
pub fn registry() -> &'static [&'static DetectorInfo] {
    &REGISTRY
}

/// The detector with this id.
pub fn find_detector(id: &str) -> Option<&'static DetectorInfo> {
    registry().iter().copied().find(|d| d.id == id)
}

/// Checks `--detector` ids and `-O detector.option=value` settings against the registry;
/// the error says what is valid.
pub fn validate_options(cfg: &Config) -> Result<(), String> {
    let ids: Vec<&str> = registry().iter().map(|d| d.id).collect();
    if let Some(only) = &cfg.only {
        for id in only {
            if find_detector(id).is_none() {
                return Err(format!(
                    "unknown detector `{id}`; the detectors are: {}",
                    ids.join(", ")
                ));
            }
        }
    }
    for (k, v) in &cfg.options {
        let Some((det, name)) = k.split_once('.') else {
            return Err(format!(
                "option `{k}` must be DETECTOR.OPTION=VALUE, e.g. small-writes.max_bytes=512"
            ));
        };
        let Some(info) = find_detector(det) else {
            return Err(format!(
                "option `{k}`: unknown detector `{det}`; the detectors are: {}",
                ids.join(", ")
            ));
        };
        if !info.options.iter().any(|(n, _, _)| *n == name) {
            let valid: Vec<String> = info
                .options
                .iter()
                .map(|(n, d, _)| format!("{n} (default {d})"))
                .collect();
            return Err(if valid.is_empty() {
                format!("option `{k}`: {det} has no options")
            } else {
                format!("option `{k}`: {det}'s options are {}", valid.join(", "))
            });
        }
        if v.parse::<u64>().is_err() {
            return Err(format!(
                "option `{k}={v}`: the value must be a whole number"
            ));
        }
    }
    Ok(())
}
