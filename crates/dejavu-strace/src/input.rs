//! Reading the inputs: one buffered reader per file, a look at the first lines of each
//! (options used, the first process's pid and working directory, the command), and the
//! merge of several files (`-ff`) in timestamp order.

use crate::importer::{Importer, SourceId, TsUnroller};
use crate::line::{self, Body, Ret, Timestamp};
use crate::{args, consts, paths, ImportError, ImportOptions, ImportReport};
use dejavu_trace::{End, Meta, TraceWriter, WriterOptions};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Lines of each input looked at before importing (fewer when there are many inputs:
/// `-ff` files need only their first line looked at).
const HEAD_LINES: usize = 2000;
const HEAD_LINES_MANY: usize = 50;

/// At most this many inputs are open at once; the others are reopened at the offset
/// where they were left (a `-ff` run of a build can leave thousands of files).
const MAX_OPEN: usize = 128;

struct Input {
    name: String,
    path: PathBuf,
    /// None while suspended (closed to stay under [`MAX_OPEN`]).
    reader: Option<Box<dyn BufRead>>,
    /// Bytes consumed from the file so far.
    offset: u64,
    head: VecDeque<Vec<u8>>,
    lineno: u64,
    eof: bool,
    /// The pid suffix of a `-ff` file name (`prefix.PID`).
    suffix_pid: Option<u32>,
    unroll: TsUnroller,
    last_key: Option<u64>,
}

impl Input {
    fn open(path: &Path, head_lines: usize) -> Result<Input, ImportError> {
        let name = path.display().to_string();
        let suffix_pid = path
            .extension()
            .and_then(|e| e.to_str())
            .filter(|e| !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|e| e.parse().ok());
        let mut input = Input {
            name,
            path: path.to_path_buf(),
            reader: None,
            offset: 0,
            head: VecDeque::new(),
            lineno: 0,
            eof: false,
            suffix_pid,
            unroll: TsUnroller::default(),
            last_key: None,
        };
        for _ in 0..head_lines {
            let mut buf = Vec::new();
            if !input.read_raw(&mut buf)? {
                break;
            }
            input.head.push_back(buf);
        }
        Ok(input)
    }

    fn is_stdin(&self) -> bool {
        self.path.as_os_str() == "-"
    }

    /// Closes the file until it is needed again (never standard input).
    fn suspend(&mut self) {
        if !self.is_stdin() {
            self.reader = None;
        }
    }

    fn is_open(&self) -> bool {
        self.reader.is_some()
    }

    fn reader(&mut self) -> Result<&mut Box<dyn BufRead>, ImportError> {
        if self.reader.is_none() {
            let err = |source| ImportError::Read {
                path: self.name.clone(),
                source,
            };
            let r: Box<dyn BufRead> = if self.is_stdin() {
                Box::new(BufReader::with_capacity(256 << 10, io::stdin()))
            } else {
                let mut f = File::open(&self.path).map_err(err)?;
                if self.offset > 0 {
                    f.seek(SeekFrom::Start(self.offset)).map_err(err)?;
                }
                Box::new(BufReader::with_capacity(64 << 10, f))
            };
            self.reader = Some(r);
        }
        // Just set when it was None.
        self.reader.as_mut().ok_or_else(|| ImportError::Read {
            path: self.name.clone(),
            source: io::Error::other("reader not open"),
        })
    }

    /// Reads one line from the file into `buf` (without the newline); false at the end.
    fn read_raw(&mut self, buf: &mut Vec<u8>) -> Result<bool, ImportError> {
        buf.clear();
        if self.eof {
            return Ok(false);
        }
        let n = self
            .reader()?
            .read_until(b'\n', buf)
            .map_err(|source| ImportError::Read {
                path: self.name.clone(),
                source,
            })?;
        self.offset += n as u64;
        if n == 0 {
            self.eof = true;
            return Ok(false);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        Ok(true)
    }

    /// The next line (from the looked-at head first) into `buf`, with its number and
    /// time key; false at the end.
    fn next(&mut self, buf: &mut Vec<u8>) -> Result<Option<(u64, Option<u64>)>, ImportError> {
        match self.head.pop_front() {
            Some(l) => *buf = l,
            None => {
                if !self.read_raw(buf)? {
                    return Ok(None);
                }
            }
        }
        self.lineno += 1;
        let (_, ts) = line::parse_prefix(buf);
        let key = match ts {
            Some(ts) => Some(self.unroll.key(ts)),
            None => self.last_key,
        };
        self.last_key = key.or(self.last_key);
        Ok(Some((self.lineno, key)))
    }

    fn first_ts(&self) -> Option<Timestamp> {
        self.head.iter().find_map(|l| line::parse_prefix(l).1)
    }
}

/// What the first lines of an input tell.
#[derive(Default)]
struct HeadFacts {
    pid: Option<u32>,
    /// Some lines have no pid column.
    unprefixed: bool,
    options: Vec<&'static str>,
}

/// Looks at an input's head: the pid of lines without a pid column, and which strace
/// options produced it.
fn look_at_head(input: &Input) -> HeadFacts {
    let mut facts = HeadFacts::default();
    let (mut pid_column, mut bracket_pid, mut dur, mut ann, mut yy, mut verbose) =
        (false, false, false, false, false, false);
    let mut ts_kind = None;
    let mut unprefixed_child: Option<u32> = None;
    for raw in &input.head {
        let Ok(l) = line::parse_line_bytes(raw) else {
            continue;
        };
        if l.pid.is_none() && !matches!(l.body, Body::Blank | Body::Summary | Body::Info) {
            facts.unprefixed = true;
        }
        if l.pid.is_some() {
            pid_column = true;
            bracket_pid |= raw.starts_with(b"[pid ");
        }
        if ts_kind.is_none() {
            ts_kind = l.ts;
        }
        if let Body::Call(c) = l.body {
            dur |= c.dur_ns.is_some();
            ann |= args::find(c.args, b"</").is_some() || args::find(c.args, b"<pipe:").is_some();
            yy |= args::find(c.args, b"<char ").is_some()
                || args::find(c.args, b"-STREAM:[").is_some();
            verbose |= args::find(c.args, b"st_dev=").is_some()
                || args::find(c.args, b"stx_dev_major=").is_some();
            if facts.pid.is_none() {
                match (l.pid, c.name, c.ret) {
                    (None, "set_tid_address" | "getpid" | "gettid", Ret::Val { val, .. }) => {
                        facts.pid = u32::try_from(val).ok();
                    }
                    (None, "clone" | "clone3" | "fork" | "vfork", Ret::Val { val, .. })
                        if val > 0 =>
                    {
                        unprefixed_child = unprefixed_child.or(u32::try_from(val).ok());
                    }
                    // strace writing `-f` output to stderr starts prefixing the first
                    // process's lines once its first child exists.
                    (Some(p), _, _) if unprefixed_child.is_some_and(|c| c != p) => {
                        facts.pid = Some(p)
                    }
                    _ => {}
                }
            }
        }
    }
    if pid_column {
        facts.options.push(if bracket_pid {
            "-f (stderr form)"
        } else {
            "-f"
        });
    } else if input.suffix_pid.is_some() {
        facts.options.push("-ff");
    }
    match ts_kind {
        Some(Timestamp::TimeOfDay(t)) if t % 1_000_000_000 == 0 => facts.options.push("-t"),
        Some(Timestamp::TimeOfDay(_)) => facts.options.push("-tt"),
        Some(Timestamp::Epoch(_)) => facts.options.push("-ttt"),
        Some(Timestamp::Relative(_)) => facts.options.push("-r"),
        None => {}
    }
    for (on, name) in [
        (dur, "-T"),
        (ann && !yy, "-y"),
        (yy, "-yy"),
        (verbose, "-v"),
    ] {
        if on {
            facts.options.push(name);
        }
    }
    facts
}

/// The command (argv of the first execve) and the first working directory shown by an
/// `AT_FDCWD</cwd>` annotation before any chdir, from the earliest input's head.
fn command_and_cwd<'a>(lines: impl Iterator<Item = &'a Vec<u8>>) -> (Vec<String>, Option<Vec<u8>>) {
    let mut command = Vec::new();
    let mut cwd = None;
    let mut chdir_seen = false;
    for raw in lines {
        let Ok(l) = line::parse_line_bytes(raw) else {
            continue;
        };
        let (name, args_text) = match l.body {
            Body::Call(c) => (c.name, c.args),
            Body::Unfinished { name, args } => (name, args),
            _ => continue,
        };
        if command.is_empty() && name == "execve" {
            let mut a = Vec::new();
            args::split_top(args_text, &mut a);
            if let Some((elems, _)) = a.get(1).and_then(|v| args::array(v)) {
                command = elems
                    .iter()
                    .filter_map(|e| match args::string(e) {
                        Some(args::StrArg::Str { bytes, .. }) => {
                            Some(String::from_utf8_lossy(&bytes).into_owned())
                        }
                        _ => None,
                    })
                    .collect();
            }
        }
        chdir_seen |= name == "chdir" || name == "fchdir";
        if cwd.is_none() && !chdir_seen {
            let mut a = Vec::new();
            args::split_top(args_text, &mut a);
            // Any spelling: `AT_FDCWD</d>`, `-100</d>` (-X raw), `-100 /* AT_FDCWD */</d>`.
            let ann = a
                .iter()
                .filter_map(|v| args::fd(v))
                .find(|f| f.fd == consts::AT_FDCWD && f.ann.is_some());
            if let Some(ann) = ann.and_then(|f| f.ann) {
                let mut out = Vec::new();
                args::unescape_into(ann, Some(b'<'), &mut out);
                cwd = Some(out);
            }
        }
        if !command.is_empty() && (cwd.is_some() || chdir_seen) {
            break;
        }
    }
    (command, cwd)
}

pub fn import_files<W: Write>(
    inputs: &[PathBuf],
    opts: &ImportOptions,
    out: W,
) -> Result<ImportReport, ImportError> {
    if inputs.is_empty() {
        return Err(ImportError::NoInput);
    }
    let head_lines = if inputs.len() > 8 {
        HEAD_LINES_MANY
    } else {
        HEAD_LINES
    };
    let mut files = Vec::with_capacity(inputs.len());
    for p in inputs {
        let mut f = Input::open(p, head_lines)?;
        if files.len() >= MAX_OPEN {
            f.suspend();
        }
        files.push(f);
    }
    let mut notes = Vec::new();

    // `-tt` times of day across files: a file that starts after midnight while others
    // started before it is a day later.
    let tods: Vec<Option<u64>> = files
        .iter()
        .map(|f| match f.first_ts() {
            Some(Timestamp::TimeOfDay(t)) => Some(t),
            _ => None,
        })
        .collect();
    let (lo, hi) = (
        tods.iter().flatten().min().copied(),
        tods.iter().flatten().max().copied(),
    );
    if let (Some(lo), Some(hi)) = (lo, hi) {
        if hi - lo > 43_200 * 1_000_000_000 {
            for (f, t) in files.iter_mut().zip(&tods) {
                if t.is_some_and(|t| t < 43_200 * 1_000_000_000) {
                    f.unroll = TsUnroller::starting_on_day(1);
                }
            }
        }
    }

    // Pull each input's first line and order the inputs by it.
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); files.len()];
    let mut heads: Vec<Option<(u64, Option<u64>)>> = Vec::with_capacity(files.len());
    let mut facts = Vec::with_capacity(files.len());
    for (f, buf) in files.iter_mut().zip(bufs.iter_mut()) {
        facts.push(look_at_head(f));
        heads.push(f.next(buf)?);
    }
    let earliest = (0..files.len())
        .min_by_key(|&i| (heads[i].and_then(|h| h.1).unwrap_or(u64::MAX), i))
        .unwrap_or(0);
    let origin = heads.iter().filter_map(|h| h.and_then(|h| h.1)).min();

    let mut options: Vec<&str> = facts
        .iter()
        .flat_map(|f| f.options.iter().copied())
        .collect();
    options.sort_unstable();
    options.dedup();
    notes.push(format!(
        "strace options detected: {}",
        if options.is_empty() {
            "none".to_string()
        } else {
            options.join(" ")
        }
    ));
    notes.push(format!(
        "inputs: {}",
        files
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));

    // The earliest input's first line is in its buffer now, the rest in its head.
    let (command, inferred_cwd) =
        command_and_cwd(std::iter::once(&bufs[earliest]).chain(files[earliest].head.iter()));
    let cwd: Option<Vec<u8>> = match &opts.cwd {
        Some(c) => Some(c.as_os_str().as_encoded_bytes().to_vec()),
        None => {
            if let Some(c) = &inferred_cwd {
                notes.push(format!(
                    "initial working directory {} inferred from the first AT_FDCWD annotation",
                    String::from_utf8_lossy(c)
                ));
            }
            inferred_cwd
        }
    };
    let cwd = cwd.map(|c| paths::normalize(&c));

    let start_unix_ns = match line::parse_prefix(&bufs[earliest])
        .1
        .or_else(|| files[earliest].first_ts())
    {
        Some(Timestamp::Epoch(_)) => origin.unwrap_or(0),
        _ => 0,
    };
    let meta = Meta {
        producer: format!("dejavu {}", env!("CARGO_PKG_VERSION")),
        backend: "strace-import".to_string(),
        arch: "x86_64".to_string(),
        start_unix_ns,
        command,
        attached: Vec::new(),
        cwd: cwd
            .as_ref()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .unwrap_or_default(),
        payload_bytes: opts.payload_bytes,
        notes: notes.clone(),
        env: Vec::new(),
    };
    let writer = TraceWriter::new(out, &meta, WriterOptions::default())?;
    let mut imp = Importer::new(writer, cwd.as_deref(), opts.payload_bytes);
    if let Some(o) = origin {
        imp.set_origin(o);
    }
    let mut ids: Vec<SourceId> = Vec::with_capacity(files.len());
    for (f, fact) in files.iter().zip(&facts) {
        let pid = fact.pid.or(f.suffix_pid);
        if pid.is_none() && fact.unprefixed {
            notes.push(format!(
                "{}: lines without a pid column are attributed to pid 0 (unknown)",
                f.name
            ));
        } else if fact.pid.is_some() && f.suffix_pid.is_none() {
            notes.push(format!(
                "{}: pid {} inferred for lines without a pid column",
                f.name,
                fact.pid.unwrap_or(0)
            ));
        }
        ids.push(imp.add_source(&f.name, pid));
    }

    if files.len() == 1 {
        let mut cur = heads[0];
        while let Some((lineno, key)) = cur {
            imp.feed_keyed(ids[0], lineno, &bufs[0], key)?;
            cur = files[0].next(&mut bufs[0])?;
        }
    } else {
        let mut heap = BinaryHeap::new();
        for (i, h) in heads.iter().enumerate() {
            if let Some((lineno, key)) = h {
                heap.push(Reverse((key.unwrap_or(0), i, *lineno, *key)));
            }
        }
        // Inputs with an open file, least recently read first.
        let mut open: VecDeque<usize> = (0..files.len()).filter(|&i| files[i].is_open()).collect();
        while let Some(Reverse((_, i, lineno, key))) = heap.pop() {
            imp.feed_keyed(ids[i], lineno, &bufs[i], key)?;
            if !files[i].is_open() && files[i].head.is_empty() {
                if open.len() >= MAX_OPEN {
                    if let Some(j) = open.pop_front() {
                        files[j].suspend();
                    }
                }
                open.push_back(i);
            }
            if let Some((lineno, key)) = files[i].next(&mut bufs[i])? {
                heap.push(Reverse((key.unwrap_or(0), i, lineno, key)));
            } else {
                files[i].suspend();
                open.retain(|&j| j != i);
            }
        }
    }

    let done = imp.finish()?;
    let mut report = done.report;
    notes.append(&mut report.notes);
    report.notes = notes;
    // The statistics travel with the trace, not only on the importer's stderr.
    let mut end_notes = report.notes.clone();
    end_notes.push(format!(
        "import: {} lines, {} records, {} unparsed lines, {} calls outside the traced set, \
         {} resumed without entry, {} never resumed",
        report.lines,
        report.records,
        report.unparsed.len(),
        report.ignored_syscalls.values().sum::<u64>(),
        report.unmatched_resumed,
        report.unfinished_never_resumed
    ));
    done.sink.finish(End {
        end_ts: done.end_ts,
        records: 0,
        lost_events: 0,
        exit: done.exit,
        notes: end_notes,
    })?;
    Ok(report)
}
