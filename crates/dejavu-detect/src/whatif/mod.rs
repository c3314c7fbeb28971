//! `dejavu whatif`: replay a trace under a fix before writing it. [`policy`] reads the
//! policies (a lookup or content cache, a negative cache, a kept-open handle, an
//! ensure-once flag, log-once), [`evaluate`] plays them all in one pass over the trace, and
//! [`own_fix`] names the policy a finding proposes. The JSON form of an [`Outcome`] is
//! documented field by field in docs/whatif.md.

mod eval;
pub mod policy;

pub use eval::{evaluate, Evaluation};
pub use policy::{Flags, Kind, Policy, PolicyError, Scope};

use crate::Finding;
use policy::{Calls, Flush, Invalidate};
use serde::Serialize;

/// Whether a policy is safe, on this recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No stale answer, nothing to invalidate.
    Safe,
    /// No stale answer, given the listed invalidation points.
    SafeWithInvalidation,
    /// It would have served a stale answer, or a kept handle or flag was wrong at some
    /// moment: the counter-example is in `verdict_text`.
    Unsafe,
}

/// Calls before and after the policy, for one syscall, program or call site.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Row {
    /// The syscall, program or call site.
    pub name: String,
    /// Calls in the trace (per call site: the calls the policy governs).
    pub before: u64,
    /// Calls left under the policy.
    pub after: u64,
}

/// What made a served answer stale.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Cause {
    /// `own_change` (the process's change the policy did not invalidate on),
    /// `other_process` (a change by another traced process) or `untraced` (no change
    /// observed: a program outside the recording).
    pub kind: &'static str,
    /// Who changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its command line (other processes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The call that changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<&'static str>,
    /// Its call site (own changes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// When, ns since the trace started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<u64>,
    /// The cause in one sentence.
    pub text: String,
}

/// One stale answer the policy would have served.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Stale {
    /// When, ns since the trace started.
    pub ts: u64,
    /// The asking process.
    pub pid: u32,
    /// The path.
    pub path: String,
    /// The call the policy answered.
    pub call: &'static str,
    /// Its call site.
    pub site: String,
    /// What the policy would have answered.
    pub served: String,
    /// What the call really returned.
    pub actual: String,
    /// Why they differ.
    pub cause: Cause,
}

/// A moment the policy's assumption was wrong (a flagged directory gone, a kept file
/// renamed by someone else) or a hazard was seen.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Moment {
    /// When, ns since the trace started (0: over the whole recording).
    pub ts: u64,
    /// The process that made the change.
    pub pid: u32,
    /// The path.
    pub path: String,
    /// The call.
    pub call: &'static str,
    /// What happened, in one sentence.
    pub text: String,
}

/// An invalidation point the policy needs to stay correct.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Point {
    /// The call and its call site (`write at main rewrite.c:21`).
    pub at: String,
    /// Times it dropped an entry whose answer then changed.
    pub times: u64,
}

/// A writer of a kept-open file.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Writer {
    /// The file.
    pub path: String,
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// Its command line.
    pub command: String,
    /// Writes it made.
    pub writes: u64,
    /// Bytes.
    pub bytes: u64,
    /// It is a process that kept the file open (false: another process).
    pub holder: bool,
}

/// What kept-open handles put at risk.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct RiskKeepOpen {
    /// With `--flush on-exit`: the most bytes buffered and not yet written at any moment
    /// (what a crash then would have lost).
    pub bytes_at_risk: u64,
    /// The writes (records) those bytes came in.
    pub records_at_risk: u64,
    /// That moment, ns since the trace started.
    pub worst_ts: Option<u64>,
    /// The file.
    pub worst_path: Option<String>,
    /// When two or more processes or threads wrote a kept file: each of them.
    pub writers: Vec<Writer>,
    /// Processes holding a kept file that a signal killed (their buffer would be lost).
    pub killed: Vec<u32>,
    /// With `--flush on-exit`: the holders' writes to their kept files, as recorded
    /// (they are not among the governed calls).
    pub writes_before: u64,
    /// The writes a 64 KiB buffer would have made of them, merging each write that starts
    /// where the last ended (not counted in `removed_calls`).
    pub writes_after: u64,
}

