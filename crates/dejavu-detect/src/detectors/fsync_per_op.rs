//! fsync-per-op: fsync/fdatasync/sync_file_range after every small write to the same
//! file, again and again — one flush to storage per record where one per batch would do.

use crate::group::{bytes, count, extras, is_write, Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{PathKey, View};
use dejavu_trace::{ev, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Whether a path is an SQLite database's rollback journal or write-ahead log
/// (`app.db-journal`, `app.db-wal`).
fn is_sqlite_journal(p: &str) -> bool {
    p.ends_with("-journal") || p.ends_with("-wal")
}

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "fsync-per-op",
    summary: "fsync/fdatasync after every small write to the same file",
    explain: "Per process and file (path), dejavu counts the bytes written (write, pwrite64, writev, \
pwritev, pwritev2, sendfile, copy_file_range, splice, through any descriptor of that path) since the \
previous successful fsync, fdatasync or sync_file_range of the file (a sync_file_range without \
SYNC_FILE_RANGE_WAIT_AFTER only starts writeback, as PostgreSQL's checkpointer asks before each \
fsync: it is neither a sync nor a write here). A sync preceded by at most \
max_bytes of writes (none at all included: syncing a directory after a create, or syncing twice) \
continues a run of per-operation syncs; a sync preceded by more starts a new run. In each run the \
first sync is needed and every further one is redundant: one sync at the end of the batch would make \
the same bytes durable. The run spans close and reopen of the file, so open-write-fsync-close per \
record is caught too. The time counted is the redundant syncs' own duration, which is usually most of \
the cost of such a loop. Failed syncs are not counted. Files opened with O_SYNC/O_DSYNC sync inside \
each write and are not seen by this detector.",
    example: "for each record: write(fd, line, 80); fsync(fd)   // 10,000 fsyncs of 80 bytes each",
    fix: "batch: sync once per batch of records (group commit: collect the records that arrive while \
one sync runs, then sync them together), or once at the end of the job; use fdatasync when the \
metadata (mtime) need not be durable",
    hazards: "Only batch if the program does not promise durability per record: a database, queue or \
journal that acknowledges each record after its sync must keep that promise — group commit (delay the \
acknowledgements until the batch's sync) keeps it, simply dropping syncs does not. A crash loses \
everything written since the last sync: size batches to what may be replayed or lost.",
    options: &[(
        "max_bytes",
        16384,
        "a sync preceded by at most this many bytes written to the file since its previous sync counts as a per-operation sync",
    )],
    make: |cfg: &Config| {
        Box::new(FsyncPerOp {
            max_bytes: cfg.opt("fsync-per-op", "max_bytes", 16384),
            ..FsyncPerOp::default()
        })
    },
};

/// One file of one process, once it has been synced.
#[derive(Clone, Copy, Default)]
struct Since {
    bytes: u64,
    writes: u64,
}

/// Per (pid, path) for the example text.
#[derive(Default)]
struct Extra {
    redundant: u64,
    /// Bytes and writes that preceded the redundant syncs.
    bytes: u64,
    writes: u64,
    /// The sync call used most recently.
    sys: Option<Sys>,
}

#[derive(Default)]
struct FsyncPerOp {
    max_bytes: u64,
    since: FxHashMap<(u32, PathKey), Since>,
    tallies: Tallies,
    extra: FxHashMap<(u32, PathKey), Extra>,
}

impl Detector for FsyncPerOp {
    fn wants(&self, sys: Sys) -> bool {
        is_write(sys)
            || matches!(
                sys,
                Sys::Sendfile
                    | Sys::CopyFileRange
                    | Sys::Splice
                    | Sys::Fsync
                    | Sys::Fdatasync
                    | Sys::SyncFileRange
            )
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if s.ev & ev::UNFINISHED != 0 || s.ret < 0 {
            return;
        }
        let Some(path) = v.path else { return };
        // sync_file_range without SYNC_FILE_RANGE_WAIT_AFTER only starts the writeback of
        // a range (PostgreSQL's checkpointer asks it of each file before its fsync): no
        // sync, and no write either.
        if s.sys == Sys::SyncFileRange && s.flags & SYNC_FILE_RANGE_WAIT_AFTER == 0 {
            return;
        }
        let key = (v.image, path);
        if !matches!(s.sys, Sys::Fsync | Sys::Fdatasync | Sys::SyncFileRange) {
            // Only files that have been synced need their writes counted.
            if let Some(since) = self.since.get_mut(&key) {
                since.bytes += s.ret as u64;
                since.writes += 1;
            }
            return;
        }
        let prev = self.since.insert(key, Since::default());
        if !cx.config.counts(s.ts) {
            return;
        }
        let t = self.tallies.get(v.image, path);
        t.calls += 1;
        match prev {
            Some(p) if p.bytes <= self.max_bytes => {
                t.redundant(s.ts, s.dur, s.stack);
                cx.mark(v.seq, s.dur, s.stack);
                let e = self.extra.entry(key).or_default();
                e.redundant += 1;
                e.bytes += p.bytes;
                e.writes += p.writes;
                e.sys = Some(s.sys);
            }
            // The first sync of the file, or one after a real batch: needed.
            _ => {}
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        let out = self.tallies.findings_with(
            &INFO, cx, Wording { cache: false }, &|_, _| Vec::new(),
            &mut extras(
                &self.extra,
                |a, b| {
                    a.redundant += b.redundant;
                    a.bytes += b.bytes;
                    a.writes += b.writes;
                    a.sys = a.sys.or(b.sys);
                },
                |f, e| {
                    if f.paths.iter().any(|p| is_sqlite_journal(p)) {
                        // SQLite syncs its journal, the database and the directory at each
                        // commit: an autocommit statement per record is a commit per record.
                        f.fix = format!(
                            "SQLite: run each batch of statements in one transaction (BEGIN ... \
                             COMMIT): every statement outside one is a commit of its own, which \
                             syncs the journal, the database and its directory (PRAGMA \
                             journal_mode=WAL syncs less per commit); in general, {}",
                            INFO.fix
                        );
                    }
                    let n = e.redundant.max(1);
                    let name = e.sys.map_or("fsync", |s| s.name());
                    f.example = Some(if e.writes == 0 {
                        format!(
                            "{} {name} calls with nothing written since the previous one",
                            count(e.redundant)
                        )
                    } else {
                        format!(
                            "{} {name} calls, each after {:.1} write(s) of {} on average since the previous sync",
                            count(e.redundant),
                            e.writes as f64 / n as f64,
                            bytes(e.bytes / n)
                        )
                    });
                },
            ),
        );
        out
    }
}

/// sync_file_range's flag that waits for the writeback it started (linux/fs.h).
const SYNC_FILE_RANGE_WAIT_AFTER: u64 = 4;

#[cfg(test)]
mod tests {
    use crate::testkit::{file, TraceBuilder};
    use crate::Config;
    use dejavu_trace::{ev, Sys};

    fn sync(b: &mut TraceBuilder, sys: Sys, fd: i32, path: &str) {
        b.call(sys, |c, b| {
            c.fd = Some(fd);
            c.path = Some(b.s(path));
            c.ev = ev::PATH_FROM_FD;
        });
    }

    fn journal(b: &mut TraceBuilder, records: usize, len: usize) {
        b.open("/db/journal", 0o2101, 3, Some(file(4, 0, 1)));
        for _ in 0..records {
            b.write(3, "/db/journal", &"r".repeat(len), false);
            sync(b, Sys::Fdatasync, 3, "/db/journal");
        }
        b.close(3, "/db/journal");
    }

    #[test]
    fn a_writeback_hint_before_an_fsync_is_no_sync() {
        // A checkpoint: each file written, its writeback started with
        // sync_file_range(SYNC_FILE_RANGE_WRITE), then fsync'ed once.
        let mut b = TraceBuilder::new();
        for i in 0..20 {
            let p = format!("/db/base/{i}");
            b.open(&p, 0o2, 3, Some(file(10 + i, 8192, 1)));
            b.write(3, &p, &"p".repeat(8192), false);
            for flags in [2, 2] {
                b.call(Sys::SyncFileRange, |c, b| {
                    c.fd = Some(3);
                    c.path = Some(b.s(&p));
                    c.ev = ev::PATH_FROM_FD;
                    c.flags = flags;
                });
            }
            sync(&mut b, Sys::Fsync, 3, &p);
            b.close(3, &p);
        }
        assert!(b.findings("fsync-per-op").is_empty());
    }

    #[test]
    fn a_sync_after_every_small_write_is_redundant_but_the_first() {
        let mut b = TraceBuilder::new();
        journal(&mut b, 20, 100);
        let f = b.findings("fsync-per-op");
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].calls, f[0].redundant_calls, f[0].wasted_ns),
            (20, 19, 19 * 500)
        );
        assert_eq!(f[0].paths, vec!["/db/journal".to_string()]);
        assert_eq!(
            f[0].example.as_deref(),
            Some("19 fdatasync calls, each after 1.0 write(s) of 100 bytes on average since the previous sync")
        );
    }

    #[test]
    fn an_sqlite_journal_synced_per_statement_is_told_to_use_a_transaction() {
        let mut b = TraceBuilder::new();
        b.open("/db/app.db-journal", 0o2101, 3, Some(file(5, 0, 1)));
        for _ in 0..20 {
            b.write(3, "/db/app.db-journal", &"r".repeat(100), false);
            sync(&mut b, Sys::Fdatasync, 3, "/db/app.db-journal");
        }
        let f = b.findings("fsync-per-op");
        assert_eq!(f.len(), 1);
        assert!(f[0]
            .fix
            .starts_with("SQLite: run each batch of statements in one transaction"));
        // Another journal keeps the general fix (above: /db/journal).
        let mut b = TraceBuilder::new();
        journal(&mut b, 20, 100);
        assert_eq!(b.findings("fsync-per-op")[0].fix, super::INFO.fix);
    }

    #[test]
    fn one_sync_per_batch_is_clean() {
        let mut b = TraceBuilder::new();
        b.open("/db/journal", 0o2101, 3, Some(file(4, 0, 1)));
        for _ in 0..20 {
            b.write(3, "/db/journal", &"r".repeat(100), false);
        }
        sync(&mut b, Sys::Fsync, 3, "/db/journal");
        b.close(3, "/db/journal");
        assert!(b.findings("fsync-per-op").is_empty());
    }

    #[test]
    fn syncs_after_large_writes_are_needed() {
        let mut b = TraceBuilder::new();
        journal(&mut b, 10, 20_000);
        assert!(b.findings("fsync-per-op").is_empty());
    }

    #[test]
    fn a_large_batch_starts_a_new_run_and_reopening_does_not() {
        let mut b = TraceBuilder::new();
        journal(&mut b, 5, 10); // run of 5: 4 redundant
        b.open("/db/journal", 0o2101, 3, Some(file(4, 50, 1)));
        b.write(3, "/db/journal", &"r".repeat(20_000), false);
        sync(&mut b, Sys::Fsync, 3, "/db/journal"); // needed: starts a run
        b.close(3, "/db/journal");
        // Reopened per record: the run goes on across the opens (5 more redundant).
        for _ in 0..5 {
            b.open("/db/journal", 0o2101, 3, Some(file(4, 50, 1)));
            b.write(3, "/db/journal", "r", false);
            sync(&mut b, Sys::Fsync, 3, "/db/journal");
            b.close(3, "/db/journal");
        }
        let f = b.findings("fsync-per-op");
        assert_eq!((f[0].calls, f[0].redundant_calls), (11, 9));
    }

    #[test]
    fn directory_syncs_with_nothing_written_count() {
        let mut b = TraceBuilder::new();
        b.open("/db", 0o200000, 4, Some(crate::testkit::dir(2)));
        for _ in 0..4 {
            sync(&mut b, Sys::Fsync, 4, "/db");
        }
        let f = b.findings("fsync-per-op");
        assert_eq!(f[0].redundant_calls, 3);
        assert_eq!(
            f[0].example.as_deref(),
            Some("3 fsync calls with nothing written since the previous one")
        );
    }

    #[test]
    fn different_files_and_failed_syncs_are_separate() {
        let mut b = TraceBuilder::new();
        b.open("/a", 1, 3, Some(file(4, 0, 1)));
        b.open("/b", 1, 4, Some(file(5, 0, 1)));
        sync(&mut b, Sys::Fsync, 3, "/a");
        sync(&mut b, Sys::Fsync, 4, "/b");
        b.call(Sys::Fsync, |c, b| {
            c.fd = Some(3);
            c.path = Some(b.s("/a"));
            c.ret = -5; // EIO: not a sync that happened
        });
        assert!(b.findings("fsync-per-op").is_empty());
    }

    #[test]
    fn max_bytes_changes_what_counts_as_small() {
        let mut b = TraceBuilder::new();
        journal(&mut b, 20, 100);
        let mut cfg = Config {
            min_calls: 1,
            ..Config::default()
        };
        cfg.options
            .insert("fsync-per-op.max_bytes".into(), "99".into());
        let a = b.analyze_with(&cfg);
        assert!(a.findings.iter().all(|f| f.detector != "fsync-per-op"));
    }
}
