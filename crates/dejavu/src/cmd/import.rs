//! `dejavu import strace`: strace logs into a dejavu trace.

use crate::cli::{ImportCommand, ImportStraceArgs};
use anyhow::Context;
use dejavu_strace::{import_files, ImportOptions};

/// Runs an import subcommand.
pub fn run(c: ImportCommand) -> anyhow::Result<i32> {
    match c {
        ImportCommand::Strace(a) => strace(a),
    }
}

fn strace(a: ImportStraceArgs) -> anyhow::Result<i32> {
    crate::cmd::record::refuse_stdout("import", &a.output);
    let opts = ImportOptions {
        cwd: a.cwd.clone(),
        payload_bytes: a.payload_bytes,
    };
    // Write beside the destination and rename at the end: a failed import leaves no
    // half-written trace under the name the user asked for.
    let dir = match a.output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let tmp = tempfile::NamedTempFile::new_in(&dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    let file = tmp
        .as_file()
        .try_clone()
        .context("duplicating a file descriptor")?;
    let report = import_files(&a.logs, &opts, file)
        .with_context(|| format!("importing into {}", a.output.display()))?;
    tmp.persist(&a.output)
        .with_context(|| format!("writing {}", a.output.display()))?;
    let shown = if a.verbose {
        report.unparsed.len()
    } else {
        report.unparsed.len().min(10)
    };
    if !report.unparsed.is_empty() {
        eprintln!(
            "dejavu: {} line(s) could not be parsed; they are recorded in the trace as lost events:",
            report.unparsed.len()
        );
        for u in &report.unparsed[..shown] {
            eprintln!("  {}:{}: {} | {}", u.file, u.line, u.reason, u.text);
        }
        if shown < report.unparsed.len() {
            eprintln!(
                "  ... and {} more (all of them with -v)",
                report.unparsed.len() - shown
            );
        }
    }
    if report.relative_paths_unresolved > 0 {
        eprintln!(
            "dejavu: warning: {} relative path(s) stayed relative: the log does not say the working directory \
             (record with strace -y, or pass --cwd DIR)",
            report.relative_paths_unresolved
        );
    }
    if a.verbose {
        for n in &report.notes {
            eprintln!("dejavu: note: {n}");
        }
        let ignored: u64 = report.ignored_syscalls.values().sum();
        eprintln!(
            "dejavu: read {} lines; wrote {} records ({} system calls) to {}; {} calls outside the traced set ignored",
            report.lines,
            report.records,
            report.syscalls,
            a.output.display(),
            ignored
        );
    }
    Ok(crate::exit::OK)
}
