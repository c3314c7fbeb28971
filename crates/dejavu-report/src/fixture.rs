//! A fixed synthetic analysis for the snapshot tests, built directly so the snapshots do
//! not move when a detector's wording changes.

use dejavu_detect::{Analysis, CacheVerdict, Callsite, Finding, Severity};
use dejavu_trace::Meta;

fn finding(detector: &'static str, pid: u32, command: &str, paths: &[&str]) -> Finding {
    Finding {
        detector,
        severity: Severity::Low,
        pid,
        command: command.to_string(),
        paths: paths.iter().map(|p| p.to_string()).collect(),
        path_count: paths.len() as u64,
        example_paths: Vec::new(),
        calls: 0,
        redundant_calls: 0,
        wasted_ns: 0,
        share: 0.0,
        first_ts: 0,
        last_ts: 0,
        fix: String::new(),
        hazards: Vec::new(),
        cache: None,
        example: None,
        callsites: Vec::new(),
    }
}

/// `node server.js` with four findings of three kinds over 1,530 calls.
pub fn analysis() -> Analysis {
    let total_ns = 412_000_000;
    let lookup_fix = "cache the answer per path and drop it on the invalidation points in the \
                      hazards, or pass the result along instead of asking again";
    let findings = vec![
        Finding {
            severity: Severity::High,
            calls: 1_001,
            redundant_calls: 1_000,
            wasted_ns: 250_000_000,
            share: 250_000_000.0 / total_ns as f64,
            first_ts: 1_200_000_000,
            last_ts: 9_800_000_000,
            fix: lookup_fix.into(),
            hazards: vec![
                "3 repeat(s) followed a change the program itself made (write): a cache must \
                 drop the cached answer on that call"
                    .into(),
            ],
            cache: Some(CacheVerdict {
                saved_calls: 1_000,
                stale_answers: 0,
                safe: true,
            }),
            callsites: vec![
                Callsite {
                    function: "loadConfig".into(),
                    file: "/srv/app/lib/config.js".into(),
                    line: 12,
                    redundant_calls: 800,
                },
                Callsite {
                    function: "handleRequest".into(),
                    file: "/srv/app/server.js".into(),
                    line: 40,
                    redundant_calls: 150,
                },
                Callsite {
                    function: "healthCheck".into(),
                    file: "/srv/app/server.js".into(),
                    line: 77,
                    redundant_calls: 40,
                },
                Callsite {
                    function: "warmup".into(),
                    file: "/srv/app/server.js".into(),
                    line: 90,
                    redundant_calls: 10,
                },
            ],
            ..finding(
                "repeated-lookup",
                4242,
                "node server.js --port 8080",
                &["/etc/app.conf"],
            )
        },
        Finding {
            severity: Severity::Medium,
            calls: 160,
            redundant_calls: 120,
            wasted_ns: 40_000_000,
            share: 40_000_000.0 / total_ns as f64,
            first_ts: 30_000_000,
            last_ts: 8_100_000_000,
            path_count: 40,
            example_paths: vec![
                "/srv/app/node_modules/express/package.json".into(),
                "/srv/app/node_modules/debug/package.json".into(),
            ],
            fix: "remember which candidates do not exist (and drop that on a create in their \
                  directory), or narrow the search path"
                .into(),
            hazards: vec![
                "the answer changed 2 time(s) with no change dejavu saw (another program changed \
                 it): caching it is unsafe unless those changes can be ignored or detected"
                    .into(),
            ],
            cache: Some(CacheVerdict {
                saved_calls: 120,
                stale_answers: 2,
                safe: false,
            }),
            ..finding(
                "negative-probe",
                4242,
                "node server.js --port 8080",
                &["/srv/app/node_modules/*/node_modules/.deeply/nested/cache/package.json"],
            )
        },
        Finding {
            severity: Severity::Low,
            calls: 90,
            redundant_calls: 44,
            wasted_ns: 20_000_000,
            share: 20_000_000.0 / total_ns as f64,
            first_ts: 2_000_000_000,
            last_ts: 3_000_000_000,
            fix: lookup_fix.into(),
            cache: Some(CacheVerdict {
                saved_calls: 44,
                stale_answers: 0,
                safe: true,
            }),
            ..finding(
                "repeated-lookup",
                4250,
                "/usr/bin/python3 /srv/app/tools/reindex.py --all --verbose --output=/tmp/idx",
                &[
                    "/srv/app/data/a.idx",
                    "/srv/app/data/b.idx",
                    "/srv/app/data/c.idx",
                ],
            )
        },
        Finding {
            severity: Severity::Low,
            calls: 40,
            redundant_calls: 40,
            wasted_ns: 1_500,
            share: 1_500.0 / total_ns as f64,
            first_ts: 5_000_000_000,
            last_ts: 5_000_100_000,
            fix: "keep one handle open, or batch the log lines".into(),
            example: Some("GET /health 200 in 3ms".into()),
            ..finding(
                "repeated-output",
                4250,
                "sh -c 'tail -f log'",
                &["/var/log/app.log"],
            )
        },
    ];
    Analysis {
        findings,
        hidden: 7,
        syscalls: 1_530,
        syscall_ns: total_ns,
        processes: 3,
        meta: Meta {
            producer: "dejavu 0.1.0".into(),
            backend: "ptrace".into(),
            arch: "x86_64".into(),
            start_unix_ns: 1_714_000_000_000_000_000,
            command: vec![
                "node".into(),
                "server.js".into(),
                "--port".into(),
                "8080".into(),
            ],
            cwd: "/srv/app".into(),
            payload_bytes: 256,
            ..Meta::default()
        },
        lost_events: 0,
        truncated: None,
        detectors: vec!["repeated-lookup", "negative-probe", "repeated-output"],
        // The findings' calls, counted once each (the engine marks them).
        redundant_calls: 1_000 + 120 + 44 + 40,
        redundant_ns: 310_001_500,
    }
}

/// The same run with nothing over the thresholds.
pub fn empty() -> Analysis {
    let mut a = analysis();
    a.findings.clear();
    a.hidden = 3;
    // The hidden findings' calls.
    a.redundant_calls = 12;
    a.redundant_ns = 6_000;
    a
}
