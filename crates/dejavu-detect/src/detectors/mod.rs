//! The detectors, one file each, in DESIGN.md's order; `lookup` holds what several of
//! them share about path lookups, `reads` what they share about reads through a
//! descriptor.

pub mod lookup;
pub mod reads;

pub mod check_then_act;
pub mod ensure_dir;
pub mod fsync_per_op;
pub mod negative_probe;
pub mod no_reader;
pub mod open_close_churn;
pub mod repeated_exec;
pub mod repeated_lookup;
pub mod repeated_output;
pub mod reread_unchanged;
pub mod self_inflicted_lookup;
pub mod small_writes;
pub mod sync_io_main_thread;
