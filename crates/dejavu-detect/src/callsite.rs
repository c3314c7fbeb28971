//! From recorded stacks to call sites: which frame to name (the innermost of the
//! program's own code, else of a dependency or the standard library: `owner::pick`), the
//! site's identity for grouping (function and file; the line only for anonymous code),
//! and the top call sites of a finding with the share of its calls each made.

use crate::group::Sites;
use crate::owner::{pick, Class};
use crate::{CallFrame, Callsite, Cx, Owner};
use dejavu_trace::{Frame, StackId, StrId, Strings};

/// A call site's identity: what a change in the code would touch. Function and file (a
/// rebuilt bundle moves lines, not functions); the line only where the function has no
/// name of its own (`<module>`, anonymous functions); a native frame without symbols by
/// its module and offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteKey {
    /// Function name.
    pub function: Option<StrId>,
    /// Source file.
    pub file: Option<StrId>,
    /// Native module, when there is no file.
    pub module: Option<StrId>,
    /// Offset in the module, when there is neither function nor file.
    pub addr: u64,
    /// Line, when the function has no name of its own.
    pub line: u32,
}

/// What a stack says about its call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteInfo {
    /// The site, None when no frame names one (only plumbing or interpreter frames).
    pub key: Option<SiteKey>,
    /// Whose call it is, None when the stack does not tell.
    pub owner: Option<Owner>,
    /// The frame named (index, innermost first).
    pub frame: Option<usize>,
    /// That frame's line (0 when unknown).
    pub line: u32,
}

fn anonymous(name: &[u8]) -> bool {
    name.is_empty() || name.starts_with(b"<") || name == b"(anonymous)" || name == b"anonymous"
}

/// The key of frame `f`.
pub fn site_key(f: &Frame, strings: &Strings) -> SiteKey {
    let function = f.function.filter(|&i| !strings.get(i).is_empty());
    let file = f.file.filter(|&i| !strings.get(i).is_empty());
    let named = function.is_some_and(|i| !anonymous(strings.get(i)));
    SiteKey {
        function,
        file,
        module: if file.is_none() { f.module } else { None },
        addr: if function.is_none() && file.is_none() {
            f.addr
        } else {
            0
        },
        line: if named { 0 } else { f.line },
    }
}

/// A function's name as its developers write it: mypyc's C name of a compiled Python
/// function (`CPyDef_metastore___SqliteMetadataStore___close`: `CPyDef_` and the module's
/// and the function's names joined by `___`, a `___` in a name written `___3_`) is
/// `metastore.SqliteMetadataStore.close`. Other names are kept.
pub(crate) fn readable(name: String) -> String {
    let Some(rest) = name
        .strip_prefix("CPyDef_")
        .or_else(|| name.strip_prefix("CPyPy_"))
    else {
        return name;
    };
    if rest.is_empty() || !rest.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return name;
    }
    rest.replace("___3_", "\u{0}")
        .replace("___", ".")
        .replace('\u{0}', "___")
}

pub(crate) fn frame_out(f: &Frame, strings: &Strings, class: Class) -> CallFrame {
    let s = |id: Option<StrId>| {
        id.map(|i| strings.lossy(i).into_owned())
            .unwrap_or_default()
    };
    CallFrame {
        kind: f.kind.name(),
        function: readable(s(f.function)),
        file: s(f.file),
        line: f.line,
        module: s(f.module),
        internal: !matches!(class, Class::Own),
    }
}

/// Most call sites listed per finding.
const TOP: usize = 5;

