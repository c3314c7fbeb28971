//! Encoding of records and stat answers inside a data block (docs/trace-format.md).
//!
//! Writer and reader share this file so the two can never disagree. Decoding returns a
//! short description of what was wrong instead of panicking; the reader adds the offset.

use crate::model::*;
use crate::sys::Sys;
use crate::varint::{put_i64, put_u64, Cursor};

/// File magic: the first 8 bytes of every trace.
pub const FILE_MAGIC: &[u8; 8] = b"DEJAVUTR";
/// Format major version written: 2 since the Mark record (tag 6), which a 1.x reader
/// could not skip. Readers refuse majors they do not know.
pub const FORMAT_MAJOR: u16 = 2;
/// Format minor version written: additions a reader of the same major can skip. 1 since
/// the mapping blocks (kind 128), which a 2.0 reader skips.
pub const FORMAT_MINOR: u16 = 1;
/// Oldest major version this reader reads: 1.x traces are 2.x traces without marks.
pub const OLDEST_MAJOR: u16 = 1;
/// Size of the file header.
pub const FILE_HEADER_LEN: usize = 16;
/// Block magic: the first 4 bytes of every block.
pub const BLOCK_MAGIC: &[u8; 4] = b"DVBK";
/// Size of a block header.
pub const BLOCK_HEADER_LEN: usize = 20;
/// Largest block payload a reader accepts (stored or raw); bigger means corrupt.
pub const MAX_BLOCK_LEN: u32 = 64 << 20;

/// Block kinds.
pub mod kind {
    /// JSON [`crate::Meta`]; the first block.
    pub const META: u8 = 1;
    /// Interned strings, stat answers and records.
    pub const DATA: u8 = 2;
    /// JSON [`crate::End`]; the last block of a complete trace.
    pub const END: u8 = 3;
    /// Kinds at or above this are optional: a reader that does not know them skips them.
    pub const FIRST_SKIPPABLE: u8 = 128;
    /// [`crate::Mapping`] records that go between the records of the data block right
    /// after it (format 2.1; optional, so a 2.0 reader skips it).
    pub const MAPPINGS: u8 = 128;
}

/// Block payload codecs.
pub mod codec_id {
    /// Stored as is.
    pub const RAW: u8 = 0;
    /// Zstandard frame.
    pub const ZSTD: u8 = 1;
}

/// Record tags.
pub mod tag {
    /// [`crate::Syscall`]
    pub const SYSCALL: u8 = 0;
    /// [`crate::Spawn`]
    pub const SPAWN: u8 = 1;
    /// [`crate::Exec`]
    pub const EXEC: u8 = 2;
    /// [`crate::Exit`]
    pub const EXIT: u8 = 3;
    /// [`crate::Signal`]
    pub const SIGNAL: u8 = 4;
    /// [`crate::Lost`]
    pub const LOST: u8 = 5;
    /// [`crate::Mark`] (format 2.0 and later)
    pub const MARK: u8 = 6;
}

/// Presence bits of a syscall record's optional fields, in encoding order.
pub mod field {
    /// `ret` is non-zero.
    pub const RET: u16 = 1 << 0;
    /// `dur` is non-zero.
    pub const DUR: u16 = 1 << 1;
    /// `ev` is non-zero.
    pub const EV: u16 = 1 << 2;
    /// `fd` is set.
    pub const FD: u16 = 1 << 3;
    /// `fd2` is set.
    pub const FD2: u16 = 1 << 4;
    /// `path` is set.
    pub const PATH: u16 = 1 << 5;
    /// `path2` is set.
    pub const PATH2: u16 = 1 << 6;
    /// `flags` is non-zero.
    pub const FLAGS: u16 = 1 << 7;
    /// `mode` is non-zero.
    pub const MODE: u16 = 1 << 8;
    /// `offset` is set.
    pub const OFFSET: u16 = 1 << 9;
    /// `count` is non-zero.
    pub const COUNT: u16 = 1 << 10;
    /// `aux` is non-zero.
    pub const AUX: u16 = 1 << 11;
    /// `stat` is set.
    pub const STAT: u16 = 1 << 12;
    /// `payload` is set.
    pub const PAYLOAD: u16 = 1 << 13;
    /// `stack` is set.
    pub const STACK: u16 = 1 << 14;
    /// `fingerprint` is set.
    pub const FINGERPRINT: u16 = 1 << 15;
    /// Every defined bit.
    pub const ALL: u16 = u16::MAX;
}

