//! The write-side and ensure/check detectors on real programs (ensure-dir, check-then-act,
//! open-close-churn, small-writes, fsync-per-op, no-reader): each dirty fixture yields its
//! finding for the right process and path with exact counts, each clean twin (and the tar
//! trap) yields none.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use dejavu_detect::{analyze, Analysis, Config, Finding};
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    common::repo().join("tests/workloads/detectors").join(rel)
}

/// A program recorded in a scratch directory (its working directory) and analyzed with
/// the default configuration.
struct Run {
    analysis: Analysis,
    work: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    fn new(cmd: &[&str]) -> Run {
        Run::with(cmd, &Config::default())
    }

    fn with(cmd: &[&str], cfg: &Config) -> Run {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path().canonicalize().expect("canonical tempdir");
        let trace = work.join("t.dvt");
        let (st, err) = common::record_quiet(&trace, cmd, &work);
        assert!(st.success(), "dejavu record {cmd:?}: {st}\n{err}");
        let mut r = dejavu_trace::TraceReader::open(&trace).expect("trace opens");
        let analysis = analyze(&mut r, cfg, |_| {}).expect("analysis");
        Run {
            analysis,
            work,
            _dir: dir,
        }
    }

    /// A file in the scratch directory, as findings name it.
    fn path(&self, name: &str) -> String {
        self.work.join(name).to_string_lossy().into_owned()
    }

    fn of(&self, detector: &str) -> Vec<&Finding> {
        self.analysis
            .findings
            .iter()
            .filter(|f| f.detector == detector)
            .collect()
    }

    /// The one finding of `detector` whose paths are exactly `[path]`.
    fn one(&self, detector: &str, path: &str) -> &Finding {
        let all = self.of(detector);
        let mine: Vec<_> = all
            .iter()
            .filter(|f| f.paths == [path.to_string()])
            .collect();
        assert_eq!(mine.len(), 1, "one {detector} finding on {path}: {all:#?}");
        mine[0]
    }
}

fn c(rel: &str) -> String {
    common::c_workload_at(&fixture(rel))
        .to_string_lossy()
        .into_owned()
}

fn script(rel: &str) -> String {
    fixture(rel).to_string_lossy().into_owned()
}

// ---- ensure-dir (Node.js, seed 000)

#[test]
fn node_ensuring_the_chat_dir_per_record_is_ensure_dir() {
    require!("node");
    let r = Run::new(&["node", &script("ensure-dir/dirty.js")]);
    let f = r.one("ensure-dir", &r.path("chats"));
    assert!(f.command.contains("dirty.js"), "{}", f.command);
    // 100 records: 100 mkdir + 100 access before them + 99 statx after the EEXISTs; all
    // but the first record's are redundant.
    assert_eq!((f.calls, f.redundant_calls), (299, 297), "{f:#?}");
    let cache = f.cache.clone().unwrap_or_default();
    assert!(cache.safe && cache.saved_calls == 297, "{cache:?}");
    assert_eq!(
        f.example.as_deref(),
        Some(
            "99 mkdir calls failed with EEXIST on a directory the process already knew existed, \
             with 99 access checks before them and 99 statx checks after them"
        )
    );
    // The rest of seed 000's four calls per record: existsSync(file) before the append,
    // and the append's own open/close per record.
    let file = r.path("chats/session.jsonl");
    let cta = r.one("check-then-act", &file);
    assert_eq!((cta.calls, cta.redundant_calls), (99, 99), "{cta:#?}");
    let churn = r.one("open-close-churn", &file);
    assert_eq!(
        (churn.calls, churn.redundant_calls),
        (200, 198),
        "{churn:#?}"
    );
    assert_eq!(cta.pid, f.pid);
    assert_eq!(churn.pid, f.pid);
}

#[test]
fn node_ensuring_the_chat_dir_once_is_quiet() {
    require!("node");
    let r = Run::new(&["node", &script("ensure-dir/clean.js")]);
    for d in [
        "ensure-dir",
        "check-then-act",
        "open-close-churn",
        "small-writes",
    ] {
        assert!(r.of(d).is_empty(), "{d}: {:#?}", r.of(d));
    }
}

// ---- check-then-act (Python; tar as the trap)

