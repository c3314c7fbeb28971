//! A small tokenizer for strace's argument syntax: quoted strings with C escapes (and the
//! `"..."...` truncation mark), numbers, `A|B` flag sets, `{key=value, ...}` structs,
//! `[...]` arrays, `N</path>` descriptor annotations (nested with `-yy`), `/* comments */`
//! and `in => out` pairs.
//!
//! Everything works on bytes borrowed from the line; only decoded strings allocate. The
//! scanner never fails: unbalanced input makes a construct run to the end of the text,
//! and the callers treat what they cannot interpret as absent.

use crate::consts::{self, Table};

/// Is `s[i]` the `<` that opens a descriptor annotation (`3</path>`, `AT_FDCWD</cwd>`)?
/// Shift operators (`1<<20`) and the `<unfinished ...>` marker are not annotations.
fn is_annotation_start(s: &[u8], i: usize) -> bool {
    if s.get(i) != Some(&b'<') || i == 0 {
        return false;
    }
    let prev = s[i - 1];
    // `-X verbose` puts a comment between the number and the annotation:
    // `-100 /* AT_FDCWD */</tmp>`.
    let after_comment = prev == b'/' && i >= 2 && s[i - 2] == b'*';
    (prev.is_ascii_alphanumeric() || prev == b'_' || after_comment) && s.get(i + 1) != Some(&b'<')
}

/// Index just past a quoted string starting at `s[i] == '"'`, including a `...`
/// truncation mark that follows it.
fn skip_string(s: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < s.len() {
        match s[i..].iter().position(|&c| c == b'"' || c == b'\\') {
            Some(p) if s[i + p] == b'\\' => i += p + 2,
            Some(p) => {
                i += p + 1;
                if s[i..].starts_with(b"...") {
                    i += 3;
                }
                return i;
            }
            None => break,
        }
    }
    s.len()
}

/// Index just past a `/* ... */` comment starting at `i`.
fn skip_comment(s: &[u8], i: usize) -> usize {
    match find(&s[i + 2..], b"*/") {
        Some(p) => i + 2 + p + 2,
        None => s.len(),
    }
}

/// Index just past an annotation starting at `s[i] == '<'`. Annotations nest (`-yy`
/// prints `</dev/null<char 1:3>>`) and socket names contain `->` inside brackets.
fn skip_annotation(s: &[u8], mut i: usize) -> usize {
    let (mut angle, mut square) = (0usize, 0usize);
    while i < s.len() {
        match s[i] {
            b'\\' => {
                i += 2;
                continue;
            }
            b'<' => angle += 1,
            b'[' => square += 1,
            b']' => square = square.saturating_sub(1),
            b'>' if square == 0 => {
                angle -= 1;
                if angle == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    s.len()
}

/// Index just past the construct starting at `i` when it is a string, comment or
/// annotation; `None` when `s[i]` is an ordinary byte.
#[inline]
fn skip_special(s: &[u8], i: usize) -> Option<usize> {
    match s[i] {
        b'"' => Some(skip_string(s, i)),
        b'/' if s.get(i + 1) == Some(&b'*') => Some(skip_comment(s, i)),
        b'<' if is_annotation_start(s, i) => Some(skip_annotation(s, i)),
        _ => None,
    }
}

/// Position of the `)` closing the argument list, for `s` = the text after `name(`.
pub fn find_close_paren(s: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'"' | b'/' | b'<' => {
                if let Some(next) = skip_special(s, i) {
                    i = next;
                    continue;
                }
            }
            b'(' | b'{' | b'[' => depth += 1,
            b')' if depth == 0 => return Some(i),
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Splits `s` at commas outside strings, brackets, comments and annotations; each piece
/// is trimmed. An empty `s` gives no pieces.
pub fn split_top<'a>(s: &'a [u8], out: &mut Vec<&'a [u8]>) {
    out.clear();
    let s = trim(s);
    if s.is_empty() {
        return;
    }
    let mut depth = 0usize;
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'"' | b'/' | b'<' => {
                if let Some(next) = skip_special(s, i) {
                    i = next;
                    continue;
                }
            }
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                out.push(trim(&s[start..i]));
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(trim(&s[start..]));
}

/// `s` without leading and trailing ASCII whitespace.
pub fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// First position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    let first = needle[0];
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        match hay[i..hay.len() - needle.len() + 1]
            .iter()
            .position(|&c| c == first)
        {
            Some(p) => {
                let at = i + p;
                if &hay[at..at + needle.len()] == needle {
                    return Some(at);
                }
                i = at + 1;
            }
            None => return None,
        }
    }
    None
}

/// Last position of `needle` in `hay`.
pub fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    (0..=hay.len() - needle.len())
        .rev()
        .find(|&i| &hay[i..i + needle.len()] == needle)
}

