//! sync-io-main-thread: file system calls made on a Node.js main thread after start-up
//! (readFileSync, statSync, existsSync, appendFileSync ...): each one blocks the event loop
//! (seed 000: 110 -> 10 sync calls per prompt).

use crate::group::{Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{FdKind, PathKey, View};
use dejavu_trace::{ev, Record, Sys, SysClass, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "sync-io-main-thread",
    summary:
        "file system calls on a Node.js main thread after start-up, each blocking the event loop",
    explain: "Applies to Node.js processes (the executable is node, nodejs, node-* or bun, or \
argv[0] is node). A call counts when it is made by the main thread (thread id == process id; \
libuv's threadpool runs fs.promises and callback fs work on other threads, which never count), \
after start-up, and is a file system call: a call on a path (open, stat family, access, readlink, \
mkdir, unlink, rename, chmod, utimes ...) or on a descriptor of a regular file or directory (read, \
write, close, fstat, lseek, getdents64, fsync, ftruncate ...); calls on pipes, sockets, terminals, \
/dev/null, eventfds and the like are not file I/O and do not count, nor are calls on descriptors 0, \
1 and 2 (console output, which Node.js writes synchronously by design, whatever the stream points \
to: repeated-output and small-writes judge it), nor calls on /proc and /sys, whose answers the \
kernel makes up from memory with nothing to wait for (os.cpus(), a native addon reading its cgroup's \
CPU quota). Module loading is not the finding: calls on .js, .mjs, .cjs and .node files, on any \
package.json, and on anything inside a node_modules directory or one of the global folders the \
CommonJS loader looks in ($HOME/.node_modules, $HOME/.node_libraries, PREFIX/lib/node) are never counted. Start-up ends where dejavu's Node.js agent says the \
main module has run (the first turn of the event loop after it): main-thread calls before that are \
the program starting up (loading, reading its configuration), and a program that never returns to \
the event loop (a command-line tool doing its work in its main module) has none to block. Only \
a server counts: a process that accepted a connection (accept, accept4) during the recording, \
whose blocked loop delays the requests it serves; a tool that returns to its loop between \
items (eslint running rules, yarn linking packages) delays nobody, and a sync call is often \
its fastest way (a cluster worker that gets its connections from the primary is not seen to \
accept them, and is not counted either). Without \
the agent (--stacks off, or NODE_OPTIONS dropped), start-up is the initial burst of module loading: \
it ends at the last main-thread access to a module file that came within startup_gap_ms of the \
previous one (the first measured from the exec). Calls before --skip-startup never count. Every \
counted call is redundant (it blocks the event loop; the async API would not), and its time is \
wasted, on a path the main thread comes back to: a path it names (opens, stats, checks) only once \
after start-up is not counted (a build tool reading each source file and writing each output once, \
an existence check behind a cache: the async API would make the same calls, once each, and nobody \
acts on those; a check, a stat and an open of one file in a row, a config loaded, is one use of it: \
the path is come back to when it is opened, stat'ed or checked again), while config.json read per \
request is. Findings are per call site (without stacks, per path pattern), ranked by time.",
    example: "app.post('/chat', (req, res) => { fs.appendFileSync(log, line); \
const cfg = JSON.parse(fs.readFileSync('config.json')); ... })",
    fix: "use fs.promises (or callback APIs), which run on libuv's threadpool, and await them; \
cache what is read on every request; create directories and check existence once, not per event",
    hazards: "Going async changes ordering: code after the call must await it, errors arrive as \
rejections, and writes that relied on being finished before the next line (append then read, \
write then exit) need a queue or a flush on shutdown, including on process.exit and EPIPE paths.",
    options: &[(
        "startup_gap_ms",
        1000,
        "module loads closer together than this (ms) belong to the initial start-up burst",
    )],
    make: |cfg: &Config| {
        Box::new(SyncIo {
            gap_ns: cfg
                .opt(INFO.id, "startup_gap_ms", 1000)
                .saturating_mul(1_000_000),
            procs: FxHashMap::default(),
            class: Vec::new(),
            seen: FxHashMap::default(),
            tallies: Tallies::default(),
            not_node: 0,
            served: Default::default(),
        })
    },
};

/// A counted call: `View::seq`, start, duration, stack, and how it named the path
/// ([`use_of`]: 0 for a call on a descriptor, which names none).
type Counted = (u64, u64, u64, Option<dejavu_trace::StackId>, u8);

/// How a call names its path: 0 not at all (a read on a descriptor), 1 an open, 2 a stat,
/// 3 an access check, 4 anything else (a mkdir, an unlink).
fn use_of(s: &Syscall, on_fd: bool) -> u8 {
    if on_fd {
        return 0;
    }
    match s.sys.class() {
        SysClass::Open => 1,
        SysClass::Lookup if matches!(s.sys, Sys::Access | Sys::Faccessat | Sys::Faccessat2) => 3,
        SysClass::Lookup => 2,
        _ => 4,
    }
}

#[derive(Clone, Default)]
struct Pend {
    /// The calls, counted when committed.
    members: Vec<Counted>,
}

/// The counted calls of one (process image, path), held until the main thread comes back
/// to the path (then tallied, and the next ones at once), dropped at the end if it never
/// did.
#[derive(Default)]
struct Seen {
    calls: Vec<Counted>,
    /// Calls that named the path, by how ([`use_of`]: opens, stats, access checks,
    /// others): a readFileSync is one open. The path is used again when one kind comes
    /// again: a config checked, stat'ed and then read once (eslint's `.eslintrc.json`:
    /// access, statx, open) is one use.
    uses: [u32; 5],
}

struct NodeProc {
    /// The process image (a process that execs gets a new one).
    image: u32,
    is_node: bool,
    startup: bool,
    /// The last main-thread module access of the start-up burst (the exec at first).
    last_module_ts: u64,
    /// A module has been loaded: before the first one, start-up goes on however slow it
    /// is (node's own bootstrap on a loaded machine).
    loading: bool,
    /// Calls since that access: start-up work if another module access follows within
    /// the gap, else counted.
    pending: FxHashMap<PathKey, Pend>,
}

struct SyncIo {
    gap_ns: u64,
    procs: FxHashMap<u32, NodeProc>,
    /// Per path key: 0 unknown, 1 module file, 2 other.
    class: Vec<u8>,
    seen: FxHashMap<(u32, PathKey), Seen>,
    tallies: Tallies,
    /// The last process seen not to be Node (most traces are runs of one program).
    not_node: u32,
    /// Images that accepted a connection: servers, whose blocked loop delays requests.
    served: rustc_hash::FxHashSet<u32>,
}

/// Calls naming a path (opens, stats) a process's main thread makes after start-up before
/// its calls on the path count.
const MIN_USES: u32 = 2;

fn is_node_proc(cx: &Cx<'_>, pid: u32) -> bool {
    let Some(p) = cx.replay.proc(pid) else {
        return false;
    };
    if p.is_node {
        return true;
    }
    p.argv.is_some_and(|a| {
        let argv0 = cx.strings.get(a).split(|&c| c == 0).next().unwrap_or(&[]);
        let base = argv0.rsplit(|&c| c == b'/').next().unwrap_or(argv0);
        base == b"node" || base == b"nodejs"
    })
}

/// Whether a call on a descriptor of this kind is file I/O.
fn file_kind(k: FdKind) -> bool {
    matches!(k, FdKind::File | FdKind::Dir)
}

/// What a path is to this detector (`SyncIo::class`; 0: not known yet).
const MODULE: u8 = 1;
const FILE: u8 = 2;
const KERNEL: u8 = 3;

/// A path of a pseudo file system whose answers the kernel makes up from memory: /proc and
/// /sys (not /dev, /run or /tmp: device nodes and tmpfs are files like others here).
fn is_kernel_path(b: &[u8]) -> bool {
    [&b"/proc"[..], b"/sys"].iter().any(|root| {
        b.strip_prefix(*root)
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
    })
}

impl SyncIo {
    fn kind(&mut self, cx: &Cx<'_>, p: PathKey) -> u8 {
        let i = p.0 as usize;
        if self.class.len() <= i {
            self.class.resize(i + 1, 0);
        }
        if self.class[i] == 0 {
            let b = cx.replay.paths.bytes(p);
            self.class[i] = if is_kernel_path(b) {
                KERNEL
            } else if crate::owner::is_node_module_path(b) {
                MODULE
            } else {
                FILE
            };
        }
        self.class[i]
    }

    fn module(&mut self, cx: &Cx<'_>, p: PathKey) -> bool {
        self.kind(cx, p) == MODULE
    }

    /// Counts a call on `path` by the main thread of the process running `image`: held
    /// until the path has been named MIN_USES times, then tallied (with those held), so
    /// that only a path named once keeps its calls in memory.
    /// A process that accepts no connection is a tool, not a server: its calls are held
    /// (not tallied) until it accepts one, and dropped if it never does.
    fn count(
        seen: &mut FxHashMap<(u32, PathKey), Seen>,
        tallies: &mut Tallies,
        served: &rustc_hash::FxHashSet<u32>,
        cx: &Cx<'_>,
        (image, path): (u32, PathKey),
        c: Counted,
    ) {
        let e = seen.entry((image, path)).or_default();
        let k = usize::from(c.4);
        if k > 0 {
            e.uses[k] = e.uses[k].saturating_add(1);
        }
        e.calls.push(c);
        if served.contains(&image) {
            Self::tally(e, tallies, cx, (image, path));
        }
    }

    /// Tallies the calls held for a path, once the main thread has named it MIN_USES times.
    fn tally(e: &mut Seen, tallies: &mut Tallies, cx: &Cx<'_>, (image, path): (u32, PathKey)) {
        if e.uses.iter().any(|&u| u >= MIN_USES) {
            let t = tallies.get(image, path);
            for (seq, ts, dur, stack, _) in e.calls.drain(..) {
                t.calls += 1;
                t.redundant(ts, dur, stack);
                cx.mark(seq, dur, stack);
            }
        }
    }

    fn commit(
        seen: &mut FxHashMap<(u32, PathKey), Seen>,
        tallies: &mut Tallies,
        served: &rustc_hash::FxHashSet<u32>,
        cx: &Cx<'_>,
        np: &mut NodeProc,
    ) {
        let mut pending: Vec<(PathKey, Pend)> = np.pending.drain().collect();
        pending.sort_by_key(|(p, _)| *p);
        for (path, p) in pending {
            for c in p.members {
                Self::count(seen, tallies, served, cx, (np.image, path), c);
            }
        }
    }
}

impl Detector for SyncIo {
    fn wants(&self, sys: Sys) -> bool {
        matches!(
            sys.class(),
            SysClass::Open
                | SysClass::Close
                | SysClass::Read
                | SysClass::Write
                | SysClass::Lookup
                | SysClass::Mutate
                | SysClass::Sync
                | SysClass::Seek
        ) && !matches!(sys, Sys::MemfdCreate | Sys::CloseRange)
            || matches!(sys, Sys::Accept | Sys::Accept4)
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if matches!(s.sys, Sys::Accept | Sys::Accept4) {
            if s.ret >= 0 {
                self.served.insert(v.image);
            }
            return;
        }
        // Threadpool and worker threads do not block the event loop.
        if s.tid != s.pid || s.ev & ev::UNFINISHED != 0 {
            return;
        }
        if s.pid == self.not_node || self.procs.get(&s.pid).is_some_and(|p| !p.is_node) {
            return;
        }
        let Some(path) = v.path else { return };
        // On a descriptor, only regular files and directories are file I/O.
        let on_fd = s.ev & ev::PATH_FROM_FD != 0 || s.path.is_none();
        // The standard streams are console output (process.stdout, console.log), written
        // synchronously to files and pipes by Node.js's design, not the fs API.
        if on_fd && s.fd.is_some_and(|fd| (0..=2).contains(&fd)) {
            return;
        }
        if on_fd {
            let kind = |f: Option<dejavu_replay::Fd>, p: Option<PathKey>| match f {
                Some(f) => f.kind,
                None => p.map_or(FdKind::Other, |p| {
                    FdKind::classify(cx.replay.paths.bytes(p), None)
                }),
            };
            let file = file_kind(kind(v.fd, v.path))
                || (matches!(s.sys, Sys::Sendfile | Sys::CopyFileRange | Sys::Splice)
                    && file_kind(kind(v.fd2, v.path2)));
            if !file {
                return;
            }
        }
        // /proc and /sys are answered from the kernel's memory, not storage: nothing to
        // wait for that the threadpool would take off the loop (os.cpus(), Rust's
        // available_parallelism() in a native addon reading the cgroup's CPU quota).
        if self.kind(cx, path) == KERNEL {
            return;
        }
        let module = self.module(cx, path);
        let gap = self.gap_ns;
        let np = self.procs.entry(s.pid).or_insert_with(|| NodeProc {
            image: v.image,
            is_node: is_node_proc(cx, s.pid),
            startup: true,
            last_module_ts: cx.replay.proc(s.pid).map_or(0, |p| p.exec_ts),
            loading: false,
            pending: FxHashMap::default(),
        });
        if !np.is_node {
            self.not_node = s.pid;
            return;
        }
        // With the agent loaded, start-up ends where it says: the first turn of the event
        // loop after the main module ran. A program that never gets there (a command-line
        // tool that does its work in its main module and exits) has no event loop to block.
        if let Some(im) = cx
            .replay
            .images
            .get(v.image as usize)
            .filter(|im| im.ready_ts.is_some())
        {
            np.pending.clear();
            np.startup = false;
            let after_main = im.main_done_ts.is_some_and(|t| s.ts >= t);
            if module || !after_main || !cx.config.counts(s.ts) {
                return;
            }
            Self::count(
                &mut self.seen,
                &mut self.tallies,
                &self.served,
                cx,
                (v.image, path),
                (v.seq, s.ts, s.dur, s.stack, use_of(s, on_fd)),
            );
            return;
        }
        if module {
            if !np.loading {
                np.loading = true;
                np.pending.clear();
                np.last_module_ts = np.last_module_ts.max(s.ts);
                return;
            }
            if np.startup {
                if s.ts.saturating_sub(np.last_module_ts) <= gap {
                    // Still loading modules: what came before was start-up.
                    np.pending.clear();
                    np.last_module_ts = np.last_module_ts.max(s.ts);
                } else {
                    np.startup = false;
                    Self::commit(&mut self.seen, &mut self.tallies, &self.served, cx, np);
                }
            }
            return;
        }
        if !cx.config.counts(s.ts) {
            return;
        }
        if np.startup {
            if np.loading && s.ts.saturating_sub(np.last_module_ts) > gap {
                np.startup = false;
                Self::commit(&mut self.seen, &mut self.tallies, &self.served, cx, np);
            } else {
                let p = np.pending.entry(path).or_default();
                p.members
                    .push((v.seq, s.ts, s.dur, s.stack, use_of(s, on_fd)));
                return;
            }
        }
        Self::count(
            &mut self.seen,
            &mut self.tallies,
            &self.served,
            cx,
            (v.image, path),
            (v.seq, s.ts, s.dur, s.stack, use_of(s, on_fd)),
        );
    }

    fn on_record(&mut self, rec: &Record, cx: &Cx<'_>) {
        match rec {
            // A new program starts up again (and may not be Node at all).
            Record::Exec(e) => {
                if self.not_node == e.pid {
                    self.not_node = 0;
                }
                if let Some(mut np) = self.procs.remove(&e.pid) {
                    Self::commit(&mut self.seen, &mut self.tallies, &self.served, cx, &mut np);
                }
            }
            Record::Exit(e) if e.pid == e.tid => {
                if self.not_node == e.pid {
                    self.not_node = 0;
                }
                if let Some(mut np) = self.procs.remove(&e.pid) {
                    Self::commit(&mut self.seen, &mut self.tallies, &self.served, cx, &mut np);
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        // The calls after the last module load of the start-up burst are the program's.
        for np in self.procs.values_mut() {
            Self::commit(&mut self.seen, &mut self.tallies, &self.served, cx, np);
        }
        // A path the main thread named once after start-up (a build tool reading each
        // source file once, writing each output once, an existence check behind a cache)
        // blocked the loop once: the async API would make the same calls, and nobody
        // would act on it. Its calls, still held, are not counted; a path it came back to
        // (config.json per request) was tallied at its second use (`count`), or is now if
        // the server accepted its first connection after that use.
        let mut seen: Vec<_> = self.seen.drain().collect();
        seen.sort_by_key(|(k, _)| *k);
        for (k, mut e) in seen {
            if self.served.contains(&k.0) {
                Self::tally(&mut e, &mut self.tallies, cx, k);
            }
        }
        let mut out = self
            .tallies
            .findings(&INFO, cx, Wording { cache: false }, &|_, _| Vec::new());
        for f in &mut out {
            f.hazards.push(format!(
                "{} call(s) on the main thread; fs.promises or callbacks run them on libuv's \
                 threadpool; code after them must then await the result",
                f.calls
            ));
            f.hazards.push(
                "start-up (until the main module has run) is not counted; use \
                 --skip-startup to exclude more"
                    .into(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::is_kernel_path;
    use crate::testkit::{file, TraceBuilder};
    use crate::Config;

    const APP: &str = "/app/server.js";
    const CFG: &str = "/app/config.json";

    /// node starts: loads its main script, a dependency and their package.json files.
    fn start_node(b: &mut TraceBuilder, exe: &str, argv0: &str) {
        b.exec(exe, &[argv0, APP]);
        b.open("/etc/ssl/openssl.cnf", 0, 17, Some(file(1, 10, 1)));
        b.read(17, "/etc/ssl/openssl.cnf", 4096, 10);
        b.close(17, "/etc/ssl/openssl.cnf");
        b.stat("/app/package.json", Err(2));
        b.open(APP, 0, 18, Some(file(2, 300, 1)));
        b.read(18, APP, 8192, 300);
        b.close(18, APP);
        b.stat("/app/node_modules/dep/package.json", Ok(file(3, 40, 1)));
        b.stat("/app/node_modules", Ok(crate::testkit::dir(4)));
        b.open(
            "/app/node_modules/dep/index.js",
            0,
            18,
            Some(file(5, 99, 1)),
        );
        b.read(18, "/app/node_modules/dep/index.js", 8192, 99);
        b.close(18, "/app/node_modules/dep/index.js");
    }

    /// One request: its connection accepted, readFileSync(config.json) and
    /// statSync(data.bin).
    fn request(b: &mut TraceBuilder) {
        serve(b);
        work(b);
    }

    /// A connection accepted: the process is a server.
    fn serve(b: &mut TraceBuilder) {
        b.call(dejavu_trace::Sys::Accept4, |c, _| {
            c.fd = Some(18);
            c.ret = 21;
        });
    }

    /// A request's file work, or a command-line tool's per item.
    fn work(b: &mut TraceBuilder) {
        b.open(CFG, 0o2000000, 19, Some(file(6, 23, 1)));
        b.read(19, CFG, 8192, 23);
        b.read(19, CFG, 8192, 0);
        b.close(19, CFG);
        b.stat("/app/data.bin", Ok(file(7, 4096, 1)));
    }

    #[test]
    fn a_process_that_accepts_no_connection_blocks_no_request() {
        // A command-line tool's sync calls per item (eslint's rules, yarn's linking) are
        // not counted; a server's are, also those made before its first connection.
        for accepts in [false, true] {
            let mut b = TraceBuilder::new();
            start_node(&mut b, "/usr/bin/node", "node");
            b.wait(2_000_000_000);
            for _ in 0..10 {
                work(&mut b);
            }
            if accepts {
                serve(&mut b);
            }
            let f = b.findings("sync-io-main-thread");
            let n: u64 = f.iter().map(|f| f.redundant_calls).sum();
            assert_eq!(n, if accepts { 50 } else { 0 }, "{f:#?}");
        }
    }

    #[test]
    fn the_loaders_global_folders_are_module_loading() {
        // A require() after start-up, per request, looks in the global folders after the
        // node_modules directories: the loader's look-ups, as node_modules' are. A path of
        // the program's own under a directory named lib/node is not one.
        let run = |dir: &str| {
            let mut b = TraceBuilder::new();
            start_node(&mut b, "/usr/bin/node", "node");
            serve(&mut b);
            b.wait(2_000_000_000);
            for _ in 0..12 {
                b.stat(dir, Err(2));
                b.stat(&format!("{dir}/plugin"), Err(2));
            }
            b.findings("sync-io-main-thread").len()
        };
        assert_eq!(run("/root/.node_modules"), 0);
        assert_eq!(run("/root/.node_libraries"), 0);
        assert_eq!(run("/usr/local/lib/node"), 0);
        assert_eq!(run("/srv/app/lib/node/data"), 1);
    }

    #[test]
    fn a_path_named_once_after_start_up_is_not_counted() {
        // A build tool after start-up: each source read once, each output written once,
        // each existence checked once (Eleventy's 132 access() calls, each on another
        // path behind its own cache). The same calls async would be the same calls.
        let mut b = TraceBuilder::new();
        start_node(&mut b, "/usr/bin/node", "node");
        serve(&mut b);
        b.wait(2_000_000_000);
        for i in 0..30 {
            let src = format!("/site/src/p{i}.md");
            b.open(&src, 0, 19, Some(file(100 + i, 50, 1)));
            b.read(19, &src, 8192, 50);
            b.close(19, &src);
            b.access(&format!("/site/_data/d{i}.json"), 0, -2);
            let out = format!("/site/_site/p{i}.html");
            b.open(&out, 0o1101, 20, Some(file(200 + i, 0, 1)));
            b.write(20, &out, "<html>", false);
            b.close(20, &out);
        }
        assert!(b.findings("sync-io-main-thread").is_empty());
        // A config checked, stat'ed, then read once (eslint's .eslintrc.json: access,
        // statx, open, reads, close): one use of it, not three.
        let mut b = TraceBuilder::new();
        start_node(&mut b, "/usr/bin/node", "node");
        serve(&mut b);
        b.wait(2_000_000_000);
        for i in 0..12 {
            let cfg = format!("/proj/d{i}/.eslintrc.json");
            b.access(&cfg, 0, 0);
            b.stat(&cfg, Ok(file(300 + i, 40, 1)));
            b.open(&cfg, 0, 21, Some(file(300 + i, 40, 1)));
            b.read(21, &cfg, 8192, 40);
            b.read(21, &cfg, 8192, 0);
            b.close(21, &cfg);
        }
        assert!(b.findings("sync-io-main-thread").is_empty());
        // One file it comes back to, per page: counted (and only that one).
        let mut b = TraceBuilder::new();
        start_node(&mut b, "/usr/bin/node", "node");
        serve(&mut b);
        b.wait(2_000_000_000);
        for i in 0..30 {
            let src = format!("/site/src/p{i}.md");
            b.open(&src, 0, 19, Some(file(100 + i, 50, 1)));
            b.read(19, &src, 8192, 50);
            b.close(19, &src);
            b.stat("/site/_data/posts.json", Ok(file(9, 10, 1)));
        }
        let f = b.findings("sync-io-main-thread");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].paths, vec!["/site/_data/posts.json".to_string()]);
        assert_eq!(f[0].redundant_calls, 30);
    }

    #[test]
    fn sync_fs_calls_per_request_after_start_up_count_every_one() {
        let mut b = TraceBuilder::new();
        start_node(&mut b, "/usr/bin/node", "node");
        serve(&mut b);
        for _ in 0..20 {
            request(&mut b);
        }
        let f = b.findings("sync-io-main-thread");
        // Without stacks, one finding per path pattern: both files of /app (named, as
        // they are only two).
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].paths,
            vec![CFG.to_string(), "/app/data.bin".to_string()]
        );
        assert_eq!((f[0].calls, f[0].redundant_calls), (100, 100));
        assert_eq!(f[0].wasted_ns, 100 * 500);
        let top: Vec<(&str, u64)> = f[0]
            .top_paths
            .iter()
            .map(|p| (p.path.as_str(), p.redundant_calls))
            .collect();
        assert_eq!(top, vec![(CFG, 80), ("/app/data.bin", 20)]);
    }

    #[test]
    fn proc_and_sys_are_the_kernels_memory_not_file_io() {
        // After start-up, per request: os.cpus() (/proc/cpuinfo, /proc/stat, a cpufreq
        // file under /sys) and a cgroup quota read, beside one config file read.
        let run = |with_config: bool| {
            let mut b = TraceBuilder::new();
            start_node(&mut b, "/usr/bin/node", "node");
            serve(&mut b);
            for _ in 0..10 {
                for p in [
                    "/proc/cpuinfo",
                    "/proc/stat",
                    "/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
                    "/sys/fs/cgroup/cpu.max",
                ] {
                    b.open(p, 0o2000000, 21, Some(file(30, 0, 1)));
                    b.read(21, p, 8192, 100);
                    b.close(21, p);
                }
                b.stat("/proc/self", Ok(crate::testkit::dir(31)));
                if with_config {
                    b.stat("/app/data.bin", Ok(file(7, 4096, 1)));
                }
            }
            b.findings("sync-io-main-thread")
        };
        assert!(run(false).is_empty(), "{:?}", run(false));
        let f = run(true);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].paths, vec!["/app/data.bin".to_string()]);
        assert_eq!(f[0].redundant_calls, 10);
        // Only the roots themselves and what is under them: /procfs, /system are files.
        assert!(is_kernel_path(b"/proc") && is_kernel_path(b"/sys/fs/cgroup/cpu.max"));
        assert!(!is_kernel_path(b"/procfs/x") && !is_kernel_path(b"/system/x"));
    }

    #[test]
    fn async_fs_on_threadpool_threads_does_not_count() {
        let mut b = TraceBuilder::new();
        start_node(&mut b, "/usr/bin/node", "node");
        serve(&mut b);
        for i in 0..20 {
            // fs.promises: open, read, close on libuv worker threads.
            b.tid = 101 + i % 4;
            request(&mut b);
        }
        b.tid = 100;
        assert!(b.findings("sync-io-main-thread").is_empty());
    }

    #[test]
    fn other_runtimes_and_start_up_work_do_not_count() {
        let mut b = TraceBuilder::new();
        start_node(&mut b, "/usr/bin/python3", "python3");
        serve(&mut b);
        for _ in 0..20 {
            request(&mut b);
        }
        assert!(b.findings("sync-io-main-thread").is_empty());
        // Node, but only start-up work: the config read before the last module load.
        let mut b = TraceBuilder::new();
        b.exec("/usr/bin/node", &["node", APP]);
        for _ in 0..20 {
            request(&mut b);
        }
        b.open(APP, 0, 18, Some(file(2, 300, 1)));
        b.close(18, APP);
        assert!(b.findings("sync-io-main-thread").is_empty());
    }

    #[test]
    fn argv0_node_is_node_and_a_module_load_after_the_gap_ends_start_up() {
        let mut b = TraceBuilder::new();
        start_node(&mut b, "/opt/runtime/bin/js-host", "node");
        serve(&mut b);
        for _ in 0..5 {
            request(&mut b);
        }
        b.wait(2_000_000_000);
        // A lazy require() long after start-up: not counted, and not start-up either.
        b.open("/app/lazy.js", 0, 18, Some(file(9, 10, 1)));
        b.close(18, "/app/lazy.js");
        for _ in 0..5 {
            request(&mut b);
        }
        let f = b.findings("sync-io-main-thread");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].top_paths[0].path, CFG);
        assert_eq!(
            f[0].top_paths[0].redundant_calls, 40,
            "all ten requests count"
        );
    }

    #[test]
    fn a_slow_start_up_before_the_main_script_is_still_start_up() {
        // A loaded machine: more than startup_gap_ms between the exec and the first
        // module load. What node reads before it loads modules is start-up all the same.
        let mut b = TraceBuilder::new();
        b.exec("/usr/bin/node", &["node", APP]);
        b.wait(1_500_000_000);
        for _ in 0..20 {
            b.stat("/etc/ssl/openssl.cnf", Ok(file(1, 10, 1)));
        }
        b.wait(1_500_000_000);
        b.open(
            "/app/node_modules/dep/index.js",
            0,
            18,
            Some(file(5, 99, 1)),
        );
        b.close(18, "/app/node_modules/dep/index.js");
        b.open(APP, 0, 18, Some(file(2, 300, 1)));
        b.close(18, APP);
        b.wait(1_500_000_000);
        for _ in 0..5 {
            request(&mut b);
        }
        let f = b.findings("sync-io-main-thread");
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].top_paths
                .iter()
                .all(|p| p.path != "/etc/ssl/openssl.cnf"),
            "{f:?}"
        );
        assert_eq!(f[0].calls, 25, "five requests");
    }

    #[test]
    fn console_output_is_not_the_fs_api() {
        // process.stdout redirected to a file: written synchronously by design.
        let mut b = TraceBuilder::new();
        start_node(&mut b, "/usr/bin/node", "node");
        serve(&mut b);
        for _ in 0..20 {
            b.write(1, "/tmp/out.log", "request ok\n", false);
        }
        assert!(b.findings("sync-io-main-thread").is_empty());
    }

    #[test]
    fn skip_startup_excludes_early_calls() {
        let mut b = TraceBuilder::new();
        start_node(&mut b, "/usr/bin/node", "node");
        serve(&mut b);
        for _ in 0..20 {
            request(&mut b);
        }
        let cfg = Config {
            min_calls: 1,
            // The builder's clock starts at 1 µs and moves 1 µs per call: start-up is 12
            // calls and an accept, a request 6 (its accept); skip the first 10 requests.
            skip_startup_ns: 1000 + 13 * 1000 + 10 * 6 * 1000,
            ..Config::default()
        };
        let a = b.analyze_with(&cfg);
        let f: Vec<_> = a
            .findings
            .iter()
            .filter(|f| f.detector == "sync-io-main-thread")
            .collect();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].top_paths[0].path, CFG);
        assert_eq!(f[0].top_paths[0].redundant_calls, 40);
    }
}