#[test]
fn python_exists_or_access_then_open_is_check_then_act() {
    require!("python3");
    let r = Run::new(&["python3", &script("check-then-act/dirty.py")]);
    let f = r.one("check-then-act", &r.path("input.txt"));
    assert!(f.command.contains("dirty.py"), "{}", f.command);
    // 50 os.path.exists (stat, then open + fstat) and 50 os.access (access, then open).
    assert_eq!((f.calls, f.redundant_calls), (100, 100), "{f:#?}");
    let example = f.example.as_deref().unwrap_or_default();
    assert!(
        example.ends_with("50 access then open, 50 stat then open and fstat of the descriptor"),
        "{example}"
    );
}

#[test]
fn python_opening_and_handling_the_error_is_quiet() {
    require!("python3");
    let r = Run::new(&["python3", &script("check-then-act/clean.py")]);
    assert!(
        r.of("check-then-act").is_empty(),
        "{:#?}",
        r.of("check-then-act")
    );
}

#[test]
fn tar_lstat_then_open_is_not_check_then_act() {
    require!("tar");
    // Even a single check-then-act on a member would show: no threshold.
    let cfg = Config {
        min_calls: 1,
        ..Config::default()
    };
    let r = Run::with(&["sh", &script("check-then-act/trap.sh")], &cfg);
    assert!(
        r.work.join("tree.tar").exists(),
        "the trap must really run tar"
    );
    let tree = r.path("tree");
    let on_tree: Vec<_> = r
        .of("check-then-act")
        .into_iter()
        .filter(|f| {
            f.paths
                .iter()
                .chain(f.top_paths.iter().map(|p| &p.path))
                .any(|p| p.starts_with(&tree))
        })
        .collect();
    assert!(on_tree.is_empty(), "{on_tree:#?}");
    // With the default threshold, nothing at all (tar's own start-up included).
    let quiet = Run::new(&["sh", &script("check-then-act/trap.sh")]);
    assert!(
        quiet.of("check-then-act").is_empty(),
        "{:#?}",
        quiet.of("check-then-act")
    );
}

// ---- open-close-churn (C, seed 004)

#[test]
fn c_open_pwrite_close_per_write_is_open_close_churn() {
    require!("gcc");
    let prog = c("open-close-churn/dirty.c");
    let r = Run::new(&[&prog]);
    let f = r.one("open-close-churn", &r.path("tiles.bin"));
    assert!(f.command.contains("dirty"), "{}", f.command);
    assert_eq!((f.calls, f.redundant_calls), (200, 198), "{f:#?}");
    assert_eq!(
        f.example.as_deref(),
        Some("99 of 100 open/close cycles repeated, 1.0 call in between on average (pwrite64)")
    );
    assert!(f.wasted_ns > 0);
}

#[test]
fn c_one_kept_handle_is_quiet() {
    require!("gcc");
    let prog = c("open-close-churn/clean.c");
    let r = Run::new(&[&prog]);
    for d in ["open-close-churn", "small-writes"] {
        assert!(r.of(d).is_empty(), "{d}: {:#?}", r.of(d));
    }
}

// ---- small-writes (Python os.write)

#[test]
fn python_os_write_per_line_is_small_writes() {
    require!("python3");
    // Counts are deterministic, pauses are not: a loaded machine must not split the run.
    let mut cfg = Config::default();
    cfg.options
        .insert("small-writes.gap_ms".into(), "60000".into());
    let r = Run::with(&["python3", &script("small-writes/dirty.py")], &cfg);
    let f = r.one("small-writes", &r.path("out.log"));
    assert!(f.command.contains("dirty.py"), "{}", f.command);
    assert_eq!((f.calls, f.redundant_calls), (100, 99), "{f:#?}");
    let example = f.example.as_deref().unwrap_or_default();
    assert!(
        example.starts_with("100 writes of ")
            && example.ends_with("in 1 run, which 1 buffered write would carry"),
        "{example}"
    );
}