/// Delta state carried from record to record within one block.
#[derive(Default, Debug, Clone, Copy)]
pub struct Deltas {
    /// Previous record's ts.
    pub ts: u64,
    /// Previous syscall record's tid.
    pub tid: u32,
}

/// Appends a stat answer.
pub fn put_stat(out: &mut Vec<u8>, st: &FileStat) {
    out.push(st.known);
    let k = st.known;
    if k & stat_known::IDENTITY != 0 {
        put_u64(out, st.dev);
        put_u64(out, st.ino);
    }
    if k & stat_known::MODE != 0 {
        put_u64(out, st.mode as u64);
    }
    if k & stat_known::SIZE != 0 {
        put_i64(out, st.size);
    }
    if k & stat_known::MTIME != 0 {
        put_i64(out, st.mtime_ns);
    }
    if k & stat_known::CTIME != 0 {
        // ctime is usually equal or close to mtime.
        put_i64(out, st.ctime_ns.wrapping_sub(st.mtime_ns));
    }
    if k & stat_known::OWNER != 0 {
        put_u64(out, st.nlink);
        put_u64(out, st.uid as u64);
        put_u64(out, st.gid as u64);
    }
    if k & stat_known::RDEV != 0 {
        put_u64(out, st.rdev);
    }
}

/// Reads a stat answer.
pub fn get_stat(c: &mut Cursor<'_>) -> Result<FileStat, &'static str> {
    const SHORT: &str = "stat answer cut short";
    let mut st = FileStat {
        known: c.u8().ok_or(SHORT)?,
        ..FileStat::default()
    };
    let k = st.known;
    if k & !stat_known::ALL != 0 {
        return Err("stat answer has unknown field bits");
    }
    if k & stat_known::IDENTITY != 0 {
        st.dev = c.u64().ok_or(SHORT)?;
        st.ino = c.u64().ok_or(SHORT)?;
    }
    if k & stat_known::MODE != 0 {
        st.mode = c.u32().ok_or(SHORT)?;
    }
    if k & stat_known::SIZE != 0 {
        st.size = c.i64().ok_or(SHORT)?;
    }
    if k & stat_known::MTIME != 0 {
        st.mtime_ns = c.i64().ok_or(SHORT)?;
    }
    if k & stat_known::CTIME != 0 {
        st.ctime_ns = c.i64().ok_or(SHORT)?.wrapping_add(st.mtime_ns);
    }
    if k & stat_known::OWNER != 0 {
        st.nlink = c.u64().ok_or(SHORT)?;
        st.uid = c.u32().ok_or(SHORT)?;
        st.gid = c.u32().ok_or(SHORT)?;
    }
    if k & stat_known::RDEV != 0 {
        st.rdev = c.u64().ok_or(SHORT)?;
    }
    Ok(st)
}

fn put_ts(out: &mut Vec<u8>, d: &mut Deltas, ts: u64) {
    put_i64(out, ts.wrapping_sub(d.ts) as i64);
    d.ts = ts;
}

/// Appends one record.
pub fn put_record(out: &mut Vec<u8>, d: &mut Deltas, rec: &Record) {
    match rec {
        Record::Syscall(s) => {
            out.push(tag::SYSCALL);
            put_u64(out, s.sys as u64);
            let mut m = 0u16;
            let bit = |cond: bool, b: u16| if cond { b } else { 0 };
            m |= bit(s.ret != 0, field::RET);
            m |= bit(s.dur != 0, field::DUR);
            m |= bit(s.ev != 0, field::EV);
            m |= bit(s.fd.is_some(), field::FD);
            m |= bit(s.fd2.is_some(), field::FD2);
            m |= bit(s.path.is_some(), field::PATH);
            m |= bit(s.path2.is_some(), field::PATH2);
            m |= bit(s.flags != 0, field::FLAGS);
            m |= bit(s.mode != 0, field::MODE);
            m |= bit(s.offset.is_some(), field::OFFSET);
            m |= bit(s.count != 0, field::COUNT);
            m |= bit(s.aux != 0, field::AUX);
            m |= bit(s.stat.is_some(), field::STAT);
            m |= bit(s.payload.is_some(), field::PAYLOAD);
            m |= bit(s.stack.is_some(), field::STACK);
            m |= bit(s.fingerprint.is_some(), field::FINGERPRINT);
            put_u64(out, m as u64);
            put_ts(out, d, s.ts);
            put_i64(out, s.tid as i64 - d.tid as i64);
            d.tid = s.tid;
            put_i64(out, s.tid as i64 - s.pid as i64);
            if m & field::RET != 0 {
                put_i64(out, s.ret);
            }
            if m & field::DUR != 0 {
                put_u64(out, s.dur);
            }
            if m & field::EV != 0 {
                put_u64(out, s.ev as u64);
            }
            if let Some(fd) = s.fd {
                put_i64(out, fd as i64);
            }
            if let Some(fd) = s.fd2 {
                put_i64(out, fd as i64);
            }
            if let Some(p) = s.path {
                put_str(out, p);
            }
            if let Some(p) = s.path2 {
                put_str(out, p);
            }
            if m & field::FLAGS != 0 {
                put_u64(out, s.flags);
            }
            if m & field::MODE != 0 {
                put_u64(out, s.mode as u64);
            }
            if let Some(o) = s.offset {
                put_i64(out, o);
            }
            if m & field::COUNT != 0 {
                put_u64(out, s.count);
            }
            if m & field::AUX != 0 {
                put_u64(out, s.aux);
            }
            if let Some(st) = s.stat {
                put_u64(out, st.0 as u64);
            }
            if let Some(p) = s.payload {
                put_str(out, p);
            }
            if let Some(st) = s.stack {
                put_u64(out, st.0 as u64);
            }
            if let Some(fp) = s.fingerprint {
                out.extend_from_slice(&fp.to_le_bytes());
            }
        }
        Record::Spawn(s) => {
            out.push(tag::SPAWN);
            put_ts(out, d, s.ts);
            put_u64(out, s.parent_pid as u64);
            put_u64(out, s.parent_tid as u64);
            put_u64(out, s.pid as u64);
            put_u64(out, s.tid as u64);
            put_u64(out, s.clone_flags);
        }
        Record::Exec(e) => {
            out.push(tag::EXEC);
            put_ts(out, d, e.ts);
            put_u64(out, e.pid as u64);
            put_u64(out, e.tid as u64);
            put_str(out, e.exe);
            put_str(out, e.argv);
        }
        Record::Exit(e) => {
            out.push(tag::EXIT);
            put_ts(out, d, e.ts);
            put_u64(out, e.pid as u64);
            put_u64(out, e.tid as u64);
            match e.status {
                ExitStatus::Code(c) => {
                    out.push(0);
                    put_i64(out, c as i64);
                }
                ExitStatus::Signal { signal, core } => {
                    out.push(if core { 2 } else { 1 });
                    put_i64(out, signal as i64);
                }
            }
        }
        Record::Signal(s) => {
            out.push(tag::SIGNAL);
            put_ts(out, d, s.ts);
            put_u64(out, s.pid as u64);
            put_u64(out, s.tid as u64);
            put_i64(out, s.signal as i64);
        }
        Record::Lost(l) => {
            out.push(tag::LOST);
            put_ts(out, d, l.ts);
            put_u64(out, l.pid as u64);
            put_u64(out, l.count);
            out.push(l.reason as u8);
        }
        Record::Mark(m) => {
            out.push(tag::MARK);
            put_ts(out, d, m.ts);
            put_u64(out, m.pid as u64);
            put_u64(out, m.tid as u64);
            out.push(m.kind as u8);
        }
        // Not a data block record: mappings go to the mapping block (`put_mapping`).
        Record::Mapping(_) => {}
    }
}

/// How many strings and stat answers exist so far, to validate references.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Defined strings.
    pub strings: u32,
    /// Block-local strings of the current block.
    pub local_strings: u32,
    /// Defined stat answers.
    pub stats: u32,
    /// Defined stacks.
    pub stacks: u32,
    /// Mark records may appear (format 2.0 and later; a 1.x trace has none).
    pub marks: bool,
}

