//! `dejavu diff` and `dejavu check` on the ensure-dir dirty/clean twins (seed 000): the
//! diff says what the fix removed, deterministically; the clean twin passes a budget the
//! dirty one exceeds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn twin(name: &str) -> String {
    common::repo()
        .join("tests/workloads/detectors/ensure-dir")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Records `script` with node in `work` (from an empty chats directory).
fn record(work: &Path, script: &str, trace: &str) -> PathBuf {
    let _ = std::fs::remove_dir_all(work.join("chats"));
    let t = work.join(trace);
    let (st, err) = common::record_quiet_with(&t, &["--stacks", "off"], &["node", script], work);
    assert!(st.success(), "{err}");
    t
}

fn dejavu(args: &[&str], cwd: &Path) -> Output {
    Command::new(common::dejavu())
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn scratch() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().canonicalize().unwrap();
    (d, p)
}

#[test]
fn diff_of_the_fix_says_what_it_removed() {
    require!("node");
    let (_d, work) = scratch();
    let before = record(&work, &twin("dirty.js"), "before.dvt");
    let after = record(&work, &twin("clean.js"), "after.dvt");
    let out = dejavu(
        &[
            "diff",
            "--json",
            before.to_str().unwrap(),
            after.to_str().unwrap(),
        ],
        &work,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let chats = work.join("chats").to_string_lossy().into_owned();
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["detector"] == "ensure-dir" && f["paths"][0] == chats.as_str())
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(f["status"], "gone", "{f:#}");
    assert_eq!(f["before"]["redundant_calls"], 297);
    assert_eq!(f["after"], Value::Null);
    assert_eq!(f["delta"], -297);
    let mkdir = v["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["syscall"] == "mkdir")
        .unwrap();
    assert_eq!(
        (mkdir["before"].as_u64(), mkdir["after"].as_u64()),
        (Some(100), Some(1))
    );
    assert!(v["after"]["redundant_calls"].as_u64() < v["before"]["redundant_calls"].as_u64());

    // The terminal form says the same.
    let out = dejavu(
        &["diff", before.to_str().unwrap(), after.to_str().unwrap()],
        &work,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("gone   ensure-dir"), "{text}");
    assert!(text.contains("mkdir"), "{text}");
}

#[test]
fn diff_is_deterministic_and_a_trace_against_itself_changes_nothing() {
    require!("node");
    let (_d, work) = scratch();
    let a = record(&work, &twin("dirty.js"), "a.dvt");
    let b = record(&work, &twin("dirty.js"), "b.dvt");
    let run = |x: &Path, y: &Path| {
        let out = dejavu(
            &["diff", "--json", x.to_str().unwrap(), y.to_str().unwrap()],
            &work,
        );
        let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["before"]["trace"] = Value::Null;
        v["after"]["trace"] = Value::Null;
        v
    };
    let same = run(&a, &a);
    for f in same["findings"].as_array().unwrap() {
        assert_eq!(f["status"], "same", "{f:#}");
    }
    // Two runs of a deterministic program: the redundant-call findings of the fixture
    // agree (the runtime's own start-up may differ by a call or two elsewhere).
    let two = run(&a, &b);
    let ensure = two["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["detector"] == "ensure-dir")
        .unwrap();
    assert_eq!(ensure["status"], "same", "{ensure:#}");
    assert_eq!(ensure["delta"], 0);
}

#[test]
fn the_clean_twin_passes_a_budget_the_dirty_one_exceeds() {
    require!("node");
    let (_d, work) = scratch();
    let budget = work.join("dejavu.toml");
    std::fs::write(
        &budget,
        "version = 1\n[detectors]\nensure-dir = 0\n[syscalls]\nmkdir = { baseline = 2, slack = 1, process = \"node\" }\n\
         [paths]\n\"**/chats\" = 150\n",
    )
    .unwrap();
    let check = |script: &str| {
        let _ = std::fs::remove_dir_all(work.join("chats"));
        dejavu(
            &[
                "check",
                "--budget",
                budget.to_str().unwrap(),
                "--stacks",
                "off",
                "--",
                "node",
                script,
            ],
            &work,
        )
    };
    let dirty = check(&twin("dirty.js"));
    let text = String::from_utf8_lossy(&dirty.stdout);
    assert_eq!(
        dirty.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&dirty.stderr)
    );
    assert!(text.contains("3 of 3 budgets exceeded"), "{text}");
    assert!(
        text.contains("OVER  detectors.ensure-dir") && text.contains("297 > 0"),
        "{text}"
    );
    assert!(
        text.contains("OVER  syscalls.mkdir [node]") && text.contains("100 > 3"),
        "{text}"
    );
    assert!(text.contains("/chats"), "where the path calls are: {text}");
    let clean = check(&twin("clean.js"));
    let text = String::from_utf8_lossy(&clean.stdout);
    assert_eq!(clean.status.code(), Some(0), "{text}");
    assert!(text.contains("0 of 3 budgets exceeded"), "{text}");
}

#[test]
fn a_budget_on_a_finding_key_fails_the_dirty_twin_and_passes_the_clean_one() {
    require!("node");
    let (_d, work) = scratch();
    let rec = |script: &str, name: &str| {
        let _ = std::fs::remove_dir_all(work.join("chats"));
        let t = work.join(name);
        let (st, err) = common::record_quiet(&t, &["node", script], &work);
        assert!(st.success(), "{err}");
        t
    };
    let dirty = rec(&twin("dirty.js"), "dirty.dvt");
    let clean = rec(&twin("clean.js"), "clean.dvt");
    let out = dejavu(&["report", "--json", dirty.to_str().unwrap()], &work);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["detector"] == "ensure-dir")
        .map(|f| f["key"].as_str().unwrap().to_string())
        .expect("an ensure-dir finding");
    assert!(key.starts_with("dirty.js|ensure-dir|own|"), "{key}");
    let budget = work.join("dejavu.toml");
    std::fs::write(&budget, format!("version = 1\n[findings]\n{key:?} = 0\n")).unwrap();
    let check = |t: &Path| {
        dejavu(
            &[
                "check",
                "--budget",
                budget.to_str().unwrap(),
                "--trace",
                t.to_str().unwrap(),
            ],
            &work,
        )
    };
    let over = check(&dirty);
    let text = String::from_utf8_lossy(&over.stdout);
    assert_eq!(over.status.code(), Some(1), "{text}");
    assert!(text.contains("OVER  findings."), "{text}");
    let ok = check(&clean);
    let text = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{text}");
}

