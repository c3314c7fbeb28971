//! The tracer's own signal handling. SIGINT, SIGTERM, SIGHUP and SIGQUIT are caught
//! (without SA_RESTART, so the blocking waitpid returns EINTR) and handled by the main
//! loop: forwarded to the program, or, when attached, a clean detach.
//!
//! When dejavu starts the program, a signal dejavu was started with ignored (`nohup`
//! ignores SIGHUP, a script's background job SIGINT and SIGQUIT) stays ignored, so the
//! program inherits it ignored as it would without dejavu. Attached, there is no program to
//! inherit anything and all four are caught: `dejavu record -p PID & ... kill -INT $!` in a
//! script detaches. The program's process resets the caught ones to their default between
//! fork and exec ([`reset_in_child`]): a signal forwarded in that window would otherwise
//! run dejavu's handler in the child and be lost.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signals the tracer catches.
pub const CAUGHT: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

static PENDING: AtomicI32 = AtomicI32::new(0);
static FROM_TTY: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let code = if info.is_null() {
        0
    } else {
        unsafe { (*info).si_code }
    };
    // Terminal-generated signals (Ctrl-C, Ctrl-\, hangup) come from the kernel and reach
    // the whole foreground process group, the program included: forwarding them again
    // would deliver them twice.
    FROM_TTY.store((code == libc::SI_KERNEL) as i32, Ordering::SeqCst);
    PENDING.store(sig, Ordering::SeqCst);
}

/// Previously installed dispositions, restored on drop.
pub struct Guard {
    old: Vec<(i32, libc::sigaction)>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("signals::Guard")
    }
}

/// Installs the handlers; with `keep_ignored`, not for the signals that are ignored now.
pub fn install(keep_ignored: bool) -> Guard {
    let mut old = Vec::new();
    for sig in CAUGHT {
        // SAFETY: a zeroed sigaction with our handler and SA_SIGINFO; old is an out-param.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut prev: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut prev) != 0
                || (keep_ignored && prev.sa_sigaction == libc::SIG_IGN)
            {
                continue;
            }
            if libc::sigaction(sig, &sa, &mut prev) == 0 {
                old.push((sig, prev));
            }
        }
    }
    PENDING.store(0, Ordering::SeqCst);
    Guard { old }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (sig, sa) in &self.old {
            // SAFETY: restoring a disposition the kernel gave us.
            unsafe { libc::sigaction(*sig, sa, std::ptr::null_mut()) };
        }
    }
}

/// In the program's process between fork and exec: the signals dejavu catches get their
/// default action back (exec would do it, but only at exec). Async-signal-safe: only
/// sigaction.
pub fn reset_in_child() {
    for sig in CAUGHT {
        // SAFETY: reading and setting dispositions with zeroed structs.
        unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                && cur.sa_sigaction == on_signal as *const () as usize
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
    }
}

/// Takes the pending signal, if any: (signal, whether it came from the terminal).
pub fn take() -> Option<(i32, bool)> {
    let sig = PENDING.swap(0, Ordering::SeqCst);
    (sig != 0).then(|| (sig, FROM_TTY.load(Ordering::SeqCst) != 0))
}
