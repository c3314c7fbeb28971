//! What-if policies: the fixes `dejavu whatif` replays (a lookup cache, a negative cache,
//! a kept-open handle, an ensure-once flag, log-once), and the parser of their spellings on
//! the command line. docs/whatif.md documents the syntax; every error says what is
//! accepted.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use thiserror::Error;

/// The accepted syntax, shown with every parse error.
pub const SYNTAX: &str = "\
accepted policies:
  --cache CALLS[:GLOB]          CALLS: stat, access, readlink, read (a file's content), comma-separated, or all
                                (e.g. 'stat,access:/srv/app/**', 'read:/etc/app/*.json')
  --negative-cache GLOB         remember failed lookups (ENOENT, ENOTDIR, EACCES ...) of paths matching GLOB
  --invalidate on-write|on-dir-change|never   when the caches drop an entry (default: on-write for --cache,
                                on-dir-change for --negative-cache): on the program's own change of the path,
                                of the path or its directory, or never
  --ttl DURATION                cache entries expire after DURATION (500ms, 2s)
  --keep-open GLOB              open each matching file once per process and keep the handle
  --flush on-exit|each-write    with --keep-open: writes are buffered until exit, or written through at once
  --ensure-dir-once GLOB        remember per process that a matching directory exists once mkdir said so
  --log-once[=GLOB]             write each line (numbers and ids masked) to the same output only once; outputs:
                                the standard streams, terminals and append-mode files, or the files matching GLOB
  --skip-unread GLOB            don't make the writes nobody reads (to /dev/null, or failing with EPIPE) to paths
                                matching GLOB ('/dev/null', 'pipe:*', '/**')
  --batch-syncs GLOB            sync a file matching GLOB once per batch: syncs with at most 16 KiB written between
                                them are one batch, and only its last sync is made
  --skip-checks GLOB            don't check a path matching GLOB (access, stat, an O_DIRECTORY probe) right before
                                the open or stat that answers the same question: just do the act
  --track-size GLOB             keep the size (and offset) of a file matching GLOB the process writes in a variable:
                                its size and position lookups after its own writes are answered from it
  --batch-writes GLOB           buffer runs of tiny writes (512 bytes or less, one descriptor) to paths matching GLOB:
                                each run goes out in one write per 64 KiB
Without a policy, --invalidate, --ttl and --flush change each finding's own fix.
GLOB: absolute-path glob; * matches within one path segment, ** across segments ('/data/**/*.tdb', '**/chats')";

/// A policy string that cannot be read.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{flag} `{value}`: {why}\n\n{SYNTAX}")]
pub struct PolicyError {
    /// The flag that carried it.
    pub flag: &'static str,
    /// What was given.
    pub value: String,
    /// What is wrong with it.
    pub why: String,
}

fn err(flag: &'static str, value: &str, why: impl Into<String>) -> PolicyError {
    PolicyError {
        flag,
        value: value.to_string(),
        why: why.into(),
    }
}

/// Which calls a cache answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Calls {
    /// stat, lstat, statx, newfstatat.
    pub stat: bool,
    /// access, faccessat, faccessat2.
    pub access: bool,
    /// readlink, readlinkat.
    pub readlink: bool,
    /// Full reads of a file (or listings of a directory): the content kept in memory.
    pub read: bool,
}

impl Calls {
    /// Every lookup (a finding's repeated-lookup fix).
    pub const LOOKUPS: Calls = Calls {
        stat: true,
        access: true,
        readlink: true,
        read: false,
    };

    /// Lookups and content.
    pub const ALL: Calls = Calls {
        stat: true,
        access: true,
        readlink: true,
        read: true,
    };

    /// `stat,access` as the user wrote it.
    pub fn spelling(&self) -> String {
        let mut v = Vec::new();
        if self.stat {
            v.push("stat");
        }
        if self.access {
            v.push("access");
        }
        if self.readlink {
            v.push("readlink");
        }
        if self.read {
            v.push("read");
        }
        v.join(",")
    }
}

