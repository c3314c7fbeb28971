//! Typed errors of the ptrace backend. Each kind that a user can fix carries the advice
//! (the CLI prints it as is) and maps to a documented exit code.

use std::io;

/// Why recording could not start or continue.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The command does not exist (exit code 127, like a shell).
    #[error("command not found: {0}")]
    NotFound(String),
    /// The command exists but cannot be executed (exit code 126, like a shell).
    #[error("cannot execute {program}: {source}")]
    NotExecutable {
        /// The program.
        program: String,
        /// Why.
        source: io::Error,
    },
    /// ptrace (or the seccomp filter) is not permitted here (exit code 77).
    #[error("tracing is not permitted here: {what}\n{advice}")]
    Denied {
        /// What failed, e.g. "ptrace(PTRACE_SEIZE, 1234): Operation not permitted".
        what: String,
        /// How to allow it.
        advice: String,
    },
    /// A pid given to -p does not exist.
    /// The eBPF backend cannot run here (not built in, no permission, no BTF).
    #[error("the eBPF backend cannot run here: {what}\n{advice}")]
    Unavailable { what: String, advice: String },
    #[error("no such process: {0}")]
    NoSuchProcess(i32),
    /// A pid given to -p cannot be recorded for what it is, not for want of permission: a
    /// zombie, or a process another tracer holds (exit code 1).
    #[error("cannot record it: {0}")]
    Unattachable(String),
    /// The trace could not be written.
    #[error("cannot write the trace: {0}")]
    Trace(#[from] dejavu_trace::TraceError),
    /// Anything else the kernel refused.
    #[error("{what}: {source}")]
    Os {
        /// The operation.
        what: String,
        /// The error.
        source: io::Error,
    },
}

impl RecordError {
    /// The exit code documented for this failure (docs/cli.md).
    pub fn exit_code(&self) -> i32 {
        match self {
            RecordError::NotFound(_) => 127,
            RecordError::NotExecutable { .. } => 126,
            RecordError::Denied { .. } | RecordError::Unavailable { .. } => 77,
            RecordError::Unattachable(_) => 1,
            _ => 125,
        }
    }

    pub fn os(what: impl Into<String>, source: io::Error) -> Self {
        RecordError::Os {
            what: what.into(),
            source,
        }
    }
}

/// Explains a refused ptrace request: the reasons we can see on this machine, each with
/// its fix, in the order they are most likely.
pub fn denied_advice(attaching: bool, target: Option<i32>) -> String {
    let mut tips = Vec::new();
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let root = unsafe { libc::geteuid() } == 0;
    if attaching {
        match scope {
            Some(1) if !root => tips.push(
                "kernel.yama.ptrace_scope is 1: only a parent may trace its children. Run dejavu as root, \
                 or let it start the program (dejavu record -- CMD), or: sudo sysctl kernel.yama.ptrace_scope=0"
                    .to_string(),
            ),
            Some(2) if !root => tips.push(
                "kernel.yama.ptrace_scope is 2: only root (CAP_SYS_PTRACE) may attach. Run dejavu with sudo."
                    .to_string(),
            ),
            Some(3) => tips.push(
                "kernel.yama.ptrace_scope is 3: attaching is disabled until reboot. Start the program under \
                 dejavu instead (dejavu record -- CMD)."
                    .to_string(),
            ),
            _ => {}
        }
        if let Some(pid) = target {
            if !root {
                if let Ok(st) = std::fs::metadata(format!("/proc/{pid}")) {
                    use std::os::unix::fs::MetadataExt;
                    if st.uid() != unsafe { libc::geteuid() } {
                        tips.push(format!(
                            "process {pid} belongs to uid {}: tracing another user's process needs root \
                             or CAP_SYS_PTRACE",
                            st.uid()
                        ));
                    }
                }
            }
        }
    }
    tips.push(
        "in a container, ptrace may be blocked by the seccomp profile or a missing capability: \
         with Docker use --cap-add=SYS_PTRACE (and --security-opt seccomp=unconfined on old versions); \
         in Kubernetes add SYS_PTRACE to securityContext.capabilities"
            .to_string(),
    );
    tips.push("as an alternative, record with strace and run dejavu import strace".to_string());
    let mut s = String::from("hints:");
    for t in tips {
        s.push_str("\n  - ");
        s.push_str(&t);
    }
    s
}