/// The value part of an argument: for `in => out` pairs the input side, with trailing
/// comments removed (`0x7ffd /* 39 vars */` -> `0x7ffd`).
pub fn value_part(a: &[u8]) -> &[u8] {
    let mut a = a;
    if let Some(p) = find_top(a, b" => ") {
        a = &a[..p];
    }
    strip_comment(a)
}

/// Removes a trailing `/* ... */` comment (and whitespace before it).
fn strip_comment(a: &[u8]) -> &[u8] {
    if a.ends_with(b"*/") && a.first() != Some(&b'"') {
        if let Some(p) = find_top(a, b"/*") {
            return trim(&a[..p]);
        }
    }
    trim(a)
}

/// First position of `needle` at nesting depth 0 outside strings and annotations.
fn find_top(s: &[u8], needle: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        if depth == 0 && s[i..].starts_with(needle) {
            return Some(i);
        }
        if s[i] == b'"' || (s[i] == b'<' && is_annotation_start(s, i)) {
            i = skip_special(s, i).unwrap_or(i + 1);
            continue;
        }
        match s[i] {
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Parses an integer as strace prints it: decimal, negative, `0x` hex, `0` octal, or one
/// of the symbolic constants for all-ones values. An `[N]` wrapper (a pointer to an
/// integer) is looked through.
pub fn int(a: &[u8]) -> Option<i64> {
    let a = value_part(a);
    let a = match (a.first(), a.last()) {
        (Some(b'['), Some(b']')) => trim(&a[1..a.len() - 1]),
        _ => a,
    };
    let a = strip_comment(strip_annotation(a).0);
    number(a).or_else(|| consts::special_number(a).map(|v| v as i64))
}

/// Parses a bare number token (no symbols): `-12`, `0x1f`, `0644`, `18446744073709551615`.
pub fn number(a: &[u8]) -> Option<i64> {
    let (neg, digits) = match a.first() {
        Some(b'-') => (true, &a[1..]),
        _ => (false, a),
    };
    if digits.is_empty() {
        return None;
    }
    let (radix, body) = if digits.len() > 2 && (digits[..2] == *b"0x" || digits[..2] == *b"0X") {
        (16, &digits[2..])
    } else if digits.len() > 1 && digits[0] == b'0' {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    let mut v: u64 = 0;
    for &c in body {
        let d = match c {
            b'0'..=b'9' => (c - b'0') as u64,
            b'a'..=b'f' => (c - b'a' + 10) as u64,
            b'A'..=b'F' => (c - b'A' + 10) as u64,
            _ => return None,
        };
        if d >= radix {
            return None;
        }
        v = v.checked_mul(radix)?.checked_add(d)?;
    }
    let v = v as i64;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Splits a value followed by an annotation (`3</etc/passwd>`) into the value and the raw
/// annotation text between the outer angle brackets (still escaped). Text after the
/// annotation (strace prints `(deleted)` there) is returned as the third element.
pub fn strip_annotation(a: &[u8]) -> (&[u8], Option<&[u8]>, &[u8]) {
    let Some(p) = a.iter().position(|&c| c == b'<') else {
        return (a, None, &[]);
    };
    if !is_annotation_start(a, p) {
        return (a, None, &[]);
    }
    let end = skip_annotation(a, p);
    let inner_end = if end > p + 1 && a[end - 1] == b'>' {
        end - 1
    } else {
        end
    };
    (&a[..p], Some(&a[p + 1..inner_end]), &a[end..])
}

/// A descriptor argument: its number and its annotation (raw). `AT_FDCWD` is -100.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdArg<'a> {
    /// The descriptor number.
    pub fd: i64,
    /// The `-y` annotation text, still escaped.
    pub ann: Option<&'a [u8]>,
    /// strace printed `(deleted)` after the annotation.
    pub deleted: bool,
}

/// Parses a descriptor argument.
pub fn fd(a: &[u8]) -> Option<FdArg<'_>> {
    let a = value_part(a);
    let (v, ann, rest) = strip_annotation(a);
    let v = strip_comment(v);
    let fd = match v {
        b"AT_FDCWD" => consts::AT_FDCWD,
        _ => number(v)?,
    };
    let deleted = rest.starts_with(b"(deleted)");
    Some(FdArg { fd, ann, deleted })
}

/// What a string argument turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StrArg {
    /// A decoded string; `truncated` when strace printed only a prefix (`"..."...`).
    Str {
        /// The bytes.
        bytes: Vec<u8>,
        /// Only a prefix was printed.
        truncated: bool,
    },
    /// `NULL`.
    Null,
    /// An address: strace could not (or did not) read the memory.
    Pointer,
}

/// Parses a quoted string argument (`"a\tb"`, `"\x2f\x65"`, `"abc"...`).
pub fn string(a: &[u8]) -> Option<StrArg> {
    let a = trim(a);
    match a.first() {
        Some(b'"') => {
            let (bytes, end) = unescape_quoted(a);
            let truncated = a[end..].starts_with(b"...");
            Some(StrArg::Str { bytes, truncated })
        }
        _ => {
            let v = value_part(a);
            if v == b"NULL" {
                Some(StrArg::Null)
            } else if v.starts_with(b"0x") || v == b"0" {
                Some(StrArg::Pointer)
            } else {
                None
            }
        }
    }
}

/// Decodes a quoted string starting at `s[0] == '"'`; returns the bytes and the index
/// just past the closing quote.
fn unescape_quoted(s: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(s.len());
    let end = unescape_into(&s[1..], Some(b'"'), &mut out);
    (out, 1 + end + 1)
}

/// Decodes C escapes from `s` into `out` until the unescaped `stop` byte (or the end);
/// returns the index of the stop byte (or `s.len()`).
pub fn unescape_into(s: &[u8], stop: Option<u8>, out: &mut Vec<u8>) -> usize {
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if Some(c) == stop {
            return i;
        }
        if c != b'\\' {
            // Copy the run of plain bytes at once.
            let run = s[i..]
                .iter()
                .position(|&b| b == b'\\' || Some(b) == stop)
                .unwrap_or(s.len() - i);
            out.extend_from_slice(&s[i..i + run]);
            i += run;
            continue;
        }
        let Some(&e) = s.get(i + 1) else {
            out.push(b'\\');
            return s.len();
        };
        i += 2;
        match e {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'e' => out.push(0x1b),
            b'x' => {
                let mut v = 0u8;
                let mut n = 0;
                while n < 2 {
                    match s.get(i).and_then(|&h| (h as char).to_digit(16)) {
                        Some(d) => {
                            v = v.wrapping_mul(16).wrapping_add(d as u8);
                            i += 1;
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.extend_from_slice(b"\\x");
                } else {
                    out.push(v);
                }
            }
            b'0'..=b'7' => {
                let mut v: u32 = (e - b'0') as u32;
                let mut n = 1;
                while n < 3 {
                    match s.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + (d - b'0') as u32;
                            i += 1;
                            n += 1;
                        }
                        _ => break,
                    }
                }
                out.push(v as u8);
            }
            other => out.push(other),
        }
    }
    s.len()
}

