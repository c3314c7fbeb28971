//! The streaming trace reader. Reads block by block in constant memory (plus the interned
//! tables), verifies every block's checksum, and never panics on bad input: corruption is
//! an error naming the byte offset; a trace cut off mid-block ends early with a warning.

use crate::codec::{
    self, codec_id, get_mapping, get_record, get_stack, get_stat, kind, Deltas, Limits,
};
use crate::error::{Result, TraceError};
use crate::model::*;
use crate::varint::Cursor;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// Interned byte strings of a trace.
#[derive(Debug, Default, Clone)]
pub struct Strings {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    local_bytes: Vec<u8>,
    local_ends: Vec<usize>,
}

impl Strings {
    /// The bytes of `id`; empty for an id this trace never defined (a reader only hands
    /// out records whose ids it has checked). A block-local id (payloads) resolves
    /// against the block of the record being processed.
    pub fn get(&self, id: StrId) -> &[u8] {
        let (bytes, ends, i) = if id.is_local() {
            (
                &self.local_bytes,
                &self.local_ends,
                (id.0 & crate::codec::LOCAL_INDEX_MASK) as usize,
            )
        } else {
            (&self.bytes, &self.ends, id.0 as usize)
        };
        let Some(&end) = ends.get(i) else {
            return &[];
        };
        let start = if i == 0 { 0 } else { ends[i - 1] };
        &bytes[start..end]
    }

    /// `get` as text, with invalid UTF-8 replaced.
    pub fn lossy(&self, id: StrId) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.get(id))
    }

    /// Number of strings defined so far.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// No strings yet.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn push(&mut self, s: &[u8]) {
        self.bytes.extend_from_slice(s);
        self.ends.push(self.bytes.len());
    }

    fn push_local(&mut self, s: &[u8]) {
        self.local_bytes.extend_from_slice(s);
        self.local_ends.push(self.local_bytes.len());
    }

    fn clear_local(&mut self) {
        self.local_bytes.clear();
        self.local_ends.clear();
    }
}

/// How a trace that ended without its end block was cut off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// Bytes of complete blocks that were read.
    pub valid_bytes: u64,
    /// Bytes after the last complete block (part of a block) that were discarded.
    pub lost_bytes: u64,
}

impl Truncation {
    /// A one-line warning for users.
    pub fn warning(&self) -> String {
        if self.lost_bytes == 0 {
            format!(
                "the trace has no end marker (the recording was cut off): read its {} bytes; \
                 events the recorder had not yet written are missing",
                self.valid_bytes
            )
        } else {
            format!(
                "the trace was cut off at byte offset {}: the last {} bytes (an incomplete block) \
                 were discarded, along with events the recorder had not yet written",
                self.valid_bytes, self.lost_bytes
            )
        }
    }
}

/// Reads a trace record by record; see docs/trace-format.md.
pub struct TraceReader<R: Read> {
    src: BufReader<R>,
    version: (u16, u16),
    offset: u64,
    meta: Meta,
    end: Option<End>,
    strings: Strings,
    stats: Vec<FileStat>,
    frames: Vec<Frame>,
    stack_ends: Vec<usize>,
    stored: Vec<u8>,
    raw: Vec<u8>,
    pos: usize,
    remaining: u64,
    deltas: Deltas,
    block_offset: u64,
    block_record: u64,
    truncated: Option<Truncation>,
    done: bool,
    records_read: u64,
    lost_events: u64,
    decompressor: zstd::bulk::Decompressor<'static>,
    /// A mapping block waiting for its data block: (its offset, its payload).
    staged_maps: Option<(u64, Vec<u8>)>,
    /// The current data block's mappings, by the number of its records before each.
    maps: VecDeque<(u64, Mapping)>,
}

impl<R: Read> std::fmt::Debug for TraceReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("offset", &self.offset)
            .field("records_read", &self.records_read)
            .finish_non_exhaustive()
    }
}