/// What a fix that drops or delays writes or syncs puts at risk (`--skip-unread`,
/// `--batch-syncs`, `--batch-writes`), as `keep_open` says it for a kept handle.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct AtRisk {
    /// Bytes: not written at all (`--skip-unread`), or written and not yet synced at the
    /// worst moment where the recording had synced them (`--batch-syncs`).
    pub bytes: u64,
    /// The writes (records) those bytes came in.
    pub records: u64,
    /// The worst moment, ns since the trace started (none: over the whole recording).
    pub worst_ts: Option<u64>,
    /// The file (or output) of the worst moment.
    pub worst_path: Option<String>,
    /// What the bytes are, in one sentence.
    pub text: String,
}

/// A repeated-output finding's fix replayed by line (`lines`): masked lines as the detector
/// counts them.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Lines {
    /// Occurrences of the finding's lines.
    pub before: u64,
    /// Left: the first of each per process and output.
    pub after: u64,
    /// Removed (`before - after`): what the finding's count compares with.
    pub removed: u64,
}

/// The finding a policy is the own fix of.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FindingRef {
    /// Its number among the report's rows (1-based).
    pub number: usize,
    /// Its detector.
    pub detector: &'static str,
    /// Its key.
    pub key: String,
    /// What the finding says a fix saves (its redundant calls).
    pub redundant_calls: u64,
    /// Whose code makes its calls (the program's, a dependency's, the runtime's, a
    /// launcher's).
    pub owner: crate::Owner,
}

/// One policy's outcome.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Outcome {
    /// The policy, spelt as flags.
    pub policy: String,
    /// `cache`, `negative-cache`, `keep-open`, `ensure-dir-once`, `log-once`.
    pub kind: &'static str,
    /// The finding it is the fix of (no-policy mode and `--finding`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<FindingRef>,
    /// Calls the policy governs (lookups of the paths it covers, opens and closes of the
    /// files it keeps open ...).
    pub calls_before: u64,
    /// Of them, calls left.
    pub calls_after: u64,
    /// Calls it removes (`calls_before - calls_after`).
    pub removed_calls: u64,
    /// The recorded durations of the removed calls, ns: the time they took in this
    /// recording, under the tracer.
    pub removed_ns: u64,
    /// Per syscall: calls in the trace, and left.
    pub by_syscall: Vec<Row>,
    /// Per program: calls in the trace, and left.
    pub by_program: Vec<Row>,
    /// Per call site: governed calls, and left (at most 10, most removed first).
    pub by_callsite: Vec<Row>,
    /// Answers it would have served that were not what the call returned.
    pub stale_answers: u64,
    /// The first few.
    pub stale_examples: Vec<Stale>,
    /// Where it must drop entries (or clear a flag, reopen, lock) to stay correct.
    pub invalidation_points: Vec<Point>,
    /// Moments its assumption was wrong (directory gone, file renamed or written by
    /// another process); the first few.
    pub moments: Vec<Moment>,
    /// All such moments.
    pub moments_total: u64,
    /// `--keep-open` only: what a crash would lose, who else wrote the files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_open: Option<RiskKeepOpen>,
    /// A repeated-output finding's own fix: its lines before and after (the calls are the
    /// writes, a write removed when every line it carried is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<Lines>,
    /// A repeated-exec finding's "run it once": its runs before and after (the calls are
    /// every call those runs made).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execs: Option<Execs>,
    /// `--skip-unread`, `--batch-syncs`: the bytes the fix drops or leaves unsynced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_risk: Option<AtRisk>,
    /// What the fix must still take care of, in sentences (a deliberate /dev/null, a
    /// promise of durability per record); empty for the caches, whose hazards are their
    /// stale answers.
    pub hazards: Vec<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// The verdict in one sentence, with the counter-example when unsafe.
    pub verdict_text: String,
}

/// The detectors whose fix a policy models, so that the replay saves what the finding
/// says. repeated-output's is [`own_log_fix`] and repeated-exec's [`own_exec_fix`] (they need the
/// finding's lines, commands or probes).
pub const MODELLED: [&str; 10] = [
    "repeated-lookup",
    "negative-probe",
    "ensure-dir",
    "open-close-churn",
    "reread-unchanged",
    "no-reader",
    "fsync-per-op",
    "small-writes",
    "check-then-act",
    "self-inflicted-lookup",
];

/// A repeated-output finding's own fix: its lines (see [`crate::Covered::lines`]) written
/// once per process and output, counted by masked line as the detector counts them.
pub fn own_log_fix(f: &Finding, lines: &[(u32, String, u8, u64)]) -> Policy {
    let mut scope = Scope::default();
    scope.programs = f.program_names();
    Policy {
        kind: Kind::LogLines {
            lines: lines.iter().cloned().collect(),
        },
        scope,
    }
}

