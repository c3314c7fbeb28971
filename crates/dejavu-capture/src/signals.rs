//! The tracer's own signal handling. Every signal whose default would end dejavu
//! ([`caught`]) is caught (without SA_RESTART, so the blocking waitpid returns EINTR) and
//! handled by the main loop: forwarded to the program ([`Policy`]: a second SIGINT or
//! SIGTERM soon after the first stops the recording), or, when attached, a clean detach.
//! A once-a-second tick ([`Ticker`]) wakes the loop so the trace reaches the file while
//! the program is quiet.
//!
//! When dejavu starts the program, a signal dejavu was started with ignored (`nohup`
//! ignores SIGHUP, a script's background job SIGINT and SIGQUIT) stays ignored, so the
//! program inherits it ignored as it would without dejavu. Attached, there is no program to
//! inherit anything and all are caught: `dejavu record -p PID & ... kill -INT $!` in a
//! script detaches. The program's process resets the caught ones to their default between
//! fork and exec ([`reset_in_child`]), with them blocked from before the fork until then
//! ([`block_for_fork`]): a signal forwarded in that window would otherwise run dejavu's
//! handler in the child and be lost.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The signals the tracer catches: every signal whose default action ends a process and
/// that someone may send to dejavu meaning the program (SIGHUP, SIGINT, SIGQUIT, SIGTERM,
/// SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGPWR, SIGIO,
/// SIGSTKFLT and the real-time signals), but the one dejavu's own tick uses. Not SIGPIPE
/// (dejavu ignores it itself; the program gets the default back) nor the synchronous
/// faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGSYS, SIGTRAP: a bug of dejavu's own).
pub fn caught() -> Vec<i32> {
    let mut v = Vec::new();
    for_each_caught(|s| v.push(s));
    v
}

/// The named signals of [`caught`].
const NAMED: [i32; 14] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGPWR,
    libc::SIGIO,
    libc::SIGSTKFLT,
];

/// Calls `f` with each signal of [`caught`], allocating nothing (it runs between fork
/// and exec).
fn for_each_caught(mut f: impl FnMut(i32)) {
    for s in NAMED {
        f(s);
    }
    for s in libc::SIGRTMIN()..=libc::SIGRTMAX() {
        if s != tick_signal() {
            f(s);
        }
    }
}

/// The signals that ask a program to stop (a second one soon after the first stops the
/// recording; after the program exited, the first does).
pub fn is_stop_request(sig: i32) -> bool {
    matches!(
        sig,
        libc::SIGINT | libc::SIGTERM | libc::SIGHUP | libc::SIGQUIT
    )
}

/// The real-time signal of dejavu's tick ([`Ticker`]): it wakes a tracer
/// blocked in waitpid so that the trace's blocks reach the file while the program is
/// quiet. Never forwarded.
pub fn tick_signal() -> i32 {
    libc::SIGRTMAX() - 1
}

/// Pending signals, one bit each (bit N: signal N).
static PENDING: AtomicU64 = AtomicU64::new(0);
/// Of those, the ones a terminal sent (si_code SI_KERNEL: Ctrl-C, Ctrl-\, a hangup).
static FROM_TTY: AtomicU64 = AtomicU64::new(0);
/// The tick fired since the last [`take_tick`].
static TICKED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    if sig == tick_signal() {
        TICKED.store(true, Ordering::SeqCst);
        return;
    }
    if !(1..64).contains(&sig) {
        return;
    }
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let code = if info.is_null() {
        0
    } else {
        unsafe { (*info).si_code }
    };
    // Terminal-generated signals (Ctrl-C, Ctrl-\, hangup) come from the kernel and reach
    // the whole foreground process group, the program included: forwarding them again
    // would deliver them twice.
    let bit = 1u64 << sig;
    if code == libc::SI_KERNEL {
        FROM_TTY.fetch_or(bit, Ordering::SeqCst);
    } else {
        FROM_TTY.fetch_and(!bit, Ordering::SeqCst);
    }
    PENDING.fetch_or(bit, Ordering::SeqCst);
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
    install_then(keep_ignored, |_| {})
}

