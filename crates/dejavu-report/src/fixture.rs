//! A fixed synthetic analysis for the snapshot tests, built directly so the snapshots do
//! not move when a detector's wording changes.

use dejavu_detect::{
    Analysis, CacheVerdict, CallFrame, Callsite, Finding, Owner, PathCount, ProgramCount, Sequence,
    Severity,
};

/// A JavaScript call site with a two-frame stack (node's fs internals, then the site).
pub(crate) fn site(function: &str, file: &str, line: u32, redundant: u64) -> Callsite {
    let frame =
        |kind: &'static str, function: &str, file: &str, line: u32, internal: bool| CallFrame {
            kind,
            function: function.into(),
            file: file.into(),
            line,
            module: String::new(),
            internal,
        };
    Callsite {
        function: function.into(),
        file: file.into(),
        line,
        column: 0,
        module: String::new(),
        addr: 0,
        owner: Owner::Own,
        redundant_calls: redundant,
        wasted_ns: redundant * 250_000,
        share: 0.0,
        stack: vec![
            frame("js", "statSync", "node:fs", 1650, true),
            frame("js", function, file, line, false),
        ],
        via: None,
    }
}
use dejavu_trace::Meta;

fn finding(detector: &'static str, pid: u32, command: &str, paths: &[&str]) -> Finding {
    let program = command
        .split(' ')
        .nth(1)
        .and_then(|s| s.rsplit('/').next())
        .unwrap_or("")
        .to_string();
    Finding {
        detector,
        severity: Severity::Low,
        owner: Owner::Own,
        key: format!(
            "{program}|{detector}|own|path:{}",
            paths.first().copied().unwrap_or("")
        ),
        program,
        programs: Vec::new(),
        processes: 1,
        pid,
        command: command.to_string(),
        paths: paths.iter().map(|p| p.to_string()).collect(),
        path_count: paths.len() as u64,
        top_paths: paths
            .iter()
            .map(|p| PathCount {
                path: p.to_string(),
                redundant_calls: 0,
            })
            .collect(),
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
        first_sites: Vec::new(),
        sequence: None,
        stream: None,
        also: Vec::new(),
        shown_in: None,
    }
}