impl Cx<'_> {
    /// What stack `stack`, made by a process running image `image`, says about its call
    /// (memoized).
    pub fn site(&self, stack: StackId, image: u32) -> SiteInfo {
        let prog_key = image;
        if let Some(s) = self.site_memo.borrow().get(&(stack, prog_key)) {
            return *s;
        }
        let frames = self.stack(stack);
        let info = {
            let mut progs = self.programs.borrow_mut();
            let prog = progs.get(self.replay, self.strings, image);
            let p = pick(&frames, self.strings, prog);
            SiteInfo {
                key: p.frame.map(|i| site_key(&frames[i], self.strings)),
                owner: p.owner,
                frame: p.frame,
                line: p.frame.map_or(0, |i| frames[i].line),
            }
        };
        self.site_memo.borrow_mut().insert((stack, prog_key), info);
        info
    }

    /// A finding's call sites from its tally's stacks (made by processes running
    /// `image`'s program), most redundant calls first, each with its share of `total`.
    pub fn callsites(&self, sites: &Sites, image: u32, total: u64) -> Vec<Callsite> {
        self.callsites_of(sites.iter().map(|(st, n, ns)| (st, image, n, ns)), total)
    }

    /// As [`Cx::callsites`], from (stack, image, calls, ns): each stack read as the
    /// program of its own image's (a finding whose calls came from several programs).
    pub fn callsites_of(
        &self,
        sites: impl Iterator<Item = (StackId, u32, u64, u64)>,
        total: u64,
    ) -> Vec<Callsite> {
        let mut v = self.callsites_ranked(sites, usize::MAX);
        v.sort_by(|a, b| {
            b.redundant_calls
                .cmp(&a.redundant_calls)
                .then_with(|| (&a.file, a.line).cmp(&(&b.file, b.line)))
        });
        v.truncate(TOP);
        for c in &mut v {
            c.share = if total == 0 {
                0.0
            } else {
                (c.redundant_calls as f64 / total as f64).min(1.0)
            };
        }
        v
    }

    /// Call sites from (stack, image, calls, ns), grouped by site, most time first (then
    /// most calls), at most `top`. Stacks that name no site are left out.
    pub fn callsites_ranked(
        &self,
        sites: impl Iterator<Item = (StackId, u32, u64, u64)>,
        top: usize,
    ) -> Vec<Callsite> {
        // A site is a line of a function: a function that makes its calls from two lines
        // lists both, each with its own calls (a finding is still one per function). Each
        // keeps the stack (and column) that made most of its calls.
        let mut by_site: Vec<((SiteKey, u32), Callsite, u64)> = Vec::new();
        let mut index: rustc_hash::FxHashMap<(SiteKey, u32), usize> =
            rustc_hash::FxHashMap::default();
        for (stack, image, n, ns) in sites {
            let info = self.site(stack, image);
            let (Some(key), Some(fi)) = (info.key, info.frame) else {
                continue;
            };
            let frames = self.stack(stack);
            // The stack, and the library frame the calls were made in when one lies
            // between the call and the site (`Callsite::via`).
            let full = || {
                let mut progs = self.programs.borrow_mut();
                let prog = progs.get(self.replay, self.strings, image);
                let mut via = None;
                let stack = frames
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let class = crate::owner::classify(f, self.strings, prog);
                        let out = frame_out(f, self.strings, class);
                        if i < fi
                            && via.is_none()
                            && matches!(class, Class::Stdlib | Class::Dependency)
                        {
                            via = Some(out.clone());
                        }
                        out
                    })
                    .collect::<Vec<_>>();
                (stack, via)
            };
            let user = &frames[fi];
            let key = (key, user.line);
            match index.get(&key) {
                Some(&i) => {
                    let (_, c, best) = &mut by_site[i];
                    c.redundant_calls += n;
                    c.wasted_ns += ns;
                    if n > *best {
                        *best = n;
                        c.column = user.column;
                        (c.stack, c.via) = full();
                    }
                }
                None => {
                    let s = |id: Option<StrId>| {
                        id.map(|i| self.strings.lossy(i).into_owned())
                            .unwrap_or_default()
                    };
                    index.insert(key, by_site.len());
                    let (stack, via) = full();
                    by_site.push((
                        key,
                        Callsite {
                            function: readable(s(user.function)),
                            file: s(user.file),
                            line: user.line,
                            column: user.column,
                            module: s(user.module),
                            addr: if key.0.addr != 0 { user.addr } else { 0 },
                            owner: info.owner.unwrap_or(Owner::Own),
                            redundant_calls: n,
                            wasted_ns: ns,
                            share: 0.0,
                            stack,
                            via,
                        },
                        n,
                    ));
                }
            }
        }
        let mut v: Vec<Callsite> = by_site.into_iter().map(|(_, c, _)| c).collect();
        v.sort_by(|a, b| {
            b.wasted_ns
                .cmp(&a.wasted_ns)
                .then(b.redundant_calls.cmp(&a.redundant_calls))
                .then_with(|| (&a.file, a.line).cmp(&(&b.file, b.line)))
        });
        v.truncate(top);
        v
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{file, TraceBuilder};
    use dejavu_trace::FrameKind::{Js, Native, Python};

    #[test]
    fn a_line_reached_from_many_stacks_counts_all_of_their_calls() {
        // One library line called from 60 places of the program (every caller a
        // different stack), on each of 3 paths that make one finding: the line made
        // all the redundant calls. Tallies kept 32 stacks each, and the finding's merge
        // 32 in all: the line said 96 of 177 calls (jest's realpath: 107 of 2,397).
        let mut b = TraceBuilder::new();
        let callers: Vec<_> = (0..60)
            .map(|i| {
                b.stack(&[
                    (Js, "statSync", "node:fs", 1650),
                    (Js, "tryRealpath", "/app/node_modules/util/real.js", 23),
                    (
                        Js,
                        &format!("caller{i}"),
                        "/app/node_modules/resolve/sync.js",
                        100 + i,
                    ),
                ])
            })
            .collect();
        for dir in ["/app", "/app/lib", "/app/lib/x"] {
            for &st in &callers {
                b.call(dejavu_trace::Sys::Statx, |c, b| {
                    c.path = Some(b.s(dir));
                    c.stat = Some(b.st(file(1, 10, 1)));
                    c.stack = Some(st);
                });
            }
        }
        let f = b.findings("repeated-lookup");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].redundant_calls, 177);
        let cs = &f[0].callsites;
        assert_eq!(cs.len(), 1, "{cs:#?}");
        assert_eq!((cs[0].function.as_str(), cs[0].line), ("tryRealpath", 23));
        assert_eq!(cs[0].redundant_calls, 177);
    }

    #[test]
    fn call_sites_name_the_innermost_user_frame_ranked_by_redundant_calls() {
        let mut b = TraceBuilder::new();
        let hot = b.stack(&[
            (Js, "statSync", "node:fs", 1650),
            (Js, "loadConfig", "/app/config.js", 18),
            (Js, "handle", "/app/server.js", 40),
        ]);
        let cold = b.stack(&[
            (Js, "statSync", "node:fs", 1650),
            (Js, "boot", "/app/main.js", 7),
        ]);
        for i in 0..6 {
            let st = if i < 4 { hot } else { cold };
            b.call(dejavu_trace::Sys::Statx, |c, b| {
                c.path = Some(b.s("/app/config.json"));
                c.stat = Some(b.st(file(1, 10, 1)));
                c.stack = Some(st);
            });
        }
        let f = b.findings("repeated-lookup");
        assert_eq!(f.len(), 1, "one path, the site with most calls owns it");
        let cs = &f[0].callsites;
        // The first call is not redundant; 3 redundant calls from the hot site, 2 from cold.
        assert_eq!(cs.len(), 2);
        assert_eq!(
            (cs[0].file.as_str(), cs[0].line, cs[0].function.as_str()),
            ("/app/config.js", 18, "loadConfig")
        );
        assert_eq!(cs[0].redundant_calls, 3);
        assert!((cs[0].share - 0.6).abs() < 1e-9, "{}", cs[0].share);
        assert_eq!((cs[1].file.as_str(), cs[1].line), ("/app/main.js", 7));
        assert!(cs[0].stack[0].internal && !cs[0].stack[1].internal);
        assert_eq!(cs[0].stack.len(), 3);
    }

    #[test]
    fn a_console_scripts_entry_line_is_not_the_programs_code() {
        // pip's venv/bin/black is `sys.exit(patched_main())`: the call belongs to the
        // library code below it.
        let mut b = TraceBuilder::new();
        let st = b.stack(&[
            (Python, "exists", "<frozen genericpath>", 19),
            (Python, "init", "/usr/lib/python3.11/mimetypes.py", 507),
            (
                Python,
                "Path.__init__",
                "/venv/lib/python3.11/site-packages/click/types.py",
                1130,
            ),
            (Python, "<module>", "/venv/bin/black", 5),
        ]);
        for _ in 0..12 {
            b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                c.path = Some(b.s("/etc/httpd/mime.types"));
                c.ret = -2;
                c.stack = Some(st);
            });
        }
        let f = b.findings("negative-probe");
        assert_eq!(f[0].owner, crate::Owner::Dependency, "{f:?}");
        // click's line, which called the standard library (made in mimetypes' `init`).
        assert_eq!(f[0].callsites[0].function, "Path.__init__");
        assert_eq!(f[0].callsites[0].via.as_ref().map(|v| v.line), Some(507));
    }

    #[test]
    fn mypycs_function_names_read_as_python() {
        use super::readable;
        let r = |s: &str| readable(s.to_string());
        assert_eq!(
            r("CPyDef_metastore___SqliteMetadataStore___close"),
            "metastore.SqliteMetadataStore.close"
        );
        assert_eq!(
            r("CPyDef_mypy___build___State___parse_file_inner"),
            "mypy.build.State.parse_file_inner"
        );
        assert_eq!(r("CPyPy_nodes___a___3_b"), "nodes.a___b");
        for kept in ["CPyDef_", "sub_acfb0", "main", "CPyDef_x::y"] {
            assert_eq!(r(kept), kept);
        }
    }

    #[test]
    fn a_programs_compiled_python_is_its_own_and_sqlites_calls_under_it_the_librarys() {
        // mypy is compiled by mypyc into `<hash>__mypyc.cpython-311-*.so`, which its
        // top_level.txt lists: its functions (`CPyDef_<module>___<name>`) are the program's
        // own code, as its .py files are, where its calls had been named at a stripped
        // `sub_acfb0 (libsqlite3.so)` as a dependency's. SQLite's calls under them (its
        // journal probes, its size checks) are the library's, named at mypy's line.
        let dir = std::env::temp_dir().join(format!(
            "dejavu-mypyc-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let site = dir.join("venv/lib/python3.11/site-packages");
        std::fs::create_dir_all(site.join("mypy-2.4.1.dist-info")).unwrap();
        std::fs::write(
            site.join("mypy-2.4.1.dist-info/top_level.txt"),
            "6ec57f84c680d3a3778b__mypyc\nmypy\nmypyc\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("venv/bin")).unwrap();
        let venv = dir.join("venv").display().to_string();
        std::fs::write(
            dir.join("venv/bin/mypy"),
            format!(
                "#!{venv}/bin/python3\nimport sys\nfrom mypy.__main__ import console_entry\n\
                 if __name__ == '__main__':\n    sys.exit(console_entry())\n"
            ),
        )
        .unwrap();
        let site = site.display().to_string();
        let mypyc = format!("{site}/6ec57f84c680d3a3778b__mypyc.cpython-311-x86_64-linux-gnu.so");
        let python = format!("{venv}/bin/python3.11");
        let sqlite = "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6";
        let other = format!("{site}/yaml/_yaml.cpython-311-x86_64-linux-gnu.so");
        let script = format!("{venv}/bin/mypy");
        let findings = |stack: &[(&str, &str)]| {
            let mut b = TraceBuilder::new();
            b.exec(&python, &[&python, &script, "pkg"]);
            let st = b.native_stack(stack);
            for _ in 0..12 {
                b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                    c.path = Some(b.s("/proj/.mypy_cache/3.11/cache.db-journal"));
                    c.ret = -2;
                    c.stack = Some(st);
                });
            }
            b.findings("negative-probe")
        };
        // mypy's own compiled code makes the call: its own.
        let f = findings(&[
            ("CPyDef_modulefinder___FindModuleCache___find", &mypyc),
            ("_PyEval_EvalFrameDefault", &python),
        ]);
        assert_eq!(f[0].owner, crate::Owner::Own, "{f:#?}");
        assert_eq!(
            f[0].callsites[0].function,
            "modulefinder.FindModuleCache.find"
        );
        // SQLite makes it under mypy's code: the library's, at mypy's line.
        let f = findings(&[
            ("sub_aa260", sqlite),
            ("sqlite3_open_v2", sqlite),
            ("CPyDef_metastore___connect_db", &mypyc),
            ("_PyEval_EvalFrameDefault", &python),
        ]);
        assert_eq!(f[0].owner, crate::Owner::Dependency, "{f:#?}");
        assert_eq!(f[0].callsites[0].function, "metastore.connect_db");
        assert_eq!(
            f[0].callsites[0].via.as_ref().map(|v| v.function.as_str()),
            Some("sub_aa260")
        );
        // Another distribution's extension module is a dependency's.
        let f = findings(&[
            ("yaml_parser_load", &other),
            ("_PyEval_EvalFrameDefault", &python),
        ]);
        assert_eq!(f[0].owner, crate::Owner::Dependency, "{f:#?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tracers_callback_is_not_the_call_of_the_frame_it_traces() {
        // `coverage run -m pytest`: as a test module's frame starts, the interpreter calls
        // coverage's `_should_trace`, which realpaths the module's file. The module's
        // `<module>` line made none of those calls: coverage's code did.
        let stack = |callback: bool| {
            let mut frames = vec![
                (Python, "_joinrealpath", "<frozen posixpath>", 451),
                (Python, "realpath", "<frozen posixpath>", 416),
                (
                    Python,
                    "abs_file",
                    "/venv/lib/python3.11/site-packages/coverage/files.py",
                    158,
                ),
            ];
            if callback {
                frames.push((
                    Python,
                    "Coverage._should_trace",
                    "/venv/lib/python3.11/site-packages/coverage/control.py",
                    452,
                ));
            }
            frames.push((Python, "<module>", "/proj/tests/test_recipes.py", 3));
            frames.push((Python, "<module>", "/venv/bin/coverage", 8));
            frames
        };
        for (callback, owner, function) in [
            (true, crate::Owner::Dependency, "abs_file"),
            // Without the callback (the program's line calling coverage's API): its own.
            (false, crate::Owner::Own, "<module>"),
        ] {
            let mut b = TraceBuilder::new();
            b.exec(
                "/venv/bin/python3",
                &[
                    "/venv/bin/python3",
                    "/venv/bin/coverage",
                    "run",
                    "-m",
                    "pytest",
                ],
            );
            let st = b.stack(&stack(callback));
            for _ in 0..12 {
                b.call(dejavu_trace::Sys::Lstat, |c, b| {
                    c.path = Some(b.s("/proj/tests"));
                    c.stat = Some(b.st(crate::testkit::dir(4)));
                    c.stack = Some(st);
                });
            }
            let f = b.findings("repeated-lookup");
            assert_eq!(f[0].owner, owner, "{callback}: {f:#?}");
            assert_eq!(f[0].callsites[0].function, function, "{callback}");
        }
    }

    #[test]
    fn rusts_test_harness_is_the_runtime_of_a_test_binary() {
        // `cargo test`: libtest prints each test's result (a write per line to a pipe),
        // from the `main` that `rustc --test` generates at the crate root's line 1. The
        // program's own small-writes they were, at `crt::main lib.rs:1`.
        let mut b = TraceBuilder::new();
        let st = b.stack(&[
            (Native, "__GI___stat64", "", 0),
            (
                Native,
                "<std::io::stdio::Stdout as std::io::Write>::flush",
                "/rustc/59807616/library/std/src/io/stdio.rs",
                799,
            ),
            (
                Native,
                "<test::formatters::pretty::PrettyFormatter<_>>::write_result",
                "/rustc/59807616/library/test/src/formatters/pretty.rs",
                174,
            ),
            (Native, "crt::main", "/src/crt/src/lib.rs", 1),
        ]);
        for _ in 0..12 {
            b.call(dejavu_trace::Sys::Stat, |c, b| {
                c.path = Some(b.s("/src/crt/target/x"));
                c.ret = -2;
                c.stack = Some(st);
            });
        }
        let f = b.findings("negative-probe");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].owner, crate::Owner::Runtime, "{f:#?}");
    }

    #[test]
    fn libc_frames_are_skipped_for_native_code() {
        let mut b = TraceBuilder::new();
        let st = b.stack(&[
            (Native, "__GI___stat64", "", 0),
            (Native, "poll_config", "/src/app.c", 11),
        ]);
        for _ in 0..3 {
            b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                c.path = Some(b.s("/etc/app.conf"));
                c.stat = Some(b.st(file(2, 10, 1)));
                c.stack = Some(st);
            });
        }
        let f = b.findings("repeated-lookup");
        assert_eq!(f[0].callsites[0].function, "poll_config");
        assert_eq!(f[0].callsites[0].line, 11);
    }

    #[test]
    fn the_import_system_makes_a_call_the_runtimes_and_the_stdlib_names_a_site() {
        let mut b = TraceBuilder::new();
        let import = b.stack(&[
            (
                Python,
                "_path_stat",
                "<frozen importlib._bootstrap_external>",
                147,
            ),
            (Python, "<module>", "/app/main.py", 1),
        ]);
        let listing = b.stack(&[
            (Python, "isdir", "<frozen genericpath>", 42),
            (
                Python,
                "list_directory",
                "/usr/lib/python3.11/http/server.py",
                780,
            ),
            (Python, "do_GET", "/usr/lib/python3.11/http/server.py", 680),
        ]);
        for _ in 0..12 {
            b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                c.path = Some(b.s("/usr/lib/python3.11"));
                c.stat = Some(b.st(crate::testkit::dir(5)));
                c.stack = Some(import);
            });
            b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                c.path = Some(b.s("/srv/www/a.txt"));
                c.stat = Some(b.st(file(6, 1, 1)));
                c.stack = Some(listing);
            });
        }
        let f = b.findings("repeated-lookup");
        let by = |p: &str| f.iter().find(|f| f.paths[0] == p).expect(p);
        assert_eq!(by("/usr/lib/python3.11").owner, crate::Owner::Runtime);
        let web = by("/srv/www/a.txt");
        assert_eq!(web.owner, crate::Owner::Dependency);
        assert_eq!(web.callsites[0].function, "list_directory");
        assert_eq!(web.callsites[0].line, 780);
        // The site is the library's own line: nothing between made the calls.
        assert_eq!(web.callsites[0].via, None);
    }

    #[test]
    fn python_m_of_an_installed_package_makes_the_whole_package_the_programs_own() {
        // `python -m sphinx`: Sphinx's modules are the program, not a dependency (only its
        // __main__.py and __init__.py were). Another package stays a dependency.
        let site = "/venv/lib/python3.11/site-packages";
        for (argv, owner) in [
            (
                &["python3.11", "-m", "sphinx", "-b", "html"][..],
                crate::Owner::Own,
            ),
            (&["python3.11", "build.py"][..], crate::Owner::Dependency),
            // A test runner is not the program's own code: the tests are.
            (
                &["python3.11", "-m", "pytest", "-q"][..],
                crate::Owner::Dependency,
            ),
        ] {
            let mut b = TraceBuilder::new();
            b.exec("/venv/bin/python3.11", argv);
            let checksum = if argv.get(2) == Some(&"pytest") {
                format!("{site}/pytest/__init__.py")
            } else {
                format!("{site}/sphinx/builders/html/_assets.py")
            };
            let jinja = format!("{site}/jinja2/loaders.py");
            let st = b.stack(&[
                (Python, "_file_checksum", &checksum, 123),
                (Python, "get_source", &jinja, 200),
            ]);
            for _ in 0..12 {
                b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                    c.path = Some(b.s("/srv/out/_static/a.css"));
                    c.stat = Some(b.st(file(6, 1, 1)));
                    c.stack = Some(st);
                });
            }
            let f = b.findings("repeated-lookup");
            assert_eq!(f.len(), 1, "{argv:?}: {f:#?}");
            assert_eq!(f[0].owner, owner, "{argv:?}");
            assert_eq!(f[0].callsites[0].function, "_file_checksum", "{argv:?}");
        }
    }

    #[test]
    fn importlib_metadata_is_a_library_the_program_calls_not_the_import_system() {
        // setuptools calls importlib.metadata.entry_points() from seven lines, each
        // reading every dist-info's entry_points.txt again: its code's calls, not the
        // runtime's (they were folded into the runtime's line, 768 calls of `python -m
        // build`).
        let mut b = TraceBuilder::new();
        let st = b.stack(&[
            (Python, "read_text", "<frozen pathlib>", 1058),
            (
                Python,
                "PathDistribution.read_text",
                "/usr/lib/python3.11/importlib/metadata/__init__.py",
                938,
            ),
            (
                Python,
                "entry_points",
                "/usr/lib/python3.11/importlib/metadata/__init__.py",
                1040,
            ),
            (Python, "load_plugins", "/app/main.py", 7),
        ]);
        for _ in 0..12 {
            b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                c.path = Some(b.s("/venv/lib/python3.11/site-packages/x.dist-info"));
                c.stat = Some(b.st(crate::testkit::dir(5)));
                c.stack = Some(st);
            });
        }
        let f = b.findings("repeated-lookup");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].owner, crate::Owner::Own, "{f:#?}");
        let c = &f[0].callsites[0];
        assert_eq!((c.function.as_str(), c.line), ("load_plugins", 7));
        let via = c.via.as_ref().expect("via");
        assert_eq!(via.function, "PathDistribution.read_text");
    }

    #[test]
    fn a_librarys_call_into_the_standard_library_is_named_at_the_librarys_line() {
        // setuptools logs each record through logging, whose handler flushes per record
        // (pyproject_hooks runs the backend from its own script, a dependency's file):
        // the line to change is setuptools' log call, made in logging's flush.
        let mut b = TraceBuilder::new();
        let st = b.stack(&[
            (
                Python,
                "StreamHandler.flush",
                "/usr/lib/python3.11/logging/__init__.py",
                1113,
            ),
            (
                Python,
                "Distribution.announce",
                "/venv/lib/python3.11/site-packages/setuptools/_distutils/dist.py",
                1044,
            ),
            (
                Python,
                "main",
                "/venv/lib/python3.11/site-packages/pyproject_hooks/_in_process/_in_process.py",
                373,
            ),
        ]);
        for _ in 0..12 {
            b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                c.path = Some(b.s("/usr/share/locale/en/LC_MESSAGES/setuptools.mo"));
                c.ret = -2;
                c.stack = Some(st);
            });
        }
        let f = b.findings("negative-probe");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].owner, crate::Owner::Dependency);
        let c = &f[0].callsites[0];
        assert_eq!(
            (c.function.as_str(), c.line),
            ("Distribution.announce", 1044),
            "{c:#?}"
        );
        assert_eq!(
            c.via.as_ref().map(|v| v.function.as_str()),
            Some("StreamHandler.flush")
        );
    }

    #[test]
    fn a_site_that_led_to_the_calls_through_a_library_says_where_they_were_made() {
        // A project's runtests.py line that starts Django's test runner, through it to
        // unittest's test discovery, which stats the package directory again and again.
        // (Not manage.py's `main`: that is the entry point django-admin writes, owner.rs.)
        let mut b = TraceBuilder::new();
        let st = b.stack(&[
            (Python, "isfile", "<frozen genericpath>", 30),
            (
                Python,
                "TestLoader._find_test_path",
                "/usr/lib/python3.11/unittest/loader.py",
                410,
            ),
            (
                Python,
                "DiscoverRunner.build_suite",
                "/venv/lib/python3.11/site-packages/django/test/runner.py",
                914,
            ),
            (Python, "main", "/srv/site/runtests.py", 18),
            (Python, "<module>", "/srv/site/runtests.py", 22),
        ]);
        let own = b.stack(&[
            (Python, "isfile", "<frozen genericpath>", 30),
            (Python, "check", "/srv/site/runtests.py", 9),
        ]);
        for (path, stack) in [("/srv/site/shop", st), ("/srv/site/x.cfg", own)] {
            for _ in 0..12 {
                b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                    c.path = Some(b.s(path));
                    c.stat = Some(b.st(file(7, 1, 1)));
                    c.stack = Some(stack);
                });
            }
        }
        let f = b.findings("repeated-lookup");
        let by = |p: &str| f.iter().find(|f| f.paths[0] == p).expect(p);
        let c = &by("/srv/site/shop").callsites[0];
        assert_eq!((c.function.as_str(), c.line), ("main", 18));
        let via = c.via.as_ref().expect("via");
        assert_eq!(
            (via.function.as_str(), via.line),
            ("TestLoader._find_test_path", 410)
        );
        // A site that made its calls itself (through plumbing alone) has none.
        assert_eq!(by("/srv/site/x.cfg").callsites[0].via, None);
    }
}