/// Low 24 bits of a block-local id: its index in the block (the writer keeps a block
/// generation in bits 24..31 to catch misuse).
pub const LOCAL_INDEX_MASK: u32 = 0x00ff_ffff;

/// Appends a string reference: global ids as `id << 1`, block-local as `index << 1 | 1`.
#[inline]
pub fn put_str(out: &mut Vec<u8>, id: StrId) {
    if id.is_local() {
        put_u64(out, (((id.0 & LOCAL_INDEX_MASK) as u64) << 1) | 1);
    } else {
        put_u64(out, (id.0 as u64) << 1);
    }
}

fn str_ref(c: &mut Cursor<'_>, lim: &Limits) -> Result<StrId, &'static str> {
    let v = c.u64().ok_or("record cut short")?;
    let idx = v >> 1;
    if v & 1 == 1 {
        if idx >= lim.local_strings as u64 {
            return Err("record refers to a block-local string the block does not define");
        }
        Ok(StrId(StrId::LOCAL | idx as u32))
    } else {
        if idx >= lim.strings as u64 {
            return Err("record refers to a string that was never defined");
        }
        Ok(StrId(idx as u32))
    }
}

fn u32_field(c: &mut Cursor<'_>) -> Result<u32, &'static str> {
    c.u32().ok_or("record cut short or field out of range")
}

fn ts_field(c: &mut Cursor<'_>, d: &mut Deltas) -> Result<u64, &'static str> {
    let delta = c.i64().ok_or("record cut short")?;
    d.ts = d.ts.wrapping_add(delta as u64);
    Ok(d.ts)
}

/// Reads one record.
#[inline]
pub fn get_record(
    c: &mut Cursor<'_>,
    d: &mut Deltas,
    lim: &Limits,
) -> Result<Record, &'static str> {
    const SHORT: &str = "record cut short";
    let t = c.u8().ok_or(SHORT)?;
    Ok(match t {
        tag::SYSCALL => {
            let sys_id = c.u64().ok_or(SHORT)?;
            let sys = u16::try_from(sys_id)
                .ok()
                .and_then(Sys::from_id)
                .ok_or("unknown syscall id")?;
            let m = c.u64().ok_or(SHORT)?;
            if m > field::ALL as u64 {
                return Err("syscall record has unknown field bits");
            }
            let m = m as u16;
            let ts = ts_field(c, d)?;
            let tid = (d.tid as i64).wrapping_add(c.i64().ok_or(SHORT)?);
            let tid = u32::try_from(tid).map_err(|_| "thread id out of range")?;
            d.tid = tid;
            let pid = u32::try_from(tid as i64 - c.i64().ok_or(SHORT)?)
                .map_err(|_| "process id out of range")?;
            let mut s = Syscall::new(ts, pid, tid, sys);
            if m & field::RET != 0 {
                s.ret = c.i64().ok_or(SHORT)?;
            }
            if m & field::DUR != 0 {
                s.dur = c.u64().ok_or(SHORT)?;
            }
            if m & field::EV != 0 {
                s.ev =
                    u16::try_from(c.u64().ok_or(SHORT)?).map_err(|_| "event flags out of range")?;
            }
            if m & field::FD != 0 {
                s.fd = Some(c.i32().ok_or("descriptor out of range")?);
            }
            if m & field::FD2 != 0 {
                s.fd2 = Some(c.i32().ok_or("descriptor out of range")?);
            }
            if m & field::PATH != 0 {
                s.path = Some(str_ref(c, lim)?);
            }
            if m & field::PATH2 != 0 {
                s.path2 = Some(str_ref(c, lim)?);
            }
            if m & field::FLAGS != 0 {
                s.flags = c.u64().ok_or(SHORT)?;
            }
            if m & field::MODE != 0 {
                s.mode = u32_field(c)?;
            }
            if m & field::OFFSET != 0 {
                s.offset = Some(c.i64().ok_or(SHORT)?);
            }
            if m & field::COUNT != 0 {
                s.count = c.u64().ok_or(SHORT)?;
            }
            if m & field::AUX != 0 {
                s.aux = c.u64().ok_or(SHORT)?;
            }
            if m & field::STAT != 0 {
                let id = u32_field(c)?;
                if id >= lim.stats {
                    return Err("record refers to a stat answer that was never defined");
                }
                s.stat = Some(StatId(id));
            }
            if m & field::PAYLOAD != 0 {
                s.payload = Some(str_ref(c, lim)?);
            }
            if m & field::STACK != 0 {
                let id = u32_field(c)?;
                if id >= lim.stacks {
                    return Err("record refers to a stack that was never defined");
                }
                s.stack = Some(StackId(id));
            }
            if m & field::FINGERPRINT != 0 {
                let b = c.bytes(8).ok_or("fingerprint cut short")?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                s.fingerprint = Some(u64::from_le_bytes(a));
            }
            Record::Syscall(s)
        }
        tag::SPAWN => Record::Spawn(Spawn {
            ts: ts_field(c, d)?,
            parent_pid: u32_field(c)?,
            parent_tid: u32_field(c)?,
            pid: u32_field(c)?,
            tid: u32_field(c)?,
            clone_flags: c.u64().ok_or(SHORT)?,
        }),
        tag::EXEC => Record::Exec(Exec {
            ts: ts_field(c, d)?,
            pid: u32_field(c)?,
            tid: u32_field(c)?,
            exe: str_ref(c, lim)?,
            argv: str_ref(c, lim)?,
        }),
        tag::EXIT => {
            let ts = ts_field(c, d)?;
            let pid = u32_field(c)?;
            let tid = u32_field(c)?;
            let how = c.u8().ok_or(SHORT)?;
            let v = c.i32().ok_or("exit status out of range")?;
            let status = match how {
                0 => ExitStatus::Code(v),
                1 | 2 => ExitStatus::Signal {
                    signal: v,
                    core: how == 2,
                },
                _ => return Err("unknown exit kind"),
            };
            Record::Exit(Exit {
                ts,
                pid,
                tid,
                status,
            })
        }
        tag::SIGNAL => Record::Signal(Signal {
            ts: ts_field(c, d)?,
            pid: u32_field(c)?,
            tid: u32_field(c)?,
            signal: c.i32().ok_or("signal out of range")?,
        }),
        tag::LOST => Record::Lost(Lost {
            ts: ts_field(c, d)?,
            pid: u32_field(c)?,
            count: c.u64().ok_or(SHORT)?,
            reason: LostReason::from_u8(c.u8().ok_or(SHORT)?).ok_or("unknown lost-event reason")?,
        }),
        tag::MARK if lim.marks => Record::Mark(Mark {
            ts: ts_field(c, d)?,
            pid: u32_field(c)?,
            tid: u32_field(c)?,
            kind: MarkKind::from_u8(c.u8().ok_or(SHORT)?).ok_or("unknown mark kind")?,
        }),
        _ => return Err("unknown record tag"),
    })
}

/// Appends one entry of a mapping block: `at` (the number of records of the data block
/// that come before it), `kind`, `ts` (delta from `prev_ts`, the block's previous entry),
/// `pid`, `start`, `len`, and for a map `offset`, `path` and `build_id` (optional string
/// ids + 1), and `identity` (0, or 1 followed by `dev` and `ino`).
pub fn put_mapping(out: &mut Vec<u8>, at: u64, prev_ts: &mut u64, m: &Mapping) {
    put_u64(out, at);
    out.push(m.kind as u8);
    put_i64(out, m.ts.wrapping_sub(*prev_ts) as i64);
    *prev_ts = m.ts;
    put_u64(out, m.pid as u64);
    put_u64(out, m.start);
    put_u64(out, m.len);
    if m.kind == MappingKind::Map {
        put_u64(out, m.offset);
        put_opt_str(out, m.path);
        put_opt_str(out, m.build_id);
        match m.file {
            None => out.push(0),
            Some((dev, ino)) => {
                out.push(1);
                put_u64(out, dev);
                put_u64(out, ino);
            }
        }
    }
}

/// Reads one entry of a mapping block (see [`put_mapping`]): its `at` and the record.
/// String ids are checked against `strings` (the trace strings defined once the data
/// block that follows is read), never block-local.
pub fn get_mapping(
    c: &mut Cursor<'_>,
    prev_ts: &mut u64,
    strings: u32,
) -> Result<(u64, Mapping), &'static str> {
    const SHORT: &str = "mapping cut short";
    let at = c.u64().ok_or(SHORT)?;
    let kind = MappingKind::from_u8(c.u8().ok_or(SHORT)?).ok_or("unknown mapping kind")?;
    let ts = prev_ts.wrapping_add(c.i64().ok_or(SHORT)? as u64);
    *prev_ts = ts;
    let pid = u32_field(c)?;
    let start = c.u64().ok_or(SHORT)?;
    let len = c.u64().ok_or(SHORT)?;
    let mut m = Mapping {
        ts,
        pid,
        kind,
        start,
        len,
        offset: 0,
        path: None,
        file: None,
        build_id: None,
    };
    if kind == MappingKind::Map {
        let opt = |c: &mut Cursor<'_>| match c.u64().ok_or(SHORT)? {
            0 => Ok(None),
            v if v - 1 < strings as u64 => Ok(Some(StrId((v - 1) as u32))),
            _ => Err("mapping refers to a string that was never defined"),
        };
        m.offset = c.u64().ok_or(SHORT)?;
        m.path = opt(c)?;
        m.build_id = opt(c)?;
        m.file = match c.u8().ok_or(SHORT)? {
            0 => None,
            1 => Some((c.u64().ok_or(SHORT)?, c.u64().ok_or(SHORT)?)),
            _ => return Err("unknown mapping identity flag"),
        };
    }
    Ok((at, m))
}