/// When a cache entry is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalidate {
    /// On the caching process's own change of the path (write, truncate, rename, unlink,
    /// chmod ...): what an in-process cache can see.
    OnWrite,
    /// On the process's own change of the path or of its directory (a create or removal
    /// there): what a negative cache needs.
    OnDirChange,
    /// Never: the entry lives as long as the process (or the TTL).
    Never,
}

impl Invalidate {
    /// Parses `on-write`, `on-dir-change`, `never`.
    pub fn parse(s: &str) -> Result<Invalidate, PolicyError> {
        match s.trim() {
            "on-write" => Ok(Invalidate::OnWrite),
            "on-dir-change" => Ok(Invalidate::OnDirChange),
            "never" => Ok(Invalidate::Never),
            _ => Err(err(
                "--invalidate",
                s,
                "expected on-write, on-dir-change or never",
            )),
        }
    }

    /// The spelling.
    pub fn name(self) -> &'static str {
        match self {
            Invalidate::OnWrite => "on-write",
            Invalidate::OnDirChange => "on-dir-change",
            Invalidate::Never => "never",
        }
    }
}

/// When a kept-open handle's buffered writes reach the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// Buffered until the process exits: a crash loses everything written since.
    OnExit,
    /// Written through at once: nothing is at risk, only the opens and closes go.
    EachWrite,
}

impl Flush {
    /// Parses `on-exit`, `each-write`.
    pub fn parse(s: &str) -> Result<Flush, PolicyError> {
        match s.trim() {
            "on-exit" => Ok(Flush::OnExit),
            "each-write" => Ok(Flush::EachWrite),
            _ => Err(err("--flush", s, "expected on-exit or each-write")),
        }
    }

    /// The spelling.
    pub fn name(self) -> &'static str {
        match self {
            Flush::OnExit => "on-exit",
            Flush::EachWrite => "each-write",
        }
    }
}

/// What a policy does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Answers repeated successful lookups from memory.
    Cache {
        /// Which lookups.
        calls: Calls,
        /// When entries are dropped.
        invalidate: Invalidate,
        /// Entries expire after this many ns.
        ttl: Option<u64>,
    },
    /// Answers repeated failed lookups (ENOENT ...) from memory.
    NegativeCache {
        /// When entries are dropped.
        invalidate: Invalidate,
        /// Entries expire after this many ns.
        ttl: Option<u64>,
    },
    /// One handle per process and file, kept open.
    KeepOpen {
        /// When buffered writes reach the file.
        flush: Flush,
    },
    /// A per-process flag "this directory exists", set by mkdir's success or EEXIST.
    EnsureDirOnce,
    /// Each line (masked) written once per output.
    LogOnce,
    /// Writes nobody reads (to /dev/null, or failing with EPIPE) are not made.
    SkipUnread,
    /// Syncs of one file with at most `bytes` written between them are one batch; only the
    /// batch's last sync is made.
    BatchSyncs {
        /// The most bytes written between two syncs of one batch.
        bytes: u64,
    },
    /// A check whose act right after answers the same question is not made.
    SkipChecks,
    /// Sizes and positions of the files a process writes, kept from its own writes.
    TrackSize,
    /// A repeated-output finding's own fix: its lines (process image, target, stream,
    /// masked line's hash) written once, counted by line as the detector counts them.
    LogLines {
        /// The finding's lines.
        lines: rustc_hash::FxHashSet<(u32, String, u8, u64)>,
    },
    /// A repeated-exec finding's own fix: its commands (starting process, command hash)
    /// run once, or its PATH probes (starting process, probed path) made once.
    ExecOnce {
        /// The finding's commands.
        cmds: rustc_hash::FxHashSet<(u32, u64)>,
        /// The finding's probes.
        probes: rustc_hash::FxHashSet<(u32, String)>,
    },
    /// Runs of tiny writes to one descriptor go through a 64 KiB buffer.
    BatchWrites {
        /// The largest write that joins a run.
        max_bytes: u64,
        /// The longest pause within a run, ns.
        gap_ns: u64,
    },
}

