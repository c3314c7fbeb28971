//! Analysis settings: thresholds, the start-up window, which detectors run, and
//! per-detector options (`-O detector.option=value`).

use std::collections::BTreeMap;

/// Settings for one analysis.
#[derive(Clone, Debug)]
pub struct Config {
    /// A finding needs at least this many redundant calls (`--min-calls`).
    pub min_calls: u64,
    /// Calls before this time (ns since the trace started) are not counted
    /// (`--skip-startup`); replay still sees them.
    pub skip_startup_ns: u64,
    /// Only these detectors (`--detector`); None runs all.
    pub only: Option<Vec<String>>,
    /// Per-detector options, keyed `detector.option`.
    pub options: BTreeMap<String, String>,
    /// Only findings of programs matching one of these globs (`--program`); empty keeps
    /// every program.
    pub programs: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min_calls: 10,
            skip_startup_ns: 0,
            only: None,
            options: BTreeMap::new(),
            programs: Vec::new(),
        }
    }
}

impl Config {
    /// A numeric option of a detector, or its default. Values were validated by
    /// [`crate::validate_options`].
    pub fn opt(&self, detector: &str, name: &str, default: u64) -> u64 {
        self.options
            .get(&format!("{detector}.{name}"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// A matcher for `programs` (None keeps every program); an invalid glob is an error
    /// naming it.
    pub fn program_matcher(&self) -> Result<Option<globset::GlobSet>, String> {
        if self.programs.is_empty() {
            return Ok(None);
        }
        let mut b = globset::GlobSetBuilder::new();
        for p in &self.programs {
            b.add(globset::Glob::new(p).map_err(|e| format!("`{p}` is not a valid glob: {e}"))?);
        }
        b.build().map(Some).map_err(|e| e.to_string())
    }

    /// Whether a call at `ts` counts toward findings.
    #[inline]
    pub fn counts(&self, ts: u64) -> bool {
        ts >= self.skip_startup_ns
    }
}
