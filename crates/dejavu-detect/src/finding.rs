//! A finding: the redundant calls one fix would remove, in one program's code at one call
//! site (or, without stacks, on one path pattern), with what they cost, whose code made
//! them and how to fix it. Its JSON form is documented field by field in
//! docs/report-format.md.

use crate::Owner;
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
        // Many calls grade a finding up only where they are some of the time too (sqlite's
        // 10,000 journal writes at 0.3% of it had been "high"); a trace without times
        // (share 0) is graded by its counts.
        let untimed = share <= 0.0;
        if share >= 0.10 || (redundant >= 10_000 && (untimed || share >= 0.01)) {
            Severity::High
        } else if share >= 0.01 || (redundant >= 1_000 && (untimed || share >= 0.001)) {
            Severity::Medium
        } else {
            Severity::Low
        }
    }

    /// The most a finding that wasted `wasted_ns` of a run of `run_ns` can be: high at 1%
    /// of the run or more, medium at 0.1%, else low (any grade when the run's length is
    /// unknown, or the finding's time: a trace without times).
    pub fn by_run(wasted_ns: u64, run_ns: u64) -> Severity {
        if run_ns == 0 || wasted_ns == 0 {
            return Severity::High;
        }
        let share = wasted_ns as f64 / run_ns as f64;
        if share >= 0.01 {
            Severity::High
        } else if share >= 0.001 {
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
/// skipped); with none, the innermost of a dependency or the standard library. With one
/// full stack that reached it.
#[derive(Clone, Debug, Serialize, PartialEq)]
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
    /// Native code without a symbol: the instruction's offset in `module` (0 otherwise).
    #[serde(skip_serializing_if = "is_zero64")]
    pub addr: u64,
    /// Whose code it is.
    pub owner: Owner,
    /// Redundant calls made from here.
    pub redundant_calls: u64,
    /// Their time, ns.
    pub wasted_ns: u64,
    /// Under a finding: the share (0..1) of the finding's redundant calls made from here.
    pub share: f64,
    /// The stack that made most of them, innermost frame first.
    pub stack: Vec<CallFrame>,
    /// The program's line led to the calls through a library: on `stack`, the innermost
    /// frame of a dependency or of the standard library between the call and the site,
    /// which made the calls (unittest's test discovery under `manage.py test`'s
    /// `execute_from_command_line` line). None when the site made them itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<CallFrame>,
}

/// A call site's column past which its label names the column too (`file:line:column`):
/// no line written by hand is that long.
pub const MINIFIED_COLUMN: u32 = 200;

impl Callsite {
    /// `function file:line`, `function (module)` or `module+0xoffset`: how a report names
    /// the site.
    pub fn label(&self) -> String {
        match self.label_parts() {
            (f, loc) if f.is_empty() => loc,
            (f, loc) if loc.is_empty() => f,
            (f, loc) => format!("{f} {loc}"),
        }
    }

    /// `label`'s two parts: the function (empty when unknown) and where it is (`file:line`,
    /// `(module)` or `module+0xoffset`; empty when unknown), for a report that has to
    /// shorten one of them.
    pub fn label_parts(&self) -> (String, String) {
        let loc = if !self.file.is_empty() {
            let mut l = self.file.clone();
            if self.line != 0 {
                l += &format!(":{}", self.line);
                // A line that long is generated: a minified bundle's (npm's tar,
                // `index.min.js:3`, is 102 KB on four lines), where the line names nothing.
                if self.column > MINIFIED_COLUMN {
                    l += &format!(":{}", self.column);
                }
            }
            l
        } else if !self.module.is_empty() {
            let m = self.module.rsplit('/').next().unwrap_or(&self.module);
            if self.function.is_empty() {
                format!("{m}+{:#x}", self.addr)
            } else {
                format!("({m})")
            }
        } else {
            String::new()
        };
        let f = if self.module.is_empty() {
            &self.function
        } else {
            without_parameters(&self.function)
        };
        (f.to_string(), loc)
    }
}

/// A demangled C++ function name without its parameter list (and the qualifiers after
/// it): `node::fs::InternalModuleStat(v8::FunctionCallbackInfo<v8::Value> const&)` is
/// `node::fs::InternalModuleStat`, which a report line has room for. Anything else as it
/// is (a C name, `operator()` alone, unbalanced parentheses).
pub fn without_parameters(name: &str) -> &str {
    let mut t = name.trim_end();
    while let Some(rest) = [" const", " volatile", " &&", " &", " noexcept"]
        .iter()
        .find_map(|q| t.strip_suffix(q))
    {
        t = rest.trim_end();
    }
    if !t.ends_with(')') {
        return name;
    }
    let mut depth = 0usize;
    for (i, c) in t.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth = match depth.checked_sub(1) {
                    Some(d) => d,
                    None => return name,
                };
                if depth == 0 {
                    let head = t[..i].trim_end();
                    return if head.is_empty() || head.ends_with("operator") {
                        name
                    } else {
                        head
                    };
                }
            }
            _ => {}
        }
    }
    name
}

