//! The records the kernel half writes to the ring buffer (layouts in bpf/dejavu.bpf.c;
//! keep the two in step). Parsing never trusts a length: a record that does not fit
//! what it claims is reported as malformed, never read past its end.

use dejavu_capture::snapshot::{FdFacts, Snapshot};
use dejavu_trace::FileStat;

pub const EV_CALL: u32 = 1;
pub const EV_FORK: u32 = 2;
pub const EV_EXEC: u32 = 3;
pub const EV_EXIT: u32 = 4;
pub const EV_SIGNAL: u32 = 5;
pub const EV_AGENT: u32 = 6;
pub const EV_STACK: u32 = 7;

const B_MEM: u16 = 1;
const B_STR: u16 = 2;
const B_FDSTAT: u16 = 3;
const B_ARGV: u16 = 4;
const B_STACK: u16 = 5;
const B_PLACE: u16 = 6;
const BF_FAULT: u16 = 1;
pub const BF_TRUNC: u32 = 2;
/// An exec's: the kernel half waits for the new program's agent (dejavu.bpf.c, BF_AWAIT).
pub const BF_AWAIT: u32 = 4;

pub const CF_UNFINISHED: u16 = 1;
pub const CF_NO_ENTER: u16 = 2;
/// A copy of the stack was sent (EV_STACK, in the stack copies' ring): `Call::stack_id`
/// is its `Slice::seq`.
pub const CF_STACK_SLICE: u16 = 4;
/// The stack is one user space unwound before: `Call::stack_id`.
pub const CF_STACK_HIT: u16 = 8;
/// No room for a copy: a short one is a blob of the call's record.
pub const CF_STACK_INLINE: u16 = 16;
/// A language agent named the calls made from this place: no native stack is sent;
/// `Call::stack_id` is the cache entry's handle.
pub const CF_STACK_AGENT: u16 = 32;
/// The thread's last STICKY (a language agent's repeated call, docs/agents.md) names the
/// call: no native stack is sent (the kernel half's `sticky_names`).
pub const CF_STACK_STICKY: u16 = 64;

/// Where the kernel side's records may place data: offsets are masked with this (the BPF
/// program's OFF_MASK).
const OFF_MASK: usize = 16384 - 1;

const HDR: usize = 24;
const CALL: usize = 104;
const BLOB: usize = 16;
const FDSTAT: usize = 80;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}
fn pad8(n: usize) -> usize {
    (n + 7) & !7
}

/// The common header.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub kind: u32,
    pub ts: u64,
    pub pid: i32,
    pub tid: i32,
}

/// The header of `b`, when `b` holds one and the size it claims.
pub fn header(b: &[u8]) -> Option<Header> {
    let size = u32_at(b, 4)? as usize;
    if size < HDR || size > b.len() {
        return None;
    }
    Some(Header {
        kind: u32_at(b, 0)?,
        ts: u64_at(b, 8)?,
        pid: u32_at(b, 16)? as i32,
        tid: u32_at(b, 20)? as i32,
    })
}

/// A call record's fixed part.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub enter_ts: u64,
    pub ret: i64,
    pub args: [u64; 6],
    pub nr: u64,
    pub flags: u16,
    /// With CF_STACK_HIT, the stack's id; with CF_STACK_SLICE, its copy's `seq`.
    pub stack_id: u64,
    /// With CF_STACK_STICKY, where the call was made: (address space, instruction
    /// pointer, stack pointer), the kernel's stack cache key less the process.
    pub place: Option<(u64, u64, u64)>,
}

/// A copy of the top of a thread's user stack (EV_STACK).
#[derive(Debug, Clone, Copy)]
pub struct Slice<'a> {
    /// The address space (with the process, the kernel's stack cache key).
    pub mm: u64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// The bytes from `sp` up.
    pub bytes: &'a [u8],
    /// Its name in the call record (`Call::stack_id` with CF_STACK_SLICE).
    pub seq: u64,
    /// `sp` is on the main thread's stack (not a thread's, not a goroutine's).
    pub main: bool,
}