#[test]
fn a_finding_key_from_one_checkout_holds_in_another() {
    // A budget written where the project was checked out on a laptop holds for the same
    // code checked out elsewhere in CI: the key names the script from the directory the
    // recording started in. A key as builds before 2026-11-30 wrote it (the script's
    // absolute path) still counts.
    require!("node");
    let (_d, work) = scratch();
    let checkout = |name: &str, script: &str| {
        let dir = work.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(twin(script), dir.join("app.js")).unwrap();
        let t = dir.join("t.dvt");
        let (st, err) = common::record_quiet(&t, &["node", "app.js"], &dir);
        assert!(st.success(), "{err}");
        (dir, t)
    };
    let (laptop, t) = checkout("laptop", "dirty.js");
    let out = dejavu(&["report", "--json", t.to_str().unwrap()], &laptop);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["detector"] == "ensure-dir")
        .map(|f| f["key"].as_str().unwrap().to_string())
        .expect("an ensure-dir finding");
    assert!(
        key.starts_with("app.js|ensure-dir|own|") && key.ends_with("@app.js"),
        "{key}"
    );
    let (site, _) = key.rsplit_once('@').unwrap();
    let old = format!("{site}@{}", laptop.join("app.js").display());
    let (ci, dirty) = checkout("ci", "dirty.js");
    let (_, clean) = checkout("ci-fixed", "clean.js");
    for k in [&key, &old] {
        let budget = work.join("dejavu.toml");
        std::fs::write(&budget, format!("version = 1\n[findings]\n{k:?} = 0\n")).unwrap();
        for (t, want) in [(&dirty, 1), (&clean, 0)] {
            let args = ["check", "--budget", budget.to_str().unwrap(), "--trace"];
            let out = dejavu(&[&args[..], &[t.to_str().unwrap()]].concat(), &ci);
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(want),
                "{k} on {}: {text}",
                t.display()
            );
        }
    }
}

