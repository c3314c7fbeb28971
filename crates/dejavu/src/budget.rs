//! Budgets for `dejavu check` (docs/budgets.md): a TOML file of count limits per syscall,
//! per detector, per path glob and per call site, absolute (`max`) or relative to a
//! baseline (`baseline` + `slack`), optionally scoped to programs by name. Read and
//! rewritten with toml_edit so that `--update` keeps the user's comments and layout.

use crate::counts::{program_of, Counts};
use anyhow::{anyhow, bail, Context};
use std::path::Path;
use toml_edit::{value, DocumentMut, Item};

/// The kinds of budget entries: the TOML table each lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `[syscalls]`: calls of a syscall.
    Syscall,
    /// `[detectors]`: redundant calls a detector finds.
    Detector,
    /// `[paths]`: calls naming a path that matches a glob.
    Path,
    /// `[callsites]`: redundant calls at `FILE:LINE` (FILE matches the end of the path).
    Callsite,
    /// `[findings]`: redundant calls of the finding with this key (`Finding::key`).
    Finding,
}

impl Kind {
    pub fn table(self) -> &'static str {
        match self {
            Kind::Syscall => "syscalls",
            Kind::Detector => "detectors",
            Kind::Path => "paths",
            Kind::Callsite => "callsites",
            Kind::Finding => "findings",
        }
    }
    const ALL: [Kind; 5] = [
        Kind::Syscall,
        Kind::Detector,
        Kind::Path,
        Kind::Callsite,
        Kind::Finding,
    ];
}

/// How much slack a relative limit allows over its baseline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Slack {
    /// A share of the baseline (10% is 0.10).
    Percent(f64),
    /// A number of calls.
    Calls(u64),
}

/// One limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub kind: Kind,
    pub name: String,
    /// An absolute limit.
    pub max: Option<u64>,
    /// A relative limit: the counts when the budget was set...
    pub baseline: Option<u64>,
    /// ...and how far above them is still within budget.
    pub slack: Slack,
    /// Only programs whose name matches this glob (e.g. `node`, `python*`).
    pub process: Option<String>,
}

impl Entry {
    /// The most calls within budget.
    pub fn limit(&self) -> u64 {
        if let Some(m) = self.max {
            return m;
        }
        let b = self.baseline.unwrap_or(0);
        match self.slack {
            Slack::Percent(p) => b + (b as f64 * p).floor() as u64,
            Slack::Calls(n) => b + n,
        }
    }

    /// `syscalls.newfstatat`, with its scope.
    pub fn label(&self) -> String {
        let mut s = format!("{}.{}", self.kind.table(), self.name);
        if let Some(p) = &self.process {
            s.push_str(&format!(" [{p}]"));
        }
        s
    }
}

/// A parsed budget file.
#[derive(Debug)]
pub struct Budget {
    pub doc: DocumentMut,
    pub entries: Vec<Entry>,
}

fn parse_slack(item: &Item, at: &str) -> anyhow::Result<Slack> {
    if let Some(n) = item.as_integer() {
        return u64::try_from(n)
            .map(Slack::Calls)
            .map_err(|_| anyhow!("{at}.slack: a count of calls must not be negative"));
    }
    let s = item
        .as_str()
        .ok_or_else(|| anyhow!("{at}.slack: a percentage (\"10%\") or a number of calls"))?;
    let p = s
        .trim()
        .strip_suffix('%')
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            anyhow!("{at}.slack = {s:?}: a percentage (\"10%\") or a number of calls")
        })?;
    Ok(Slack::Percent(p / 100.0))
}

fn count(item: &Item, at: &str, what: &str) -> anyhow::Result<u64> {
    let n = item
        .as_integer()
        .ok_or_else(|| anyhow!("{at}.{what}: a whole number of calls"))?;
    u64::try_from(n).map_err(|_| anyhow!("{at}.{what}: must not be negative"))
}