/// small-writes' `max_bytes` and `gap_ms`: what `--batch-writes` merges.
pub const BATCH_WRITE_BYTES: u64 = 512;
/// See [`BATCH_WRITE_BYTES`].
pub const BATCH_WRITE_GAP_NS: u64 = 100_000_000;

/// fsync-per-op's `max_bytes`: syncs with at most this many bytes written between them
/// are one batch for `--batch-syncs`.
pub const BATCH_SYNC_BYTES: u64 = 16384;

impl Kind {
    /// The flag that selects it.
    pub fn flag(&self) -> &'static str {
        match self {
            Kind::Cache { .. } => "--cache",
            Kind::NegativeCache { .. } => "--negative-cache",
            Kind::KeepOpen { .. } => "--keep-open",
            Kind::EnsureDirOnce => "--ensure-dir-once",
            Kind::LogOnce => "--log-once",
            Kind::SkipUnread => "--skip-unread",
            Kind::BatchSyncs { .. } => "--batch-syncs",
            Kind::BatchWrites { .. } => "--batch-writes",
            Kind::SkipChecks => "--skip-checks",
            Kind::TrackSize => "--track-size",
            Kind::LogLines { .. } => "--log-once",
            Kind::ExecOnce { .. } => "(exec once)",
        }
    }
}

/// Which calls a policy covers: paths matching its globs (all when none), made by the
/// named programs (all when none).
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// The globs as given.
    pub globs: Vec<String>,
    set: Option<GlobSet>,
    /// Program names (as the report names them); empty: every program.
    pub programs: Vec<String>,
    /// A finding's own fix: exactly the (process image, path) pairs behind the finding,
    /// instead of the globs (which then only say what it shows).
    pub exact: Option<rustc_hash::FxHashSet<(u32, String)>>,
}

impl PartialEq for Scope {
    fn eq(&self, o: &Scope) -> bool {
        self.globs == o.globs && self.programs == o.programs && self.exact == o.exact
    }
}
impl Eq for Scope {}

impl Scope {
    /// Paths matching any of `globs` (every path when empty), any program.
    pub fn paths(flag: &'static str, globs: &[String]) -> Result<Scope, PolicyError> {
        if globs.is_empty() {
            return Ok(Scope::default());
        }
        let mut b = GlobSetBuilder::new();
        for g in globs {
            if g.trim().is_empty() {
                return Err(err(flag, g, "the glob is empty"));
            }
            let glob = GlobBuilder::new(g.trim())
                .literal_separator(true)
                .build()
                .map_err(|e| err(flag, g, format!("not a glob: {}", e.kind())))?;
            b.add(glob);
        }
        let set = b
            .build()
            .map_err(|e| err(flag, &globs.join(","), e.to_string()))?;
        Ok(Scope {
            globs: globs.to_vec(),
            set: Some(set),
            programs: Vec::new(),
            exact: None,
        })
    }

    /// Whether `path`, asked about by process image `image`, is covered.
    pub fn covers(&self, image: u32, path: &[u8]) -> bool {
        match &self.exact {
            Some(set) => set.contains(&(image, String::from_utf8_lossy(path).into_owned())),
            None => self.matches(path),
        }
    }

    /// Whether `path` matches the globs.
    pub fn matches(&self, path: &[u8]) -> bool {
        match &self.set {
            None => true,
            Some(s) => {
                let p = String::from_utf8_lossy(path);
                s.is_match(p.as_ref())
            }
        }
    }

    /// Whether `program`'s calls are covered.
    pub fn covers_program(&self, program: &str) -> bool {
        self.programs.is_empty() || self.programs.iter().any(|p| p == program)
    }
}

/// One policy to replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// What it does.
    pub kind: Kind,
    /// What it covers.
    pub scope: Scope,
}

