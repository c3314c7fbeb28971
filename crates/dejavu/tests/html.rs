//! The HTML report in a real browser (issue 13): a dirty twin recorded under the tracer
//! (the backend `DEJAVU_BACKEND` picks), rendered with `dejavu report --format html`,
//! `dejavu run --html` and `dejavu diff --format html`, then loaded from file:// by
//! headless Chromium: the DOM it builds must hold the findings, detector names, the call
//! site with its source line, a flame graph and a timeline row with the redundant calls
//! marked; selecting a frame filters the findings; the page makes no network request
//! (Chromium's own network log says so); a screenshot goes to target/html-report.png for
//! a person to look at.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Debian's package installs `chromium`.
const CHROMIUM: &str = "chromium";

fn fixture() -> PathBuf {
    common::repo().join("tests/workloads/findings/stat_loop.py")
}

/// The fixture's line that makes the redundant stat.
fn stat_line() -> (usize, String) {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let (i, l) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("# STAT_LINE"))
        .unwrap();
    (i + 1, l.trim().to_string())
}

/// Records the dirty twin (`n` stats of one unchanged file) into `dir/NAME.dvt`.
fn record(dir: &Path, name: &str, n: u32) -> PathBuf {
    let data = dir.join("config.txt");
    std::fs::write(&data, "x=1\n").unwrap();
    let trace = dir.join(format!("{name}.dvt"));
    let py = fixture();
    let n = n.to_string();
    let (st, err) = common::record_quiet(
        &trace,
        &["python3", py.to_str().unwrap(), data.to_str().unwrap(), &n],
        dir,
    );
    assert!(st.success(), "recording failed: {err}");
    trace
}