/// `node server.js` with four findings of three kinds over 1,530 calls.
pub fn analysis() -> Analysis {
    let total_ns = 412_000_000;
    let lookup_fix = "cache the answer per path and drop it on the invalidation points in the \
                      hazards, or pass the result along instead of asking again";
    let mut findings = vec![
        Finding {
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
                stale_times: 0,
                safe: true,
            }),
            callsites: vec![
                site("loadConfig", "/srv/app/lib/config.js", 12, 800),
                site("handleRequest", "/srv/app/server.js", 40, 150),
                site("healthCheck", "/srv/app/server.js", 77, 40),
                site("warmup", "/srv/app/server.js", 90, 10),
            ],
            ..finding(
                "repeated-lookup",
                4242,
                "node server.js --port 8080",
                &["/etc/app.conf"],
            )
        },
        Finding {
            calls: 160,
            redundant_calls: 120,
            wasted_ns: 40_000_000,
            share: 40_000_000.0 / total_ns as f64,
            first_ts: 30_000_000,
            last_ts: 8_100_000_000,
            owner: Owner::Dependency,
            path_count: 40,
            top_paths: vec![
                PathCount {
                    path: "/srv/app/node_modules/express/package.json".into(),
                    redundant_calls: 30,
                },
                PathCount {
                    path: "/srv/app/node_modules/debug/package.json".into(),
                    redundant_calls: 12,
                },
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
                stale_times: 0,
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
                stale_times: 3,
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
            calls: 40,
            redundant_calls: 40,
            wasted_ns: 1_500,
            share: 1_500.0 / total_ns as f64,
            first_ts: 5_000_000_000,
            last_ts: 5_000_100_000,
            fix: "keep one handle open, or batch the log lines".into(),
            example: Some("GET /health 200 in 3ms".into()),
            stream: Some("stderr -> /var/log/app.log".into()),
            owner: Owner::Launcher,
            program: "sh -c".into(),
            ..finding(
                "repeated-output",
                4250,
                "sh -c 'tail -f log'",
                &["/var/log/app.log"],
            )
        },
    ];
    // Owners as the engine ranks them: own, dependency, runtime, launcher.
    findings.swap(1, 2);
    findings.insert(
        3,
        Finding {
            owner: Owner::Runtime,
            calls: 30,
            redundant_calls: 25,
            wasted_ns: 9_000,
            share: 9_000.0 / total_ns as f64,
            ..finding(
                "negative-probe",
                4242,
                "node server.js --port 8080",
                &["/srv/app/node_modules/*/package.json"],
            )
        },
    );
    // A native call site without symbols: named by module and offset (a shared library's:
    // the finding is a dependency's, as the engine would own it).
    findings[1].owner = Owner::Dependency;
    // Its calls came from two programs (the library in both): one finding, each program
    // with its calls, the key naming both.
    findings[1].programs = vec![
        ProgramCount {
            program: "reindex.py".into(),
            redundant_calls: 30,
        },
        ProgramCount {
            program: "compact.py".into(),
            redundant_calls: 14,
        },
    ];
    findings[1].processes = 2;
    findings[1].key = findings[1]
        .key
        .replacen("reindex.py|", "compact.py+reindex.py|", 1);
    findings[1].callsites.push(Callsite {
        function: String::new(),
        file: String::new(),
        line: 0,
        column: 0,
        module: "/usr/lib/x86_64-linux-gnu/libidx.so.1".into(),
        addr: 0x4f2a0,
        owner: Owner::Dependency,
        redundant_calls: 44,
        wasted_ns: 20_000_000,
        share: 0.0,
        stack: vec![CallFrame {
            kind: "native",
            function: String::new(),
            file: String::new(),
            line: 0,
            module: "/usr/lib/x86_64-linux-gnu/libidx.so.1".into(),
            internal: true,
        }],
        via: None,
    });
    findings[0].sequence = Some(Sequence {
        function: "loadConfig".into(),
        file: "/srv/app/lib/config.js".into(),
        per: "call",
        line: 0,
        iterations: 800,
        calls: 3,
        redundant: 2.0,
        steps: vec![
            "stat /etc/app.conf".into(),
            "open /etc/app.conf".into(),
            "stat /srv/app/conf.d/* -> ENOENT".into(),
        ],
    });
    for f in &mut findings {
        let total = f.redundant_calls.max(1) as f64;
        for c in &mut f.callsites {
            c.share = c.redundant_calls as f64 / total;
        }
    }
    // A JavaScript column, and a native call site (module, no source) on another finding.
    findings[0].callsites[0].column = 5;
    findings[2].callsites.push(Callsite {
        function: "poll_config".into(),
        file: String::new(),
        line: 0,
        column: 0,
        module: "/usr/local/bin/poller".into(),
        addr: 0,
        owner: Owner::Dependency,
        redundant_calls: 20,
        wasted_ns: 2_000_000,
        share: 20.0 / 120.0,
        stack: vec![CallFrame {
            kind: "native",
            function: "poll_config".into(),
            file: String::new(),
            line: 0,
            module: "/usr/local/bin/poller".into(),
            internal: false,
        }],
        via: None,
    });
    // The first site reached its calls through a library (Callsite::via).
    let through = CallFrame {
        kind: "js",
        function: "readJsonSync".into(),
        file: "/srv/app/node_modules/jsonfile/index.js".into(),
        line: 30,
        module: String::new(),
        internal: true,
    };
    findings[0].callsites[0].stack.insert(1, through.clone());
    findings[0].callsites[0].via = Some(through);
    // Another line made the first stat, which the per-request ones repeat.
    findings[0].first_sites.push(Callsite {
        function: "boot".into(),
        file: "/srv/app/server.js".into(),
        line: 4,
        column: 0,
        module: String::new(),
        addr: 0,
        owner: Owner::Own,
        redundant_calls: 1_000,
        wasted_ns: 0,
        share: 1.0,
        stack: vec![CallFrame {
            kind: "js",
            function: "boot".into(),
            file: "/srv/app/server.js".into(),
            line: 4,
            module: String::new(),
            internal: false,
        }],
        via: None,
    });
    // The same stat calls block the main thread: an aspect of the first finding, shown in
    // it (the engine lists such findings after the rows).
    let aspect = Finding {
        calls: 1_001,
        redundant_calls: 1_000,
        wasted_ns: 250_000_000,
        share: 250_000_000.0 / total_ns as f64,
        fix: "move the calls off the main thread (fs.promises), or out of the request path".into(),
        shown_in: Some(findings[0].key.clone()),
        ..finding(
            "sync-io-main-thread",
            4242,
            "node server.js --port 8080",
            &["/etc/app.conf"],
        )
    };
    findings[0].also.push(dejavu_detect::Aspect {
        detector: aspect.detector,
        key: aspect.key.clone(),
        redundant_calls: aspect.redundant_calls,
        shared_calls: 1_000,
        same_loop: false,
    });
    findings.push(aspect);
    // Graded as the engine grades them, from share and count, never set by hand.
    for f in &mut findings {
        f.severity = Severity::grade(f.share, f.redundant_calls);
    }
    Analysis {
        findings,
        hidden: 7,
        hidden_calls: 23,
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
        agentless: vec![dejavu_detect::Agentless {
            program: "_in_process.py".to_string(),
            processes: 3,
        }],
        truncated: None,
        detectors: vec!["repeated-lookup", "negative-probe", "repeated-output"],
        // The findings' calls, counted once each (the engine marks them), the hidden
        // findings' 23 included.
        redundant_calls: 1_000 + 120 + 44 + 25 + 40 + 23,
        redundant_ns: 310_010_500,
        callsites: vec![
            site("loadConfig", "/srv/app/lib/config.js", 12, 800),
            site("handleRequest", "/srv/app/server.js", 40, 150),
        ],
        redundant_bits: Vec::new(),
        stacks: Default::default(),
        timeline: Default::default(),
        run_ns: 0,
        samples: None,
        counts: None,
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
    a.callsites.clear();
    a
}
