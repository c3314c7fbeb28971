//! The `dejavu` command: parse flags, then hand plain options to one subcommand.

mod budget;
mod cli;
mod cmd;
mod counts;
mod exit;
mod pprof;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    let code = match cmd::run(args) {
        Ok(code) => code,
        Err(err) => exit::report(&err),
    };
    std::process::exit(code);
}