/// Parses a flag set (`O_RDONLY|O_CLOEXEC`, `S_IFREG|0644`, `0x80000 /* O_CLOEXEC */`,
/// `SIGCHLD`) into its value. Unknown names contribute nothing and are counted in
/// `unknown`, so a newer strace's new flags degrade gracefully.
pub fn flags(a: &[u8], tables: &[Table], unknown: &mut u64) -> u64 {
    let a = value_part(a);
    let mut v = 0u64;
    for part in a.split(|&c| c == b'|') {
        let part = trim(part);
        if part.is_empty() || part == b"0" {
            continue;
        }
        if let Some(n) = number(part) {
            v |= n as u64;
            continue;
        }
        if let Some(n) = tables.iter().find_map(|t| consts::lookup(t, part)) {
            v |= n;
            continue;
        }
        if let Some(s) = consts::signal_from_name(part) {
            v |= s as u64;
            continue;
        }
        *unknown += 1;
    }
    v
}

/// Parses a mode (`0644`, `S_IFDIR|S_ISVTX|0777`).
pub fn mode(a: &[u8], unknown: &mut u64) -> u32 {
    flags(a, &[consts::MODE_BITS], unknown) as u32
}

/// The `key=value` fields of a struct argument `{a=1, b="x", ...}` (or of a bare
/// `a=1, b=2` list). Elements without `=` (`...`) are skipped.
pub fn fields(a: &[u8]) -> Vec<(&[u8], &[u8])> {
    let a = trim(value_part(a));
    let inner = match (a.first(), a.last()) {
        (Some(b'{'), Some(b'}')) => &a[1..a.len() - 1],
        _ => a,
    };
    let mut parts = Vec::new();
    split_top(inner, &mut parts);
    parts
        .into_iter()
        .filter_map(|p| {
            let eq = p.iter().position(|&c| c == b'=')?;
            Some((trim(&p[..eq]), trim(&p[eq + 1..])))
        })
        .collect()
}

