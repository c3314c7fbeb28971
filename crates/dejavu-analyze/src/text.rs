//! Small helpers for text reports, shared by `dejavu summary` and the reports (dejavu-report
//! re-exports them): number and duration formats, fitting text to columns.
//!
//! Widths count characters, not bytes: paths are often UTF-8, and an ellipsis must not
//! split a character. (East Asian wide characters still count as one column; reports stay
//! aligned for the paths people mostly have.)

/// `1234567` -> `1,234,567`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in the unit that keeps 3-4 significant digits: `850ns`, `12.3µs`, `4.56ms`,
/// `1.234s`, `2m03s`.
pub fn fmt_duration(ns: u64) -> String {
    let f = ns as f64;
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}µs", f / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}ms", f / 1e6),
        1_000_000_000..=59_999_999_999 => format!("{:.3}s", f / 1e9),
        _ => {
            let s = ns / 1_000_000_000;
            format!("{}m{:02}s", s / 60, s % 60)
        }
    }
}

/// Replaces control characters (a newline in a file name, an escape sequence in an argv)
/// so they cannot break a table or drive the terminal.
pub fn sanitize(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

/// An argv as a shell would need it: arguments with spaces or quotes in single quotes.
pub fn shell_join(argv: &[String]) -> String {
    let quote = |a: &String| -> String {
        let plain = !a.is_empty()
            && a.chars()
                .all(|c| c.is_alphanumeric() || "-_./,:=+@%^".contains(c));
        if plain {
            a.clone()
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    argv.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// `s` cut to `width` characters, ending in `…` when cut.
pub fn shorten_end(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `s` cut to `width` characters by replacing its middle with `…`. The tail keeps the
/// larger share: for a path, the file name matters more than the top directories. Cuts
/// snap to `/` when that costs little, so whole directory names are elided:
/// `/home/u/…/node_modules/pkg/index.js`.
pub fn shorten_middle(s: &str, width: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len();
    if n <= width {
        return s.to_string();
    }
    if width < 2 {
        return "…".chars().take(width).collect();
    }
    let keep = width - 1;
    // Length of the longest suffix that starts with '/' and fits in `max` characters.
    let slash_suffix = |max: usize| {
        (0..=max.min(n))
            .rev()
            .find(|&l| l > 0 && chars[n - l] == '/')
    };
    let budget = keep - keep * 2 / 5;
    let tail = match slash_suffix(budget) {
        Some(l) if l >= budget / 2 => l,
        _ => budget,
    };
    let budget = keep - tail;
    let head = match (1..=budget).rev().find(|&l| chars[l - 1] == '/') {
        Some(l) if l >= budget / 2 => l,
        _ => budget,
    };
    // What the head's snap to '/' left over may let the tail take one more directory.
    let tail = match slash_suffix(keep - head) {
        Some(l) if l > tail => l,
        _ => tail,
    };
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[n - tail..]);
    out
}

/// Word-wraps `text` to `width` columns; the first line starts with `first`, the others
/// with `rest`. A word longer than a line is left whole rather than broken.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut line_len = first.chars().count();
    let mut empty = true;
    for word in text.split_whitespace() {
        let wl = word.chars().count();
        if !empty && line_len + 1 + wl > width {
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            line_len = rest.chars().count();
            empty = true;
        }
        if !empty {
            line.push(' ');
            line_len += 1;
        }
        line.push_str(word);
        line_len += wl;
        empty = false;
    }
    lines.push(line);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1000), "1,000");
        assert_eq!(fmt_count(1234567), "1,234,567");
        assert_eq!(fmt_count(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(fmt_duration(0), "0ns");
        assert_eq!(fmt_duration(850), "850ns");
        assert_eq!(fmt_duration(12_345), "12.3µs");
        assert_eq!(fmt_duration(4_560_000), "4.56ms");
        assert_eq!(fmt_duration(1_234_000_000), "1.234s");
        assert_eq!(fmt_duration(123_000_000_000), "2m03s");
    }

    #[test]
    fn shortening_keeps_the_width_and_the_file_name() {
        let p = "/home/user/project/node_modules/some-package/lib/index.js";
        let s = shorten_middle(p, 30);
        assert_eq!(s, "/home/user/…/lib/index.js");
        let s = shorten_middle(p, 40);
        assert_eq!(s, "/home/user/project/…/lib/index.js");
        assert!(shorten_middle(p, 40).chars().count() <= 40);
        // No slash near the cut: cut by characters, exactly to the width.
        let s = shorten_middle("abcdefghijklmnopqrstuvwxyz", 10);
        assert_eq!(s, "abc…uvwxyz");
        for w in 2..p.len() {
            let s = shorten_middle(p, w);
            assert!(s.chars().count() <= w && s.contains('…'), "{w}: {s}");
        }
        assert_eq!(shorten_middle("short", 30), "short");
        assert_eq!(shorten_middle("ééééééééééé", 5).chars().count(), 5);
        assert_eq!(shorten_end("abcdef", 4), "abc…");
        assert_eq!(shorten_end("abc", 4), "abc");
    }

    #[test]
    fn control_characters_cannot_break_a_table() {
        assert_eq!(sanitize("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(sanitize("\u{1b}[31m"), "\\u{1b}[31m");
        assert_eq!(sanitize("plain"), "plain");
    }

    #[test]
    fn argv_is_quoted_like_a_shell_would() {
        let argv: Vec<String> = ["sh", "-c", "ls -l", "it's", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_join(&argv), r"sh -c 'ls -l' 'it'\''s' ''");
    }

    #[test]
    fn wrap_fits_the_width() {
        let lines = wrap("one two three four five six", 12, "! ", "  ");
        assert_eq!(lines, ["! one two", "  three four", "  five six"]);
        for l in &lines {
            assert!(l.chars().count() <= 12);
        }
    }
}