#[test]
fn writes_to_a_socketpair_dup2ed_over_a_file_are_not_the_files() {
    // rsync's shape: the socketpair is made by an untraced call, so dejavu cannot name the
    // socket, but it must not keep calling fd 1 by the file it was before.
    let r = Run::new(&[&c("small-writes/socketpair_dup2.c")]);
    let log = r.path("out.log");
    let on_log: Vec<_> = r
        .analysis
        .findings
        .iter()
        .filter(|f| f.paths.contains(&log) || f.top_paths.iter().any(|p| p.path == log))
        .collect();
    assert!(on_log.is_empty(), "{on_log:#?}");
}

#[test]
fn python_buffered_file_is_quiet() {
    require!("python3");
    let r = Run::new(&["python3", &script("small-writes/clean.py")]);
    let out = r.path("out.log");
    let mine: Vec<_> = r
        .of("small-writes")
        .into_iter()
        .filter(|f| f.paths.iter().any(|p| Path::new(p) == Path::new(&out)))
        .collect();
    assert!(mine.is_empty(), "{mine:#?}");
    assert!(
        r.of("small-writes").is_empty(),
        "{:#?}",
        r.of("small-writes")
    );
}

// ---- fsync-per-op (C)

#[test]
fn c_fsync_per_record_is_fsync_per_op() {
    require!("gcc");
    let prog = c("fsync-per-op/dirty.c");
    let r = Run::new(&[&prog]);
    let f = r.one("fsync-per-op", &r.path("journal.log"));
    assert!(f.command.contains("dirty"), "{}", f.command);
    assert_eq!((f.calls, f.redundant_calls), (100, 99), "{f:#?}");
    assert_eq!(
        f.example.as_deref(),
        Some("99 fsync calls, each after 1.0 write(s) of 31 bytes on average since the previous sync")
    );
}

#[test]
fn c_group_commit_is_quiet() {
    require!("gcc");
    let prog = c("fsync-per-op/clean.c");
    let r = Run::new(&[&prog]);
    for d in ["fsync-per-op", "small-writes", "open-close-churn"] {
        assert!(r.of(d).is_empty(), "{d}: {:#?}", r.of(d));
    }
}

// ---- no-reader (C)

#[test]
fn c_writes_to_dev_null_and_a_dead_pipe_are_no_reader() {
    require!("gcc");
    let prog = c("no-reader/dirty.c");
    let r = Run::new(&[&prog]);
    // Both kinds of writes come from main(): one finding when the stacks name it, one per
    // path without them. Either way, each path's calls and its example are there.
    let all = r.of("no-reader");
    assert!(!all.is_empty() && all.len() <= 2, "{all:#?}");
    assert!(all.iter().all(|f| f.command.contains("dirty")), "{all:#?}");
    let count = |pred: &dyn Fn(&str) -> bool| -> u64 {
        all.iter()
            .flat_map(|f| f.top_paths.iter())
            .filter(|p| pred(&p.path))
            .map(|p| p.redundant_calls)
            .sum()
    };
    assert_eq!(count(&|p| p == "/dev/null"), 100, "{all:#?}");
    assert_eq!(count(&|p| p.starts_with("pipe:")), 100, "{all:#?}");
    assert_eq!(all.iter().map(|f| f.calls).sum::<u64>(), 200);
    assert_eq!(all.iter().map(|f| f.redundant_calls).sum::<u64>(), 200);
    let examples: Vec<&str> = all.iter().filter_map(|f| f.example.as_deref()).collect();
    let said = |t: &str| examples.iter().any(|e| e.contains(t));
    assert!(
        said("10.0 kB written to /dev/null in 100 writes"),
        "{examples:?}"
    );
    assert!(
        said("100 writes of 6.4 kB failed with EPIPE after the reader had gone"),
        "{examples:?}"
    );
    // The writer, not the reader that exited.
    let pids: std::collections::BTreeSet<u32> = all.iter().map(|f| f.pid).collect();
    assert_eq!(pids.len(), 1, "{all:#?}");
    // The failed pipe writes are not small-writes runs; /dev/null is no-reader's alone.
    assert!(
        r.of("small-writes").is_empty(),
        "{:#?}",
        r.of("small-writes")
    );
}

#[test]
fn c_not_producing_unread_output_is_quiet() {
    require!("gcc");
    let prog = c("no-reader/clean.c");
    let r = Run::new(&[&prog]);
    assert!(r.of("no-reader").is_empty(), "{:#?}", r.of("no-reader"));
}
