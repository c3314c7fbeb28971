//! `dejavu record`: run or attach, write the trace, exit with the program's status.

use crate::cli::{Backend, CaptureFlags, RecordArgs};
use dejavu_capture::{Outcome, RecordOptions, Target};
use dejavu_trace::{ExitStatus, TraceWriter, WriterOptions};
use std::path::Path;

/// Records and returns the exit code: the program's own status, shell-style.
pub fn run(a: RecordArgs) -> anyhow::Result<i32> {
    refuse_stdout("record", &a.output);
    let target = if !a.pids.is_empty() {
        Target::Attach(a.pids.clone())
    } else if !a.command.is_empty() {
        Target::Command(a.command.clone())
    } else {
        use clap::CommandFactory;
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        let record = cmd
            .find_subcommand_mut("record")
            .expect("record subcommand exists");
        record
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "nothing to record: give a command after `--` (dejavu record -- CMD ARGS...), or attach with --pid PID",
            )
            .exit();
    };
    let outcome = capture(target, &a.capture, a.verbose, &a.output)?;
    Ok(program_status(&outcome))
}

/// `-o -`: a trace is a binary file written in blocks, not a stream for a terminal or a
/// pipe; say so (exit 2) rather than create a file named `-`.
pub fn refuse_stdout(sub: &str, output: &std::path::Path) {
    if output.as_os_str() == "-" {
        crate::cmd::report::usage_error(
            sub,
            "-o -: a trace is written to a file, not to standard output; give a file name \
             (`dejavu export` writes a trace's events to standard output)",
        );
    }
}

/// Records `target` into the trace at `path`, then says on stderr what the user must
/// know (warnings, a failed write, with `verbose` what was recorded). Shared with
/// `dejavu run`.
pub fn capture(
    target: Target,
    flags: &CaptureFlags,
    verbose: bool,
    path: &Path,
) -> anyhow::Result<Outcome> {
    let opts = RecordOptions {
        payload_bytes: if flags.no_payload {
            0
        } else {
            flags.payload_bytes
        },
        open_identity: !flags.no_file_identity,
        follow_cpu: !flags.no_pin,
        verbose,
        stacks: match flags.stacks {
            crate::cli::StacksWhen::On => dejavu_capture::StackMode::On,
            crate::cli::StacksWhen::Off => dejavu_capture::StackMode::Off,
            crate::cli::StacksWhen::All => dejavu_capture::StackMode::All,
        },
    };
    let make =
        |meta: &dejavu_trace::Meta| TraceWriter::create(path, meta, WriterOptions::default());
    let eopts = dejavu_ebpf::Options {
        buffer_bytes: flags.buffer_size,
    };
    let result = match backend(flags)? {
        Backend::Ptrace => dejavu_ptrace::record(target, &opts, make),
        Backend::Ebpf => dejavu_ebpf::record(target, &opts, &eopts, make),
        Backend::Auto => match dejavu_ebpf::check() {
            Ok(()) => {
                eprintln!("dejavu: recording with eBPF (--backend auto)");
                match dejavu_ebpf::record(target.clone(), &opts, &eopts, make) {
                    Err(dejavu_capture::RecordError::Unavailable { what, .. }) => {
                        eprintln!("dejavu: recording with ptrace instead: eBPF failed: {what}");
                        dejavu_ptrace::record(target, &opts, make)
                    }
                    r => r,
                }
            }
            Err(e) => {
                let why = match &e {
                    dejavu_capture::RecordError::Unavailable { what, .. } => what.clone(),
                    e => e.to_string(),
                };
                eprintln!("dejavu: recording with ptrace (--backend auto; eBPF: {why})");
                dejavu_ptrace::record(target, &opts, make)
            }
        },
    };
    let (outcome, _file) = result.map_err(|e| match e {
        // Only trace-writing errors need the path; the others say all there is.
        dejavu_capture::RecordError::Trace(_) => {
            anyhow::Error::from(e).context(format!("recording to {}", path.display()))
        }
        e => anyhow::Error::from(e),
    })?;
    for w in &outcome.warnings {
        eprintln!("dejavu: warning: {w}");
    }
    if let Some(e) = &outcome.write_error {
        eprintln!(
            "dejavu: the trace is incomplete: writing failed ({e}); {} events were not written",
            outcome.dropped
        );
    }
    if verbose {
        eprintln!(
            "dejavu: recorded {} system calls from {} processes ({} threads) to {}{}",
            outcome.syscalls,
            outcome.processes,
            outcome.threads,
            path.display(),
            match outcome.pins {
                0 => String::new(),
                n => format!("; a hot thread shared the tracer's CPU {n} time(s)"),
            }
        );
        for n in &outcome.notes {
            eprintln!("dejavu: {n}");
        }
        if let Some((user, sys)) = own_cpu() {
            eprintln!(
                "dejavu: its own CPU time: {user:.3} s user, {sys:.3} s system (every thread of \
                 dejavu; the program's is not in it)"
            );
        }
    }
    Ok(outcome)
}

/// dejavu's own CPU time so far (user, system; seconds): all its threads, none of the
/// program's (getrusage RUSAGE_SELF counts the calling process only).
fn own_cpu() -> Option<(f64, f64)> {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some((s(u.ru_utime), s(u.ru_stime)))
}

/// The backend to use: --backend, else $DEJAVU_BACKEND, else auto.
fn backend(flags: &CaptureFlags) -> anyhow::Result<Backend> {
    if let Some(b) = flags.backend {
        return Ok(b);
    }
    match std::env::var("DEJAVU_BACKEND") {
        Ok(v) if !v.is_empty() => {
            use clap::ValueEnum;
            Backend::from_str(&v, true).map_err(|_| {
                anyhow::anyhow!("DEJAVU_BACKEND={v:?} is not a backend: use auto, ebpf or ptrace")
            })
        }
        _ => Ok(Backend::Auto),
    }
}

/// The program's exit status as a shell reports it (128+N for signal N); says which
/// signal killed it. 0 when there is no status (attached processes keep running); 128+N
/// when signal N stopped the recording of a program that runs on.
pub fn program_status(outcome: &Outcome) -> i32 {
    match outcome.exit {
        Some(ExitStatus::Code(c)) => c,
        Some(ExitStatus::Signal { signal, core }) => {
            // We exit with 128+N instead of dying of the signal, so the shell will not
            // say what happened: say it as a shell would (and, like bash, not for
            // SIGINT and SIGPIPE, which the user caused or expects).
            if signal != 2 && signal != 13 {
                eprintln!(
                    "dejavu: the program was killed by {}{}",
                    dejavu_analyze::names::signal_label(signal),
                    if core { " (core dumped)" } else { "" }
                );
            }
            128 + signal
        }
        // Recording stopped by a second SIGINT while the program ran on (eBPF): as an
        // interrupted command.
        None => outcome.stopped_by.map_or(0, |s| 128 + s),
    }
}