#[test]
fn update_writes_a_budget_from_the_clean_twin_that_the_dirty_one_then_fails() {
    require!("node");
    let (_d, work) = scratch();
    let budget = work.join("new.toml");
    let _ = std::fs::remove_dir_all(work.join("chats"));
    let out = dejavu(
        &[
            "check",
            "--budget",
            budget.to_str().unwrap(),
            "--update",
            "--stacks",
            "off",
            "--",
            "node",
            &twin("clean.js"),
        ],
        &work,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&budget).unwrap();
    assert!(
        text.contains("ensure-dir = 0") && text.contains("mkdir = 1"),
        "{text}"
    );
    let trace = record(&work, &twin("dirty.js"), "dirty.dvt");
    let out = dejavu(
        &[
            "check",
            "--budget",
            budget.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        &work,
    );
    assert_eq!(out.status.code(), Some(1));
    let v = dejavu(
        &[
            "check",
            "--json",
            "--budget",
            budget.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        &work,
    );
    let v: Value = serde_json::from_slice(&v.stdout).unwrap();
    let e = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "detectors" && e["name"] == "ensure-dir")
        .unwrap();
    assert_eq!(
        (
            e["count"].as_u64(),
            e["limit"].as_u64(),
            e["over"].as_bool()
        ),
        (Some(297), Some(0), Some(true))
    );

    // --update on an existing budget moves its limits to the dirty counts, comments kept.
    std::fs::write(&budget, format!("# ours\n{text}")).unwrap();
    let out = dejavu(
        &[
            "check",
            "--budget",
            budget.to_str().unwrap(),
            "--update",
            "--trace",
            trace.to_str().unwrap(),
        ],
        &work,
    );
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(&budget).unwrap();
    assert!(
        text.starts_with("# ours") && text.contains("ensure-dir = 297"),
        "{text}"
    );
}

#[test]
fn a_bad_budget_is_a_usage_error_before_the_program_runs() {
    let (_d, work) = scratch();
    let budget = work.join("bad.toml");
    std::fs::write(&budget, "version = 1\n[detectors]\nensure-dirs = 0\n").unwrap();
    let marker = work.join("ran");
    let out = dejavu(
        &[
            "check",
            "--budget",
            budget.to_str().unwrap(),
            "--",
            "touch",
            marker.to_str().unwrap(),
        ],
        &work,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("detectors.ensure-dirs") && err.contains("no such detector"),
        "{err}"
    );
    assert!(
        !marker.exists(),
        "the program must not run for a typo in the budget"
    );
    let out = dejavu(&["check", "--budget", budget.to_str().unwrap()], &work);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_programs_own_failure_within_budget_is_exit_3() {
    let (_d, work) = scratch();
    let budget = work.join("b.toml");
    std::fs::write(&budget, "version = 1\n[syscalls]\nopenat = 100000\n").unwrap();
    let out = dejavu(
        &[
            "check",
            "--budget",
            budget.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "exit 4",
        ],
        &work,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("the program itself failed (exit status 4)"),
        "{err}"
    );
}

/// `dejavu report --format sarif` of the dirty twin recorded with stacks.
fn sarif_of(work: &Path, trace: &Path) -> Value {
    sarif_with_root(work, trace, &common::repo())
}

fn sarif_with_root(work: &Path, trace: &Path, root: &Path) -> Value {
    let out = dejavu(
        &[
            "report",
            "--format",
            "sarif",
            "--source-root",
            root.to_str().unwrap(),
            trace.to_str().unwrap(),
        ],
        work,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sarif_puts_findings_on_their_source_lines_with_stable_fingerprints() {
    require!("node");
    let (_d, work) = scratch();
    let record_stacks = |name: &str| {
        let _ = std::fs::remove_dir_all(work.join("chats"));
        let t = work.join(name);
        let (st, err) = common::record_quiet(&t, &["node", &twin("dirty.js")], &work);
        assert!(st.success(), "{err}");
        t
    };
    let (a, b) = (record_stacks("a.dvt"), record_stacks("b.dvt"));
    let v = sarif_of(&work, &a);
    // Valid SARIF 2.1.0: it deserializes into the types generated from the official schema,
    // and validates against that schema (the copy the serde-sarif crate ships).
    let log: serde_sarif::sarif::Sarif = serde_json::from_value(v.clone()).expect("SARIF 2.1.0");
    validate_against_the_sarif_schema(&work, &v);
    assert_eq!(serde_json::to_value(&log.version).unwrap(), "2.1.0");
    let run = &v["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(rules
        .iter()
        .any(|r| r["id"] == "ensure-dir" && r["fullDescription"]["text"].is_string()));
    let src = common::repo().join("tests/workloads/detectors/ensure-dir/dirty.js");
    let mkdir_line = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .position(|l| l.contains("fs.mkdirSync(dir"))
        .unwrap()
        + 1;
    let r = run["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "ensure-dir")
        .unwrap_or_else(|| panic!("{run:#}"));
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"],
        "tests/workloads/detectors/ensure-dir/dirty.js"
    );
    assert_eq!(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    assert_eq!(loc["region"]["startLine"].as_u64(), Some(mkdir_line as u64));
    assert!(r["message"]["text"]
        .as_str()
        .unwrap()
        .contains("297 of 299 calls were redundant"));
    // Findings without a call site in the tree are notifications, never dropped: with a
    // source root that holds none of the program's files, every result becomes one. (Not
    // left to Node.js start-up having findings of its own: on some machines it has none.)
    let results = run["results"].as_array().unwrap().len();
    let elsewhere = sarif_with_root(&work, &a, &work);
    let notes = elsewhere["runs"][0]["invocations"][0]["toolExecutionNotifications"]
        .as_array()
        .unwrap();
    assert_eq!(elsewhere["runs"][0]["results"].as_array().unwrap().len(), 0);
    assert!(
        notes.len() >= results,
        "{} notes, {results} results",
        notes.len()
    );
    assert!(notes.iter().any(|n| n["descriptor"]["id"] == "ensure-dir"
        && n["message"]["text"]
            .as_str()
            .unwrap()
            .contains("no call site in the source tree")));
    // The same program recorded again: the same fingerprints.
    let fp = |v: &Value| -> Vec<String> {
        let mut f: Vec<String> = v["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r["partialFingerprints"]["dejavuFinding/v1"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        f.sort();
        f
    };
    assert_eq!(fp(&v), fp(&sarif_of(&work, &b)));
}

/// Validates `sarif` with jsonschema (scripts/setup puts it in target/test-venv) against the
/// official SARIF 2.1.0 JSON schema that the serde-sarif crate (a dev-dependency) ships;
/// says why when either is missing.
fn validate_against_the_sarif_schema(work: &Path, sarif: &Value) {
    let py = common::repo().join("target/test-venv/bin/python");
    let has = Command::new(&py)
        .args(["-c", "import jsonschema"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        common::skip(
            "jsonschema",
            "schema validation: no jsonschema in target/test-venv (scripts/setup installs it)",
        );
        return;
    }
    // This machine's platform only: no download of other platforms' dependencies.
    let host = Command::new("rustc").arg("-vV").output().unwrap();
    let host = String::from_utf8_lossy(&host.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap();
    let meta = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host,
        ])
        .current_dir(common::repo())
        .output()
        .unwrap();
    assert!(
        meta.status.success(),
        "{}",
        String::from_utf8_lossy(&meta.stderr)
    );
    let meta: Value = serde_json::from_slice(&meta.stdout).unwrap();
    let manifest = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "serde-sarif")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("serde-sarif is a dev-dependency");
    let schema = Path::new(manifest)
        .parent()
        .unwrap()
        .join("src/schema.json");
    assert!(schema.exists(), "{}", schema.display());
    let doc = work.join("out.sarif");
    std::fs::write(&doc, serde_json::to_vec(sarif).unwrap()).unwrap();
    let script = format!(
        "import json, jsonschema\n\
         schema = json.load(open({:?}))\n\
         doc = json.load(open({:?}))\n\
         errs = list(jsonschema.Draft7Validator(schema).iter_errors(doc))\n\
         [print(list(e.path), e.message[:300]) for e in errs[:10]]\n\
         raise SystemExit(1 if errs else 0)\n",
        schema.to_str().unwrap(),
        doc.to_str().unwrap()
    );
    let out = Command::new(&py).args(["-c", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "not valid against the SARIF 2.1.0 schema:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
