//! Text helpers for reports: number, duration and share formats, fitting text to columns.
//! The ones `dejavu summary` shares (counts, durations, sanitizing, shell quoting,
//! shortening, wrapping) live in `dejavu_analyze::text` and are re-exported here, so both
//! commands format alike from one copy; the table-only ones (short durations, shares)
//! live here.

pub use dejavu_analyze::text::{
    fmt_count, fmt_duration, sanitize, shell_join, shorten_end, shorten_middle, wrap,
};

/// A duration in at most three significant digits, trailing zeros dropped, for tables:
/// `850ns`, `1.5µs`, `40ms`, `250ms`, `1.23s`, `2m03s`.
pub fn fmt_duration_short(ns: u64) -> String {
    let (v, unit) = match ns {
        0..=999 => return format!("{ns}ns"),
        1_000..=999_999 => (ns as f64 / 1e3, "µs"),
        1_000_000..=999_999_999 => (ns as f64 / 1e6, "ms"),
        1_000_000_000..=59_999_999_999 => (ns as f64 / 1e9, "s"),
        _ => {
            let s = ns / 1_000_000_000;
            return format!("{}m{:02}s", s / 60, s % 60);
        }
    };
    let decimals = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let mut num = format!("{v:.decimals$}");
    if num.contains('.') {
        while num.ends_with('0') {
            num.pop();
        }
        if num.ends_with('.') {
            num.pop();
        }
    }
    // Rounding can reach the next unit (999.7µs -> "1000µs"); that is still exact enough
    // and keeps the width.
    format!("{num}{unit}")
}

/// A share (0..1) as a percentage with one decimal: `60.7%`, `<0.1%` for a share too small
/// to show but not zero, `0%` for none.
pub fn fmt_share(share: f64) -> String {
    let pct = share * 100.0;
    if pct.is_nan() || pct <= 0.0 {
        "0%".to_string()
    } else if pct < 0.05 {
        "<0.1%".to_string()
    } else if pct >= 99.95 {
        format!("{pct:.0}%")
    } else {
        format!("{pct:.1}%")
    }
}

/// `part` of `whole` as a share (0 when `whole` is 0).
pub fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_durations_keep_three_digits() {
        assert_eq!(fmt_duration_short(850), "850ns");
        assert_eq!(fmt_duration_short(1_500), "1.5µs");
        assert_eq!(fmt_duration_short(40_000_000), "40ms");
        assert_eq!(fmt_duration_short(250_000_000), "250ms");
        assert_eq!(fmt_duration_short(1_234_000_000), "1.23s");
        assert_eq!(fmt_duration_short(2_000_000_000), "2s");
        assert_eq!(fmt_duration_short(12_345_000), "12.3ms");
        assert_eq!(fmt_duration_short(123_000_000_000), "2m03s");
    }

    #[test]
    fn shares_never_round_to_a_misleading_zero() {
        assert_eq!(fmt_share(0.0), "0%");
        assert_eq!(fmt_share(0.0001), "<0.1%");
        assert_eq!(fmt_share(0.6071), "60.7%");
        assert_eq!(fmt_share(1.0), "100%");
        assert_eq!(fmt_share(f64::NAN), "0%");
        assert_eq!(ratio(1, 0), 0.0);
    }
}