impl Policy {
    /// How a user would spell it on the command line.
    pub fn spelling(&self) -> String {
        let globs = match &self.scope.exact {
            Some(set) => {
                let mut paths: Vec<&str> = set.iter().map(|(_, p)| p.as_str()).collect();
                paths.sort_unstable();
                paths.dedup();
                match paths.as_slice() {
                    [one] => one.to_string(),
                    _ => format!("{{the finding's {} paths}}", paths.len()),
                }
            }
            None => self.scope.globs.join(","),
        };
        let quoted = |s: &str| format!("'{s}'");
        let mut s = match &self.kind {
            Kind::Cache {
                calls,
                invalidate,
                ttl,
            } => {
                let mut s = if globs.is_empty() {
                    format!("--cache {}", calls.spelling())
                } else {
                    format!(
                        "--cache {}",
                        quoted(&format!("{}:{globs}", calls.spelling()))
                    )
                };
                s += &format!(" --invalidate {}", invalidate.name());
                if let Some(t) = ttl {
                    s += &format!(" --ttl {}", duration(*t));
                }
                s
            }
            Kind::NegativeCache { invalidate, ttl } => {
                let mut s = format!(
                    "--negative-cache {} --invalidate {}",
                    quoted(if globs.is_empty() { "/**" } else { &globs }),
                    invalidate.name()
                );
                if let Some(t) = ttl {
                    s += &format!(" --ttl {}", duration(*t));
                }
                s
            }
            Kind::KeepOpen { flush } => format!(
                "--keep-open {} --flush {}",
                quoted(if globs.is_empty() { "/**" } else { &globs }),
                flush.name()
            ),
            Kind::EnsureDirOnce => format!(
                "--ensure-dir-once {}",
                quoted(if globs.is_empty() { "/**" } else { &globs })
            ),
            Kind::LogOnce if globs.is_empty() => "--log-once".to_string(),
            Kind::LogOnce => format!("--log-once={}", quoted(&globs)),
            Kind::SkipUnread => format!(
                "--skip-unread {}",
                quoted(if globs.is_empty() { "/**" } else { &globs })
            ),
            Kind::BatchSyncs { .. } => format!(
                "--batch-syncs {}",
                quoted(if globs.is_empty() { "/**" } else { &globs })
            ),
            Kind::BatchWrites { .. } => format!(
                "--batch-writes {}",
                quoted(if globs.is_empty() { "/**" } else { &globs })
            ),
            Kind::SkipChecks => format!(
                "--skip-checks {}",
                quoted(if globs.is_empty() { "/**" } else { &globs })
            ),
            Kind::TrackSize => format!(
                "--track-size {}",
                quoted(if globs.is_empty() { "/**" } else { &globs })
            ),
            Kind::ExecOnce { cmds, probes } if probes.is_empty() => format!(
                "run once (the finding's {} command{}, per starting process)",
                cmds.len(),
                if cmds.len() == 1 { "" } else { "s" }
            ),
            Kind::ExecOnce { probes, .. } => format!(
                "resolve the path once (the finding's {} probed path{})",
                probes.len(),
                if probes.len() == 1 { "" } else { "s" }
            ),
            Kind::LogLines { lines } => {
                let n: rustc_hash::FxHashSet<u64> = lines.iter().map(|l| l.3).collect();
                format!(
                    "--log-once (the finding's {} line{}, by masked line)",
                    n.len(),
                    if n.len() == 1 { "" } else { "s" }
                )
            }
        };
        if !self.scope.programs.is_empty() {
            s += &format!(" (program {})", self.scope.programs.join(", "));
        }
        s
    }
}

