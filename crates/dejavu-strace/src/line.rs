//! Parses one line of strace output into its parts: the pid column, the timestamp, and
//! the body (a complete call, the entry or exit half of an interrupted call, a signal, an
//! exit, or one of strace's own messages). Arguments stay as raw text here; the importer
//! decodes the ones each call needs.

use crate::args::{self, trim};
use crate::consts;
use std::fmt;

/// A timestamp as strace printed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timestamp {
    /// `-t`/`-tt`: time of day, ns since midnight (local time of the traced machine).
    TimeOfDay(u64),
    /// `-ttt`: ns since the Unix epoch.
    Epoch(u64),
    /// `-r`: ns since the previous line's timestamp.
    Relative(u64),
}

/// The result of a call (`= ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ret<'a> {
    /// A value, with the `-y` annotation of a returned descriptor.
    Val {
        /// The value (addresses are printed in hex and come out as they are).
        val: i64,
        /// The annotation of a returned descriptor (`= 3</etc/passwd>`), still escaped.
        ann: Option<&'a [u8]>,
    },
    /// `= -1 ENOENT (...)` or `= ? ERESTARTSYS (...)`: the errno number.
    Err(i32),
    /// An errno name this table does not know; the call failed with an unknown errno.
    UnknownErr,
    /// `= ?`: the call did not return (exit, a successful execve in another thread, or
    /// strace could not fetch the result: `= ? <unavailable>`).
    NoReturn,
}

/// A complete call: name, raw argument text and result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    /// The syscall name as strace prints it.
    pub name: &'a str,
    /// The raw text between the parentheses.
    pub args: &'a [u8],
    /// The result.
    pub ret: Ret<'a>,
    /// Time spent in the call (`-T`), ns.
    pub dur_ns: Option<u64>,
}

/// What a line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// A call that entered and returned on this line.
    Call(Call<'a>),
    /// `name(args <unfinished ...>`: the entry half; `args` is the text printed so far.
    Unfinished {
        /// Syscall name.
        name: &'a str,
        /// Arguments printed at entry.
        args: &'a [u8],
    },
    /// `<... name resumed>tail`: the exit half; `tail` is the rest of the arguments, the
    /// closing parenthesis and the result (without the `-T` duration).
    Resumed {
        /// Syscall name.
        name: &'a str,
        /// Text after `resumed>`.
        tail: &'a [u8],
        /// `-T` duration, ns.
        dur_ns: Option<u64>,
    },
    /// `--- SIGCHLD {...} ---`: a signal was delivered.
    Signal(i32),
    /// `+++ exited with N +++`.
    Exited(i32),
    /// `+++ killed by SIG (core dumped) +++`.
    Killed {
        /// The signal.
        signal: i32,
        /// A core was dumped.
        core: bool,
    },
    /// `+++ superseded by execve in pid N +++`: thread N exec'd and took over this pid.
    Superseded(u32),
    /// `strace: Process N attached`.
    Attached(u32),
    /// `strace: Process N detached`.
    Detached(u32),
    /// Other lines from strace itself (`--- stopped by SIGSTOP ---`, warnings, `-k`
    /// stack frames, `[ Process PID=N runs in 32 bit mode. ]`).
    Info,
    /// A line of the `-c`/`-C` summary table.
    Summary,
    /// An empty line.
    Blank,
}

/// A parsed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// The pid column (`-f` to a file) or `[pid N]` prefix; the thread id.
    pub pid: Option<u32>,
    /// The timestamp, when strace printed one.
    pub ts: Option<Timestamp>,
    /// The rest.
    pub body: Body<'a>,
}

