//! `dejavu record`: run or attach, write the trace, exit with the program's status.

use crate::cli::RecordArgs;
use dejavu_ptrace::{RecordOptions, Target};
use dejavu_trace::{ExitStatus, TraceWriter, WriterOptions};

/// Records and returns the exit code: the program's own status, shell-style.
pub fn run(a: RecordArgs) -> anyhow::Result<i32> {
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
    let opts = RecordOptions {
        payload_bytes: if a.no_payload { 0 } else { a.payload_bytes },
        open_identity: !a.no_file_identity,
        follow_cpu: !a.no_follow_cpu,
        verbose: a.verbose,
    };
    let out_path = a.output.clone();
    let (outcome, _file) = dejavu_ptrace::record(target, &opts, |meta| {
        TraceWriter::create(&out_path, meta, WriterOptions::default())
    })
    .map_err(|e| match e {
        // Only trace-writing errors need the path; the others say all there is.
        dejavu_ptrace::RecordError::Trace(_) => {
            anyhow::Error::from(e).context(format!("recording to {}", a.output.display()))
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
    if a.verbose {
        eprintln!(
            "dejavu: recorded {} system calls from {} processes ({} threads) to {}",
            outcome.syscalls,
            outcome.processes,
            outcome.threads,
            a.output.display()
        );
    }
    Ok(match outcome.exit {
        Some(ExitStatus::Code(c)) => c,
        Some(ExitStatus::Signal { signal, core }) => {
            if signal != libc_sigint() && signal != 13 {
                eprintln!(
                    "dejavu: the program was killed by signal {signal}{}",
                    if core { " (core dumped)" } else { "" }
                );
            }
            128 + signal
        }
        None => 0,
    })
}

fn libc_sigint() -> i32 {
    2
}