/// `; did you mean `X`?` for the known name closest to `name` (at most a third of its
/// letters off), or nothing.
fn did_you_mean<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> String {
    known
        .map(|k| (strsim::damerau_levenshtein(name, k), k))
        .filter(|(d, _)| *d <= (name.len() / 3).max(1))
        .min()
        .map(|(_, k)| format!("; did you mean `{k}`?"))
        .unwrap_or_default()
}

impl Budget {
    /// Parses `text` (from `path`, for messages).
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<Budget> {
        let doc: DocumentMut = text
            .parse()
            .with_context(|| format!("{} is not valid TOML", path.display()))?;
        let mut default_process = None;
        for (k, item) in doc.iter() {
            match k {
                "version" => {
                    if item.as_integer() != Some(1) {
                        bail!("{}: version must be 1", path.display());
                    }
                }
                "defaults" => {
                    let t = item
                        .as_table_like()
                        .ok_or_else(|| anyhow!("[defaults] must be a table"))?;
                    for (dk, dv) in t.iter() {
                        match dk {
                            "process" => {
                                default_process = Some(
                                    dv.as_str()
                                        .ok_or_else(|| anyhow!("defaults.process: a program name glob"))?
                                        .to_string(),
                                )
                            }
                            other => bail!("defaults.{other}: unknown key (known: process)"),
                        }
                    }
                }
                k if Kind::ALL.iter().any(|t| t.table() == k) => {}
                other => bail!(
                    "{}: unknown table or key `{other}` (known: version, defaults, syscalls, detectors, paths, callsites, findings)",
                    path.display()
                ),
            }
        }
        let mut entries = Vec::new();
        for kind in Kind::ALL {
            let Some(item) = doc.get(kind.table()) else {
                continue;
            };
            let t = item
                .as_table_like()
                .ok_or_else(|| anyhow!("[{}] must be a table", kind.table()))?;
            for (name, v) in t.iter() {
                let at = format!("{}.{name}", kind.table());
                let mut e = Entry {
                    kind,
                    name: name.to_string(),
                    max: None,
                    baseline: None,
                    slack: Slack::Calls(0),
                    process: default_process.clone(),
                };
                if v.is_integer() {
                    e.max = Some(
                        count(v, &at, "max")
                            .map_err(|_| anyhow!("{at}: a whole number of calls (or a table)"))?,
                    );
                } else if let Some(t) = v.as_table_like() {
                    for (k, x) in t.iter() {
                        match k {
                            "max" => e.max = Some(count(x, &at, "max")?),
                            "baseline" => e.baseline = Some(count(x, &at, "baseline")?),
                            "slack" => e.slack = parse_slack(x, &at)?,
                            "process" => {
                                e.process = Some(
                                    x.as_str()
                                        .ok_or_else(|| {
                                            anyhow!("{at}.process: a program name glob")
                                        })?
                                        .to_string(),
                                )
                            }
                            other => bail!(
                                "{at}.{other}: unknown key (known: max, baseline, slack, process)"
                            ),
                        }
                    }
                    if e.max.is_none() && e.baseline.is_none() {
                        bail!("{at}: give max (an absolute limit) or baseline (and slack)");
                    }
                    if e.max.is_some() && e.baseline.is_some() {
                        bail!("{at}: give max or baseline, not both");
                    }
                } else {
                    bail!("{at}: a whole number of calls, or a table like {{ max = 10 }} or {{ baseline = 100, slack = \"10%\" }}");
                }
                if kind == Kind::Detector && dejavu_detect::find_detector(name).is_none() {
                    let ids = dejavu_detect::registry().iter().map(|d| d.id);
                    bail!(
                        "{at}: no such detector{} (dejavu report --list-detectors lists them)",
                        did_you_mean(name, ids)
                    );
                }
                if kind == Kind::Syscall && dejavu_trace::Sys::from_name(name).is_none() {
                    let names = dejavu_trace::Sys::ALL.iter().map(|s| s.name());
                    bail!(
                        "{at}: no such syscall{} (the budget could never be exceeded; \
                         docs/trace-format.md lists the syscalls dejavu records)",
                        did_you_mean(name, names)
                    );
                }
                if kind == Kind::Finding && name.split('|').count() < 4 {
                    bail!(
                        "{at}: a finding key is PROGRAM|DETECTOR|OWNER|SITE, as `dejavu report --json` \
                         gives it (e.g. \"server.js|repeated-lookup|own|loadConfig@lib/config.js\")"
                    );
                }
                if kind == Kind::Callsite
                    && name
                        .rsplit_once(':')
                        .is_none_or(|(_, l)| l.parse::<u32>().is_err())
                {
                    bail!("{at}: a call site is FILE:LINE, e.g. \"app.js:18\"");
                }
                if kind == Kind::Path {
                    globset::Glob::new(name).with_context(|| format!("{at}: not a valid glob"))?;
                }
                if let Some(p) = &e.process {
                    globset::Glob::new(p)
                        .with_context(|| format!("{at}.process: not a valid glob"))?;
                }
                entries.push(e);
            }
        }
        Ok(Budget { doc, entries })
    }

