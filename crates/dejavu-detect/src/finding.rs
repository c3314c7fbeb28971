//! A finding: one kind of redundant work, in one process, on one path or path pattern,
//! with what it cost and how to fix it. Its JSON form is documented field by field in
//! docs/report-format.md.

use serde::Serialize;

/// How much a finding matters, from its share of the traced time and its count.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Little time or few calls.
    Low,
    /// Worth fixing.
    Medium,
    /// A large share of the program's traced time.
    High,
}

impl Severity {
    /// From the share of traced time (0..1) and the redundant call count.
    pub fn grade(share: f64, redundant: u64) -> Severity {
        if share >= 0.10 || redundant >= 10_000 {
            Severity::High
        } else if share >= 0.01 || redundant >= 1_000 {
            Severity::Medium
        } else {
            Severity::Low
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// A source location that made redundant calls (when the trace has stacks): the innermost
/// frame of the program's own code (libc, the runtime's internals and dejavu's agents
/// skipped), and one full stack that reached it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Callsite {
    /// Function name ("" when unknown).
    pub function: String,
    /// Source file ("" when unknown: then `module` says where the code is).
    pub file: String,
    /// Line number (0 when unknown).
    pub line: u32,
    /// Column (0 when unknown).
    #[serde(skip_serializing_if = "is_zero")]
    pub column: u32,
    /// Native code: the executable or library.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub module: String,
    /// Redundant calls made from here.
    pub redundant_calls: u64,
    /// Their time, ns.
    pub wasted_ns: u64,
    /// The stack that made most of them, innermost frame first.
    pub stack: Vec<CallFrame>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// One frame of a call site's stack.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct CallFrame {
    /// `native`, `js` or `python`.
    pub kind: &'static str,
    /// Function name ("" when unknown).
    pub function: String,
    /// Source file ("" when unknown).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub file: String,
    /// Line (0 when unknown).
    #[serde(skip_serializing_if = "is_zero")]
    pub line: u32,
    /// Native frames: the executable or library.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub module: String,
    /// The frame is runtime or library plumbing, not the program's code.
    pub internal: bool,
}

/// What a cache with exact invalidation would have done, replayed over the trace.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, Default)]
pub struct CacheVerdict {
    /// Calls it would have answered from memory.
    pub saved_calls: u64,
    /// Times it would have served an answer that had changed without any mutation dejavu
    /// saw (another program changed the file): stale answers.
    pub stale_answers: u64,
    /// No stale answer: a cache with the invalidation points listed in the hazards is safe
    /// for this trace.
    pub safe: bool,
}

/// One finding.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Finding {
    /// Detector id (stable; see `dejavu report --list-detectors`).
    pub detector: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// The process.
    pub pid: u32,
    /// Its command line.
    pub command: String,
    /// The paths involved: the paths themselves when there are at most three, else one
    /// pattern covering them all, such as `/app/node_modules/*/package.json`.
    pub paths: Vec<String>,
    /// Number of distinct paths.
    pub path_count: u64,
    /// When `paths` is a pattern: the paths with the most redundant calls (at most five).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub example_paths: Vec<String>,
    /// Calls of the pattern (redundant or not).
    pub calls: u64,
    /// Calls a fix would remove.
    pub redundant_calls: u64,
    /// Time spent in the redundant calls, ns.
    pub wasted_ns: u64,
    /// `wasted_ns` as a share of all traced syscall time (0..1).
    pub share: f64,
    /// First redundant call, ns since the trace started.
    pub first_ts: u64,
    /// Last redundant call.
    pub last_ts: u64,
    /// The fix, in one line.
    pub fix: String,
    /// What a fix must respect: invalidation points, external changes, threads.
    pub hazards: Vec<String>,
    /// The cache counterfactual, for detectors that propose a cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheVerdict>,
    /// An example, as the user would recognise it (a repeated output line, a command).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
    /// Where the calls come from, most redundant calls first (empty without stacks).
    pub callsites: Vec<Callsite>,
}