impl TraceReader<File> {
    /// Opens a trace file and reads its header and meta block.
    pub fn open(path: &Path) -> Result<Self> {
        TraceReader::new(File::open(path)?)
    }
}

/// Reads until `buf` is full or the input ends; returns how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

enum Block {
    Data,
    Mappings,
    End,
    Eof,
}

impl<R: Read> TraceReader<R> {
    /// Starts reading a trace from `src`: checks the header and reads the meta block.
    pub fn new(src: R) -> Result<Self> {
        let mut src = BufReader::with_capacity(64 << 10, src);
        let mut hdr = [0u8; codec::FILE_HEADER_LEN];
        let n = read_full(&mut src, &mut hdr)?;
        if n == 0 {
            return Err(TraceError::NotATrace {
                offset: 0,
                what: "the file is empty".into(),
            });
        }
        if n < 8 || &hdr[..8] != codec::FILE_MAGIC {
            let shown: String = hdr[..n.min(8)]
                .iter()
                .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
                .collect();
            return Err(TraceError::NotATrace {
                offset: 0,
                what: format!("expected magic \"DEJAVUTR\", found \"{shown}\""),
            });
        }
        if n < hdr.len() {
            return Err(TraceError::corrupt(n as u64, "file header cut short"));
        }
        let major = u16::from_le_bytes([hdr[8], hdr[9]]);
        let minor = u16::from_le_bytes([hdr[10], hdr[11]]);
        if !(codec::OLDEST_MAJOR..=codec::FORMAT_MAJOR).contains(&major) {
            return Err(TraceError::Version { major, minor });
        }
        let mut r = TraceReader {
            src,
            version: (major, minor),
            offset: hdr.len() as u64,
            meta: Meta::default(),
            end: None,
            strings: Strings::default(),
            stats: Vec::new(),
            frames: Vec::new(),
            stack_ends: Vec::new(),
            stored: Vec::new(),
            raw: Vec::new(),
            pos: 0,
            remaining: 0,
            deltas: Deltas::default(),
            block_offset: 0,
            block_record: 0,
            truncated: None,
            done: false,
            records_read: 0,
            lost_events: 0,
            decompressor: zstd::bulk::Decompressor::new()?,
            staged_maps: None,
            maps: VecDeque::new(),
        };
        match r.read_block_raw()? {
            Some(kind::META) => {
                r.meta = serde_json::from_slice(&r.raw).map_err(|e| {
                    TraceError::corrupt(
                        r.block_offset,
                        format!("meta block is not valid JSON: {e}"),
                    )
                })?;
            }
            Some(k) => {
                return Err(TraceError::corrupt(
                    r.block_offset,
                    format!("expected the meta block first, found block kind {k}"),
                ))
            }
            None => {
                return Err(TraceError::corrupt(
                    r.offset,
                    "the trace ends before its meta block (the recording was cut off at once)",
                ))
            }
        }
        Ok(r)
    }

    /// The file's format version (major, minor), as its header says.
    pub fn version(&self) -> (u16, u16) {
        self.version
    }

    /// Trace-wide facts from the start of the trace.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Facts from the end block; `None` until the reader reached it, or if the trace was
    /// cut off (then see [`TraceReader::truncation`]).
    pub fn end(&self) -> Option<&End> {
        self.end.as_ref()
    }

    /// How the trace was cut off, once the reader has reached its end.
    pub fn truncation(&self) -> Option<&Truncation> {
        self.truncated.as_ref()
    }

    /// Interned strings defined so far.
    pub fn strings(&self) -> &Strings {
        &self.strings
    }

    /// The bytes of an interned string (empty for an unknown id).
    pub fn str(&self, id: StrId) -> &[u8] {
        self.strings.get(id)
    }

    /// A stat answer (all-unknown for an unknown id).
    pub fn stat(&self, id: StatId) -> FileStat {
        self.stats.get(id.0 as usize).copied().unwrap_or_default()
    }

