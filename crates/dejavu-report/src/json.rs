//! The JSON report: one object, versioned, documented field by field in
//! docs/report-format.md (a test below keeps that document and this output in step).

use crate::{RenderOptions, Reporter, Totals};
use dejavu_detect::{Analysis, Finding};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Write};

/// The `version` field. Bumped when a field is removed or changes meaning; new fields may
/// appear within a version.
pub const FORMAT_VERSION: u32 = 2;

/// Renders the analysis as one pretty-printed JSON object.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonReporter;

#[derive(Serialize)]
struct Report<'a> {
    version: u32,
    trace: Trace<'a>,
    thresholds: Thresholds,
    detectors: &'a [&'static str],
    syscalls: u64,
    syscall_ns: u64,
    run_ns: u64,
    processes: usize,
    redundant_calls: u64,
    wasted_ns: u64,
    share: f64,
    /// Rows: findings not shown in another.
    finding_count: usize,
    /// Findings shown in another (`shown_in`), listed after the row they belong to.
    shown_in_others: usize,
    hidden: usize,
    hidden_calls: u64,
    omitted: usize,
    lost_events: u64,
    truncated: Option<Truncated>,
    agentless: &'a [dejavu_detect::Agentless],
    findings: Vec<Ranked<'a>>,
    callsites: Vec<SiteRow<'a>>,
}

#[derive(Serialize)]
struct Trace<'a> {
    command: &'a [String],
    backend: &'a str,
    producer: &'a str,
    arch: &'a str,
    cwd: &'a str,
    start_unix_ns: u64,
    attached: &'a [u32],
    payload_bytes: u32,
}

#[derive(Serialize)]
struct Thresholds {
    min_calls: u64,
    skip_startup_ns: u64,
    options: BTreeMap<String, serde_json::Value>,
}

#[derive(Serialize)]
struct Truncated {
    valid_bytes: u64,
    lost_bytes: u64,
}

/// A call site across findings (each redundant call counted once), with the detectors
/// whose findings name it.
#[derive(Serialize)]
struct SiteRow<'a> {
    rank: usize,
    detectors: Vec<&'static str>,
    #[serde(flatten)]
    site: &'a dejavu_detect::Callsite,
}

/// A finding with its rank; every field of [`Finding`] follows, flattened.
#[derive(Serialize)]
struct Ranked<'a> {
    rank: usize,
    #[serde(flatten)]
    finding: &'a Finding,
}