fn is_zero64(v: &u64) -> bool {
    *v == 0
}

/// A path a finding covers, with its redundant calls.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct PathCount {
    /// The path.
    pub path: String,
    /// Redundant calls naming it.
    pub redundant_calls: u64,
}

/// A program a finding's calls came from, with its redundant calls.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ProgramCount {
    /// The program, named as [`Finding::program`] is.
    pub program: String,
    /// Its redundant calls.
    pub redundant_calls: u64,
}

/// The fixed sequence of calls a function makes each time it runs, when its calls repeat
/// one (a loop body): what each seed author reconstructed by hand.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Sequence {
    /// The function.
    pub function: String,
    /// Its file.
    pub file: String,
    /// What one run is: `"call"`, a call of the function; `"line"`, one execution of
    /// `line` in a function without a name of its own (a module's top level, an anonymous
    /// function), whose call sites are told apart by line; `"iteration"`, one iteration of
    /// a loop in a function that runs once per process (`main`).
    pub per: &'static str,
    /// The line, when `per` is `"line"` (0 otherwise).
    pub line: u32,
    /// Times it ran the sequence.
    pub iterations: u64,
    /// Calls per run.
    pub calls: u32,
    /// Redundant calls per run, on average.
    pub redundant: f64,
    /// The calls, in order: `stat /srv/guest/* -> ENOENT`.
    pub steps: Vec<String>,
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
    /// Answers that changed with no mutation dejavu saw only in a directory's times, size
    /// or link count (another program added or removed entries in it): stale for a cache
    /// of its times, not for one of whether it exists and what it is. Not in
    /// `stale_answers`.
    #[serde(skip_serializing_if = "is_zero64")]
    pub stale_times: u64,
    /// No stale answer: a cache with the invalidation points listed in the hazards is safe
    /// for this trace (of a directory's times too when `stale_times` is 0).
    pub safe: bool,
}

/// One finding.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Finding {
    /// Detector id (stable; see `dejavu report --list-detectors`).
    pub detector: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// Whose code made the calls.
    pub owner: Owner,
    /// The program (what the processes exec'd: `tsc`, `cc1`, `stat.py`).
    pub program: String,
    /// When the calls came from several programs (one line of the program's own code or
    /// of a library compiled into each: a crate's function in every test binary `cargo
    /// test` runs), each of them, most redundant calls first; `program` is the first.
    /// Empty when they came from one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<ProgramCount>,
    /// The finding's identity across runs: program, detector, owner, call site (function
    /// and file) or, without one, the path pattern; per-run parts masked. `dejavu diff`
    /// and `dejavu check` match findings on it.
    pub key: String,
    /// Processes of the program that made the calls.
    pub processes: u64,
    /// The first of them.
    pub pid: u32,
    /// Its command line.
    pub command: String,
    /// The paths involved: up to three paths or patterns (`/srv/www/files/*`), the
    /// heaviest first.
    pub paths: Vec<String>,
    /// Number of distinct paths.
    pub path_count: u64,
    /// The paths with the most redundant calls (at most five), with their counts.
    pub top_paths: Vec<PathCount>,
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
    /// Where the calls they repeat were made (the first of each chain of repeats: what a
    /// cache would have been filled by), when none of `callsites` made them: another line
    /// read the file or asked the question first (Go's module index reads a source that
    /// `cache.FileHash` then reads again). Each with the redundant calls that repeat it.
    /// At most two; empty when the repeats' own sites made the first calls too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub first_sites: Vec<Callsite>,
    /// The calls the finding's function makes each time it runs, when they repeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<Sequence>,
    /// For output on the standard streams: which one and where it went (`stderr ->
    /// /var/log/app.log`, `stdout (pipe)`, `stderr (terminal)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// Other findings about (mostly) the same calls, shown in this one: the same writes are
    /// small and repeated output, the same reads are re-reads and block the main thread.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Aspect>,
    /// Set when this finding's calls are (mostly) another finding's, shown there: that
    /// finding's key. The report lists it as an aspect of that one, not as a row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shown_in: Option<String>,
}