const STACK: usize = 72;

/// Parses a stack record. None when malformed.
pub fn slice(b: &[u8]) -> Option<Slice<'_>> {
    let size = (u32_at(b, 4)? as usize).min(b.len());
    let b = b.get(..size)?;
    let len = u32_at(b, 56)? as usize;
    Some(Slice {
        mm: u64_at(b, 24)?,
        ip: u64_at(b, 32)?,
        sp: u64_at(b, 40)?,
        bp: u64_at(b, 48)?,
        bytes: b.get(STACK..STACK.checked_add(len)?)?,
        seq: u64_at(b, 64)?,
        main: u32_at(b, 60)? != 0,
    })
}

/// Parses a call record: its fixed part, its blobs into `snap`, and the short copy of the
/// stack it carries when there was no room for a full one (CF_STACK_INLINE; its `seq` is
/// 0). None when malformed.
pub fn call<'a>(b: &'a [u8], snap: &mut Snapshot) -> Option<(Call, Option<Slice<'a>>)> {
    let size = (u32_at(b, 4)? as usize).min(b.len());
    let b = b.get(..size)?;
    let mut args = [0u64; 6];
    for (i, a) in args.iter_mut().enumerate() {
        *a = u64_at(b, 40 + 8 * i)?;
    }
    let mut c = Call {
        enter_ts: u64_at(b, 24)?,
        ret: u64_at(b, 32)? as i64,
        args,
        nr: u32_at(b, 88)? as u64,
        flags: u16_at(b, 94)?,
        stack_id: u64_at(b, 96)?,
        place: None,
    };
    // A frame-pointer walk's place (always empty now).
    let nips = u16_at(b, 92)? as usize;
    let mut at = CALL.checked_add(nips.checked_mul(8)?)?;
    snap.clear();
    let mut inline = None;
    while at + BLOB <= b.len() {
        let addr = u64_at(b, at)?;
        let len = u32_at(b, at + 8)? as usize;
        let kind = u16_at(b, at + 12)?;
        let flags = u16_at(b, at + 14)?;
        let data = b.get(at + BLOB..at + BLOB + len)?;
        let fault = flags & BF_FAULT != 0;
        match kind {
            B_MEM => snap.add_mem(addr, data, fault),
            B_STR => snap.add_str(addr, data, fault),
            B_ARGV => {
                let argv = data.strip_suffix(b"\0").unwrap_or(data);
                if flags as u32 & BF_TRUNC != 0 {
                    let mut v = argv.to_vec();
                    v.extend_from_slice(b"\0...");
                    snap.set_argv(&v);
                } else {
                    snap.set_argv(argv);
                }
            }
            B_FDSTAT if len >= FDSTAT => snap.add_fd(addr as i32, fdstat(data)?),
            B_PLACE if len >= 16 => c.place = Some((u64_at(data, 0)?, u64_at(data, 8)?, addr)),
            B_STACK if len >= 16 && !fault => {
                inline = Some(Slice {
                    mm: 0,
                    ip: u64_at(data, 0)?,
                    sp: addr,
                    bp: u64_at(data, 8)?,
                    bytes: &data[16..],
                    seq: 0,
                    // (Not stored in the kernel's cache: it does not matter.)
                    main: true,
                })
            }
            _ => {}
        }
        // A string's copy includes its NUL.
        at += BLOB
            + if kind == B_STR {
                pad8(len + 1)
            } else {
                pad8(len)
            };
    }
    Some((c, inline))
}

/// The kernel's dev_t (major << 20 | minor) as stat(2) encodes it.
fn user_dev(k: u32) -> u64 {
    libc::makedev(k >> 20, k & 0xfffff)
}