fn dejavu_ok(args: &[&str], cwd: &Path) {
    let out = Command::new(common::dejavu())
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dejavu {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Chromium with no state of its own and nothing running in the background.
fn chromium(profile: &Path) -> Command {
    let mut c = Command::new("timeout");
    c.arg("120")
        .arg(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// The DOM Chromium builds from `url` (scripts run), and the requests the page made
/// according to Chromium's network log.
fn load(dir: &Path, url: &str) -> (String, Vec<String>) {
    let profile = tempfile::tempdir_in(dir).unwrap();
    let netlog = profile.path().join("net-log.json");
    let out = chromium(profile.path())
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium --dump-dom {url} failed");
    let dom = String::from_utf8(out.stdout).unwrap();
    (dom, page_requests(&netlog))
}

/// URLs the page itself asked for: the log's URL_REQUEST_START_JOB events whose initiator
/// is the page's origin (`null` for a file:// page; Chromium's own background requests
/// say `not an origin`), file: and data: URLs left out.
fn page_requests(netlog: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(netlog).unwrap();
    // Chromium may be killed before it closes the JSON: cut at the last whole event.
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| {
        let cut = text.rfind("},\n").map_or(text.len(), |i| i + 1);
        serde_json::from_str(&format!("{}]}}", &text[..cut])).expect("net log is JSON")
    });
    let start = v["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .expect("the net log names its event types");
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start))
        .filter(|e| e["params"]["initiator"].as_str() != Some("not an origin"))
        .filter_map(|e| e["params"]["url"].as_str())
        .filter(|u| !u.starts_with("file:") && !u.starts_with("data:"))
        .map(str::to_string)
        .collect()
}

/// The `<li class="finding ...">` start tags of a DOM.
fn finding_tags(dom: &str) -> Vec<&str> {
    dom.match_indices("<li class=\"finding")
        .map(|(i, _)| &dom[i..i + dom[i..].find('>').unwrap()])
        .collect()
}

#[test]
fn the_html_report_shows_findings_source_and_a_flame_graph_that_filters_them() {
    require!(CHROMIUM);
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let trace = record(dir, "dirty", 200);
    let html = dir.join("report.html");
    dejavu_ok(
        &[
            "report",
            "--format",
            "html",
            "-o",
            html.to_str().unwrap(),
            trace.to_str().unwrap(),
        ],
        dir,
    );
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.len() < 2 << 20,
        "{} bytes for a small trace",
        text.len()
    );
    assert!(text.contains("default-src 'none'"), "no CSP");
    for load in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
        "<link",
        "<iframe",
    ] {
        assert!(!text.contains(load), "the file loads something: {load}");
    }

    let url = format!("file://{}", html.display());
    let (dom, requests) = load(dir, &url);
    assert!(requests.is_empty(), "the page made requests: {requests:?}");
    assert!(
        dom.contains("data-rendered=\"1\""),
        "the script did not run to its end"
    );
    // The finding, by detector, with the program's call site and its source line marked.
    let (line, source) = stat_line();
    assert!(
        dom.contains("data-detector=\"repeated-lookup\" data-program=\"stat_loop.py\""),
        "no repeated-lookup finding of stat_loop.py"
    );
    assert!(dom.contains("<span class=\"detector\">repeated-lookup</span>"));
    assert!(
        dom.contains(&format!("check_config {}:{line}", fixture().display())),
        "no call site check_config at line {line}"
    );
    let marked = format!("<span class=\"ln\">{line:>5}</span> ");
    let at = dom
        .find(&format!("<mark class=\"line\">{marked}"))
        .expect("the call site's line is not marked in a source excerpt");
    assert!(
        dom[at..].starts_with(&format!("<mark class=\"line\">{marked}    {source}")),
        "the marked line is not the fixture's: {}",
        &dom[at..at + 120]
    );
    // A flame graph with the program's own frames.
    let frames = dom.matches("<button class=\"fr").count();
    assert!(frames >= 4, "{frames} flame graph frames");
    assert!(
        dom.contains("class=\"fr own\"") && dom.contains("data-frame=\"check_config\""),
        "check_config is not an own frame of the flame graph"
    );
    // A timeline row for the program's thread, with its redundant calls marked.
    let row = dom
        .split("<div class=\"tl-row\">")
        .skip(1)
        .find(|r| r.contains("stat_loop.py"))
        .expect("no timeline row for stat_loop.py");
    assert!(row.contains("<path class=\"tl-red\""), "{row}");
    assert!(dom.contains("id=\"tl-in\"") && dom.contains("id=\"tl-out\""));
    // Nothing filtered yet.
    let all = finding_tags(&dom);
    assert!(all.len() >= 2, "{all:?}");
    assert!(all.iter().all(|t| !t.contains("hidden")), "{all:?}");

    // Selecting check_config (the page reads #frame=NAME as a selection) leaves only the
    // findings whose calls pass through it.
    let (dom, requests) = load(dir, &format!("{url}#frame=check_config"));
    assert!(requests.is_empty(), "the page made requests: {requests:?}");
    let tags = finding_tags(&dom);
    let shown: Vec<&&str> = tags.iter().filter(|t| !t.contains("hidden")).collect();
    assert_eq!(shown.len(), 1, "{tags:#?}");
    assert!(
        shown[0].contains("data-detector=\"repeated-lookup\" data-program=\"stat_loop.py\""),
        "{shown:?}"
    );
    assert!(
        dom.contains(&format!(
            "Showing 1 of {} findings whose calls pass through check_config",
            tags.len()
        )),
        "no filter status"
    );
    assert!(dom.contains("aria-pressed=\"true\" data-frame=\"check_config\""));

    // A picture for a person.
    let shot = common::repo().join("target/html-report.png");
    let profile = tempfile::tempdir_in(dir).unwrap();
    let st = chromium(profile.path())
        .arg("--window-size=1280,1800")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success() && shot.exists(), "no screenshot");
}