/// The field `key` of a struct argument.
pub fn field<'a>(fields: &[(&'a [u8], &'a [u8])], key: &[u8]) -> Option<&'a [u8]> {
    fields.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
}

/// The elements of an array argument `[a, b, ...]`; `None` when the argument is not an
/// array (an address printed instead). The second value is true when strace elided
/// elements (a trailing `...`).
pub fn array(a: &[u8]) -> Option<(Vec<&[u8]>, bool)> {
    let a = trim(value_part(a));
    match (a.first(), a.last()) {
        (Some(b'['), Some(b']')) => {
            let mut parts = Vec::new();
            split_top(&a[1..a.len() - 1], &mut parts);
            let elided = parts.last().is_some_and(|p| *p == b"...");
            if elided {
                parts.pop();
            }
            Some((parts, elided))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<String> {
        let mut v = Vec::new();
        split_top(s.as_bytes(), &mut v);
        v.into_iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect()
    }

    #[test]
    fn splits_at_top_level_commas_only() {
        assert_eq!(
            split(r#"3</a,b>, "x, \"y\"", {a=1, b=[2, 3]}, [4, 5] /* c, d */, f(1, 2)"#),
            vec![
                r#"3</a,b>"#,
                r#""x, \"y\"""#,
                "{a=1, b=[2, 3]}",
                "[4, 5] /* c, d */",
                "f(1, 2)"
            ]
        );
        assert_eq!(split(""), Vec::<String>::new());
        assert_eq!(split("1<<20, 2"), vec!["1<<20", "2"]);
    }

    #[test]
    fn annotations_nest_and_hold_arrows() {
        assert_eq!(
            split("3</dev/null<char 1:3>>, 4<TCP:[1.2.3.4:5->6.7.8.9:10]>, 5"),
            vec![
                "3</dev/null<char 1:3>>",
                "4<TCP:[1.2.3.4:5->6.7.8.9:10]>",
                "5"
            ]
        );
        let f = fd(b"3</dev/null<char 1:3>>").expect("valid test input");
        assert_eq!(f.fd, 3);
        assert_eq!(f.ann, Some(&b"/dev/null<char 1:3>"[..]));
        let f = fd(b"3</memfd:x>(deleted)").expect("valid test input");
        assert!(f.deleted);
        assert_eq!(fd(b"AT_FDCWD</tmp>").expect("valid test input").fd, -100);
        assert_eq!(fd(b"AT_FDCWD").expect("valid test input").ann, None);
        let f = fd(b"-100 /* AT_FDCWD */</tmp>").expect("valid test input");
        assert_eq!((f.fd, f.ann), (-100, Some(&b"/tmp"[..])));
    }

    #[test]
    fn close_paren_ignores_parens_in_strings_and_annotations() {
        let s = br#""a)b", 3</x)y>) = 0"#;
        assert_eq!(find_close_paren(s), Some(14));
        assert_eq!(find_close_paren(b"\"unterminated"), None);
    }

    #[test]
    fn strings_decode_escapes_and_truncation() {
        assert_eq!(
            string(br#""a\tb\n\"q\"\\\1\0012\x41\177""#),
            Some(StrArg::Str {
                bytes: b"a\tb\n\"q\"\\\x01\x012A\x7f".to_vec(),
                truncated: false
            })
        );
        assert_eq!(
            string(br#""abc"..."#),
            Some(StrArg::Str {
                bytes: b"abc".to_vec(),
                truncated: true
            })
        );
        assert_eq!(
            string(br#""\x2f\x65\x74\x63""#),
            Some(StrArg::Str {
                bytes: b"/etc".to_vec(),
                truncated: false
            })
        );
        assert_eq!(string(b"NULL"), Some(StrArg::Null));
        assert_eq!(string(b"0x7ffd1234"), Some(StrArg::Pointer));
        assert_eq!(string(b"O_RDONLY"), None);
    }

    #[test]
    fn numbers_and_flags() {
        assert_eq!(int(b"-1"), Some(-1));
        assert_eq!(int(b"0x1f"), Some(31));
        assert_eq!(int(b"0644"), Some(0o644));
        assert_eq!(int(b"[0] => [8]"), Some(0));
        assert_eq!(int(b"0x7ffd /* 39 vars */"), Some(0x7ffd));
        assert_eq!(int(b"18446744073709551615"), Some(-1));
        assert_eq!(int(b"~0U"), Some(u32::MAX as i64));
        assert_eq!(int(b"12abc"), None);
        let mut unknown = 0;
        assert_eq!(
            flags(
                b"O_RDONLY|O_CLOEXEC|O_DIRECTORY",
                &[consts::OPEN_FLAGS],
                &mut unknown
            ),
            0o2200000
        );
        assert_eq!(
            flags(
                b"O_WRONLY|O_FUTURE_THING",
                &[consts::OPEN_FLAGS],
                &mut unknown
            ),
            1
        );
        assert_eq!(unknown, 1);
        assert_eq!(
            flags(
                b"0x80000 /* O_CLOEXEC */",
                &[consts::OPEN_FLAGS],
                &mut unknown
            ),
            0x80000
        );
        assert_eq!(mode(b"S_IFDIR|S_ISVTX|0777", &mut unknown), 0o41777);
        assert_eq!(
            flags(
                b"CLONE_VM|CLONE_VFORK|SIGCHLD",
                &[consts::CLONE_FLAGS],
                &mut unknown
            ),
            0x4111
        );
    }

    #[test]
    fn structs_and_arrays() {
        let f = fields(b"{st_mode=S_IFREG|0644, st_size=33763, ...}");
        assert_eq!(field(&f, b"st_mode"), Some(&b"S_IFREG|0644"[..]));
        assert_eq!(field(&f, b"st_size"), Some(&b"33763"[..]));
        assert_eq!(f.len(), 2);
        let f = fields(b"{flags=CLONE_VM, exit_signal=0} => {parent_tid=[42]}");
        assert_eq!(field(&f, b"exit_signal"), Some(&b"0"[..]));
        let (v, elided) = array(br#"["ls", "-l", ...]"#).expect("valid test input");
        assert_eq!(v.len(), 2);
        assert!(elided);
        assert!(array(b"0x7ffd").is_none());
    }
}