/// `500ms`, `2s`, `1.5s` for people.
pub fn duration(ns: u64) -> String {
    if ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// The policy flags of one `dejavu whatif`, as given (before parsing).
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// `--cache CALLS[:GLOB]`, repeatable.
    pub cache: Vec<String>,
    /// `--negative-cache GLOB`, repeatable.
    pub negative_cache: Vec<String>,
    /// `--invalidate`.
    pub invalidate: Option<String>,
    /// `--ttl`, already in ns.
    pub ttl: Option<u64>,
    /// `--keep-open GLOB`, repeatable.
    pub keep_open: Vec<String>,
    /// `--flush`.
    pub flush: Option<String>,
    /// `--ensure-dir-once GLOB`, repeatable.
    pub ensure_dir_once: Vec<String>,
    /// `--log-once` (`Some("")`) or `--log-once=GLOB`.
    pub log_once: Option<String>,
    /// `--skip-unread GLOB`, repeatable.
    pub skip_unread: Vec<String>,
    /// `--batch-syncs GLOB`, repeatable.
    pub batch_syncs: Vec<String>,
    /// `--batch-writes GLOB`, repeatable.
    pub batch_writes: Vec<String>,
    /// `--skip-checks GLOB`, repeatable.
    pub skip_checks: Vec<String>,
    /// `--track-size GLOB`, repeatable.
    pub track_size: Vec<String>,
}

impl Flags {
    /// `--invalidate`, `--ttl` or `--flush` given.
    pub fn modifies(&self) -> bool {
        self.invalidate.is_some() || self.ttl.is_some() || self.flush.is_some()
    }

    /// No policy given: replay each finding's own fix.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
            && self.negative_cache.is_empty()
            && self.keep_open.is_empty()
            && self.ensure_dir_once.is_empty()
            && self.log_once.is_none()
            && self.skip_unread.is_empty()
            && self.batch_syncs.is_empty()
            && self.batch_writes.is_empty()
            && self.skip_checks.is_empty()
            && self.track_size.is_empty()
    }
}

/// Parses `stat,access:/srv/app/**` (calls, then an optional glob).
pub fn parse_cache(spec: &str) -> Result<(Calls, Scope), PolicyError> {
    let (calls, glob) = match spec.split_once(':') {
        Some((c, g)) => (c, Some(g)),
        None if spec.trim_start().starts_with('/') || spec.contains('*') => {
            return Err(err(
                "--cache",
                spec,
                "name the calls to cache before the glob: 'stat,access:/srv/app/**'",
            ))
        }
        None => (spec, None),
    };
    let mut out = Calls::default();
    for c in calls.split(',') {
        match c.trim() {
            "stat" | "lstat" | "statx" | "newfstatat" | "fstatat" => out.stat = true,
            "access" | "faccessat" | "faccessat2" => out.access = true,
            "readlink" | "readlinkat" => out.readlink = true,
            "read" => out.read = true,
            "all" => out = Calls::ALL,
            "" => return Err(err("--cache", spec, "no call named before ':'")),
            other => {
                return Err(err(
                    "--cache",
                    spec,
                    format!(
                        "`{other}` is not a call a cache can answer: stat, access, readlink or read"
                    ),
                ))
            }
        }
    }
    let globs: Vec<String> = glob.map(|g| vec![g.to_string()]).unwrap_or_default();
    Ok((out, Scope::paths("--cache", &globs)?))
}

/// Applies `--invalidate`, `--ttl` and `--flush` to a finding's own fix (given without
/// policies, they change what each finding proposes: "and with a 2 s TTL?").
pub fn modify(p: &mut Policy, f: &Flags) -> Result<(), PolicyError> {
    let inv = f.invalidate.as_deref().map(Invalidate::parse).transpose()?;
    let fl = f.flush.as_deref().map(Flush::parse).transpose()?;
    match &mut p.kind {
        Kind::Cache {
            invalidate, ttl, ..
        }
        | Kind::NegativeCache { invalidate, ttl } => {
            if let Some(i) = inv {
                *invalidate = i;
            }
            if f.ttl.is_some() {
                *ttl = f.ttl;
            }
        }
        Kind::KeepOpen { flush } => {
            if let Some(x) = fl {
                *flush = x;
            }
        }
        Kind::EnsureDirOnce
        | Kind::LogOnce
        | Kind::SkipUnread
        | Kind::BatchSyncs { .. }
        | Kind::BatchWrites { .. }
        | Kind::SkipChecks
        | Kind::TrackSize
        | Kind::LogLines { .. }
        | Kind::ExecOnce { .. } => {}
    }
    Ok(())
}

