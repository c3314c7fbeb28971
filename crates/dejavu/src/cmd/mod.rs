//! One module per subcommand; `run` dispatches.

mod check;
mod diff;
mod explain;
mod export;
mod import;
mod record;
pub(crate) mod report;
mod run;
mod summary;
mod whatif;

use crate::cli::{Cli, Command};

/// Runs the chosen subcommand; returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Record(a) => record::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Check(a) => check::run(a),
        Command::Report(a) => report::run(a),
        Command::Run(a) => run::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Export(a) => export::run(a),
        Command::Summary(a) => summary::run(a),
        Command::Import(c) => import::run(c),
        Command::Whatif(a) => whatif::run(a),
    }
}
