//! The streaming trace writer: interns strings and stat answers, encodes records into
//! blocks, and writes each block with a single `write` so a crash leaves whole blocks.

use crate::codec::{self, codec_id, kind, put_mapping, put_record, put_stack, put_stat, Deltas};
use crate::error::Result;
use crate::model::*;
use crate::varint::put_u64;
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Tuning for [`TraceWriter`].
#[derive(Debug, Clone, Copy)]
pub struct WriterOptions {
    /// Flush a block once its encoded records reach this many bytes.
    pub block_bytes: usize,
    /// Flush a block once its first record is this old (ns of trace time), so a trace of
    /// a long, quiet program stays readable while it runs.
    pub block_age_ns: u64,
    /// zstd level (1..=19); 0 stores blocks uncompressed.
    pub zstd_level: i32,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            block_bytes: 256 << 10,
            block_age_ns: 1_000_000_000,
            zstd_level: 3,
        }
    }
}

/// Writes a trace to any `Write`; see docs/trace-format.md.
pub struct TraceWriter<W: Write> {
    out: W,
    opts: WriterOptions,
    strings: FxHashMap<Box<[u8]>, u32>,
    stats: FxHashMap<FileStat, u32>,
    new_strings: Vec<u8>,
    new_string_count: u64,
    new_stats: Vec<u8>,
    new_stat_count: u64,
    stacks: FxHashMap<Box<[Frame]>, u32>,
    new_stacks: Vec<u8>,
    new_stack_count: u64,
    local: FxHashMap<Box<[u8]>, u32>,
    new_local: Vec<u8>,
    generation: u32,
    records: Vec<u8>,
    record_count: u64,
    /// Mapping records of the pending block (its mapping block) and their count.
    maps: Vec<u8>,
    map_count: u64,
    map_ts: u64,
    block_first_ts: Option<u64>,
    deltas: Deltas,
    scratch: Vec<u8>,
    compressor: Option<zstd::bulk::Compressor<'static>>,
    total_records: u64,
    lost_events: u64,
    /// Records of blocks that could not be written.
    unwritten: u64,
    bytes_written: u64,
}

impl<W: Write> std::fmt::Debug for TraceWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriter")
            .field("records", &self.total_records)
            .field("bytes_written", &self.bytes_written)
            .finish_non_exhaustive()
    }
}

impl TraceWriter<File> {
    /// Creates (or truncates) `path`, readable and writable by its owner only (0600: a
    /// trace holds paths, arguments and the first bytes of writes), and writes the trace
    /// header and `meta`. A `path` that is not a regular file (a FIFO, /dev/null) is
    /// written to as it is.
    pub fn create(path: &Path, meta: &Meta, opts: WriterOptions) -> Result<Self> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        // Not truncated before it is locked: another recording may be writing it.
        #[allow(clippy::suspicious_open_options)]
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        // SAFETY: flock on a descriptor we own; the lock goes with the file's last close.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::ResourceBusy,
                    format!(
                        "{} is being written by another recording; give another -o FILE",
                        path.display()
                    ),
                )
                .into());
            }
            // A file system without locks: go on as before.
        }
        // A regular file is emptied and, as an existing file keeps its mode through open,
        // narrowed to 0600. Anything else (`-o /dev/null`, a FIFO or a process
        // substitution `-o >(zstd > t.zst)`) is written as it is: never truncated or
        // chmod-ed (root recording to /dev/null must not take it away from everyone).
        if f.metadata()?.is_file() {
            f.set_len(0)?;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        TraceWriter::new(f, meta, opts)
    }
}

impl<W: Write> TraceWriter<W> {
    /// Starts a trace on `out`: writes the file header and the meta block.
    pub fn new(mut out: W, meta: &Meta, opts: WriterOptions) -> Result<Self> {
        let mut hdr = Vec::with_capacity(codec::FILE_HEADER_LEN);
        hdr.extend_from_slice(codec::FILE_MAGIC);
        hdr.extend_from_slice(&codec::FORMAT_MAJOR.to_le_bytes());
        hdr.extend_from_slice(&codec::FORMAT_MINOR.to_le_bytes());
        hdr.extend_from_slice(&0u32.to_le_bytes());
        out.write_all(&hdr)?;
        let compressor = if opts.zstd_level > 0 {
            Some(zstd::bulk::Compressor::new(opts.zstd_level)?)
        } else {
            None
        };
        let mut w = TraceWriter {
            out,
            opts,
            strings: FxHashMap::default(),
            stats: FxHashMap::default(),
            new_strings: Vec::new(),
            new_string_count: 0,
            new_stats: Vec::new(),
            new_stat_count: 0,
            stacks: FxHashMap::default(),
            new_stacks: Vec::new(),
            new_stack_count: 0,
            local: FxHashMap::default(),
            new_local: Vec::new(),
            generation: 0,
            records: Vec::with_capacity(opts.block_bytes + 1024),
            record_count: 0,
            maps: Vec::new(),
            map_count: 0,
            map_ts: 0,
            block_first_ts: None,
            deltas: Deltas::default(),
            scratch: Vec::new(),
            compressor,
            total_records: 0,
            lost_events: 0,
            unwritten: 0,
            bytes_written: hdr.len() as u64,
        };
        let json = serde_json::to_vec(meta).map_err(std::io::Error::from)?;
        w.write_block(kind::META, &json, false)?;
        Ok(w)
    }

