//! SARIF 2.1.0, as GitHub code scanning reads it: one rule per detector (from the registry:
//! the same texts as `dejavu explain`), one result per finding at its first call site in
//! the source tree (a repository-relative URI and a start line), the finding's other call
//! sites as related locations, and a partial fingerprint that stays the same from run to
//! run (detector, location and paths; never pids or times). A finding with no call site
//! in the source tree (no stacks, or only library frames) is not dropped: it becomes a
//! run-level notification. docs/report-format.md, "SARIF".

use crate::{RenderOptions, Reporter};
use dejavu_detect::{registry, Analysis, Finding, Severity};
use serde_json::{json, Value};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Renders the analysis as one SARIF log (pretty-printed JSON).
#[derive(Clone, Debug)]
pub struct SarifReporter {
    /// The source tree (the repository's root) result locations are relative to.
    pub root: PathBuf,
    /// dejavu's version, for the tool's driver.
    pub version: String,
}

impl Reporter for SarifReporter {
    fn render(&self, a: &Analysis, out: &mut dyn Write, _opts: &RenderOptions) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &sarif(a, &self.root, &self.version))?;
        writeln!(out)
    }
}

/// The SARIF version written.
pub const SARIF_VERSION: &str = "2.1.0";
const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// The URI base id results are relative to.
const SRCROOT: &str = "%SRCROOT%";

/// 64-bit FNV-1a: a stable hash for fingerprints (the same on every machine and run).
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `repeated-lookup` -> `RepeatedLookup`.
fn rule_name(id: &str) -> String {
    id.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::High | Severity::Medium => "warning",
        Severity::Low => "note",
    }
}

/// `file` relative to `root`, with forward slashes, if it is inside it.
fn relative(file: &str, root: &Path) -> Option<String> {
    let p = Path::new(file);
    if !p.is_absolute() {
        return None;
    }
    let rel = p.strip_prefix(root).ok()?;
    let s = rel.to_str()?;
    (!s.is_empty()).then(|| s.replace('\\', "/"))
}

fn message(f: &Finding) -> String {
    let paths = if f.path_count > f.paths.len() as u64 {
        format!("{} paths ({})", f.path_count, f.paths.join(", "))
    } else {
        f.paths.join(", ")
    };
    let paths = f.stream.clone().unwrap_or(paths);
    let mut text = format!(
        "{} of {} calls were redundant ({}: {}), {:.1} ms. Fix: {}",
        f.redundant_calls,
        f.calls,
        f.detector,
        paths,
        f.wasted_ns as f64 / 1e6,
        f.fix
    );
    for x in &f.also {
        if x.same_loop {
            text.push_str(&format!(
                " Also {} on {} more calls in the same runs of this function.",
                x.detector, x.redundant_calls
            ));
        } else {
            text.push_str(&format!(
                " Also {} on {} of these calls.",
                x.detector, x.shared_calls
            ));
        }
    }
    text
}

/// The SARIF log of `analysis`; call sites under `root` become repository-relative
/// locations. `version` is dejavu's.
pub fn sarif(analysis: &Analysis, root: &Path, version: &str) -> Value {
    let rules: Vec<Value> = registry()
        .iter()
        .map(|d| {
            json!({
                "id": d.id,
                "name": rule_name(d.id),
                "shortDescription": {"text": d.summary},
                "fullDescription": {"text": d.explain},
                "help": {
                    "text": format!("{}\n\nExample: {}\n\nFix: {}\n\nHazards: {}", d.summary, d.example, d.fix, d.hazards),
                    "markdown": format!("{}\n\n**Example**\n\n```\n{}\n```\n\n**Fix**: {}\n\n**Hazards**: {}", d.summary, d.example, d.fix, d.hazards),
                },
                "defaultConfiguration": {"level": "warning"},
                "properties": {"tags": ["performance", "redundant-io"]},
            })
        })
        .collect();
    let index = |id: &str| registry().iter().position(|d| d.id == id);
    let mut results = Vec::new();
    let mut notes = Vec::new();
    // One result per call: findings shown in another are named in its message.
    for f in analysis.rows() {
        let in_tree: Vec<(String, u32, &str)> = f
            .callsites
            .iter()
            .filter(|c| c.line > 0)
            .filter_map(|c| relative(&c.file, root).map(|u| (u, c.line, c.function.as_str())))
            .collect();
        let text = message(f);
        let Some((uri, line, function)) = in_tree.first().cloned() else {
            notes.push(json!({
                "level": "note",
                "message": {"text": format!("{text} (no call site in the source tree; pid {}, {})", f.pid, f.command)},
                "descriptor": {"id": f.detector},
            }));
            continue;
        };
        let location = |uri: &str, line: u32, function: &str| {
            json!({
                "physicalLocation": {
                    "artifactLocation": {"uri": uri, "uriBaseId": SRCROOT},
                    "region": {"startLine": line},
                },
                "logicalLocations": [{"name": function, "kind": "function"}],
            })
        };
        let fingerprint = fnv1a(&format!(
            "{}|{}|{}|{}",
            f.detector,
            uri,
            line,
            f.paths.join(" ")
        ));
        let mut r = json!({
            "ruleId": f.detector,
            "level": level(f.severity),
            "message": {"text": text},
            "locations": [location(&uri, line, function)],
            "partialFingerprints": {"dejavuFinding/v1": format!("{fingerprint:016x}")},
            "properties": {
                "calls": f.calls,
                "redundantCalls": f.redundant_calls,
                "wastedNs": f.wasted_ns,
                "paths": f.paths,
            },
        });
        if let Some(i) = index(f.detector) {
            r["ruleIndex"] = json!(i);
        }
        let related: Vec<Value> = in_tree
            .iter()
            .skip(1)
            .enumerate()
            .map(|(i, (u, l, func))| {
                let mut loc = location(u, *l, func);
                loc["id"] = json!(i + 1);
                loc
            })
            .collect();
        if !related.is_empty() {
            r["relatedLocations"] = Value::Array(related);
        }
        results.push(r);
    }
    let mut root_uri = root.to_string_lossy().into_owned();
    if !root_uri.ends_with('/') {
        root_uri.push('/');
    }
    json!({
        "$schema": SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": "dejavu",
                "semanticVersion": version,
                "informationUri": "https://example.invalid/dejavu",
                "rules": rules,
            }},
            "originalUriBaseIds": {SRCROOT: {"uri": format!("file://{root_uri}")}},
            "results": results,
            "invocations": [{
                "executionSuccessful": true,
                "toolExecutionNotifications": notes,
            }],
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_hashes_are_stable() {
        assert_eq!(rule_name("self-inflicted-lookup"), "SelfInflictedLookup");
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            relative("/repo/src/a.js", Path::new("/repo")),
            Some("src/a.js".into())
        );
        assert_eq!(relative("/usr/lib/x.so", Path::new("/repo")), None);
        assert_eq!(relative("node:fs", Path::new("/repo")), None);
    }
}
