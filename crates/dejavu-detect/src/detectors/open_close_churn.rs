//! open-close-churn: not implemented yet (placeholder so the registry lists every detector id).

use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::View;
use dejavu_trace::{Sys, Syscall};

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "open-close-churn",
    summary: "(not implemented yet)",
    explain: "(not implemented yet)",
    example: "",
    fix: "",
    hazards: "",
    options: &[],
    make: |_cfg: &Config| Box::new(Placeholder),
};

struct Placeholder;

impl Detector for Placeholder {
    fn wants(&self, _sys: Sys) -> bool {
        false
    }

    fn on_syscall(&mut self, _s: &Syscall, _v: &View, _cx: &Cx<'_>) {}

    fn finish(&mut self, _cx: &Cx<'_>) -> Vec<Finding> {
        Vec::new()
    }
}