/// Why a line could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Nothing recognisable at the start of the body.
    NotACall,
    /// The argument list never closes (a line cut off, or garbage).
    Unbalanced,
    /// No `= result` after the arguments.
    MissingResult,
    /// The result is not a number, `?`, or `-1 ERRNO`.
    BadResult,
    /// A `<... resumed>` line without a name or `resumed>` marker.
    BadResumed,
    /// A `---` or `+++` line of a shape strace does not print.
    BadEvent,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ParseError::NotACall => "not a syscall, signal, exit or strace message",
            ParseError::Unbalanced => "the argument list does not close (line cut off?)",
            ParseError::MissingResult => "no \"= result\" after the arguments",
            ParseError::BadResult => "the result is not a number, \"?\" or \"-1 ERRNO\"",
            ParseError::BadResumed => "malformed \"<... resumed>\" line",
            ParseError::BadEvent => "malformed \"---\"/\"+++\" line",
        })
    }
}

impl std::error::Error for ParseError {}

/// Parses one line (without its newline).
pub fn parse_line(line: &str) -> Result<Line<'_>, ParseError> {
    parse_line_bytes(line.as_bytes())
}

/// Parses one line given as bytes (strace output need not be UTF-8).
pub fn parse_line_bytes(line: &[u8]) -> Result<Line<'_>, ParseError> {
    let line = trim_end(line);
    let (pid, ts, body) = split_prefix(line);
    let body = parse_body(body, line)?;
    Ok(Line { pid, ts, body })
}

/// The pid column and timestamp of a line, without parsing the rest: what merging
/// several files by time needs.
pub fn parse_prefix(line: &[u8]) -> (Option<u32>, Option<Timestamp>) {
    let (pid, ts, _) = split_prefix(line);
    (pid, ts)
}

fn trim_end(s: &[u8]) -> &[u8] {
    let end = s
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |e| e + 1);
    &s[..end]
}

fn skip_spaces(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&c| c == b' ').count();
    &s[n..]
}

fn digits_len(s: &[u8]) -> usize {
    s.iter().take_while(|c| c.is_ascii_digit()).count()
}

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    Some(v)
}

/// `.123456` (any number of digits, at most 9 used) as ns.
fn frac_ns(s: &[u8]) -> u64 {
    let mut ns = 0u64;
    for i in 0..9 {
        ns = ns * 10
            + s.get(i)
                .filter(|c| c.is_ascii_digit())
                .map_or(0, |&c| (c - b'0') as u64);
    }
    ns
}

/// Parses a timestamp at the start of `s`; returns it and the bytes consumed.
fn timestamp(s: &[u8]) -> Option<(Timestamp, usize)> {
    let n = digits_len(s);
    if n == 0 {
        return None;
    }
    let lead = parse_u64(&s[..n])?;
    match s.get(n) {
        Some(b':') => {
            // HH:MM:SS[.frac]
            let mm = &s[n + 1..];
            if mm.len() < 5 || mm[2] != b':' {
                return None;
            }
            let m = parse_u64(&mm[..2])?;
            let sec = parse_u64(&mm[3..5])?;
            let mut used = n + 1 + 5;
            let mut ns = 0;
            if s.get(used) == Some(&b'.') {
                let f = digits_len(&s[used + 1..]);
                ns = frac_ns(&s[used + 1..used + 1 + f]);
                used += 1 + f;
            }
            let tod = lead
                .checked_mul(3600)?
                .checked_add(m * 60 + sec)?
                .checked_mul(1_000_000_000)?
                .checked_add(ns)?;
            Some((Timestamp::TimeOfDay(tod), used))
        }
        Some(b'.') => {
            let f = digits_len(&s[n + 1..]);
            if f == 0 {
                return None;
            }
            let ns = lead
                .checked_mul(1_000_000_000)?
                .checked_add(frac_ns(&s[n + 1..n + 1 + f]))?;
            Some((Timestamp::Epoch(ns), n + 1 + f))
        }
        _ => None,
    }
}

