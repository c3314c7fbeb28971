//! dejavu's eBPF capture backend. A BPF program in the kernel (bpf/dejavu.bpf.c) follows
//! the traced program's process tree, filters the traced syscalls, and copies at each
//! call's exit what decoding needs; this crate loads it (aya), starts or attaches to the
//! program, reads the ring buffer, and feeds the records to dejavu-capture's decoder, so
//! both backends write the same trace. docs/ebpf-backend.md has the design, the
//! differences from ptrace, and the measurements.

pub mod access;
#[cfg(dejavu_bpf)]
mod core_cache;
#[cfg(dejavu_bpf)]
mod drainer;
pub mod event;
#[cfg(dejavu_bpf)]
mod kept;
#[cfg(dejavu_bpf)]
mod recorder;

pub use dejavu_capture::{Outcome, RecordError, RecordOptions, Target};
use dejavu_trace::{Meta, TraceError, TraceWriter};
use std::io::Write;

/// The default size of each ring buffer (the calls', and the stack copies' with stacks on). The
/// drainer thread copies records out as they come (drainer.rs), so a ring holds only what
/// arrives while the drainer waits for a CPU: at the heaviest rate measured here (a stat loop,
/// about 450,000 calls a second, ~330 bytes each: 150 MB/s) 4 MiB hold about 27 ms, and the
/// kernel wakes the drainer when a quarter waits. No record was lost: with 1 MiB and three busy
/// loops competing for the two CPUs, by the Python stat loop (stacks on and off), the Node.js
/// one (off) and the C loops of bench/; with 2 MiB, by `make -j2`, and with two busy loops, by
/// `find /usr`, `du` and `cat` of 3,000 files. A bigger ring costs milliseconds at every start
/// (the kernel allocates, zeroes and maps it, and unmaps it at the end): 16 MiB, the default
/// before, made `dejavu record -- true` ~5 ms slower (bench/RESULTS.md).
pub const DEFAULT_BUFFER_BYTES: u64 = 4 << 20;

/// eBPF-specific options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Ring buffer size in bytes (rounded up to a power of two, at least one page).
    pub buffer_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            buffer_bytes: DEFAULT_BUFFER_BYTES,
        }
    }
}

/// Whether this build has the eBPF backend at all.
pub fn built() -> bool {
    cfg!(dejavu_bpf)
}

const PTRACE_WORKS: &str = "--backend ptrace records the same events without any of this.";

fn unavailable(what: impl Into<String>, advice: impl Into<String>) -> RecordError {
    RecordError::Unavailable {
        what: what.into(),
        advice: format!("{} {PTRACE_WORKS}", advice.into()),
    }
}

/// Effective capabilities of this process (CapEff in /proc/self/status).
pub(crate) fn effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Checks what the backend needs before trying it: built in, BTF, and the privilege to
/// load tracing programs. The answer names what is missing.
pub fn check() -> Result<(), RecordError> {
    if !built() {
        return Err(unavailable(
            "this dejavu was built without it (clang or libbpf's headers were missing)",
            "Install clang and libbpf-dev (scripts/setup does) and rebuild.",
        ));
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(unavailable(
            "the kernel has no BTF type information (/sys/kernel/btf/vmlinux)",
            "It needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (5.15 or later; most distributions' are).",
        ));
    }
    const CAP_SYS_ADMIN: u64 = 1 << 21;
    const CAP_PERFMON: u64 = 1 << 38;
    const CAP_BPF: u64 = 1 << 39;
    let caps = effective_caps();
    let privileged = caps & CAP_SYS_ADMIN != 0 || (caps & CAP_BPF != 0 && caps & CAP_PERFMON != 0);
    if !privileged {
        let mut missing = Vec::new();
        if caps & CAP_BPF == 0 {
            missing.push("CAP_BPF");
        }
        if caps & CAP_PERFMON == 0 {
            missing.push("CAP_PERFMON");
        }
        let sysctl = std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
            .map(|s| format!(" (kernel.unprivileged_bpf_disabled is {})", s.trim()))
            .unwrap_or_default();
        return Err(unavailable(
            format!(
                "loading tracing programs needs root, or {} (or CAP_SYS_ADMIN); this process has neither{sysctl}",
                missing.join(" and ")
            ),
            "Run dejavu with sudo, or grant the capabilities: sudo setcap cap_bpf,cap_perfmon+ep $(command -v dejavu). \
             That lets every user who can run that file load tracing programs with it (which can read any \
             process's calls); dejavu itself records only the processes its user could ptrace. \
             --backend ptrace needs none of this.",
        ));
    }
    Ok(())
}

/// Records `target` with the eBPF backend into the trace `make_writer` creates.
pub fn record<W: Write>(
    target: Target,
    opts: &RecordOptions,
    eopts: &Options,
    make_writer: impl FnOnce(&Meta) -> Result<TraceWriter<W>, TraceError>,
) -> Result<(Outcome, W), RecordError> {
    check()?;
    #[cfg(dejavu_bpf)]
    {
        recorder::record(target, opts, eopts, make_writer)
    }
    #[cfg(not(dejavu_bpf))]
    {
        let _ = (target, opts, eopts, make_writer);
        Err(unavailable("not built in", ""))
    }
}