/// Whether `--invalidate`, `--ttl` and `--flush` can change `p` (one finding's own fix,
/// `--finding N`): an error naming the flag when the fix has no cache or kept handle.
pub fn applies(p: &Policy, f: &Flags) -> Result<(), PolicyError> {
    let cache = matches!(p.kind, Kind::Cache { .. } | Kind::NegativeCache { .. });
    let keep = matches!(p.kind, Kind::KeepOpen { .. });
    let fix = format!("the finding's own fix is {}", p.kind.flag());
    if let (Some(i), false) = (&f.invalidate, cache) {
        return Err(err(
            "--invalidate",
            i,
            format!("{fix}: it has no cache to invalidate"),
        ));
    }
    if let (Some(t), false) = (f.ttl, cache) {
        return Err(err(
            "--ttl",
            &duration(t),
            format!("{fix}: it has no cache entry to expire"),
        ));
    }
    if let (Some(fl), false) = (&f.flush, keep) {
        return Err(err(
            "--flush",
            fl,
            format!("{fix}: it keeps no handle open"),
        ));
    }
    Ok(())
}

/// Turns the flags into policies; errors name the flag and show the accepted syntax.
pub fn parse(f: &Flags) -> Result<Vec<Policy>, PolicyError> {
    let invalidate = f.invalidate.as_deref().map(Invalidate::parse).transpose()?;
    let flush = f.flush.as_deref().map(Flush::parse).transpose()?;
    if f.ttl == Some(0) {
        return Err(err(
            "--ttl",
            "0",
            "a TTL of 0 caches nothing: give 500ms, 2s ...",
        ));
    }
    if f.is_empty() {
        // No policy: --invalidate, --ttl and --flush change the findings' own fixes
        // (see `modify`).
        return Ok(Vec::new());
    }
    if f.cache.is_empty() && f.negative_cache.is_empty() {
        if let Some(i) = &f.invalidate {
            return Err(err(
                "--invalidate",
                i,
                "it says when a cache drops an entry: give --cache or --negative-cache with it",
            ));
        }
        if let Some(t) = f.ttl {
            return Err(err(
                "--ttl",
                &duration(t),
                "it says when a cache entry expires: give --cache or --negative-cache with it",
            ));
        }
    }
    if f.keep_open.is_empty() {
        if let Some(fl) = &f.flush {
            return Err(err(
                "--flush",
                fl,
                "it says when a kept-open handle's writes reach the file: give --keep-open with it",
            ));
        }
    }
    let mut out = Vec::new();
    for spec in &f.cache {
        let (calls, scope) = parse_cache(spec)?;
        out.push(Policy {
            kind: Kind::Cache {
                calls,
                invalidate: invalidate.unwrap_or(Invalidate::OnWrite),
                ttl: f.ttl,
            },
            scope,
        });
    }
    for g in &f.negative_cache {
        out.push(Policy {
            kind: Kind::NegativeCache {
                invalidate: invalidate.unwrap_or(Invalidate::OnDirChange),
                ttl: f.ttl,
            },
            scope: Scope::paths("--negative-cache", std::slice::from_ref(g))?,
        });
    }
    for g in &f.keep_open {
        out.push(Policy {
            kind: Kind::KeepOpen {
                flush: flush.unwrap_or(Flush::OnExit),
            },
            scope: Scope::paths("--keep-open", std::slice::from_ref(g))?,
        });
    }
    for g in &f.ensure_dir_once {
        out.push(Policy {
            kind: Kind::EnsureDirOnce,
            scope: Scope::paths("--ensure-dir-once", std::slice::from_ref(g))?,
        });
    }
    match f.log_once.as_deref() {
        None => {}
        Some("") => out.push(Policy {
            kind: Kind::LogOnce,
            scope: Scope::default(),
        }),
        Some(g) => out.push(Policy {
            kind: Kind::LogOnce,
            scope: Scope::paths("--log-once", &[g.to_string()])?,
        }),
    }
    for g in &f.skip_unread {
        out.push(Policy {
            kind: Kind::SkipUnread,
            scope: Scope::paths("--skip-unread", std::slice::from_ref(g))?,
        });
    }
    for g in &f.batch_syncs {
        out.push(Policy {
            kind: Kind::BatchSyncs {
                bytes: BATCH_SYNC_BYTES,
            },
            scope: Scope::paths("--batch-syncs", std::slice::from_ref(g))?,
        });
    }
    for g in &f.batch_writes {
        out.push(Policy {
            kind: Kind::BatchWrites {
                max_bytes: BATCH_WRITE_BYTES,
                gap_ns: BATCH_WRITE_GAP_NS,
            },
            scope: Scope::paths("--batch-writes", std::slice::from_ref(g))?,
        });
    }
    for g in &f.skip_checks {
        out.push(Policy {
            kind: Kind::SkipChecks,
            scope: Scope::paths("--skip-checks", std::slice::from_ref(g))?,
        });
    }
    for g in &f.track_size {
        out.push(Policy {
            kind: Kind::TrackSize,
            scope: Scope::paths("--track-size", std::slice::from_ref(g))?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> Flags {
        Flags::default()
    }

    #[test]
    fn a_cache_spec_names_its_calls_and_its_glob() {
        let f = Flags {
            cache: vec!["stat,access:/srv/app/**".into()],
            ..flags()
        };
        let p = parse(&f).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(
            p[0].kind,
            Kind::Cache {
                calls: Calls {
                    stat: true,
                    access: true,
                    readlink: false,
                    read: false
                },
                invalidate: Invalidate::OnWrite,
                ttl: None
            }
        );
        assert!(p[0].scope.matches(b"/srv/app/a/b/config.json"));
        assert!(!p[0].scope.matches(b"/srv/other/config.json"));
        assert_eq!(
            p[0].spelling(),
            "--cache 'stat,access:/srv/app/**' --invalidate on-write"
        );
    }

    #[test]
    fn a_star_stays_within_one_segment_and_two_cross_them() {
        let s = Scope::paths("--keep-open", &["/data/*/x.tdb".into()]).unwrap();
        assert!(s.matches(b"/data/a/x.tdb"));
        assert!(!s.matches(b"/data/a/b/x.tdb"));
        let s = Scope::paths("--ensure-dir-once", &["**/chats".into()]).unwrap();
        assert!(s.matches(b"/home/u/.app/chats"));
        assert!(!s.matches(b"/home/u/.app/chats/x"));
    }

    #[test]
    fn defaults_follow_the_kind_of_cache_and_ttl_applies_to_both() {
        let f = Flags {
            cache: vec!["stat".into()],
            negative_cache: vec!["/usr/lib/**".into()],
            ttl: Some(500_000_000),
            ..flags()
        };
        let p = parse(&f).unwrap();
        assert_eq!(
            p[0].kind,
            Kind::Cache {
                calls: Calls {
                    stat: true,
                    access: false,
                    readlink: false,
                    read: false
                },
                invalidate: Invalidate::OnWrite,
                ttl: Some(500_000_000)
            }
        );
        assert_eq!(
            p[1].kind,
            Kind::NegativeCache {
                invalidate: Invalidate::OnDirChange,
                ttl: Some(500_000_000)
            }
        );
        assert!(p[0].scope.matches(b"/anything"), "no glob: every path");
        assert_eq!(
            p[1].spelling(),
            "--negative-cache '/usr/lib/**' --invalidate on-dir-change --ttl 500ms"
        );
    }

    #[test]
    fn bad_strings_name_the_flag_and_show_the_syntax() {
        let cases: Vec<(Flags, &str, &str)> = vec![
            (
                Flags {
                    cache: vec!["open:/x/**".into()],
                    ..flags()
                },
                "--cache",
                "`open` is not a call a cache can answer",
            ),
            (
                Flags {
                    cache: vec!["/srv/**".into()],
                    ..flags()
                },
                "--cache",
                "name the calls",
            ),
            (
                Flags {
                    cache: vec!["stat:/srv/[".into()],
                    ..flags()
                },
                "--cache",
                "not a glob",
            ),
            (
                Flags {
                    cache: vec!["stat".into()],
                    invalidate: Some("sometimes".into()),
                    ..flags()
                },
                "--invalidate",
                "expected on-write",
            ),
            (
                Flags {
                    keep_open: vec!["/x".into()],
                    flush: Some("never".into()),
                    ..flags()
                },
                "--flush",
                "expected on-exit",
            ),
            (
                Flags {
                    cache: vec!["stat".into()],
                    flush: Some("on-exit".into()),
                    ..flags()
                },
                "--flush",
                "give --keep-open",
            ),
            (
                Flags {
                    keep_open: vec!["/x".into()],
                    ttl: Some(5),
                    ..flags()
                },
                "--ttl",
                "give --cache",
            ),
            (
                Flags {
                    ensure_dir_once: vec!["".into()],
                    ..flags()
                },
                "--ensure-dir-once",
                "empty",
            ),
        ];
        for (f, flag, why) in cases {
            let e = parse(&f).expect_err(flag);
            assert_eq!(e.flag, flag);
            assert!(e.why.contains(why), "{flag}: {}", e.why);
            let text = e.to_string();
            assert!(text.contains("accepted policies:"), "{text}");
            assert!(text.contains("--negative-cache GLOB"), "{text}");
        }
    }

    #[test]
    fn log_once_takes_an_optional_glob() {
        let p = parse(&Flags {
            log_once: Some(String::new()),
            ..flags()
        })
        .unwrap();
        assert_eq!(
            (p[0].kind.clone(), p[0].spelling()),
            (Kind::LogOnce, "--log-once".to_string())
        );
        let p = parse(&Flags {
            log_once: Some("/var/log/*.txt".into()),
            ..flags()
        })
        .unwrap();
        assert!(p[0].scope.matches(b"/var/log/app.txt"));
        assert_eq!(p[0].spelling(), "--log-once='/var/log/*.txt'");
        let e = parse(&Flags {
            log_once: Some("/x/[".into()),
            ..flags()
        })
        .expect_err("bad glob");
        assert_eq!(e.flag, "--log-once");
    }

    #[test]
    fn without_policies_the_modifiers_change_the_findings_own_fixes() {
        let f = Flags {
            invalidate: Some("never".into()),
            ttl: Some(2_000_000_000),
            flush: Some("each-write".into()),
            ..flags()
        };
        assert_eq!(parse(&f).unwrap(), Vec::new());
        let mut c = parse(&Flags {
            cache: vec!["stat".into()],
            ..flags()
        })
        .unwrap()
        .remove(0);
        modify(&mut c, &f).unwrap();
        assert_eq!(
            c.spelling(),
            "--cache stat --invalidate never --ttl 2s",
            "{c:?}"
        );
        let mut k = parse(&Flags {
            keep_open: vec!["/x".into()],
            ..flags()
        })
        .unwrap()
        .remove(0);
        modify(&mut k, &f).unwrap();
        assert_eq!(
            k.kind,
            Kind::KeepOpen {
                flush: Flush::EachWrite
            }
        );
        let bad = Flags {
            invalidate: Some("sometimes".into()),
            ..flags()
        };
        assert_eq!(parse(&bad).expect_err("bad").flag, "--invalidate");
    }

    #[test]
    fn durations_read_back_as_given() {
        assert_eq!(duration(500_000_000), "500ms");
        assert_eq!(duration(2_000_000_000), "2s");
        assert_eq!(duration(1_500), "1500ns");
    }
}