/// Length of a `<comm>` suffix of a pid (`-Y` prints `1234<python3>`), or 0.
fn comm_len(s: &[u8]) -> usize {
    if s.first() != Some(&b'<') {
        return 0;
    }
    match s.iter().position(|&c| c == b'>') {
        Some(p) if s.get(p + 1) == Some(&b' ') || s.get(p + 1) == Some(&b']') => p + 1,
        _ => 0,
    }
}

/// Splits a line into pid column, timestamp and body.
fn split_prefix(line: &[u8]) -> (Option<u32>, Option<Timestamp>, &[u8]) {
    let mut s = line;
    let mut pid = None;
    if let Some(rest) = s.strip_prefix(b"[pid ") {
        let rest = skip_spaces(rest);
        let n = digits_len(rest);
        let after = n + comm_len(&rest[n..]);
        if n > 0 && rest.get(after) == Some(&b']') {
            pid = parse_u64(&rest[..n]).and_then(|v| u32::try_from(v).ok());
            s = skip_spaces(&rest[after + 1..]);
        }
    } else if s.first().is_some_and(u8::is_ascii_digit) {
        let n = digits_len(s);
        let after = n + comm_len(&s[n..]);
        if s.get(after) == Some(&b' ') {
            pid = parse_u64(&s[..n]).and_then(|v| u32::try_from(v).ok());
            s = skip_spaces(&s[after..]);
        }
    } else if s.first() == Some(&b' ') {
        s = skip_spaces(s);
    }
    let mut ts = None;
    if s.first().is_some_and(u8::is_ascii_digit) {
        if let Some((t, used)) = timestamp(s) {
            if s.get(used).is_none_or(|&c| c == b' ') {
                // `-r` prints seconds since the previous line; `-ttt` prints seconds
                // since 1970, which are never below ~3 years.
                ts = Some(match t {
                    Timestamp::Epoch(ns) if ns < RELATIVE_LIMIT_NS => Timestamp::Relative(ns),
                    t => t,
                });
                s = skip_spaces(&s[used..]);
            }
        }
    }
    // `-n` prints the syscall number and `-i` the instruction pointer, in brackets.
    for _ in 0..2 {
        if s.first() != Some(&b'[') {
            break;
        }
        let Some(close) = s.iter().position(|&c| c == b']') else {
            break;
        };
        let inner = &s[1..close];
        if !inner
            .iter()
            .all(|c| c.is_ascii_hexdigit() || *c == b' ' || *c == b'?')
            || s.get(close + 1) != Some(&b' ')
        {
            break;
        }
        s = skip_spaces(&s[close + 1..]);
    }
    (pid, ts, s)
}

/// The `-T` duration at the end of `s` (`... <0.000012>`), and `s` without it.
fn split_duration(s: &[u8]) -> (&[u8], Option<u64>) {
    if s.last() != Some(&b'>') {
        return (s, None);
    }
    let Some(open) = s.iter().rposition(|&c| c == b'<') else {
        return (s, None);
    };
    if open == 0 || s[open - 1] != b' ' {
        return (s, None);
    }
    let inner = &s[open + 1..s.len() - 1];
    let n = digits_len(inner);
    if n == 0 || inner.get(n) != Some(&b'.') || digits_len(&inner[n + 1..]) != inner.len() - n - 1 {
        return (s, None);
    }
    let Some(secs) = parse_u64(&inner[..n]) else {
        return (s, None);
    };
    let ns = secs
        .saturating_mul(1_000_000_000)
        .saturating_add(frac_ns(&inner[n + 1..]));
    (trim_end(&s[..open]), Some(ns))
}

fn ident_len(s: &[u8]) -> usize {
    s.iter()
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_')
        .count()
}

fn as_str(s: &[u8]) -> &str {
    // Identifiers are ASCII by construction.
    std::str::from_utf8(s).unwrap_or("?")
}

/// `-r` deltas are below this; `-ttt` epochs are above it.
const RELATIVE_LIMIT_NS: u64 = 100_000_000 * 1_000_000_000;

const UNFINISHED: &[u8] = b"<unfinished ...>";