impl Finding {
    /// The programs its calls came from, in the order of their names: `programs`' names,
    /// or `program` alone.
    pub fn program_names(&self) -> Vec<String> {
        if self.programs.is_empty() {
            vec![self.program.clone()]
        } else {
            let mut v: Vec<String> = self.programs.iter().map(|p| p.program.clone()).collect();
            v.sort_unstable();
            v
        }
    }

    /// Whether its calls came from `program` (one of them, when from several).
    pub fn of_program(&self, is: impl Fn(&str) -> bool) -> bool {
        is(&self.program) || self.programs.iter().any(|p| is(&p.program))
    }
}

/// Another finding about (mostly) the same calls, folded into the one that owns the fix.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Aspect {
    /// Its detector.
    pub detector: &'static str,
    /// Its key.
    pub key: String,
    /// Its redundant calls.
    pub redundant_calls: u64,
    /// Of them, calls this finding flags too.
    pub shared_calls: u64,
    /// Whether its calls are others, made in the same runs of the same function
    /// (`sequence`): a lookup found repeated and one found failing again in one loop, which
    /// one cache removes.
    pub same_loop: bool,
}

#[cfg(test)]
mod label_tests {
    use super::without_parameters as w;

    #[test]
    fn cpp_names_lose_their_parameter_lists() {
        assert_eq!(
            w("node::fs::InternalModuleStat(v8::FunctionCallbackInfo<v8::Value> const&)"),
            "node::fs::InternalModuleStat"
        );
        assert_eq!(
            w("v8::internal::(anonymous namespace)::Invoke(v8::internal::Isolate*, int)"),
            "v8::internal::(anonymous namespace)::Invoke"
        );
        assert_eq!(
            w("tiledb::sm::Posix::write(std::string const&, void const*, unsigned long) const"),
            "tiledb::sm::Posix::write"
        );
        assert_eq!(w("Foo::operator()(int)"), "Foo::operator()");
        assert_eq!(w("operator()"), "operator()");
        assert_eq!(w("uv__statx"), "uv__statx");
        assert_eq!(w("f(int))"), "f(int))");
        assert_eq!(w("(anonymous namespace)"), "(anonymous namespace)");
    }
}

/// Processes of one program that ran without dejavu's language agent
/// ([`crate::Analysis::agentless`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Agentless {
    /// The program (a finding's `program`).
    pub program: String,
    /// How many of its processes.
    pub processes: u64,
}

#[cfg(test)]
mod tests {
    use super::Severity;

    #[test]
    fn a_run_bounds_the_grade_by_its_share() {
        assert_eq!(Severity::by_run(10, 1_000), Severity::High);
        assert_eq!(Severity::by_run(1, 1_000), Severity::Medium);
        assert_eq!(Severity::by_run(1, 10_000), Severity::Low);
        // Unknown run or untimed finding: no bound.
        assert_eq!(Severity::by_run(1, 0), Severity::High);
        assert_eq!(Severity::by_run(0, 10_000), Severity::High);
    }

    #[test]
    fn many_calls_grade_up_only_with_some_of_the_time() {
        assert_eq!(Severity::grade(0.12, 5), Severity::High);
        assert_eq!(Severity::grade(0.02, 20_000), Severity::High);
        // sqlite's 10,000 journal writes at 0.3% of the traced time: worth fixing, not high.
        assert_eq!(Severity::grade(0.003, 10_000), Severity::Medium);
        assert_eq!(Severity::grade(0.0005, 10_000), Severity::Low);
        assert_eq!(Severity::grade(0.02, 5), Severity::Medium);
        assert_eq!(Severity::grade(0.002, 1_500), Severity::Medium);
        assert_eq!(Severity::grade(0.0002, 1_500), Severity::Low);
        // A trace without times: the counts decide.
        assert_eq!(Severity::grade(0.0, 10_000), Severity::High);
        assert_eq!(Severity::grade(0.0, 1_000), Severity::Medium);
        assert_eq!(Severity::grade(0.0, 999), Severity::Low);
    }
}
