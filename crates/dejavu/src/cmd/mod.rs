//! One module per subcommand; `run` dispatches.

mod export;
mod import;
mod record;
mod summary;

use crate::cli::{Cli, Command};

/// Runs the chosen subcommand; returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Record(a) => record::run(a),
        Command::Export(a) => export::run(a),
        Command::Summary(a) => summary::run(a),
        Command::Import(c) => import::run(c),
    }
}
