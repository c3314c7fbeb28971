//! From recorded stacks to call sites: which frame is the program's own code (the
//! innermost one that is not libc, the language runtime's internals or dejavu's agents),
//! and the top call sites of a finding by redundant calls.

use crate::group::Sites;
use crate::{CallFrame, Callsite, Cx};
use dejavu_trace::{Frame, FrameKind, StackId, Strings};

/// Whether a frame is plumbing rather than the program's own code.
pub fn is_internal(f: &Frame, strings: &Strings) -> bool {
    let get = |id: Option<dejavu_trace::StrId>| id.map_or(&[][..], |i| strings.get(i));
    let file = get(f.file);
    let function = get(f.function);
    match f.kind {
        FrameKind::Js => {
            file.is_empty()
                || file.starts_with(b"node:")
                || file.starts_with(b"internal/")
                || file.ends_with(b"dejavu-agent.js")
        }
        FrameKind::Python => {
            file.is_empty()
                || file.starts_with(b"<frozen ")
                || contains(file, b"/dejavu-agent/")
                || file.ends_with(b"dejavu_agent.py")
                // The standard library (not third-party packages in site-packages).
                || (contains(file, b"/lib/python3") && !contains(file, b"-packages/"))
        }
        FrameKind::Native => {
            dejavu_trace::is_runtime_module(get(f.module))
                || function.starts_with(b"std::")
                || function.starts_with(b"core::")
                || function.starts_with(b"alloc::")
                || function.starts_with(b"<std::")
                || function.starts_with(b"<core::")
                || function.starts_with(b"<alloc::")
                || function.starts_with(b"__libc_")
                || function.starts_with(b"__GI_")
        }
    }
}

fn contains(h: &[u8], n: &[u8]) -> bool {
    h.windows(n.len()).any(|w| w == n)
}

fn frame_out(f: &Frame, strings: &Strings) -> CallFrame {
    let s = |id: Option<dejavu_trace::StrId>| {
        id.map(|i| strings.lossy(i).into_owned())
            .unwrap_or_default()
    };
    CallFrame {
        kind: f.kind.name(),
        function: s(f.function),
        file: s(f.file),
        line: f.line,
        module: s(f.module),
        internal: is_internal(f, strings),
    }
}

/// Most call sites listed per finding.
const TOP: usize = 5;

impl Cx<'_> {
    /// A finding's call sites from its tally's stacks, most redundant calls first.
    pub fn callsites(&self, sites: &Sites) -> Vec<Callsite> {
        let mut v = self.callsites_ranked(sites.iter(), usize::MAX);
        v.sort_by(|a, b| {
            b.redundant_calls
                .cmp(&a.redundant_calls)
                .then_with(|| (&a.file, a.line).cmp(&(&b.file, b.line)))
        });
        v.truncate(TOP);
        v
    }

    /// Call sites from stacks, grouped by their user frame, most time first (then most
    /// calls), at most `top`.
    pub fn callsites_ranked(
        &self,
        sites: impl Iterator<Item = (StackId, u64, u64)>,
        top: usize,
    ) -> Vec<Callsite> {
        // Group stacks by their user frame; each site keeps the stack with most calls.
        let mut by_site: Vec<(Callsite, u64)> = Vec::new();
        for (stack, n, ns) in sites {
            let frames = self.stack(stack);
            let Some(user) = frames
                .iter()
                .find(|f| !is_internal(f, self.strings))
                .or(frames.first())
            else {
                continue;
            };
            let u = frame_out(user, self.strings);
            let pos = by_site.iter().position(|(c, _)| {
                c.function == u.function
                    && c.file == u.file
                    && c.line == u.line
                    && c.module == u.module
            });
            let full = || frames.iter().map(|f| frame_out(f, self.strings)).collect();
            match pos {
                Some(i) => {
                    let (c, best) = &mut by_site[i];
                    c.redundant_calls += n;
                    c.wasted_ns += ns;
                    if n > *best {
                        *best = n;
                        c.stack = full();
                    }
                }
                None => by_site.push((
                    Callsite {
                        function: u.function,
                        file: u.file,
                        line: u.line,
                        column: user.column,
                        module: u.module,
                        redundant_calls: n,
                        wasted_ns: ns,
                        stack: full(),
                    },
                    n,
                )),
            }
        }
        by_site.sort_by(|a, b| {
            b.0.wasted_ns
                .cmp(&a.0.wasted_ns)
                .then(b.0.redundant_calls.cmp(&a.0.redundant_calls))
                .then_with(|| (&a.0.file, a.0.line).cmp(&(&b.0.file, b.0.line)))
        });
        by_site.into_iter().take(top).map(|(c, _)| c).collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{file, TraceBuilder};
    use dejavu_trace::FrameKind::{Js, Native};

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
        assert_eq!(f.len(), 1);
        let cs = &f[0].callsites;
        // The first call is not redundant; 3 redundant calls from the hot site, 2 from cold.
        assert_eq!(cs.len(), 2);
        assert_eq!(
            (cs[0].file.as_str(), cs[0].line, cs[0].function.as_str()),
            ("/app/config.js", 18, "loadConfig")
        );
        assert_eq!(cs[0].redundant_calls, 3);
        assert_eq!((cs[1].file.as_str(), cs[1].line), ("/app/main.js", 7));
        assert!(cs[0].stack[0].internal && !cs[0].stack[1].internal);
        assert_eq!(cs[0].stack.len(), 3);
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
}