/// A repeated-exec finding's own fix: its commands (see [`crate::Covered::execs`]) run
/// once per starting process, or its PATH probes ([`crate::Covered::probes`]) made once.
pub fn own_exec_fix(f: &Finding, cmds: &[(u32, u64)], probes: &[(u32, String)]) -> Policy {
    let mut scope = Scope::default();
    scope.programs = f.program_names();
    Policy {
        kind: Kind::ExecOnce {
            cmds: cmds.iter().copied().collect(),
            probes: probes.iter().cloned().collect(),
        },
        scope,
    }
}

/// Runs of a repeated-exec finding's commands (`execs`).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Execs {
    /// Runs of the finding's commands.
    pub before: u64,
    /// Left: the first of each command per starting process.
    pub after: u64,
    /// Removed (`before - after`): what the finding's count compares with.
    pub removed: u64,
}

/// Why a finding of `detector` is not replayed under its own fix.
pub fn not_modelled(detector: &str) -> String {
    match detector {
        "repeated-output" => {
            "the finding does not list its lines (the trace was analysed without them)".to_string()
        }
        "sync-io-main-thread" => {
            "its fix moves the calls off the main thread (async APIs, a worker) rather than \
removing them: no call goes, so there is nothing to count as removed"
                .to_string()
        }
        "repeated-exec" => {
            "the finding does not list its commands or probes (the trace was analysed without \
them)"
                .to_string()
        }
        d => format!(
            "no policy models {d}'s fix yet (modelled: {})",
            MODELLED.join(", ")
        ),
    }
}

/// A path or pattern from a finding as a glob: the finding's `*` stays a wildcard of one
/// segment, anything else glob syntax would read (`?`, `[`, `{`) is escaped.
fn glob_of(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for ch in path.chars() {
        match ch {
            '?' | '[' | ']' | '{' | '}' | '\\' => {
                out.push('[');
                out.push(ch);
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

/// The globs that cover a path as a finding shows it: the path, its `*` pattern, or for a
/// walk of a tree (`X and 12 more under /usr/lib`) the tree.
fn globs_of(shown: &str) -> Vec<String> {
    if let Some((_, rest)) = shown.split_once(" and ") {
        if let Some((n, top)) = rest.split_once(" more under ") {
            if n.bytes().all(|b| b.is_ascii_digit()) {
                return vec![glob_of(top), format!("{}/**", glob_of(top))];
            }
        }
    }
    vec![glob_of(shown)]
}

/// The policy a finding proposes (its own fix), for the detectors in [`MODELLED`]: the
/// fix applied to the finding's program and paths; to exactly the (process image, path)
/// pairs behind it when `covered` says which (see [`crate::analyze_covered`]), else to the
/// paths and patterns it shows.
pub fn own_fix(f: &Finding, covered: Option<&[(u32, String)]>) -> Option<Policy> {
    let kind = match f.detector {
        "repeated-lookup" => Kind::Cache {
            calls: Calls::LOOKUPS,
            invalidate: Invalidate::OnWrite,
            ttl: None,
        },
        "negative-probe" => Kind::NegativeCache {
            invalidate: Invalidate::OnDirChange,
            ttl: None,
        },
        "ensure-dir" => Kind::EnsureDirOnce,
        "open-close-churn" => Kind::KeepOpen {
            flush: Flush::OnExit,
        },
        "reread-unchanged" => Kind::Cache {
            calls: Calls {
                read: true,
                ..Calls::default()
            },
            invalidate: Invalidate::OnWrite,
            ttl: None,
        },
        "no-reader" => Kind::SkipUnread,
        "fsync-per-op" => Kind::BatchSyncs {
            bytes: policy::BATCH_SYNC_BYTES,
        },
        "check-then-act" => Kind::SkipChecks,
        "self-inflicted-lookup" => Kind::TrackSize,
        "small-writes" => Kind::BatchWrites {
            max_bytes: policy::BATCH_WRITE_BYTES,
            gap_ns: policy::BATCH_WRITE_GAP_NS,
        },
        _ => return None,
    };
    let globs: Vec<String> = f.paths.iter().flat_map(|p| globs_of(p)).collect();
    let mut scope = Scope::paths(kind.flag(), &globs).ok()?;
    scope.programs = f.program_names();
    scope.exact = covered.map(|c| c.iter().cloned().collect());
    Some(Policy { kind, scope })
}

#[cfg(test)]
mod tests;
