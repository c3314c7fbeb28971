//! What `dejavu diff` and `dejavu check` compare: counts from one trace, never times.
//! Per program (the basename of what a process exec'd, inherited across fork), the calls of
//! each syscall and of each path, and the analysis's findings and call sites.

use dejavu_detect::{analyze, Analysis, Config};
use dejavu_trace::{Record, TraceReader};
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

/// The program name of a command line or executable path: its first word's basename.
pub fn program_of(command: &str) -> String {
    let first = command.split_whitespace().next().unwrap_or("");
    first.rsplit('/').next().unwrap_or(first).to_string()
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// The program each process runs, followed through a trace's spawn and exec records:
/// what it exec'd, else its parent's, else the recorded command's.
#[derive(Debug, Default)]
pub struct Programs {
    root: String,
    by_pid: FxHashMap<u32, String>,
}

impl Programs {
    /// For a trace of `meta`.
    pub fn new(meta: &dejavu_trace::Meta) -> Programs {
        Programs {
            root: meta
                .command
                .first()
                .map(|c| program_of(c))
                .unwrap_or_default(),
            by_pid: FxHashMap::default(),
        }
    }

    /// Takes note of a spawn or an exec.
    pub fn record<R: std::io::Read>(&mut self, rec: &Record, r: &TraceReader<R>) {
        match rec {
            Record::Spawn(s) => {
                let p = self.of(s.parent_pid).to_string();
                self.by_pid.insert(s.pid, p);
            }
            Record::Exec(e) => {
                let argv = r.str(e.argv);
                let first = argv.split(|&b| b == 0).next().unwrap_or(b"");
                let name = if first.is_empty() {
                    r.str(e.exe)
                } else {
                    first
                };
                self.by_pid
                    .insert(e.pid, program_of(&String::from_utf8_lossy(name)));
            }
            _ => {}
        }
    }

    /// The program of `pid`.
    pub fn of(&self, pid: u32) -> &str {
        self.by_pid.get(&pid).unwrap_or(&self.root)
    }
}

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
    /// Reads and analyses the trace at `path`.
    pub fn load(path: &Path) -> anyhow::Result<Counts> {
        use anyhow::Context;
        let mut r =
            TraceReader::open(path).with_context(|| format!("reading {}", path.display()))?;
        let mut syscalls = BTreeMap::new();
        let mut paths = FxHashMap::default();
        let mut programs = Programs::new(r.meta());
        while let Some(rec) = r
            .next_record()
            .with_context(|| format!("reading {}", path.display()))?
        {
            programs.record(&rec, &r);
            if let Record::Syscall(s) = rec {
                let prog = programs.of(s.pid).to_string();
                *syscalls
                    .entry((prog.clone(), s.sys.name().to_string()))
                    .or_insert(0) += 1;
                if let Some(p) = s.path {
                    let p = String::from_utf8_lossy(r.str(p)).into_owned();
                    *paths.entry((prog, p)).or_insert(0) += 1;
                }
            }
        }
        let cfg = Config {
            min_calls: 1,
            ..Config::default()
        };
        let mut r =
            TraceReader::open(path).with_context(|| format!("reading {}", path.display()))?;
        let analysis = analyze(&mut r, &cfg, |_| {})
            .map_err(|e| anyhow::anyhow!("analysing {}: {e}", path.display()))?;
        Ok(Counts {
            syscalls,
            paths,
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
