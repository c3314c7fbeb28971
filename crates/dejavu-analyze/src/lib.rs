//! Analyses of dejavu traces that need no replay: the summary (`dejavu summary`) and the
//! JSON Lines export (`dejavu export --format jsonl`).

pub mod chrome;
pub mod export;
/// Names for the numbers a trace stores (errnos, signals, event flags): shared from the trace crate.
pub use dejavu_trace::names;
pub mod parquet_export;
pub mod summary;
pub mod text;

pub use export::{export_jsonl, ExportError, ExportStats};
pub use summary::{Summary, SummaryBuilder, TextOptions};

#[cfg(test)]
mod testutil;
