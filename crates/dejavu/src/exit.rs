//! Exit codes and the one place errors become messages for the user (docs/cli.md).

use dejavu_capture::RecordError;

/// Success.
pub const OK: i32 = 0;
/// A command that reads traces failed (unreadable, corrupt, not a trace).
pub const FAILURE: i32 = 1;

/// Prints `err` (with its causes) on stderr and returns the exit code it maps to.
pub fn report(err: &anyhow::Error) -> i32 {
    if is_broken_pipe(err) {
        // `dejavu summary t.dvt | head` is not an error.
        return OK;
    }
    eprintln!("dejavu: {err}");
    let mut last = err.to_string();
    for cause in err.chain().skip(1) {
        // Library errors often repeat their source in their own message; say it once.
        let text = cause.to_string();
        if !last.contains(&text) {
            eprintln!("  caused by: {text}");
        }
        last = text;
    }
    if let Some(rec) = err.downcast_ref::<RecordError>() {
        return rec.exit_code();
    }
    FAILURE
}

/// A write to our own stdout failed because the reader went away.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<dejavu_trace::TraceError>()
                .is_some_and(|e| matches!(e, dejavu_trace::TraceError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe))
    })
}