fn put_opt_str(out: &mut Vec<u8>, id: Option<StrId>) {
    match id {
        // 0 is "none"; string ids are shifted by one.
        None => put_u64(out, 0),
        Some(id) => put_u64(out, id.0 as u64 + 1),
    }
}

fn get_opt_str(c: &mut Cursor<'_>, lim: &Limits) -> Result<Option<StrId>, &'static str> {
    match c.u64().ok_or("stack cut short")? {
        0 => Ok(None),
        v if v - 1 < lim.strings as u64 => Ok(Some(StrId((v - 1) as u32))),
        _ => Err("stack frame refers to a string that was never defined"),
    }
}

/// Appends a stack definition: frame count, then per frame `kind` byte, function, file,
/// module (optional string ids + 1), line, column, addr.
pub fn put_stack(out: &mut Vec<u8>, frames: &[Frame]) {
    put_u64(out, frames.len() as u64);
    for f in frames {
        debug_assert!(![f.function, f.file, f.module]
            .iter()
            .flatten()
            .any(|s| s.is_local()));
        out.push(f.kind as u8);
        put_opt_str(out, f.function);
        put_opt_str(out, f.file);
        put_opt_str(out, f.module);
        put_u64(out, f.line as u64);
        put_u64(out, f.column as u64);
        put_u64(out, f.addr);
    }
}

/// Most frames a stack may have (deeper stacks are cut by the writer).
pub const MAX_FRAMES: usize = 256;

/// Reads a stack definition into `frames`.
pub fn get_stack(
    c: &mut Cursor<'_>,
    lim: &Limits,
    frames: &mut Vec<Frame>,
) -> Result<(), &'static str> {
    const SHORT: &str = "stack cut short";
    let n = c.u64().ok_or(SHORT)?;
    if n > MAX_FRAMES as u64 {
        return Err("stack deeper than 256 frames");
    }
    for _ in 0..n {
        let kind = FrameKind::from_u8(c.u8().ok_or(SHORT)?).ok_or("unknown frame kind")?;
        let function = get_opt_str(c, lim)?;
        let file = get_opt_str(c, lim)?;
        let module = get_opt_str(c, lim)?;
        let line = c.u32().ok_or(SHORT)?;
        let column = c.u32().ok_or(SHORT)?;
        let addr = c.u64().ok_or(SHORT)?;
        frames.push(Frame {
            kind,
            function,
            file,
            line,
            column,
            module,
            addr,
        });
    }
    Ok(())
}