fn fdstat(d: &[u8]) -> Option<FdFacts> {
    let ns = |sec: u64, nsec: u64| {
        (sec as i64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(nsec as i64)
    };
    Some(FdFacts {
        stat: FileStat {
            known: dejavu_trace::stat_known::ALL,
            dev: user_dev(u32_at(d, 0)?),
            mode: u32_at(d, 4)?,
            ino: u64_at(d, 8)?,
            size: u64_at(d, 16)? as i64,
            nlink: u32_at(d, 24)? as u64,
            uid: u32_at(d, 28)?,
            gid: u32_at(d, 32)?,
            rdev: user_dev(u32_at(d, 36)?),
            mtime_ns: ns(u64_at(d, 40)?, u64_at(d, 48)?),
            ctime_ns: ns(u64_at(d, 56)?, u64_at(d, 64)?),
        },
        flags: u32_at(d, 72)?,
    })
}

/// A new task.
#[derive(Debug, Clone, Copy)]
pub struct Fork {
    pub child_pid: i32,
    pub child_tid: i32,
    /// Facts bits: 1 a thread, 2 CLONE_FILES, 4 CLONE_FS, 8 CLONE_VM.
    pub bits: u64,
    /// A new process sharing its parent's memory: the parent's native stack in the clone,
    /// as a call's (`Call::flags`' stack bits and `Call::stack_id`).
    pub stack_id: u64,
    pub sflags: u16,
}

/// A new task: see `Fork`.
pub fn fork(b: &[u8]) -> Option<Fork> {
    Some(Fork {
        child_pid: u32_at(b, 24)? as i32,
        child_tid: u32_at(b, 28)? as i32,
        bits: u64_at(b, 32)?,
        stack_id: u64_at(b, 40)?,
        sflags: u32_at(b, 48)? as u16,
    })
}

/// An exec: see `Exec`.
pub fn exec(b: &[u8]) -> Option<Exec<'_>> {
    let old = u32_at(b, 24)? as i32;
    let flen = u32_at(b, 28)? as usize;
    let alen = u32_at(b, 32)? as usize;
    let flags = u32_at(b, 36)?;
    const DATA: usize = 72;
    let fname = b.get(DATA..DATA + flen)?;
    let argv_at = (DATA + pad8(flen + 1)) & OFF_MASK;
    let argv = b.get(argv_at..argv_at + alen)?;
    Some(Exec {
        old,
        fname,
        argv,
        truncated: flags & BF_TRUNC != 0,
        awaiting: flags & BF_AWAIT != 0,
        at_phdr: u64_at(b, 40)?,
        at_base: u64_at(b, 48)?,
        stack_id: u64_at(b, 56)?,
        sflags: u32_at(b, 64)? as u16,
    })
}

/// An exec record.
#[derive(Debug, Clone, Copy)]
pub struct Exec<'a> {
    /// The thread's tid before (a non-leader thread takes the leader's).
    pub old: i32,
    /// The file name as given to execve.
    pub fname: &'a [u8],
    /// The arguments, NUL-joined.
    pub argv: &'a [u8],
    /// The arguments were cut short.
    pub truncated: bool,
    /// The kernel half waits for the new program's agent before it takes native stacks.
    pub awaiting: bool,
    /// The auxiliary vector's AT_PHDR and AT_BASE (0 when unknown or none).
    pub at_phdr: u64,
    pub at_base: u64,
    /// The execve's native stack, taken at its entry in the old program, as a call's
    /// (`Call::flags`' stack bits and `Call::stack_id`).
    pub stack_id: u64,
    pub sflags: u16,
}

/// A task's end: (exit code as wait status bits, the whole process ended).
pub fn exit(b: &[u8]) -> Option<(i32, bool)> {
    Some((u32_at(b, 24)? as i32, u32_at(b, 28)? != 0))
}

/// A delivered signal.
pub fn signal(b: &[u8]) -> Option<i32> {
    Some(u32_at(b, 24)? as i32)
}

