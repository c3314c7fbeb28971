//! The `dejavu` command: parse flags, then hand plain options to one subcommand.

mod budget;
mod cli;
mod cmd;
mod counts;
mod exit;

use clap::Parser;

/// Which of descriptors 0-2 were closed at exec, bit N for descriptor N: read by
/// [`read_closed_std_fds`] before the Rust runtime opens /dev/null on them.
static CLOSED_STD_FDS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

extern "C" fn read_closed_std_fds() {
    let mut mask = 0u8;
    for fd in 0..3 {
        // SAFETY: F_GETFD on a descriptor number only reads the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            mask |= 1 << fd;
        }
    }
    CLOSED_STD_FDS.store(mask, std::sync::atomic::Ordering::Relaxed);
}

/// Runs [`read_closed_std_fds`] from the ELF constructors, before `main` and before the
/// Rust runtime's start-up (which replaces a closed 0, 1 or 2 by /dev/null).
#[used]
#[unsafe(link_section = ".init_array")]
static READ_CLOSED_STD_FDS: extern "C" fn() = read_closed_std_fds;

fn main() {
    dejavu_capture::spawn::set_closed_std_fds(
        CLOSED_STD_FDS.load(std::sync::atomic::Ordering::Relaxed),
    );
    let args = cli::Cli::parse();
    let code = match cmd::run(args) {
        Ok(code) => code,
        Err(err) => exit::report(&err),
    };
    std::process::exit(code);
}