    /// A call stack, innermost frame first (empty for an unknown id).
    pub fn stack(&self, id: StackId) -> &[Frame] {
        let i = id.0 as usize;
        let Some(&end) = self.stack_ends.get(i) else {
            return &[];
        };
        let start = if i == 0 { 0 } else { self.stack_ends[i - 1] };
        &self.frames[start..end]
    }

    /// Number of stacks defined so far.
    pub fn stack_count(&self) -> usize {
        self.stack_ends.len()
    }

    /// Bytes of input consumed so far (for progress bars).
    pub fn bytes_read(&self) -> u64 {
        self.offset
    }

    /// Records returned so far.
    pub fn records_read(&self) -> u64 {
        self.records_read
    }

    /// Sum of the Lost records seen so far.
    pub fn lost_events(&self) -> u64 {
        self.lost_events
    }

    /// The next record, or `None` at the end of the trace.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<Record>> {
        loop {
            if let Some(&(at, m)) = self.maps.front() {
                if at <= self.block_record {
                    self.maps.pop_front();
                    self.records_read += 1;
                    return Ok(Some(Record::Mapping(m)));
                }
            }
            if self.remaining > 0 {
                return self.decode_one().map(Some);
            }
            if self.done {
                return Ok(None);
            }
            self.load_block()?;
        }
    }

    #[inline]
    fn decode_one(&mut self) -> Result<Record> {
        let lim = Limits {
            strings: self.strings.len() as u32,
            local_strings: self.strings.local_ends.len() as u32,
            stats: self.stats.len() as u32,
            stacks: self.stack_ends.len() as u32,
            marks: self.version.0 >= 2,
        };
        let mut c = Cursor::at(&self.raw, self.pos);
        let rec = get_record(&mut c, &mut self.deltas, &lim).map_err(|what| {
            TraceError::corrupt(
                self.block_offset,
                format!(
                    "data block, record {} (payload byte {}): {what}",
                    self.block_record, self.pos
                ),
            )
        })?;
        self.pos = c.pos();
        self.remaining -= 1;
        self.block_record += 1;
        self.records_read += 1;
        if self.remaining == 0 && self.pos != self.raw.len() {
            return Err(TraceError::corrupt(
                self.block_offset,
                format!(
                    "data block has {} bytes after its last record",
                    self.raw.len() - self.pos
                ),
            ));
        }
        if let Record::Lost(l) = rec {
            self.lost_events += l.count;
        }
        Ok(rec)
    }

    fn load_block(&mut self) -> Result<()> {
        match self.next_block()? {
            Block::Data => {
                let bo = self.block_offset;
                let bad = |what: &str, at: usize| {
                    TraceError::corrupt(bo, format!("data block (payload byte {at}): {what}"))
                };
                let mut c = Cursor::new(&self.raw);
                let n = c.u64().ok_or_else(|| bad("string count missing", 0))?;
                for _ in 0..n {
                    let at = c.pos();
                    let len = c.u64().ok_or_else(|| bad("string cut short", at))?;
                    let s = usize::try_from(len)
                        .ok()
                        .and_then(|l| c.bytes(l))
                        .ok_or_else(|| bad("string longer than the block", at))?;
                    self.strings.push(s);
                }
                let at = c.pos();
                let n = c.u64().ok_or_else(|| bad("stat count missing", at))?;
                for _ in 0..n {
                    let at = c.pos();
                    let st = get_stat(&mut c).map_err(|w| bad(w, at))?;
                    self.stats.push(st);
                }
                let at = c.pos();
                let n = c.u64().ok_or_else(|| bad("stack count missing", at))?;
                let lim = Limits {
                    strings: self.strings.len() as u32,
                    local_strings: 0,
                    stats: self.stats.len() as u32,
                    stacks: 0,
                    marks: false,
                };
                for _ in 0..n {
                    let at = c.pos();
                    get_stack(&mut c, &lim, &mut self.frames).map_err(|w| bad(w, at))?;
                    self.stack_ends.push(self.frames.len());
                }
                self.strings.clear_local();
                let at = c.pos();
                let n = c
                    .u64()
                    .ok_or_else(|| bad("block-local string count missing", at))?;
                if n > crate::codec::LOCAL_INDEX_MASK as u64 + 1 {
                    return Err(bad("too many block-local strings", at));
                }
                for _ in 0..n {
                    let at = c.pos();
                    let len = c.u64().ok_or_else(|| bad("string cut short", at))?;
                    let s = usize::try_from(len)
                        .ok()
                        .and_then(|l| c.bytes(l))
                        .ok_or_else(|| bad("string longer than the block", at))?;
                    self.strings.push_local(s);
                }
                let at = c.pos();
                self.remaining = c.u64().ok_or_else(|| bad("record count missing", at))?;
                self.pos = c.pos();
                self.deltas = Deltas::default();
                self.block_record = 0;
                if self.remaining == 0 && self.pos != self.raw.len() {
                    return Err(bad(
                        "bytes after the record count of an empty block",
                        self.pos,
                    ));
                }
                if let Some((mo, payload)) = self.staged_maps.take() {
                    self.maps =
                        parse_mappings(&payload, mo, self.strings.len() as u32, self.remaining)?;
                }
            }
            Block::Mappings => {
                if self.staged_maps.is_some() {
                    return Err(TraceError::corrupt(
                        self.block_offset,
                        "a mapping block follows a mapping block (each goes before its data block)",
                    ));
                }
                self.staged_maps = Some((self.block_offset, std::mem::take(&mut self.raw)));
            }
            Block::End => {
                if self.staged_maps.is_some() {
                    return Err(TraceError::corrupt(
                        self.block_offset,
                        "the end block follows a mapping block without its data block",
                    ));
                }
                self.end = Some(serde_json::from_slice(&self.raw).map_err(|e| {
                    TraceError::corrupt(
                        self.block_offset,
                        format!("end block is not valid JSON: {e}"),
                    )
                })?);
                // Nothing may follow the end block.
                let mut probe = [0u8; 1];
                if read_full(&mut self.src, &mut probe)? != 0 {
                    return Err(TraceError::corrupt(self.offset, "data after the end block"));
                }
                self.done = true;
            }
            Block::Eof => {
                // A mapping block whose data block was cut off goes with it.
                self.staged_maps = None;
                self.done = true;
            }
        }
        Ok(())
    }

    fn next_block(&mut self) -> Result<Block> {
        loop {
            match self.read_block_raw()? {
                None => return Ok(Block::Eof),
                Some(kind::DATA) => return Ok(Block::Data),
                // Mapping blocks are format 2.1; an older trace's block 128 is not ours.
                Some(kind::MAPPINGS) if self.version >= (2, 1) => return Ok(Block::Mappings),
                Some(kind::END) => return Ok(Block::End),
                Some(kind::META) => {
                    return Err(TraceError::corrupt(
                        self.block_offset,
                        "a second meta block",
                    ))
                }
                Some(k) if k >= kind::FIRST_SKIPPABLE => continue,
                Some(k) => {
                    return Err(TraceError::corrupt(
                        self.block_offset,
                        format!("unknown block kind {k} (written by a newer dejavu?)"),
                    ))
                }
            }
        }
    }

    /// Reads one block into `self.raw`; `None` at a clean or cut-off end.
    fn read_block_raw(&mut self) -> Result<Option<u8>> {
        self.block_offset = self.offset;
        let mut hdr = [0u8; codec::BLOCK_HEADER_LEN];
        let n = read_full(&mut self.src, &mut hdr)?;
        if n == 0 {
            self.truncated = Some(Truncation {
                valid_bytes: self.offset,
                lost_bytes: 0,
            });
            return Ok(None);
        }
        if n >= 4 && &hdr[..4] != codec::BLOCK_MAGIC {
            return Err(TraceError::corrupt(
                self.offset,
                "bad block magic (expected \"DVBK\")",
            ));
        }
        if n < hdr.len() {
            self.truncated = Some(Truncation {
                valid_bytes: self.offset,
                lost_bytes: n as u64,
            });
            return Ok(None);
        }
        let block_kind = hdr[4];
        let codec = hdr[5];
        let stored_len = u32::from_le_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]);
        let raw_len = u32::from_le_bytes([hdr[12], hdr[13], hdr[14], hdr[15]]);
        let crc = u32::from_le_bytes([hdr[16], hdr[17], hdr[18], hdr[19]]);
        if stored_len > codec::MAX_BLOCK_LEN || raw_len > codec::MAX_BLOCK_LEN {
            return Err(TraceError::corrupt(
                self.offset,
                format!(
                    "block claims {stored_len} stored / {raw_len} raw bytes, over the 64 MiB limit"
                ),
            ));
        }
        // Read in bounded steps: a damaged header claiming 64 MiB must not cost a 64 MiB
        // allocation when the file holds a few bytes.
        self.stored.clear();
        let mut got = 0usize;
        while got < stored_len as usize {
            let step = (stored_len as usize - got).min(1 << 20);
            self.stored.resize(got + step, 0);
            let n = read_full(&mut self.src, &mut self.stored[got..got + step])?;
            got += n;
            if n < step {
                self.stored.truncate(got);
                break;
            }
        }
        if got < stored_len as usize {
            self.truncated = Some(Truncation {
                valid_bytes: self.offset,
                lost_bytes: (hdr.len() + got) as u64,
            });
            return Ok(None);
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&hdr[4..16]);
        h.update(&self.stored);
        if h.finalize() != crc {
            return Err(TraceError::corrupt(
                self.offset,
                format!("block checksum mismatch (kind {block_kind}, {stored_len} bytes)"),
            ));
        }
        match codec {
            codec_id::RAW => std::mem::swap(&mut self.raw, &mut self.stored),
            codec_id::ZSTD => {
                self.raw.clear();
                self.raw.reserve(raw_len as usize);
                let n = self
                    .decompressor
                    .decompress_to_buffer(&self.stored, &mut self.raw)
                    .map_err(|e| {
                        TraceError::corrupt(self.offset, format!("block does not decompress: {e}"))
                    })?;
                if n != raw_len as usize {
                    return Err(TraceError::corrupt(
                        self.offset,
                        format!("block decompressed to {n} bytes, header says {raw_len}"),
                    ));
                }
            }
            other => {
                return Err(TraceError::corrupt(
                    self.offset,
                    format!("unknown block codec {other}"),
                ))
            }
        }
        self.offset += (hdr.len() + stored_len as usize) as u64;
        Ok(Some(block_kind))
    }
}

/// The entries of the mapping block at `offset` (`payload`), for a data block of
/// `records` records with `strings` trace strings defined once it is read.
fn parse_mappings(
    payload: &[u8],
    offset: u64,
    strings: u32,
    records: u64,
) -> Result<VecDeque<(u64, Mapping)>> {
    let bad = |what: &str, i: u64, at: usize| {
        TraceError::corrupt(
            offset,
            format!("mapping block, entry {i} (payload byte {at}): {what}"),
        )
    };
    let mut c = Cursor::new(payload);
    let n = c.u64().ok_or_else(|| bad("entry count missing", 0, 0))?;
    let mut out = VecDeque::new();
    let mut prev_ts = 0u64;
    let mut prev_at = 0u64;
    for i in 0..n {
        let at = c.pos();
        let (before, m) = get_mapping(&mut c, &mut prev_ts, strings).map_err(|w| bad(w, i, at))?;
        if before < prev_at || before > records {
            return Err(bad(
                "its place is out of order or past its data block's records",
                i,
                at,
            ));
        }
        prev_at = before;
        out.push_back((before, m));
    }
    if c.pos() != payload.len() {
        return Err(bad("bytes after the last entry", n, c.pos()));
    }
    Ok(out)
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}