#[test]
fn the_network_check_sees_a_page_that_loads_something() {
    // The check above must be able to fail: a page that loads an image over http.
    require!(CHROMIUM);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("loads.html");
    std::fs::write(
        &page,
        "<html><body><img src=\"http://127.0.0.1:9/dejavu-test.png\"></body></html>",
    )
    .unwrap();
    let (_, requests) = load(dir.path(), &format!("file://{}", page.display()));
    assert_eq!(requests, vec!["http://127.0.0.1:9/dejavu-test.png"]);
}

#[test]
fn run_html_and_diff_html_write_pages_a_browser_reads() {
    require!(CHROMIUM);
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let before = record(dir, "before", 200);
    let after = record(dir, "after", 1);
    let diff = dir.join("diff.html");
    dejavu_ok(
        &[
            "diff",
            "--format",
            "html",
            "-o",
            diff.to_str().unwrap(),
            before.to_str().unwrap(),
            after.to_str().unwrap(),
        ],
        dir,
    );
    let (dom, requests) = load(dir, &format!("file://{}", diff.display()));
    assert!(requests.is_empty(), "{requests:?}");
    // The program's repeated stat is gone after the fix, at its call site.
    let row = dom
        .split("<tr class=\"gone\">")
        .skip(1)
        .find(|r| r.contains("repeated-lookup") && r.contains("check_config"))
        .expect("no gone repeated-lookup row at check_config");
    assert!(
        row.contains("<td class=\"n\">199</td><td class=\"n\">–</td>"),
        "{row}"
    );
    assert!(dom.contains("id=\"diff-ds\""), "no call site table");
    assert!(dom.contains("id=\"diff-dy\""), "no syscall table");

    // `dejavu run --html`: the page beside the terminal report.
    let data = dir.join("config.txt");
    let page = dir.join("run.html");
    let py = fixture();
    dejavu_ok(
        &[
            "run",
            "--html",
            page.to_str().unwrap(),
            "--",
            "python3",
            py.to_str().unwrap(),
            data.to_str().unwrap(),
            "150",
        ],
        dir,
    );
    let (dom, _) = load(dir, &format!("file://{}", page.display()));
    assert!(
        dom.contains("data-detector=\"repeated-lookup\" data-program=\"stat_loop.py\""),
        "dejavu run --html has no finding"
    );
    assert!(dom.contains("<b>149</b> of 150 calls redundant"));
}

#[test]
fn whatif_html_shows_each_finding_s_fix_replayed_with_its_verdict() {
    // `dejavu whatif --html`: the dirty twin's repeated stat replayed under its own fix (a
    // stat cache invalidated on write), on a page a browser reads without a request.
    require!(CHROMIUM);
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let trace = record(dir, "t", 200);
    let page = dir.join("whatif.html");
    dejavu_ok(
        &[
            "whatif",
            "--html",
            page.to_str().unwrap(),
            trace.to_str().unwrap(),
        ],
        dir,
    );
    let (dom, requests) = load(dir, &format!("file://{}", page.display()));
    assert!(requests.is_empty(), "{requests:?}");
    let section = dom
        .split("<section class=\"policy\"")
        .skip(1)
        .find(|s| s.contains("repeated-lookup") && s.contains("check_config"))
        .unwrap_or_else(|| panic!("no policy section for the repeated stat: {dom}"));
    assert!(section.contains("--cache"), "{section}");
    assert!(
        section.contains("class=\"verdict safe\""),
        "the twin's file never changes: {section}"
    );
    assert!(section.contains("the replay agrees"), "{section}");
    assert!(
        section.contains("199 removed"),
        "200 stats of one unchanged file, one left: {section}"
    );
}

#[test]
fn html_to_a_terminal_is_refused_with_the_flag_that_fixes_it() {
    require!("script");
    let dir = tempfile::tempdir().unwrap();
    let trace = record(dir.path(), "t", 1);
    // script(1) gives dejavu a terminal for its stdout.
    let cmd = format!(
        "{} report --format html {}",
        common::dejavu().display(),
        trace.display()
    );
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("give it a file with -o"), "{text}");
    assert!(!text.contains("<html"), "{text}");
}
