//! Where imported records go: a [`TraceWriter`] for real imports, or a [`MemorySink`]
//! that keeps everything in memory (tests, previews).

use crate::ImportError;
use dejavu_trace::{FileStat, Record, StatId, StrId, Syscall, TraceWriter};
use rustc_hash::FxHashMap;
use std::io::Write;

/// Receives interned strings, stat answers and records from the importer.
pub trait Sink {
    /// The id of `bytes`.
    fn intern(&mut self, bytes: &[u8]) -> StrId;
    /// The id of a stat answer.
    fn intern_stat(&mut self, st: &FileStat) -> StatId;
    /// Appends a record.
    fn push(&mut self, rec: &Record) -> Result<(), ImportError>;
}

impl<W: Write> Sink for TraceWriter<W> {
    fn intern(&mut self, bytes: &[u8]) -> StrId {
        TraceWriter::intern(self, bytes)
    }

    fn intern_stat(&mut self, st: &FileStat) -> StatId {
        TraceWriter::intern_stat(self, st)
    }

    fn push(&mut self, rec: &Record) -> Result<(), ImportError> {
        Ok(TraceWriter::push(self, rec)?)
    }
}

/// Keeps the imported trace in memory.
#[derive(Debug, Default)]
pub struct MemorySink {
    strings: Vec<Vec<u8>>,
    string_ids: FxHashMap<Vec<u8>, u32>,
    stats: Vec<FileStat>,
    stat_ids: FxHashMap<FileStat, u32>,
    /// Every record, in the order the importer emitted them.
    pub records: Vec<Record>,
}

impl MemorySink {
    /// The bytes of a string id (empty for an id this sink never handed out).
    pub fn str(&self, id: StrId) -> &[u8] {
        self.strings
            .get(id.0 as usize)
            .map_or(&[], |s| s.as_slice())
    }

    /// `str` of an optional id, as text (for assertions and debugging).
    pub fn text(&self, id: Option<StrId>) -> Option<String> {
        id.map(|id| String::from_utf8_lossy(self.str(id)).into_owned())
    }

    /// The stat answer of an id (default for an id this sink never handed out).
    pub fn stat(&self, id: StatId) -> FileStat {
        self.stats.get(id.0 as usize).copied().unwrap_or_default()
    }

    /// The syscall records.
    pub fn syscalls(&self) -> impl Iterator<Item = &Syscall> {
        self.records.iter().filter_map(|r| match r {
            Record::Syscall(s) => Some(s),
            _ => None,
        })
    }
}

impl Sink for MemorySink {
    fn intern(&mut self, bytes: &[u8]) -> StrId {
        if let Some(&id) = self.string_ids.get(bytes) {
            return StrId(id);
        }
        let id = self.strings.len() as u32;
        self.strings.push(bytes.to_vec());
        self.string_ids.insert(bytes.to_vec(), id);
        StrId(id)
    }

    fn intern_stat(&mut self, st: &FileStat) -> StatId {
        if let Some(&id) = self.stat_ids.get(st) {
            return StatId(id);
        }
        let id = self.stats.len() as u32;
        self.stats.push(*st);
        self.stat_ids.insert(*st, id);
        StatId(id)
    }

    fn push(&mut self, rec: &Record) -> Result<(), ImportError> {
        self.records.push(*rec);
        Ok(())
    }
}