impl Reporter for JsonReporter {
    fn render(&self, a: &Analysis, out: &mut dyn Write, opts: &RenderOptions) -> io::Result<()> {
        let rows = a.rows();
        let shown = opts.top.map_or(rows.len(), |n| n.min(rows.len()));
        // Rows ranked 1.., each followed by the findings shown in it (same rank).
        let mut findings: Vec<Ranked> = Vec::new();
        for (i, finding) in rows[..shown].iter().enumerate() {
            findings.push(Ranked {
                rank: i + 1,
                finding,
            });
            for f in &a.findings[rows.len()..] {
                if f.shown_in.as_deref() == Some(finding.key.as_str()) {
                    findings.push(Ranked {
                        rank: i + 1,
                        finding: f,
                    });
                }
            }
        }
        let totals = Totals::of(a);
        let report = Report {
            version: FORMAT_VERSION,
            trace: Trace {
                command: &a.meta.command,
                backend: &a.meta.backend,
                producer: &a.meta.producer,
                arch: &a.meta.arch,
                cwd: &a.meta.cwd,
                start_unix_ns: a.meta.start_unix_ns,
                attached: &a.meta.attached,
                payload_bytes: a.meta.payload_bytes,
            },
            thresholds: Thresholds {
                // The engine treats 0 as 1: say what was applied.
                min_calls: opts.config.min_calls.max(1),
                skip_startup_ns: opts.config.skip_startup_ns,
                options: opts
                    .config
                    .options
                    .iter()
                    .map(|(k, v)| {
                        let v = v
                            .parse::<u64>()
                            .map_or_else(|_| v.clone().into(), serde_json::Value::from);
                        (k.clone(), v)
                    })
                    .collect(),
            },
            detectors: &a.detectors,
            syscalls: a.syscalls,
            syscall_ns: a.syscall_ns,
            run_ns: a.run_ns,
            processes: a.processes,
            redundant_calls: totals.redundant_calls,
            wasted_ns: totals.wasted_ns,
            share: crate::text::ratio(totals.wasted_ns, a.syscall_ns),
            finding_count: rows.len(),
            shown_in_others: a.findings.len() - rows.len(),
            hidden: a.hidden,
            hidden_calls: a.hidden_calls,
            omitted: rows.len() - shown,
            lost_events: a.lost_events,
            agentless: &a.agentless,
            truncated: a.truncated.as_ref().map(|t| Truncated {
                valid_bytes: t.valid_bytes,
                lost_bytes: t.lost_bytes,
            }),
            findings,
            callsites: a
                .callsites
                .iter()
                .enumerate()
                .map(|(i, site)| SiteRow {
                    rank: i + 1,
                    detectors: crate::callsite_detectors(a, site),
                    site,
                })
                .collect(),
        };
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use serde_json::Value;
    use std::collections::BTreeSet;

    fn render(a: &Analysis, opts: &RenderOptions) -> String {
        let mut out = Vec::new();
        JsonReporter
            .render(a, &mut out, opts)
            .expect("render to memory");
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    fn opts() -> RenderOptions {
        let mut o = RenderOptions {
            top: None,
            ..RenderOptions::default()
        };
        o.config.skip_startup_ns = 2_000_000_000;
        o.config
            .options
            .insert("small-writes.max_bytes".into(), "512".into());
        o
    }

    #[test]
    fn snapshot_json() {
        insta::assert_snapshot!(render(&fixture::analysis(), &opts()));
    }

    #[test]
    fn snapshot_json_without_findings() {
        insta::assert_snapshot!(render(&fixture::empty(), &opts()));
    }

    #[test]
    fn top_limits_the_findings_and_says_how_many_were_omitted() {
        let o = RenderOptions {
            top: Some(1),
            ..opts()
        };
        let v: Value = serde_json::from_str(&render(&fixture::analysis(), &o)).expect("JSON");
        // The first row, and the finding shown in it.
        let f = v["findings"].as_array().cloned().unwrap_or_default();
        assert_eq!(f.len(), 2);
        assert_eq!(
            (f[0]["rank"].clone(), f[1]["rank"].clone()),
            (1.into(), 1.into())
        );
        assert_eq!(f[1]["shown_in"], f[0]["key"]);
        assert_eq!(v["omitted"], 4);
        assert_eq!(v["finding_count"], 5);
        assert_eq!(v["shown_in_others"], 1);
        // Totals still cover every finding, not only the ones shown.
        assert_eq!(v["redundant_calls"], 1_000 + 120 + 44 + 25 + 40 + 23);
    }

    /// The field names documented in one section of docs/report-format.md: the first
    /// column of the table under the heading `## {section}`.
    fn documented(section: &str) -> BTreeSet<String> {
        let doc = include_str!("../../../docs/report-format.md");
        let start = doc
            .find(&format!("\n## {section}\n"))
            .unwrap_or_else(|| panic!("docs/report-format.md has no `## {section}`"));
        let body = &doc[start + 1..];
        let body = &body[body.find('\n').unwrap_or(0) + 1..];
        let end = body.find("\n## ").unwrap_or(body.len());
        body[..end]
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .map(|f| f.rsplit('.').next().unwrap_or(f).to_string())
            .collect()
    }

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[test]
    fn every_field_is_documented_and_every_documented_field_exists() {
        let v: Value = serde_json::from_str(&render(&fixture::analysis(), &opts())).expect("JSON");
        let mut finding_keys = BTreeSet::new();
        let mut cache_keys = BTreeSet::new();
        let mut callsite_keys = BTreeSet::new();
        let mut sequence_keys = BTreeSet::new();
        let mut top_path_keys = BTreeSet::new();
        let mut also_keys = BTreeSet::new();
        for f in v["findings"].as_array().into_iter().flatten() {
            finding_keys.extend(keys(f));
            for x in f["also"].as_array().into_iter().flatten() {
                also_keys.extend(keys(x));
            }
            cache_keys.extend(keys(&f["cache"]));
            sequence_keys.extend(keys(&f["sequence"]));
            for p in f["top_paths"].as_array().into_iter().flatten() {
                top_path_keys.extend(keys(p));
            }
            for c in f["callsites"].as_array().into_iter().flatten() {
                callsite_keys.extend(keys(c));
            }
        }
        // The fixture sets every optional field on at least one finding.
        assert_eq!(keys(&v), documented("Top level"));
        assert_eq!(keys(&v["trace"]), documented("trace"));
        assert_eq!(keys(&v["thresholds"]), documented("thresholds"));
        assert_eq!(finding_keys, documented("Findings"));
        assert_eq!(cache_keys, documented("cache"));
        assert_eq!(callsite_keys, documented("callsites"));
        assert_eq!(sequence_keys, documented("sequence"));
        assert_eq!(top_path_keys, documented("top_paths"));
        assert_eq!(also_keys, documented("One row per call"));
    }
}