fn parse_body<'a>(s: &'a [u8], whole: &'a [u8]) -> Result<Body<'a>, ParseError> {
    if s.is_empty() {
        return Ok(Body::Blank);
    }
    match s[0] {
        b'-' if s.starts_with(b"--- ") => return event_signal(s),
        b'-' if s.iter().all(|&c| c == b'-' || c == b' ') => return Ok(Body::Summary),
        b'+' if s.starts_with(b"+++ ") => return event_exit(s),
        b'<' if s.starts_with(b"<... ") => return resumed(s),
        b'>' if s.starts_with(b"> ") => return Ok(Body::Info),
        b'%' if s.starts_with(b"% time") => return Ok(Body::Summary),
        _ => {}
    }
    if let Some(rest) = s.strip_prefix(b"strace: ") {
        return Ok(strace_message(rest));
    }
    if s.starts_with(b"[ Process PID=") || whole.starts_with(b" > ") {
        return Ok(Body::Info);
    }
    let n = ident_len(s);
    if n == 0 || s.get(n) != Some(&b'(') {
        if is_summary_row(whole) {
            return Ok(Body::Summary);
        }
        return Err(ParseError::NotACall);
    }
    let name = as_str(&s[..n]);
    let after = &s[n + 1..];
    // `<detached ...>`: strace let go of the task inside the call; like a call that is
    // never resumed.
    let entry_only = after
        .strip_suffix(UNFINISHED)
        .or_else(|| after.strip_suffix(b"<detached ...>"));
    if let Some(args) = entry_only {
        return Ok(Body::Unfinished {
            name,
            args: trim_end(args),
        });
    }
    let (after, dur_ns) = split_duration(after);
    Ok(Body::Call(call_rest(name, after, dur_ns)?))
}

/// Parses `args) = ret ...` (the text after `name(`).
pub fn call_rest<'a>(
    name: &'a str,
    after: &'a [u8],
    dur_ns: Option<u64>,
) -> Result<Call<'a>, ParseError> {
    let close = match args::find_close_paren(after) {
        Some(c) => c,
        // A string or annotation with an odd quote can hide the real parenthesis; the
        // last ") = " is then the best guess.
        None => args::rfind(after, b") = ").ok_or(ParseError::Unbalanced)?,
    };
    let args_text = &after[..close];
    let rest = skip_spaces(&after[close + 1..]);
    let Some(rest) = rest.strip_prefix(b"=") else {
        return Err(ParseError::MissingResult);
    };
    let ret = result(skip_spaces(rest))?;
    Ok(Call {
        name,
        args: args_text,
        ret,
        dur_ns,
    })
}

fn result(s: &[u8]) -> Result<Ret<'_>, ParseError> {
    let tok_len = s.iter().position(|&c| c == b' ').unwrap_or(s.len());
    let tok = &s[..tok_len];
    let rest = skip_spaces(&s[tok_len..]);
    if tok == b"?" {
        // `= ? ERESTARTSYS (To be restarted ...)` or `= ? <unavailable>`.
        let n = ident_len(rest);
        if n > 0 {
            return Ok(errno_ret(&rest[..n]));
        }
        return Ok(Ret::NoReturn);
    }
    if tok == b"-1" && !rest.is_empty() {
        let n = ident_len(rest);
        if n > 0 && rest[0] == b'E' {
            return Ok(errno_ret(&rest[..n]));
        }
        if let Some(num) = rest.strip_prefix(b"(errno ") {
            let d = digits_len(num);
            if let Some(e) = parse_u64(&num[..d]) {
                return Ok(Ret::Err(e as i32));
            }
        }
    }
    // The value may carry an annotation, which can contain spaces (`= 3</a b>`).
    let n = s
        .iter()
        .position(|&c| c == b' ' || c == b'<')
        .unwrap_or(s.len());
    let v = &s[..n];
    let ann = if s.get(n) == Some(&b'<') {
        args::strip_annotation(s).1
    } else {
        None
    };
    let val = args::number(v).ok_or(ParseError::BadResult)?;
    Ok(Ret::Val { val, ann })
}