/// [`install`], calling `after` with each signal once its handler is in place (a test
/// sends one there, as a signal arriving mid-install would).
fn install_then(keep_ignored: bool, mut after: impl FnMut(i32)) -> Guard {
    // Cleared before the first handler is in place, not after the last: a SIGTERM that
    // arrives while the others are still being installed (dozens of sigaction calls) is
    // pending, and was lost when this ran last (the program then ran as if never
    // signalled: `sleep 30` exited 0 after its 30 s).
    PENDING.store(0, Ordering::SeqCst);
    FROM_TTY.store(0, Ordering::SeqCst);
    TICKED.store(false, Ordering::SeqCst);
    let mut old = Vec::new();
    for sig in caught().into_iter().chain([tick_signal()]) {
        // SAFETY: a zeroed sigaction with our handler and SA_SIGINFO; old is an out-param.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut prev: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut prev) != 0
                || (keep_ignored && prev.sa_sigaction == libc::SIG_IGN && sig != tick_signal())
            {
                continue;
            }
            if libc::sigaction(sig, &sa, &mut prev) == 0 {
                old.push((sig, prev));
            }
        }
        after(sig);
    }
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

/// Blocks the signals dejavu catches in the calling thread, for a fork: a signal dejavu
/// forwards to the new process before it has reset them ([`reset_in_child`]) waits,
/// pending, instead of running dejavu's handler there (where it would be lost: the program
/// then ran as if never signalled). Returns the mask to restore, in both processes, after.
pub fn block_for_fork() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; the calls fill and read it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for_each_caught(|s| {
            libc::sigaddset(&mut set, s);
        });
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        old
    }
}

/// Puts back the mask [`block_for_fork`] returned (in the child, after
/// [`reset_in_child`]: a signal that came meanwhile is delivered then, with its default
/// action). Async-signal-safe.
pub fn restore_mask(old: &libc::sigset_t) {
    // SAFETY: restoring a mask the kernel gave us.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

/// In the program's process between fork and exec: the signals dejavu catches get their
/// default action back (exec would do it, but only at exec). Async-signal-safe: only
/// sigaction.
pub fn reset_in_child() {
    let reset = |sig: i32| {
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
    };
    for_each_caught(reset);
    reset(tick_signal());
}

/// Takes a pending signal, if any (the lowest first): (signal, whether it came from the
/// terminal).
pub fn take() -> Option<(i32, bool)> {
    loop {
        let p = PENDING.load(Ordering::SeqCst);
        if p == 0 {
            return None;
        }
        let sig = p.trailing_zeros() as i32;
        let bit = 1u64 << sig;
        if PENDING
            .compare_exchange(p, p & !bit, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Some((sig, FROM_TTY.load(Ordering::SeqCst) & bit != 0));
        }
    }
}

/// Whether the tick fired since the last call.
pub fn take_tick() -> bool {
    TICKED.swap(false, Ordering::SeqCst)
}

/// The tick's period.
pub const TICK: Duration = Duration::from_millis(500);

/// A POSIX timer that sends [`tick_signal`] to the calling thread every [`TICK`] (so a
/// waitpid it blocks in returns EINTR); deleted on drop. Needs [`install`]'s handler.
pub struct Ticker(Option<libc::timer_t>);

impl std::fmt::Debug for Ticker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("signals::Ticker")
    }
}