    /// The id of `bytes`, defining it in the next block if it is new.
    pub fn intern(&mut self, bytes: &[u8]) -> StrId {
        if let Some(&id) = self.strings.get(bytes) {
            return StrId(id);
        }
        let id = self.strings.len() as u32;
        self.strings.insert(bytes.into(), id);
        put_u64(&mut self.new_strings, bytes.len() as u64);
        self.new_strings.extend_from_slice(bytes);
        self.new_string_count += 1;
        StrId(id)
    }

    /// A block-local id for `bytes` (payloads): deduplicated within the current block
    /// only, so memory stays bounded however many distinct payloads a recording has. The
    /// record using it must be pushed before the block is flushed: push it right away
    /// (`push` rejects a block-local id from an earlier block).
    pub fn intern_local(&mut self, bytes: &[u8]) -> StrId {
        let idx = match self.local.get(bytes) {
            Some(&i) => i,
            None => {
                let i = self.local.len() as u32;
                if i > codec::LOCAL_INDEX_MASK {
                    // 16 M distinct payloads in one block cannot happen with the block
                    // size limits; fall back to a global string rather than overflow.
                    return self.intern(bytes);
                }
                self.local.insert(bytes.into(), i);
                put_u64(&mut self.new_local, bytes.len() as u64);
                self.new_local.extend_from_slice(bytes);
                i
            }
        };
        StrId(StrId::LOCAL | (self.generation << 24) | idx)
    }