fn errno_ret(name: &[u8]) -> Ret<'static> {
    match consts::errno_from_name(name) {
        Some(e) => Ret::Err(e),
        None => Ret::UnknownErr,
    }
}

fn resumed(s: &[u8]) -> Result<Body<'_>, ParseError> {
    let rest = &s[5..];
    let n = ident_len(rest);
    if n == 0 {
        return Err(ParseError::BadResumed);
    }
    let name = as_str(&rest[..n]);
    let Some(tail) = rest[n..].strip_prefix(b" resumed>") else {
        return Err(ParseError::BadResumed);
    };
    // `<... read resumed> <unfinished ...>) = ?`: the task died inside the call.
    let tail = match skip_spaces(tail).strip_prefix(UNFINISHED) {
        Some(t) => t,
        None => tail,
    };
    let (tail, dur_ns) = split_duration(tail);
    Ok(Body::Resumed { name, tail, dur_ns })
}

fn event_signal(s: &[u8]) -> Result<Body<'_>, ParseError> {
    let rest = &s[4..];
    if rest.starts_with(b"stopped by ") {
        return Ok(Body::Info);
    }
    let n = ident_len(rest);
    let sig = consts::signal_from_name(&rest[..n]).ok_or(ParseError::BadEvent)?;
    Ok(Body::Signal(sig))
}

fn event_exit(s: &[u8]) -> Result<Body<'_>, ParseError> {
    let rest = &s[4..];
    if let Some(r) = rest.strip_prefix(b"exited with ") {
        let n = digits_len(r);
        let code = parse_u64(&r[..n]).ok_or(ParseError::BadEvent)?;
        return Ok(Body::Exited(code as i32));
    }
    if let Some(r) = rest.strip_prefix(b"killed by ") {
        let n = ident_len(r);
        let signal = consts::signal_from_name(&r[..n]).ok_or(ParseError::BadEvent)?;
        let core = args::find(r, b"(core dumped)").is_some();
        return Ok(Body::Killed { signal, core });
    }
    if let Some(r) = rest.strip_prefix(b"superseded by execve in pid ") {
        let n = digits_len(r);
        let pid = parse_u64(&r[..n]).ok_or(ParseError::BadEvent)?;
        return Ok(Body::Superseded(pid as u32));
    }
    Err(ParseError::BadEvent)
}

fn strace_message(rest: &[u8]) -> Body<'_> {
    if let Some(r) = rest.strip_prefix(b"Process ") {
        let n = digits_len(r);
        if let Some(pid) = parse_u64(&r[..n]) {
            let tail = trim(&r[n..]);
            if tail.starts_with(b"attached") {
                return Body::Attached(pid as u32);
            }
            if tail.starts_with(b"detached") {
                return Body::Detached(pid as u32);
            }
        }
    }
    Body::Info
}

