//! Which writes keep their bytes. Every write of the write family gets a fingerprint
//! ([`crate::mask::fingerprint`]); the bytes themselves (a prefix of at most the trace's
//! `payload_bytes`) are kept only where a report needs an example of what was written:
//!
//! - descriptors 0, 1 and 2, whatever they point at (a regular file included: a program's
//!   output and its log, redirected);
//! - terminals, pipes, sockets and `/dev/null`;
//! - files opened (or `F_SETFL`'d) with `O_APPEND`;
//! - regular files whose path names a log ([`is_log_name`]).
//!
//! Every backend applies these rules with what it knows of the descriptor; the rule is
//! documented in docs/trace-format.md ("Syscall fields by call", write calls).

/// What a descriptor refers to, as far as the payload rule cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A regular file.
    File,
    /// A terminal, pipe, socket or `/dev/null`: its bytes are kept.
    Stream,
    /// Anything else (a directory, another device, an anonymous inode), or unknown.
    Other,
}

/// Whether a write to descriptor `fd` keeps its bytes (see the module's rules): `target`
/// is what the descriptor refers to, `append` whether it was opened with `O_APPEND`, and
/// `path` its path (consulted only for regular files).
pub fn keeps_payload(fd: i32, target: Target, append: bool, path: &[u8]) -> bool {
    (0..=2).contains(&fd)
        || append
        || target == Target::Stream
        || (target == Target::File && is_log_name(path))
}

/// A log file by its name: `*.log`, `*.log.N` (and any `.log.` infix, as rotated logs
/// have: `app.log.2024-05-01`), `*.err`, `nohup.out`, or anything under a directory named
/// `log` or `logs` (any case). `*.out` in general is not: `a.out`, expected outputs.
pub fn is_log_name(path: &[u8]) -> bool {
    let mut parts = path.rsplit(|&b| b == b'/');
    let name = parts.next().unwrap_or(&[]);
    if parts.any(|d| d.eq_ignore_ascii_case(b"log") || d.eq_ignore_ascii_case(b"logs")) {
        return true;
    }
    let ends = |suffix: &[u8]| {
        name.len() > suffix.len() && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
    };
    if ends(b".log") || ends(b".err") || name.eq_ignore_ascii_case(b"nohup.out") {
        return true;
    }
    name.windows(5).any(|w| w.eq_ignore_ascii_case(b".log."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names() {
        for p in [
            "/var/log/syslog",
            "/srv/x/logs/today",
            "/srv/x/LOGS/today",
            "/tmp/app.log",
            "/tmp/APP.LOG",
            "/tmp/app.log.1",
            "/tmp/app.log.2024-05-01",
            "nohup.out",
            "/home/u/nohup.out",
            "/tmp/build.err",
        ] {
            assert!(is_log_name(p.as_bytes()), "{p}");
        }
        for p in [
            "/tmp/catalog",
            "/tmp/x.logo",
            "/srv/data/out.csv",
            "/tmp/.log",
            "/tmp/a.out",
            "/tmp/blog/post.html",
            "",
        ] {
            assert!(!is_log_name(p.as_bytes()), "{p}");
        }
    }

    #[test]
    fn payload_rules() {
        use Target::*;
        // The standard streams, whatever they are.
        for fd in 0..=2 {
            assert!(keeps_payload(fd, File, false, b"/tmp/out.csv"));
            assert!(keeps_payload(fd, Other, false, b""));
        }
        assert!(keeps_payload(3, Stream, false, b"pipe:[12]"));
        assert!(keeps_payload(3, File, true, b"/tmp/data.bin"));
        assert!(keeps_payload(3, File, false, b"/tmp/app.log"));
        assert!(!keeps_payload(3, File, false, b"/tmp/data.bin"));
        assert!(!keeps_payload(3, Other, false, b"/tmp/app.log"));
        assert!(!keeps_payload(-1, File, false, b"/tmp/data.bin"));
    }
}