    fn check_local(&self, id: Option<StrId>) -> Result<()> {
        match id {
            Some(id) if id.is_local() && (id.0 >> 24) & 0x7f != self.generation => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a block-local string from an earlier block: push a record right after intern_local",
            )
            .into()),
            _ => Ok(()),
        }
    }

    /// The id of a call stack (innermost frame first, at most 256 frames kept), defining
    /// it in the next block if it is new. Its strings must be trace strings from
    /// [`TraceWriter::intern`], never block-local ones.
    pub fn intern_stack(&mut self, frames: &[Frame]) -> StackId {
        let frames = &frames[..frames.len().min(codec::MAX_FRAMES)];
        if let Some(&id) = self.stacks.get(frames) {
            return StackId(id);
        }
        let id = self.stacks.len() as u32;
        self.stacks.insert(frames.into(), id);
        put_stack(&mut self.new_stacks, frames);
        self.new_stack_count += 1;
        StackId(id)
    }

    /// The id of a stat answer, defining it in the next block if it is new.
    pub fn intern_stat(&mut self, st: &FileStat) -> StatId {
        if let Some(&id) = self.stats.get(st) {
            return StatId(id);
        }
        let id = self.stats.len() as u32;
        self.stats.insert(*st, id);
        put_stat(&mut self.new_stats, st);
        self.new_stat_count += 1;
        StatId(id)
    }

    /// Appends a record; writes a block when the current one is full or old enough.
    /// Ids in the record must come from this writer's `intern*` calls.
    pub fn push(&mut self, rec: &Record) -> Result<()> {
        match rec {
            Record::Syscall(s) => {
                self.check_local(s.path)?;
                self.check_local(s.path2)?;
                self.check_local(s.payload)?;
            }
            Record::Exec(e) => {
                self.check_local(Some(e.exe))?;
                self.check_local(Some(e.argv))?;
            }
            Record::Mapping(m) if [m.path, m.build_id].iter().flatten().any(|s| s.is_local()) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a mapping's path and build id are trace strings (intern), never block-local",
                )
                .into());
            }
            _ => {}
        }
        let ts = rec.ts();
        let first = *self.block_first_ts.get_or_insert(ts);
        if let Record::Mapping(m) = rec {
            // In the mapping block written with this data block, placed before the
            // record that comes next.
            put_mapping(&mut self.maps, self.record_count, &mut self.map_ts, m);
            self.map_count += 1;
        } else {
            put_record(&mut self.records, &mut self.deltas, rec);
            self.record_count += 1;
        }
        self.total_records += 1;
        if let Record::Lost(l) = rec {
            self.lost_events += l.count;
        }
        if self.records.len() >= self.opts.block_bytes
            || ts.saturating_sub(first) >= self.opts.block_age_ns
        {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Writes the pending records as a block if the oldest of them is `age` ns old or
    /// more at time `now` (trace time, as records' `ts`): what a recorder calls when no
    /// new record came for a while, so the file holds everything up to about that age even
    /// if the recorder is then killed.
    pub fn flush_if_older(&mut self, now: u64, age: u64) -> Result<()> {
        match self.block_first_ts {
            Some(first) if now.saturating_sub(first) >= age => self.flush_block(),
            _ => Ok(()),
        }
    }

    /// Writes everything pending as one data block (no-op when nothing is pending).
    pub fn flush_block(&mut self) -> Result<()> {
        if self.record_count == 0
            && self.map_count == 0
            && self.new_string_count == 0
            && self.new_stat_count == 0
            && self.new_stack_count == 0
            && self.local.is_empty()
        {
            return Ok(());
        }
        let mut raw = std::mem::take(&mut self.scratch);
        raw.clear();
        put_u64(&mut raw, self.new_string_count);
        raw.extend_from_slice(&self.new_strings);
        put_u64(&mut raw, self.new_stat_count);
        raw.extend_from_slice(&self.new_stats);
        put_u64(&mut raw, self.new_stack_count);
        raw.extend_from_slice(&self.new_stacks);
        put_u64(&mut raw, self.local.len() as u64);
        raw.extend_from_slice(&self.new_local);
        put_u64(&mut raw, self.record_count);
        raw.extend_from_slice(&self.records);
        let res = if self.map_count == 0 {
            self.write_block(kind::DATA, &raw, true)
        } else {
            // The mapping block goes first, in the same write as its data block, so a
            // crash leaves both or neither (or a mapping block alone, which readers drop
            // with the cut-off data block).
            let mut maps = Vec::with_capacity(self.maps.len() + 10);
            put_u64(&mut maps, self.map_count);
            maps.extend_from_slice(&self.maps);
            self.block_bytes(kind::MAPPINGS, &maps, true)
                .and_then(|mut b| {
                    b.extend_from_slice(&self.block_bytes(kind::DATA, &raw, true)?);
                    Ok(b)
                })
                .and_then(|b| self.write_all(&b))
        };
        self.scratch = raw;
        if res.is_err() {
            self.unwritten += self.record_count + self.map_count;
        }
        // Whatever happened, the block is gone: a failed write must not make the next
        // block refer to strings it would then never define twice.
        self.new_strings.clear();
        self.new_string_count = 0;
        self.new_stats.clear();
        self.new_stat_count = 0;
        self.new_stacks.clear();
        self.new_stack_count = 0;
        self.local.clear();
        self.new_local.clear();
        self.generation = (self.generation + 1) & 0x7f;
        self.records.clear();
        self.record_count = 0;
        self.maps.clear();
        self.map_count = 0;
        self.map_ts = 0;
        self.block_first_ts = None;
        self.deltas = Deltas::default();
        res
    }

    fn write_block(&mut self, block_kind: u8, raw: &[u8], compress: bool) -> Result<()> {
        let block = self.block_bytes(block_kind, raw, compress)?;
        self.write_all(&block)
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes)?;
        self.bytes_written += bytes.len() as u64;
        Ok(())
    }

    /// A block as it goes to the file: header and (compressed) payload.
    fn block_bytes(&mut self, block_kind: u8, raw: &[u8], compress: bool) -> Result<Vec<u8>> {
        let compressed;
        let (codec, stored): (u8, &[u8]) = match (&mut self.compressor, compress) {
            (Some(c), true) => {
                compressed = c.compress(raw)?;
                (codec_id::ZSTD, &compressed)
            }
            _ => (codec_id::RAW, raw),
        };
        let mut block = Vec::with_capacity(codec::BLOCK_HEADER_LEN + stored.len());
        block.extend_from_slice(codec::BLOCK_MAGIC);
        block.push(block_kind);
        block.push(codec);
        block.extend_from_slice(&0u16.to_le_bytes());
        block.extend_from_slice(&(stored.len() as u32).to_le_bytes());
        block.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        let mut h = crc32fast::Hasher::new();
        h.update(&block[4..16]);
        h.update(stored);
        block.extend_from_slice(&h.finalize().to_le_bytes());
        block.extend_from_slice(stored);
        Ok(block)
    }

    /// Records of blocks that failed to write (a full disk), so far.
    pub fn unwritten(&self) -> u64 {
        self.unwritten
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.total_records
    }

    /// Bytes written so far (blocks already flushed).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Flushes the last block, writes the end block, and returns the output.
    /// As [`TraceWriter::finish`], but the output comes back whatever happens, with the
    /// error if the last block or the end block could not be written (a full disk), and
    /// the records lost in blocks that failed to write over the whole trace: so that a
    /// recorder can still report the program's status and what is missing.
    pub fn finish_keeping(mut self, mut end: End) -> (W, Option<crate::TraceError>, u64) {
        let mut err = self.flush_block().err();
        if err.is_none() {
            end.records = self.total_records;
            end.lost_events = end.lost_events.max(self.lost_events);
            err = match serde_json::to_vec(&end) {
                Ok(json) => self
                    .write_block(kind::END, &json, false)
                    .and_then(|()| self.out.flush().map_err(crate::TraceError::from))
                    .err(),
                Err(e) => Some(crate::TraceError::from(std::io::Error::from(e))),
            };
        }
        (self.out, err, self.unwritten)
    }

    pub fn finish(mut self, mut end: End) -> Result<W> {
        self.flush_block()?;
        end.records = self.total_records;
        end.lost_events = end.lost_events.max(self.lost_events);
        let json = serde_json::to_vec(&end).map_err(std::io::Error::from)?;
        self.write_block(kind::END, &json, false)?;
        self.out.flush()?;
        Ok(self.out)
    }
}