    /// Reads the budget at `path`.
    pub fn load(path: &Path) -> anyhow::Result<Budget> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the budget {}", path.display()))?;
        Budget::parse(&text, path)
    }
}

/// Matches program names against an entry's scope.
fn scope(e: &Entry) -> impl Fn(&str) -> bool {
    let m = e
        .process
        .as_deref()
        .and_then(|p| globset::Glob::new(p).ok())
        .map(|g| g.compile_matcher());
    move |prog: &str| m.as_ref().is_none_or(|m| m.is_match(prog))
}

/// Where a count came from: the top call sites or paths, for the message.
#[derive(Debug, Default)]
pub struct Measured {
    pub count: u64,
    pub where_: Vec<String>,
}

/// What the trace counts for `e`.
pub fn measure(e: &Entry, c: &Counts) -> Measured {
    let prog = scope(e);
    // A finding is in scope by its executable's name (`node`) or its program's (`tsc`).
    let in_scope =
        |f: &dejavu_detect::Finding| prog(&program_of(&f.command)) || f.of_program(&prog);
    match e.kind {
        Kind::Syscall => Measured {
            count: c.syscall(&e.name, &prog),
            where_: Vec::new(),
        },
        Kind::Detector => {
            let mut m = Measured::default();
            let mut sites: Vec<(u64, String)> = Vec::new();
            for f in c
                .analysis
                .findings
                .iter()
                .filter(|f| f.detector == e.name && in_scope(f))
            {
                m.count += f.redundant_calls;
                match f.callsites.first() {
                    Some(s) => sites.push((
                        f.redundant_calls,
                        format!("{}:{} {}", s.file, s.line, s.function),
                    )),
                    None => sites.push((f.redundant_calls, f.paths.join(" "))),
                }
            }
            sites.sort_by_key(|s| std::cmp::Reverse(s.0));
            m.where_ = sites.into_iter().take(3).map(|s| s.1).collect();
            m
        }
        Kind::Path => {
            let g = globset::Glob::new(&e.name)
                .map(|g| g.compile_matcher())
                .ok();
            let mut m = Measured::default();
            let mut top: Vec<(u64, &str)> = Vec::new();
            for ((p, path), n) in &c.paths {
                if prog(p) && g.as_ref().is_some_and(|g| g.is_match(path)) {
                    m.count += n;
                    top.push((*n, path));
                }
            }
            top.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
            m.where_ = top
                .into_iter()
                .take(3)
                .map(|(_, p)| p.to_string())
                .collect();
            m
        }
        Kind::Finding => {
            // The key as given; a finding whose anonymous site moved to another line (a
            // rebuilt bundle) still counts, by the key without the line; and a key with
            // absolute paths (an older build's) by the end of its paths.
            let mut m = Measured::default();
            let loose = crate::counts::loose_key(&e.name);
            let matching = |same: &dyn Fn(&dejavu_detect::Finding) -> bool| {
                c.analysis
                    .findings
                    .iter()
                    .filter(|f| same(f) && in_scope(f))
                    .collect::<Vec<_>>()
            };
            let mut hits = matching(&|f| f.key == e.name);
            if hits.is_empty() {
                hits = matching(&|f| crate::counts::loose_key(&f.key) == loose);
            }
            if hits.is_empty() {
                // A key an older build wrote, with the absolute path a key now names
                // from its package folder or from where the recording started.
                hits = matching(&|f| {
                    dejavu_detect::portable::same_key(&loose, &crate::counts::loose_key(&f.key))
                });
            }
            for f in hits {
                m.count += f.redundant_calls;
                if let Some(s) = f.callsites.first() {
                    m.where_.push(s.label());
                }
            }
            m
        }
        Kind::Callsite => {
            let (file, line) = e.name.rsplit_once(':').unwrap_or((&e.name, "0"));
            let line: u32 = line.parse().unwrap_or(0);
            let hit =
                |f: &str, l: u32| l == line && (f == file || f.ends_with(&format!("/{file}")));
            let mut m = Measured::default();
            if e.process.is_none() {
                // Each redundant call once, however many findings name it.
                for s in c.analysis.callsites.iter().filter(|s| hit(&s.file, s.line)) {
                    m.count += s.redundant_calls;
                    m.where_.push(s.function.clone());
                }
            } else {
                for f in c.analysis.findings.iter().filter(|f| in_scope(f)) {
                    for s in f.callsites.iter().filter(|s| hit(&s.file, s.line)) {
                        m.count += s.redundant_calls;
                        if !m.where_.contains(&s.function) {
                            m.where_.push(s.function.clone());
                        }
                    }
                }
            }
            m
        }
    }
}