/// A row of the `-c`/`-C` table: numbers, then a syscall name (or `total`).
fn is_summary_row(line: &[u8]) -> bool {
    let mut words = line
        .split(|&c| c == b' ')
        .filter(|w| !w.is_empty())
        .peekable();
    let mut numbers = 0;
    let mut last_is_name = false;
    while let Some(w) = words.next() {
        let is_num = w.iter().all(|c| c.is_ascii_digit() || *c == b'.');
        if words.peek().is_none() {
            last_is_name = !is_num && ident_len(w) == w.len();
        } else if is_num {
            numbers += 1;
        } else {
            return false;
        }
    }
    last_is_name && (3..=6).contains(&numbers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(line: &str) -> Call<'_> {
        match parse_line(line).expect("valid test input").body {
            Body::Call(c) => c,
            other => panic!("not a call: {other:?}"),
        }
    }

    #[test]
    fn pid_column_and_timestamps() {
        let l = parse_line("4680  00:20:08.457292 brk(NULL)         = 0x55755274a000 <0.000044>")
            .expect("valid test input");
        assert_eq!(l.pid, Some(4680));
        assert_eq!(
            l.ts,
            Some(Timestamp::TimeOfDay(
                (20 * 60 + 8) * 1_000_000_000 + 457_292_000
            ))
        );
        let c = match l.body {
            Body::Call(c) => c,
            _ => panic!(),
        };
        assert_eq!(c.name, "brk");
        assert_eq!(
            c.ret,
            Ret::Val {
                val: 0x55755274a000,
                ann: None
            }
        );
        assert_eq!(c.dur_ns, Some(44_000));

        let l =
            parse_line("[pid  6707] 23:59:59.999999999 close(3) = 0").expect("valid test input");
        assert_eq!(l.pid, Some(6707));
        assert_eq!(l.ts, Some(Timestamp::TimeOfDay(86_399_999_999_999)));

        let l = parse_line("1795306964.692904 close(3) = 0").expect("valid test input");
        assert_eq!(
            (l.pid, l.ts),
            (None, Some(Timestamp::Epoch(1_795_306_964_692_904_000)))
        );

        let l = parse_line("12:00:01 close(3) = 0").expect("valid test input");
        assert_eq!(l.ts, Some(Timestamp::TimeOfDay(43_201_000_000_000)));

        let l = parse_line("     0.000123 close(3) = 0").expect("valid test input");
        assert_eq!((l.pid, l.ts), (None, Some(Timestamp::Relative(123_000))));

        let l = parse_line("close(3) = 0").expect("valid test input");
        assert_eq!((l.pid, l.ts), (None, None));

        let l = parse_line("77 close(3) = 0").expect("valid test input");
        assert_eq!((l.pid, l.ts), (Some(77), None));

        let l = parse_line("77 12:00:00.000001 [ 257] [00007f0123456789] close(3) = 0")
            .expect("valid test input");
        assert_eq!(l.pid, Some(77));
        assert!(matches!(l.body, Body::Call(_)));
        let l = parse_line("16673<sh> 00:43:51.292738 brk(NULL) = 0x5").expect("valid test input");
        assert_eq!(l.pid, Some(16673));
        let l = parse_line("[pid 16674<ls>] close(3) = 0").expect("valid test input");
        assert_eq!(l.pid, Some(16674));
        let l = parse_line("5 read(0,  <detached ...>").expect("valid test input");
        assert_eq!(
            l.body,
            Body::Unfinished {
                name: "read",
                args: b"0,"
            }
        );
        let l = parse_line("5 1.5 [  60] [????????????????] +++ exited with 0 +++")
            .expect("valid test input");
        assert_eq!((l.pid, l.body), (Some(5), Body::Exited(0)));
    }

    #[test]
    fn results() {
        let c = call(
            r#"openat(AT_FDCWD</tmp>, "x", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000047>"#,
        );
        assert_eq!(c.ret, Ret::Err(2));
        assert_eq!(c.dur_ns, Some(47_000));
        assert_eq!(c.args, br#"AT_FDCWD</tmp>, "x", O_RDONLY"#);
        let c = call(r#"openat(AT_FDCWD, "/a b", O_RDONLY) = 3</a b>"#);
        assert_eq!(
            c.ret,
            Ret::Val {
                val: 3,
                ann: Some(b"/a b")
            }
        );
        let c = call("read(3, 0x7ff, 8) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)");
        assert_eq!(c.ret, Ret::Err(512));
        assert_eq!(call("exit_group(0)     = ?").ret, Ret::NoReturn);
        assert_eq!(call("read(3, 0x1, 8) = ? <unavailable>").ret, Ret::NoReturn);
        assert_eq!(
            call("fcntl(3, F_GETFL) = 0x8000 (flags O_RDONLY|O_LARGEFILE)").ret,
            Ret::Val {
                val: 0x8000,
                ann: None
            }
        );
        assert_eq!(call("foo(1) = -1 EWHATEVER (Odd)").ret, Ret::UnknownErr);
        assert_eq!(call("foo(1) = -1 (errno 1234)").ret, Ret::Err(1234));
        assert_eq!(
            call(r#"write(1, "a) = 1", 5) = 5"#).args,
            br#"1, "a) = 1", 5"#
        );
    }

    #[test]
    fn unfinished_and_resumed() {
        let l = parse_line("4743  00:20:17.662614 read(3<pipe:[9231]>,  <unfinished ...>")
            .expect("valid test input");
        assert_eq!(
            l.body,
            Body::Unfinished {
                name: "read",
                args: b"3<pipe:[9231]>,"
            }
        );
        let l =
            parse_line(r#"4743  00:20:17.667676 <... read resumed>"x\n", 4096) = 18 <0.005044>"#)
                .expect("valid test input");
        assert_eq!(
            l.body,
            Body::Resumed {
                name: "read",
                tail: br#""x\n", 4096) = 18"#,
                dur_ns: Some(5_044_000)
            }
        );
        let l = parse_line("5 <... read resumed> <unfinished ...>) = ?").expect("valid test input");
        assert_eq!(
            l.body,
            Body::Resumed {
                name: "read",
                tail: b") = ?",
                dur_ns: None
            }
        );
    }

    #[test]
    fn events_and_messages() {
        let b = |s| parse_line(s).expect("valid test input").body;
        assert_eq!(
            b("1 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED} ---"),
            Body::Signal(17)
        );
        assert_eq!(b("1 --- stopped by SIGSTOP ---"), Body::Info);
        assert_eq!(b("1 +++ exited with 3 +++"), Body::Exited(3));
        assert_eq!(
            b("1 +++ killed by SIGKILL +++"),
            Body::Killed {
                signal: 9,
                core: false
            }
        );
        assert_eq!(
            b("1 +++ killed by SIGSEGV (core dumped) +++"),
            Body::Killed {
                signal: 11,
                core: true
            }
        );
        assert_eq!(
            b("1 +++ superseded by execve in pid 7 +++"),
            Body::Superseded(7)
        );
        assert_eq!(b("strace: Process 123 attached"), Body::Attached(123));
        assert_eq!(b("strace: Process 123 detached"), Body::Detached(123));
        assert_eq!(
            b("% time     seconds  usecs/call     calls    errors syscall"),
            Body::Summary
        );
        assert_eq!(
            b("------ ----------- ----------- --------- --------- ----------------"),
            Body::Summary
        );
        assert_eq!(
            b("  0.18    0.000730           8        89           getgid"),
            Body::Summary
        );
        assert_eq!(
            b("100.00    0.395432          43      9112      1433 total"),
            Body::Summary
        );
        assert_eq!(
            b(" > /usr/lib/libc.so.6(__open64+0x1b) [0xf2b5b]"),
            Body::Info
        );
        assert_eq!(b(""), Body::Blank);
    }

    #[test]
    fn garbage_is_an_error() {
        let err = |l| parse_line(l).err();
        assert_eq!(err("hello world"), Some(ParseError::NotACall));
        assert_eq!(err("1 read(3, \"abc"), Some(ParseError::Unbalanced));
        assert_eq!(err("1 read(3, 4)"), Some(ParseError::MissingResult));
        assert_eq!(err("1 read(3, 4) = what"), Some(ParseError::BadResult));
        assert_eq!(err("1 +++ vanished +++"), Some(ParseError::BadEvent));
        assert_eq!(err("1 <... >"), Some(ParseError::BadResumed));
        assert_eq!(err("1 --- SIGNOPE ---"), Some(ParseError::BadEvent));
    }
}
