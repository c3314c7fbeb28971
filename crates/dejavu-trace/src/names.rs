//! Names for the numbers a trace stores: errnos, signals, event flags, exit statuses.
//!
//! Traces store numbers as the kernel reports them; people and JSON consumers want the
//! names strace prints. The tables are Linux's generic ones (x86_64, aarch64, riscv64
//! and most others share them); architectures with their own numbering (alpha, mips,
//! parisc, sparc) are not traced by dejavu.

use crate::{ev, ExitStatus};
use std::borrow::Cow;

/// errno names by number (asm-generic/errno-base.h and errno.h); "" where unassigned.
const ERRNO_NAMES: &[&str] = &[
    "",
    "EPERM",
    "ENOENT",
    "ESRCH",
    "EINTR",
    "EIO",
    "ENXIO",
    "E2BIG",
    "ENOEXEC",
    "EBADF",
    "ECHILD",
    "EAGAIN",
    "ENOMEM",
    "EACCES",
    "EFAULT",
    "ENOTBLK",
    "EBUSY",
    "EEXIST",
    "EXDEV",
    "ENODEV",
    "ENOTDIR",
    "EISDIR",
    "EINVAL",
    "ENFILE",
    "EMFILE",
    "ENOTTY",
    "ETXTBSY",
    "EFBIG",
    "ENOSPC",
    "ESPIPE",
    "EROFS",
    "EMLINK",
    "EPIPE",
    "EDOM",
    "ERANGE",
    "EDEADLK",
    "ENAMETOOLONG",
    "ENOLCK",
    "ENOSYS",
    "ENOTEMPTY",
    "ELOOP",
    "",
    "ENOMSG",
    "EIDRM",
    "ECHRNG",
    "EL2NSYNC",
    "EL3HLT",
    "EL3RST",
    "ELNRNG",
    "EUNATCH",
    "ENOCSI",
    "EL2HLT",
    "EBADE",
    "EBADR",
    "EXFULL",
    "ENOANO",
    "EBADRQC",
    "EBADSLT",
    "",
    "EBFONT",
    "ENOSTR",
    "ENODATA",
    "ETIME",
    "ENOSR",
    "ENONET",
    "ENOPKG",
    "EREMOTE",
    "ENOLINK",
    "EADV",
    "ESRMNT",
    "ECOMM",
    "EPROTO",
    "EMULTIHOP",
    "EDOTDOT",
    "EBADMSG",
    "EOVERFLOW",
    "ENOTUNIQ",
    "EBADFD",
    "EREMCHG",
    "ELIBACC",
    "ELIBBAD",
    "ELIBSCN",
    "ELIBMAX",
    "ELIBEXEC",
    "EILSEQ",
    "ERESTART",
    "ESTRPIPE",
    "EUSERS",
    "ENOTSOCK",
    "EDESTADDRREQ",
    "EMSGSIZE",
    "EPROTOTYPE",
    "ENOPROTOOPT",
    "EPROTONOSUPPORT",
    "ESOCKTNOSUPPORT",
    "EOPNOTSUPP",
    "EPFNOSUPPORT",
    "EAFNOSUPPORT",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "ENETDOWN",
    "ENETUNREACH",
    "ENETRESET",
    "ECONNABORTED",
    "ECONNRESET",
    "ENOBUFS",
    "EISCONN",
    "ENOTCONN",
    "ESHUTDOWN",
    "ETOOMANYREFS",
    "ETIMEDOUT",
    "ECONNREFUSED",
    "EHOSTDOWN",
    "EHOSTUNREACH",
    "EALREADY",
    "EINPROGRESS",
    "ESTALE",
    "EUCLEAN",
    "ENOTNAM",
    "ENAVAIL",
    "EISNAM",
    "EREMOTEIO",
    "EDQUOT",
    "ENOMEDIUM",
    "EMEDIUMTYPE",
    "ECANCELED",
    "ENOKEY",
    "EKEYEXPIRED",
    "EKEYREVOKED",
    "EKEYREJECTED",
    "EOWNERDEAD",
    "ENOTRECOVERABLE",
    "ERFKILL",
    "EHWPOISON",
];

/// Kernel-internal errnos a tracer sees when a call is interrupted by a signal.
const ERESTART_NAMES: &[&str] = &[
    "ERESTARTSYS",
    "ERESTARTNOINTR",
    "ERESTARTNOHAND",
    "ENOIOCTLCMD",
    "ERESTART_RESTARTBLOCK",
];

/// The symbolic name of an errno (`2` -> `ENOENT`), if it has one.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    let name = match errno {
        512..=516 => ERESTART_NAMES[(errno - 512) as usize],
        _ => ERRNO_NAMES.get(usize::try_from(errno).ok()?).copied()?,
    };
    (!name.is_empty()).then_some(name)
}

/// The errno's name, or `E<number>` for a number without one.
pub fn errno_label(errno: i32) -> Cow<'static, str> {
    match errno_name(errno) {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(format!("E{errno}")),
    }
}

/// Signal names by number (1..=31).
const SIGNAL_NAMES: &[&str] = &[
    "",
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// The kernel's first real-time signal. glibc reserves two of them and its `SIGRTMIN`
/// is 34; traces record kernel numbers, so names here count from the kernel's.
const KERNEL_SIGRTMIN: i32 = 32;
/// The last signal number.
const SIGRTMAX: i32 = 64;

/// The name of a standard signal (`9` -> `SIGKILL`), if it has a fixed one.
pub fn signal_name(signal: i32) -> Option<&'static str> {
    let name = SIGNAL_NAMES.get(usize::try_from(signal).ok()?).copied()?;
    (!name.is_empty()).then_some(name)
}