impl Ticker {
    /// Starts the tick for the calling thread; without a timer (it cannot fail in
    /// practice), the tracer just wakes less often.
    pub fn start() -> Ticker {
        // SAFETY: a zeroed sigevent with the fields Linux reads for SIGEV_THREAD_ID; the
        // timer id is an out-param; the itimerspec is a plain struct.
        unsafe {
            let mut ev: libc::sigevent = std::mem::zeroed();
            ev.sigev_notify = libc::SIGEV_THREAD_ID;
            ev.sigev_signo = tick_signal();
            ev.sigev_notify_thread_id = libc::syscall(libc::SYS_gettid) as libc::pid_t;
            let mut id: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut id) != 0 {
                return Ticker(None);
            }
            let second = libc::timespec {
                tv_sec: TICK.as_secs() as libc::time_t,
                tv_nsec: TICK.subsec_nanos() as libc::c_long,
            };
            let spec = libc::itimerspec {
                it_interval: second,
                it_value: second,
            };
            if libc::timer_settime(id, 0, &spec, std::ptr::null_mut()) != 0 {
                libc::timer_delete(id);
                return Ticker(None);
            }
            Ticker(Some(id))
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        if let Some(id) = self.0 {
            // SAFETY: a timer this Ticker created.
            unsafe { libc::timer_delete(id) };
        }
    }
}

/// How dejavu answers a signal meant for the program it started: forwarded while the
/// program runs; a second request to stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT) within
/// [`SECOND_SIGNAL`] of the first, or the first once the program has exited and left
/// processes running, stops the recording.
#[derive(Debug, Default)]
pub struct Policy {
    last_stop_request: Option<Instant>,
}

/// How soon a second request to stop must follow the first to stop the recording.
pub const SECOND_SIGNAL: Duration = Duration::from_secs(3);

/// What to do with a signal ([`Policy::on_signal`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Pass it to the program (unless a terminal already did).
    Forward,
    /// Stop recording.
    Stop,
}

impl Policy {
    /// The action for `sig`; `program_ended`: the launched program has exited.
    pub fn on_signal(&mut self, sig: i32, program_ended: bool) -> Action {
        if !is_stop_request(sig) {
            return Action::Forward;
        }
        if program_ended {
            return Action::Stop;
        }
        let now = Instant::now();
        let second = self
            .last_stop_request
            .is_some_and(|t| now.duration_since(t) <= SECOND_SIGNAL);
        self.last_stop_request = Some(now);
        if second {
            Action::Stop
        } else {
            Action::Forward
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_request_to_stop_soon_after_the_first_stops() {
        let mut p = Policy::default();
        assert_eq!(p.on_signal(libc::SIGUSR1, false), Action::Forward);
        assert_eq!(p.on_signal(libc::SIGUSR1, false), Action::Forward);
        assert_eq!(p.on_signal(libc::SIGINT, false), Action::Forward);
        assert_eq!(p.on_signal(libc::SIGTERM, false), Action::Stop);
        let mut p = Policy::default();
        assert_eq!(p.on_signal(libc::SIGTERM, true), Action::Stop);
        assert_eq!(p.on_signal(libc::SIGUSR2, true), Action::Forward);
    }

    #[test]
    fn a_signal_that_comes_while_the_handlers_are_installed_is_kept() {
        // SIGUSR2 sent to this thread right after its handler is in place, with the
        // handlers of the real-time signals still to come: `take` must return it (it was
        // cleared once the last handler was in place: a SIGTERM a few ms into start-up was
        // lost and the program ran on).
        let guard = install_then(false, |sig| {
            if sig == libc::SIGUSR2 {
                // SAFETY: raise runs the handler just installed on this thread.
                unsafe { libc::raise(libc::SIGUSR2) };
            }
        });
        let got = take();
        drop(guard);
        assert_eq!(got, Some((libc::SIGUSR2, false)));
    }

    #[test]
    fn every_terminating_signal_is_caught_but_the_tick_and_the_faults() {
        let c = caught();
        for s in [
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGALRM,
            libc::SIGRTMIN(),
        ] {
            assert!(c.contains(&s), "{s}");
        }
        for s in [
            libc::SIGPIPE,
            libc::SIGSEGV,
            libc::SIGCHLD,
            libc::SIGKILL,
            tick_signal(),
        ] {
            assert!(!c.contains(&s), "{s}");
        }
    }
}