/// Sets `e`'s limit in the document to `n`: its baseline when it has one, else its max.
pub fn update(doc: &mut DocumentMut, e: &Entry, n: u64) {
    let Some(table) = doc
        .get_mut(e.kind.table())
        .and_then(|t| t.as_table_like_mut())
    else {
        return;
    };
    let Some(item) = table.get_mut(&e.name) else {
        return;
    };
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    if item.is_integer() {
        *item = value(n);
    } else if let Some(t) = item.as_table_like_mut() {
        let key = if e.baseline.is_some() {
            "baseline"
        } else {
            "max"
        };
        t.insert(key, value(n));
    }
}

/// A new budget from `c`: every syscall and every detector at its current count (so that a
/// new kind of waste fails the check), and the call sites with redundant calls.
pub fn fresh(c: &Counts) -> String {
    let mut s = String::from(
        "# dejavu budget (docs/budgets.md): counts only, never times.\n\
         # `dejavu check --budget FILE --update -- CMD` rewrites the limits to the current counts.\n\
         version = 1\n\n[syscalls]\n",
    );
    let all = |_: &str| true;
    for (name, n) in c.syscall_totals(&all) {
        s.push_str(&format!("{name} = {n}\n"));
    }
    s.push_str("\n[detectors]  # redundant calls\n");
    for info in dejavu_detect::registry() {
        let n: u64 = c
            .analysis
            .findings
            .iter()
            .filter(|f| f.detector == info.id)
            .map(|f| f.redundant_calls)
            .sum();
        s.push_str(&format!("{} = {n}\n", info.id));
    }
    let owned: Vec<_> = c
        .analysis
        .findings
        .iter()
        .filter(|f| {
            matches!(
                f.owner,
                dejavu_detect::Owner::Own | dejavu_detect::Owner::Dependency
            )
        })
        .take(20)
        .collect();
    if !owned.is_empty() {
        s.push_str("\n[findings]  # redundant calls of the program's and its dependencies' findings, by key\n");
        for f in owned {
            s.push_str(&format!(
                "{} = {}\n",
                toml_edit::Value::from(f.key.as_str()),
                f.redundant_calls
            ));
        }
    }
    let sites: Vec<_> = c
        .analysis
        .callsites
        .iter()
        .filter(|cs| !cs.file.is_empty() && cs.line > 0)
        .take(20)
        .collect();
    if !sites.is_empty() {
        s.push_str("\n[callsites]  # redundant calls at FILE:LINE\n");
        for cs in sites {
            let file = cs.file.rsplit('/').next().unwrap_or(&cs.file);
            s.push_str(&format!(
                "\"{}:{}\" = {}\n",
                file, cs.line, cs.redundant_calls
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(t: &str) -> anyhow::Result<Budget> {
        Budget::parse(t, Path::new("b.toml"))
    }

    #[test]
    fn absolute_and_relative_limits() {
        let b = parse(
            "version = 1\n[syscalls]\nopenat = 10\nstatx = { baseline = 200, slack = \"10%\" }\n\
             [detectors]\nensure-dir = { baseline = 5, slack = 2, process = \"node\" }\n",
        )
        .unwrap();
        let limits: Vec<_> = b.entries.iter().map(|e| (e.label(), e.limit())).collect();
        assert_eq!(
            limits,
            [
                ("syscalls.openat".to_string(), 10),
                ("syscalls.statx".to_string(), 220),
                ("detectors.ensure-dir [node]".to_string(), 7)
            ]
        );
    }

    #[test]
    fn mistakes_are_named() {
        for (t, want) in [
            ("version = 2", "version must be 1"),
            ("[syscall]\nopenat = 1", "unknown table or key `syscall`"),
            (
                "[syscalls]\nopnat = 0",
                "syscalls.opnat: no such syscall; did you mean `openat`?",
            ),
            (
                "[syscalls]\nfrobnicate = 0",
                "syscalls.frobnicate: no such syscall (",
            ),
            (
                "[detectors]\nensure-dirs = 0",
                "detectors.ensure-dirs: no such detector; did you mean `ensure-dir`?",
            ),
            ("[detectors]\nno-such = 1", "no such detector"),
            ("[syscalls]\nopenat = -1", "syscalls.openat"),
            ("[syscalls]\nopenat = { slack = \"5%\" }", "give max"),
            ("[syscalls]\nopenat = { max = 1, baseline = 2 }", "not both"),
            (
                "[syscalls]\nopenat = { max = 1, slack = \"x\" }",
                "percentage",
            ),
            ("[callsites]\n\"app.js\" = 1", "FILE:LINE"),
            ("[findings]\n\"app.js\" = 1", "PROGRAM|DETECTOR|OWNER|SITE"),
            ("[paths]\n\"a[\" = 1", "not a valid glob"),
            (
                "[syscalls]\nopenat = { max = 1, colour = 2 }",
                "unknown key",
            ),
            ("not toml =", "not valid TOML"),
        ] {
            let e = format!("{:#}", parse(t).unwrap_err());
            assert!(e.contains(want), "{t}: {e}");
        }
    }

    #[test]
    fn update_keeps_comments_and_the_kind_of_limit() {
        let mut b = parse(
            "# mine\nversion = 1\n[syscalls]\nopenat = 10 # tight\nstatx = { baseline = 200, slack = \"10%\" }\n",
        )
        .unwrap();
        let es = b.entries.clone();
        update(&mut b.doc, &es[0], 7);
        update(&mut b.doc, &es[1], 150);
        let out = b.doc.to_string();
        assert!(
            out.contains("# mine") && out.contains("openat = 7"),
            "{out}"
        );
        assert!(
            out.contains("baseline = 150") && out.contains("slack = \"10%\""),
            "{out}"
        );
    }
}