/// The signal's name: `SIGKILL`, `SIGRTMIN+3` for real-time signals, `SIG<number>` for
/// anything else.
pub fn signal_label(signal: i32) -> Cow<'static, str> {
    if let Some(n) = signal_name(signal) {
        return Cow::Borrowed(n);
    }
    match signal {
        KERNEL_SIGRTMIN => Cow::Borrowed("SIGRTMIN"),
        s if s > KERNEL_SIGRTMIN && s <= SIGRTMAX => {
            Cow::Owned(format!("SIGRTMIN+{}", s - KERNEL_SIGRTMIN))
        }
        s => Cow::Owned(format!("SIG{s}")),
    }
}

/// Names of the [`ev`] flag bits, in bit order (as docs/trace-format.md spells them).
pub const EV_FLAG_NAMES: [(u16, &str); 9] = [
    (ev::UNFINISHED, "unfinished"),
    (ev::UNDECODED, "undecoded"),
    (ev::PAYLOAD_TRUNCATED, "payload_truncated"),
    (ev::PATH_FROM_FD, "path_from_fd"),
    (ev::PATH_UNREADABLE, "path_unreadable"),
    (ev::RESTARTED, "restarted"),
    (ev::FD_UNKNOWN, "fd_unknown"),
    (ev::STAT_PARTIAL, "stat_partial"),
    (ev::NO_DURATION, "no_duration"),
];

/// Calls `f` with the name of every bit set in `flags`, in bit order; bits this version
/// does not know are named `bit<N>` so nothing is dropped silently.
pub fn for_each_ev_flag(flags: u16, mut f: impl FnMut(&str)) {
    for bit in 0..16 {
        let b = 1u16 << bit;
        if flags & b == 0 {
            continue;
        }
        match EV_FLAG_NAMES.iter().find(|(v, _)| *v == b) {
            Some((_, name)) => f(name),
            None => f(&format!("bit{bit}")),
        }
    }
}

/// A short description of an exit status for tables: `0`, `1`, `SIGKILL`, `SIGSEGV core`.
pub fn exit_label(status: &ExitStatus) -> String {
    match *status {
        ExitStatus::Code(c) => c.to_string(),
        ExitStatus::Signal {
            signal,
            core: false,
        } => signal_label(signal).into_owned(),
        ExitStatus::Signal { signal, core: true } => format!("{} core", signal_label(signal)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_have_their_linux_names() {
        assert_eq!(errno_name(1), Some("EPERM"));
        assert_eq!(errno_name(2), Some("ENOENT"));
        assert_eq!(errno_name(17), Some("EEXIST"));
        assert_eq!(errno_name(20), Some("ENOTDIR"));
        assert_eq!(errno_name(32), Some("EPIPE"));
        assert_eq!(errno_name(95), Some("EOPNOTSUPP"));
        assert_eq!(errno_name(133), Some("EHWPOISON"));
        assert_eq!(errno_name(512), Some("ERESTARTSYS"));
        assert_eq!(errno_name(516), Some("ERESTART_RESTARTBLOCK"));
        // Aliases own no number of their own, so these are unassigned.
        assert_eq!(errno_name(41), None);
        assert_eq!(errno_name(58), None);
        assert_eq!(errno_name(0), None);
        assert_eq!(errno_name(-1), None);
        assert_eq!(errno_label(4000), "E4000");
    }

    #[test]
    fn signals_have_their_linux_names() {
        assert_eq!(signal_label(2), "SIGINT");
        assert_eq!(signal_label(9), "SIGKILL");
        assert_eq!(signal_label(11), "SIGSEGV");
        assert_eq!(signal_label(17), "SIGCHLD");
        assert_eq!(signal_label(31), "SIGSYS");
        assert_eq!(signal_label(32), "SIGRTMIN");
        assert_eq!(signal_label(35), "SIGRTMIN+3");
        assert_eq!(signal_label(0), "SIG0");
        assert_eq!(signal_label(99), "SIG99");
    }

    #[test]
    fn every_ev_bit_is_named_and_unknown_bits_are_kept() {
        let mut names = Vec::new();
        for_each_ev_flag(0xffff, |n| names.push(n.to_string()));
        assert_eq!(names.len(), 16);
        assert_eq!(names[0], "unfinished");
        assert_eq!(names[7], "stat_partial");
        assert_eq!(names[8], "no_duration");
        assert_eq!(names[9], "bit9");
        let mut names = Vec::new();
        for_each_ev_flag(ev::PATH_FROM_FD | ev::RESTARTED, |n| {
            names.push(n.to_string())
        });
        assert_eq!(names, ["path_from_fd", "restarted"]);
    }

    #[test]
    fn exit_labels_read_like_a_shell() {
        assert_eq!(exit_label(&ExitStatus::Code(3)), "3");
        assert_eq!(
            exit_label(&ExitStatus::Signal {
                signal: 9,
                core: false
            }),
            "SIGKILL"
        );
        assert_eq!(
            exit_label(&ExitStatus::Signal {
                signal: 11,
                core: true
            }),
            "SIGSEGV core"
        );
    }
}
