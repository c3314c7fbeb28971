//! A one-line progress bar on stderr for long analyses: it appears only after a second
//! (short runs stay quiet), only on a terminal, redraws at most ten times a second, and
//! erases itself when done so the report starts on a clean line.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Shown only when the work has taken at least this long.
const DELAY: Duration = Duration::from_secs(1);
/// Redraws at most this often.
const EVERY: Duration = Duration::from_millis(100);

/// Progress of reading `total` bytes.
#[derive(Debug)]
pub struct Progress {
    label: &'static str,
    total: u64,
    start: Instant,
    last: Option<Instant>,
    enabled: bool,
}

impl Progress {
    /// A bar for `total` bytes; drawn only when stderr is a terminal.
    pub fn new(label: &'static str, total: u64) -> Progress {
        Progress::with(label, total, std::io::stderr().is_terminal())
    }

    /// A bar that draws only if `enabled`.
    pub fn with(label: &'static str, total: u64, enabled: bool) -> Progress {
        Progress {
            label,
            total,
            start: Instant::now(),
            last: None,
            enabled,
        }
    }

    /// `done` bytes have been read.
    pub fn update(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let elapsed = now.duration_since(self.start);
        if elapsed < DELAY || self.last.is_some_and(|t| now.duration_since(t) < EVERY) {
            return;
        }
        self.last = Some(now);
        let line = self.line(done, elapsed);
        // A failed write to stderr is not worth failing the analysis for.
        let _ = write!(std::io::stderr().lock(), "\r{line}\x1b[K");
    }

    /// The bar's text for `done` bytes after `elapsed`.
    fn line(&self, done: u64, elapsed: Duration) -> String {
        const WIDTH: usize = 30;
        let frac = if self.total == 0 {
            0.0
        } else {
            (done as f64 / self.total as f64).clamp(0.0, 1.0)
        };
        let filled = (frac * WIDTH as f64).round() as usize;
        let eta = if frac > 0.0 {
            let left = elapsed.as_secs_f64() * (1.0 - frac) / frac;
            format!(", {left:.0}s left")
        } else {
            String::new()
        };
        format!(
            "dejavu: {} [{}{}] {:>3.0}% of {:.1} MB{eta}",
            self.label,
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            frac * 100.0,
            self.total as f64 / 1e6,
        )
    }

    /// Erases the bar if it was drawn.
    pub fn finish(&mut self) {
        if self.last.take().is_some() {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_shows_the_fraction_and_what_is_left() {
        let p = Progress::with("analysing", 200_000_000, false);
        let l = p.line(50_000_000, Duration::from_secs(2));
        assert_eq!(
            l,
            "dejavu: analysing [########----------------------]  25% of 200.0 MB, 6s left"
        );
        assert!(p
            .line(0, Duration::from_secs(2))
            .ends_with("0% of 200.0 MB"));
    }

    #[test]
    fn a_disabled_bar_never_draws() {
        let mut p = Progress::with("x", 10, false);
        p.start -= Duration::from_secs(5);
        p.update(5);
        assert!(p.last.is_none());
    }
}