/// An agent's report bytes.
pub fn agent(b: &[u8]) -> Option<&[u8]> {
    let len = u32_at(b, 24)? as usize;
    b.get(32..32 + len)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn hdr(kind: u32, size: usize) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&kind.to_le_bytes());
        b.extend_from_slice(&(size as u32).to_le_bytes());
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend_from_slice(&10u32.to_le_bytes());
        b.extend_from_slice(&11u32.to_le_bytes());
        b
    }

    #[test]
    fn a_call_with_a_path_and_a_stat_buffer_parses() {
        let mut b = hdr(EV_CALL, 0);
        b.extend_from_slice(&5u64.to_le_bytes()); // enter
        b.extend_from_slice(&0i64.to_le_bytes()); // ret
        for a in [0x1000u64, 0x2000, 0, 0, 0, 0] {
            b.extend_from_slice(&a.to_le_bytes());
        }
        b.extend_from_slice(&4u32.to_le_bytes()); // nr: stat
        b.extend_from_slice(&1u16.to_le_bytes()); // one ip
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&0x401000u64.to_le_bytes());
        for (addr, kind, data) in [
            (0x1000u64, B_STR, &b"/etc"[..]),
            (0x2000, B_MEM, &[9u8; 144][..]),
        ] {
            b.extend_from_slice(&addr.to_le_bytes());
            b.extend_from_slice(&(data.len() as u32).to_le_bytes());
            b.extend_from_slice(&kind.to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes());
            b.extend_from_slice(data);
            if kind == B_STR {
                b.push(0);
            }
            b.resize(pad8(b.len()), 0);
        }
        let size = b.len() as u32;
        b[4..8].copy_from_slice(&size.to_le_bytes());
        let h = header(&b).unwrap();
        assert_eq!((h.kind, h.ts, h.pid, h.tid), (EV_CALL, 7, 10, 11));
        let mut snap = Snapshot::default();
        let (c, inline) = call(&b, &mut snap).unwrap();
        assert!(inline.is_none());
        assert_eq!((c.nr, c.args[0], c.enter_ts), (4, 0x1000, 5));
        let mut s = Vec::new();
        assert!(snap.cstr(0x1000, 4096, &mut s).unwrap());
        assert_eq!(s, b"/etc");
        let mut st = [0u8; 144];
        assert_eq!(snap.read(0x2000, &mut st).unwrap(), 144);
        // Cut short: never read past the end.
        assert!(header(&b[..b.len() - 8]).is_none());
        let mut short = b[..CALL + 8 + BLOB + 2].to_vec();
        let n = short.len() as u32;
        short[4..8].copy_from_slice(&n.to_le_bytes());
        assert!(call(&short, &mut snap).is_none());
    }

    #[test]
    fn stack_records_parse_and_never_read_past_their_end() {
        let mut b = Vec::new();
        b.extend_from_slice(&EV_STACK.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // size, set below
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend_from_slice(&10u32.to_le_bytes());
        b.extend_from_slice(&11u32.to_le_bytes());
        for v in [
            0xffff_8000_0000_1000u64,
            0x401234,
            0x7ffc_0000_1000,
            0x7ffc_0000_1040,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&16u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&99u64.to_le_bytes());
        assert_eq!(b.len(), STACK);
        b.extend_from_slice(&[0xab; 16]);
        let n = b.len() as u32;
        b[4..8].copy_from_slice(&n.to_le_bytes());
        let s = slice(&b).unwrap();
        assert_eq!(
            (s.ip, s.sp, s.bp),
            (0x401234, 0x7ffc_0000_1000, 0x7ffc_0000_1040)
        );
        assert_eq!(s.bytes, &[0xab; 16]);
        assert_eq!(s.seq, 99);
        // A length past the record's end.
        b[56..60].copy_from_slice(&17u32.to_le_bytes());
        assert!(slice(&b).is_none());
    }

    #[test]
    fn kernel_dev_numbers_become_stat_dev_numbers() {
        // 254:0 (device-mapper) is 0xfe00 in stat's encoding.
        assert_eq!(user_dev(254 << 20), 0xfe00);
        assert_eq!(user_dev((8 << 20) | 1), libc::makedev(8, 1));
    }
}
