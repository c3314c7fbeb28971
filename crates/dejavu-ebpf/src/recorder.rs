//! Loading the kernel half, starting or attaching to the program, and the reader loop.

use crate::core_cache;
use crate::drainer::{self, Batch, Drainer, Packed, Rings};
use crate::event::{self, CF_UNFINISHED};
use crate::kept;
use crate::{unavailable, Options};
use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf, EbpfLoader};
use dejavu_capture::feed::{Feed, NewTask, RawCall};
use dejavu_capture::os as kernel;
use dejavu_capture::stacks::{native::Deps, NativeStack};
use dejavu_capture::{arch, signals, spawn, Outcome, RecordError, RecordOptions, Target};
use dejavu_trace::{ExitStatus, Meta, StackId, TraceError, TraceWriter};
use rustc_hash::FxHashMap;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/dejavu.bpf.o"));

/// How long the reader waits for a batch of records before it looks at signals, the
/// program's end and the processes left.
const POLL: Duration = Duration::from_millis(10);
/// Most bytes of a write payload the kernel half copies.
pub const PAYLOAD_MAX: u32 = 4096;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Config {
    payload_bytes: u32,
    agent_fd: i32,
    stacks: u32,
    wake_bytes: u32,
    open_identity: u32,
    await_agent: u32,
}

// SAFETY: plain integers, no padding (six u32/i32), as the BPF side's struct config.
unsafe impl aya::Pod for Config {}

/// The kernel's cache of stacks already unwound (bpf/dejavu.bpf.c, `stacks`): keep the
/// layouts in step.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StkKey {
    mm: u64,
    ip: u64,
    sp: u64,
    tgid: u32,
    pad: u32,
}

const STK_WORDS: usize = 64;
/// The reader's and the drainer's nice value (see `Reader::run`).
pub(crate) const READER_NICE: i32 = -10;

/// Bytes of stack a call's record carries when the copies' ring is full (INLINE_STACK).
const INLINE_STACK: usize = 256;

/// Bytes of user stack the kernel half copies for a call whose stack it has not seen
/// (perf --call-graph dwarf's default too). DEJAVU_EBPF_STACK_BYTES overrides it.
const STACK_BYTES: u32 = 8192;
/// Bytes of stack the kernel copies at most (SLICE_MAX).
const SLICE_MAX: usize = 16384;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct StkVal {
    bp: u64,
    hash: u64,
    id: u32,
    n: u16,
    span: u16,
    off: [u16; STK_WORDS],
    /// The frame pointer register did not matter: any `bp` matches.
    bp_any: u32,
    /// A language agent names the calls made here: the kernel sends none (`id` is then a
    /// handle in `StackCache::agent_keys`).
    agent: u32,
    /// Up to STK_MORE more stacks of the same place read from the same words, newest
    /// first (`ways` of them): the stacks stored before this one, so that stacks taking
    /// turns at one place (a helper called from several lines of a loop) do not replace
    /// each other (`with_older`).
    hashes: [u64; STK_MORE],
    ids: [u32; STK_MORE],
    ways: u32,
}

/// Stacks an entry keeps besides its own (bpf/dejavu.bpf.c, STK_MORE).
const STK_MORE: usize = 3;

impl StkVal {
    /// `self`, then the stacks of `prev` (the entry stored before it for the same key) as
    /// its older ways, when both read the same words; else `self` alone. The oldest goes
    /// past STK_MORE.
    fn with_older(mut self, prev: &StkVal) -> StkVal {
        let same_words = self.agent == 0
            && prev.agent == 0
            && self.n == prev.n
            && self.span == prev.span
            && self.off[..self.n as usize] == prev.off[..prev.n as usize]
            && self.bp_any == prev.bp_any
            && (self.bp_any != 0 || self.bp == prev.bp);
        if !same_words {
            return self;
        }
        let older = std::iter::once((prev.hash, prev.id)).chain(
            prev.hashes
                .iter()
                .zip(prev.ids)
                .take(prev.ways as usize)
                .map(|(&h, i)| (h, i)),
        );
        let mut ways = 0;
        for (h, i) in older.filter(|&(h, _)| h != self.hash).take(STK_MORE) {
            self.hashes[ways] = h;
            self.ids[ways] = i;
            ways += 1;
        }
        self.ways = ways as u32;
        self
    }

    /// Whether this entry holds the stack whose words hash to `hash`.
    fn holds(&self, hash: u64) -> bool {
        self.hash == hash || self.hashes[..self.ways as usize].contains(&hash)
    }
}

// SAFETY: plain integers, no implicit padding (32 and 200 bytes, 8-aligned), as the BPF
// side's struct stk_key and struct stk_val.
unsafe impl aya::Pod for StkKey {}
unsafe impl aya::Pod for StkVal {}

/// The hash of the stack words an unwind read, as the kernel half computes it.
fn stack_hash(values: impl Iterator<Item = u64>) -> u64 {
    values.fold(0x243F_6A88_85A3_08D3, |mut h, w| {
        h ^= w;
        h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^ (h >> 29)
    })
}

/// What the kernel stores for a stack unwound from a copy: the words the unwind read
/// (offsets from the stack pointer) and their hash. None when they cannot be checked
/// there (too many, or not 8-aligned words of the copy).
fn cache_entry(bp: u64, id: u32, deps: &Deps, copied: usize) -> Option<StkVal> {
    let words = &deps.words;
    if words.is_empty() || words.len() > STK_WORDS {
        return None;
    }
    let mut v = StkVal {
        bp,
        hash: stack_hash(words.iter().map(|w| w.1)),
        id,
        n: words.len() as u16,
        span: 0,
        off: [0; STK_WORDS],
        bp_any: (!deps.fp) as u32,
        agent: 0,
        hashes: [0; STK_MORE],
        ids: [0; STK_MORE],
        ways: 0,
    };
    let mut span = 0;
    for (i, &(off, _)) in words.iter().enumerate() {
        let end = off.checked_add(8)? as usize;
        if off % 8 != 0 || end > copied.min(SLICE_MAX) {
            return None;
        }
        v.off[i] = (off / 8) as u16;
        span = span.max(end);
    }
    v.span = u16::try_from(span).ok()?;
    Some(v)
}

/// A relative entry's key (bpf/dejavu.bpf.c, STK_REL): the stack pointer field is this
/// bit and the stack pointer's offset in its page.
const STK_REL: u64 = 1 << 63;
const STK_REL_MASK: u64 = 4095;
/// In a relative entry's `off`: the word held an address in the copied stack, hashed as its
/// distance from the stack pointer.
const STK_OFF_REL: u16 = 0x8000;

/// The key of the relative entry for a call at `k` (bpf/dejavu.bpf.c, `stk_check`).
fn rel_key(k: &StkKey) -> StkKey {
    StkKey {
        sp: STK_REL | (k.sp & STK_REL_MASK),
        ..*k
    }
}

/// `v` (made by `cache_entry` for a copy of `copied` bytes taken at `sp`) as a relative
/// entry: the same code on another stack (a goroutine's, another thread's) is the same
/// stack when every word it read holds the same, where a stack address counts as its
/// distance from the stack pointer (as does the frame pointer register). An unwind is the
/// same under such a move: it computes stack addresses from the stack pointer and the
/// saved frame pointers, and takes code addresses as they are (code unwound by its tables
/// alone, with no stack address among the words, is the same from any stack pointer).
fn rel_entry(v: &StkVal, deps: &Deps, sp: u64, copied: usize) -> StkVal {
    let in_stack = |w: u64| w >= sp && w - sp < copied as u64;
    let mut r = *v;
    for (i, &(_, w)) in deps.words.iter().enumerate().take(v.n as usize) {
        if in_stack(w) {
            r.off[i] |= STK_OFF_REL;
        }
    }
    r.hash = stack_hash(
        deps.words
            .iter()
            .map(|&(_, w)| if in_stack(w) { w - sp } else { w }),
    );
    if r.bp_any == 0 {
        r.bp = v.bp.wrapping_sub(sp);
    }
    r
}

/// Stacks unwound before they are stored in the kernel's cache at the latest.
const MAX_PENDING: usize = 256;

/// BPF_MAP_UPDATE_BATCH of `entries` into `map`: how many were stored, or how many were
/// before the error (errno) stopped it.
fn update_batch(
    map: &aya::maps::MapData,
    entries: &[(StkKey, StkVal)],
) -> Result<usize, (usize, i32)> {
    use std::os::fd::{AsFd, AsRawFd};
    let keys: Vec<StkKey> = entries.iter().map(|e| e.0).collect();
    let values: Vec<StkVal> = entries.iter().map(|e| e.1).collect();
    // The kernel reads `count` keys and values of the map's sizes and writes back `count`.
    let mut attr = kept::BatchAttr {
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count: u32::try_from(entries.len()).map_err(|_| (0, libc::EINVAL))?,
        map_fd: map.fd().as_fd().as_raw_fd() as u32,
        ..kept::BatchAttr::default()
    };
    let r = kept::sys_bpf(kept::BPF_MAP_UPDATE_BATCH, &mut attr);
    let n = (attr.count as usize).min(entries.len());
    match r {
        Ok(()) => Ok(entries.len()),
        Err(e) => Err((n, e.raw_os_error().unwrap_or(0))),
    }
}

/// Memory of unwound copies kept for the next ones (see `StackCache::spare`).
const MAX_SPARE_COPIES: usize = 64;

/// A copy of the top of a thread's stack, out of the ring buffer until its call comes.
struct HeldCopy {
    /// When the kernel sent it.
    ts: u64,
    mm: u64,
    ip: u64,
    sp: u64,
    bp: u64,
    /// On the main thread's stack (`event::Slice::main`).
    main: bool,
    bytes: Vec<u8>,
    /// While the batch it came in is decoded, the copy is that batch's item `at` (and
    /// `bytes` is empty): most calls come in the same batch as their copy, whose bytes
    /// are then unwound where they are. The others are copied out (`StackCache::keep`).
    at: Option<usize>,
}

/// The copies of stacks whose calls have not come yet, the kernel's stack cache, and
/// counters for `DEJAVU_NATIVE_STATS=1`.
struct StackCache {
    /// Copies read from the kernel's ring whose calls have not come yet, by `seq`.
    copies: FxHashMap<u64, HeldCopy>,
    gen: u32,
    /// Where the call being decoded was made, when its stack came as a copy.
    last: Option<StkKey>,
    /// Places an agent names, by handle; the last handle given.
    agent_keys: FxHashMap<u32, StkKey>,
    next_handle: u32,
    /// The read of the ring in which each key's entry was stored (and the entry: its
    /// stacks), and marked as an agent's.
    stored: FxHashMap<StkKey, (u32, StkVal)>,
    marked: FxHashMap<StkKey, u32>,
    map: HashMap<MapData, StkKey, StkVal>,
    /// The count of changes to `map` (the kernel's `stacks_gen`): each CPU keeps the
    /// entry it found last while the count is the same.
    map_changes: Changes,
    /// Changes the kernel could not be told of (`changed`).
    gen_failures: u64,
    deps: Deps,
    /// The memory of copies unwound, for the next ones (a copy is a few KiB: no
    /// allocation and free per copy).
    spare: Vec<Vec<u8>>,
    /// Stacks unwound, not yet stored in the kernel's cache (`flush`).
    pending: Vec<(StkKey, StkVal)>,
    /// DEJAVU_EBPF_DEBUG: each entry stored is printed (read once, not per stack).
    debug: bool,
    /// Whether the kernel stores them in one call (false once it said it cannot).
    batch_updates: bool,
    /// Stack copies unwound, calls whose stack the kernel found in the cache, entries
    /// stored.
    slices: u64,
    hits: u64,
    cached: u64,
    /// Calls that came with a short copy (the copies' ring was full).
    inline: u64,
    /// Calls sent without a stack from a place an agent names, and those of them the agent
    /// did not name after all.
    agent_skips: u64,
    agent_misses: u64,
    /// Calls the kernel half sent without a stack for a STICKY (CF_STACK_STICKY), and
    /// those of them user space did not name (none, unless the two halves disagree).
    sticky_skips: u64,
    sticky_misses: u64,
}

impl StackCache {
    /// Takes the copies of a batch, before its calls. A copy waits for its call (which
    /// comes in the same batch or a later one: the drainer reads the copies after the
    /// calls too, and may send a batch of copies alone) for COPY_WAIT_NS of the
    /// recording's time after the newest copy taken; one older than that lost its call
    /// (the calls' ring buffer was full) and would wait for ever.
    fn take(&mut self, copies: &Packed) {
        let newest = copies
            .iter()
            .filter_map(|c| event::header(c).map(|h| h.ts))
            .max()
            .unwrap_or(0);
        if !self.copies.is_empty() && newest > COPY_WAIT_NS {
            let cut = newest - COPY_WAIT_NS;
            self.copies.retain(|_, c| c.ts >= cut);
        }
        self.gen = self.gen.wrapping_add(1);
        for (i, item) in copies.iter().enumerate() {
            let (Some(sl), Some(h)) = (event::slice(item), event::header(item)) else {
                continue;
            };
            self.copies.insert(
                sl.seq,
                HeldCopy {
                    ts: h.ts,
                    mm: sl.mm,
                    ip: sl.ip,
                    sp: sl.sp,
                    bp: sl.bp,
                    main: sl.main,
                    bytes: Vec::new(),
                    at: Some(i),
                },
            );
        }
    }

    /// After the records of the batch whose copies were `copies`: the copies whose calls
    /// did not come in it are copied out of it (it goes back to the drainer).
    fn keep(&mut self, copies: &Packed) {
        for c in self.copies.values_mut() {
            let Some(i) = c.at.take() else { continue };
            if let Some(sl) = copies.get(i).and_then(event::slice) {
                let mut v = self.spare.pop().unwrap_or_default();
                v.clear();
                v.extend_from_slice(sl.bytes);
                c.bytes = v;
            }
        }
    }

    /// The native stack the kernel half reported with `flags` and `id` (a call's, or a
    /// fork's or an exec's): known from the cache, or unwound now from its copy.
    fn native<W: Write>(
        &mut self,
        feed: &mut Feed<W>,
        pid: i32,
        tid: i32,
        flags: u16,
        id: u64,
        batch: &Packed,
    ) -> NativeStack {
        if flags & event::CF_STACK_HIT != 0 {
            self.hits += 1;
            NativeStack::Known(StackId(id as u32))
        } else if flags & event::CF_STACK_SLICE != 0 {
            self.unwind(feed, pid, tid, id, batch)
        } else {
            NativeStack::None
        }
    }

    /// The stack of a call of `tid` (of `pid`) whose copy is `seq`: unwound now, and the
    /// answer stored in the kernel's cache. `batch`: the copies of the batch being decoded.
    fn unwind<W: Write>(
        &mut self,
        feed: &mut Feed<W>,
        pid: i32,
        tid: i32,
        seq: u64,
        batch: &Packed,
    ) -> NativeStack {
        // Sent before its call: taken with this batch or the one before.
        let Some(c) = self.copies.remove(&seq) else {
            return NativeStack::None;
        };
        let bytes = match c.at {
            Some(i) => batch
                .get(i)
                .and_then(event::slice)
                .map_or(&[][..], |sl| sl.bytes),
            None => &c.bytes[..],
        };
        self.slices += 1;
        let k = StkKey {
            mm: c.mm,
            ip: c.ip,
            sp: c.sp,
            tgid: pid as u32,
            pad: 0,
        };
        // Where the call was made, for `after_call` (an agent's place needs no words).
        self.last = Some(k);
        let regs = arch::SyscallRegs {
            ip: c.ip,
            sp: c.sp,
            fp: c.bp,
            ..arch::SyscallRegs::default()
        };
        let id = feed.stack_slice(pid, tid, &regs, bytes, &mut self.deps, true);
        // The same call from the same place, with the same words where this unwind read,
        // is the same stack: the kernel half then sends its id, not a copy.
        if let Some(v) = id.and_then(|id| cache_entry(c.bp, id.0, &self.deps, bytes.len())) {
            if self.debug {
                eprintln!(
                    "stack cache: ip {:#x} sp {:#x} bp_any {} words {:x?}",
                    k.ip, k.sp, v.bp_any, self.deps.words
                );
            }
            // And for the same code on another stack: the kernel asks it when the plain
            // entry does not answer (a goroutine's first call from a place, each thread's).
            // (Not on the main thread's stack: one stack, and the plain entry for it. Nor
            // from an unwind that stopped where the copy ended: on another stack whose
            // words agree, it may go on further.)
            let rel = (!c.main && !self.deps.cut)
                .then(|| (rel_key(&k), rel_entry(&v, &self.deps, c.sp, bytes.len())));
            // Once per key and read of the ring: the copies that came before the kernel
            // had the answer are the same stack again (each insert is a system call).
            // A key whose entry holds other stacks read from the same words keeps them
            // after it (`StkVal::with_older`): a helper called from two lines of a loop
            // took turns replacing its entry, and each call sent a copy.
            for (k, v) in std::iter::once((k, v)).chain(rel) {
                let v = match self.stored.get(&k) {
                    Some((gen, p)) if p.holds(v.hash) => {
                        if *gen == self.gen {
                            continue;
                        }
                        *p
                    }
                    Some((_, p)) => v.with_older(p),
                    None => v,
                };
                if self.stored.len() >= MAX_AGENT_KEYS {
                    self.stored.clear();
                }
                self.stored.insert(k, (self.gen, v));
                self.pending.push((k, v));
                if self.pending.len() >= MAX_PENDING {
                    self.flush();
                }
            }
        }
        if !c.bytes.is_empty() && self.spare.len() < MAX_SPARE_COPIES {
            self.spare.push(c.bytes);
        }
        NativeStack::Pending
    }

    /// Stores the stacks unwound since the last time in the kernel's cache: one `bpf`
    /// call for all of them (BPF_MAP_UPDATE_BATCH) where the kernel has it, instead of one
    /// per stack (a build stores ~12,000). Called at the end of each batch of records,
    /// every MAX_PENDING stacks, and before an agent's mark, so that the kernel sees the
    /// entries in the order they were decided.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut done = 0;
        if self.batch_updates {
            match update_batch(aya::maps::IterableMap::map(&self.map), &self.pending) {
                Ok(n) => done = n,
                Err((n, e)) => {
                    done = n;
                    // Not this kernel's (before 5.6), or not for this map: one at a time
                    // from now on. Anything else (no memory): the rest one at a time.
                    if matches!(e, libc::EINVAL | libc::ENOTSUP | libc::ENOTTY | 524) {
                        self.batch_updates = false;
                    }
                }
            }
        }
        self.cached += done as u64;
        for (k, v) in &self.pending[done.min(self.pending.len())..] {
            if self.map.insert(*k, *v, 0).is_ok() {
                self.cached += 1;
            }
        }
        self.pending.clear();
        self.changed();
    }

    /// Says to the kernel that `map` changed: the entries the CPUs kept are stale.
    fn changed(&mut self) {
        // A failure (none is expected of an array's update) leaves a CPU's kept entry in
        // use: one for a place whose entry was replaced or removed. Counted, said in the
        // native stats.
        if self.map_changes.bump().is_err() {
            self.gen_failures += 1;
        }
    }

    /// After a call was decoded: `named` says whether a language agent gave its site.
    /// The place of a call the agent named, whose stack was just unwound (or that went
    /// without one for its thread's STICKY: `place`, in process `pid`), needs no native
    /// stack from now on (the kernel then skips even its cache check, which reads a few
    /// KiB of a runtime's deep stack); a call from such a place the agent did not name
    /// (`flags` CF_STACK_AGENT, went without a stack) puts the place back to copies.
    fn after_call(
        &mut self,
        pid: u32,
        flags: u16,
        handle: u64,
        place: Option<(u64, u64, u64)>,
        named: bool,
    ) {
        let mut last = self.last.take();
        if flags & event::CF_STACK_STICKY != 0 {
            self.sticky_skips += 1;
            self.sticky_misses += u64::from(!named);
            // Its place, marked below as for a call whose stack was unwound: the next
            // calls from it go without a stack and without the kernel's path check.
            last = place.map(|(mm, ip, sp)| StkKey {
                mm,
                ip,
                sp,
                tgid: pid,
                pad: 0,
            });
        }
        if flags & event::CF_STACK_AGENT != 0 {
            self.agent_skips += 1;
            if !named {
                self.agent_misses += 1;
                if let Some(k) = self.agent_keys.remove(&(handle as u32)) {
                    // In the order they were decided: the stored stacks first.
                    self.flush();
                    let _ = self.map.remove(&k);
                    self.changed();
                }
            }
            return;
        }
        let (Some(k), true) = (last, named) else {
            return;
        };
        if self.marked.get(&k) == Some(&self.gen) {
            return;
        }
        if self.marked.len() >= MAX_AGENT_KEYS {
            self.marked.clear();
        }
        self.marked.insert(k, self.gen);
        if self.agent_keys.len() >= MAX_AGENT_KEYS {
            self.agent_keys.clear();
        }
        self.next_handle = self.next_handle.wrapping_add(1);
        let v = StkVal {
            bp: 0,
            hash: 0,
            id: self.next_handle,
            n: 0,
            span: 0,
            off: [0; STK_WORDS],
            bp_any: 1,
            agent: 1,
            hashes: [0; STK_MORE],
            ids: [0; STK_MORE],
            ways: 0,
        };
        self.flush();
        if self.map.insert(k, v, 0).is_ok() {
            self.agent_keys.insert(self.next_handle, k);
            self.changed();
        }
    }
}

/// How long a copy of a stack waits for its call (see `StackCache::take`): the two are
/// sent microseconds apart, but the drainer may hand them over in different batches.
const COPY_WAIT_NS: u64 = 100_000_000;

/// Places marked as named by an agent remembered at most (see `StackCache::after_call`);
/// a handle forgotten leaves its place marked until the kernel's LRU drops it.
const MAX_AGENT_KEYS: usize = 1 << 16;

struct Loaded {
    /// The programs, attached while this lives.
    _programs: Programs,
    /// The kept slot they are pinned in (kept.rs), held until the reader ends (`Reader`).
    slot: Option<kept::Slot>,
    /// Whether they were kept from an earlier recording, kept for the next, or neither.
    kept: Kept,
    /// Handed to the drainer when the reader starts.
    rings: Option<Rings>,
    traced: Traced,
    stacks: StackCache,
    ring_bytes: u32,
}

/// User space's count of its changes to a kernel map, in an entry of an array map the
/// kernel half reads before it trusts what a CPU kept of that map (`gens[1]` for
/// `traced`, `stacks_gen[0]` for `stacks`).
struct Changes {
    counter: Array<MapData, u64>,
    index: u32,
    count: u64,
}

impl Changes {
    fn new(counter: Array<MapData, u64>, index: u32) -> Self {
        Changes {
            counter,
            index,
            count: 0,
        }
    }

    /// Counts a change; call it after the change.
    fn bump(&mut self) -> Result<(), aya::maps::MapError> {
        self.count += 1;
        self.counter.set(self.index, self.count, 0)
    }
}

/// The kernel's set of followed processes (`traced`), and the count of user space's
/// changes to it that tells each CPU's kept answer it is stale (see `is_traced` in the
/// kernel half).
struct Traced {
    set: HashMap<MapData, u32, u8>,
    /// Interpreters awaiting their agent's hello (dejavu.bpf.c, `awaiting`).
    awaiting: HashMap<MapData, u32, u8>,
    changes: Changes,
}

/// `traced` value: followed.
const TRACED: u8 = 1;
/// `traced` bit: without native stacks (dejavu.bpf.c's TRACED_NO_STACKS).
const TRACED_NO_STACKS: u8 = 2;
/// `traced` bit: a program whose children's system programs are tools
/// (TRACED_CHILD_TOOLS).
const TRACED_CHILD_TOOLS: u8 = 4;
/// `gens` index counted by user space.
const GEN_USER: u32 = 1;

impl Traced {
    fn insert(&mut self, tgid: i32) -> Result<(), RecordError> {
        self.set
            .insert(tgid as u32, TRACED, 0)
            .and_then(|()| self.changes.bump())
            .map_err(|e| load_error("following the process", e))
    }

    /// What a followed process's program is, for its native stacks (see
    /// `Stacks::tool_exec`); best effort: a failure leaves it as the kernel set it.
    fn set_role(&mut self, tgid: i32, role: dejavu_capture::stacks::ExecRole) {
        use dejavu_capture::stacks::ExecRole;
        let v = match role {
            ExecRole::Program => TRACED | TRACED_CHILD_TOOLS,
            ExecRole::Other => TRACED,
            ExecRole::Tool => TRACED | TRACED_NO_STACKS,
        };
        // Only a process still followed (one that ended is not put back): BPF_EXIST.
        const BPF_EXIST: u64 = 2;
        if self.set.insert(tgid as u32, v, BPF_EXIST).is_ok() {
            let _ = self.changes.bump();
        }
    }

    /// No agent will come to `tgid` (see `Stacks::exec_start_up`): its calls take native
    /// stacks again. Nothing when it was not waiting (the kernel half did not take its
    /// program for an interpreter, or the hello came first) or has ended.
    fn no_agent(&mut self, tgid: i32) {
        if self.awaiting.remove(&(tgid as u32)).is_ok() {
            let _ = self.changes.bump();
        }
    }

    fn remove(&mut self, tgid: i32) {
        if self.set.remove(&(tgid as u32)).is_ok() {
            // Best effort, as the removal: a failure leaves the CPUs' answers as they were
            // for this process, which then goes on being recorded (as before the removal).
            let _ = self.changes.bump();
        }
    }
}

fn load_error(what: &str, e: impl std::fmt::Display) -> RecordError {
    let msg = e.to_string();
    let perm = msg.contains("Operation not permitted") || msg.contains("EPERM");
    unavailable(
        format!("{what}: {msg}"),
        if perm {
            "The kernel refused: run dejavu as root (or with CAP_BPF and CAP_PERFMON)."
        } else {
            "The kernel rejected dejavu's BPF program; please report this with `uname -r`."
        },
    )
}

/// Linux before 5.11 charges BPF maps to RLIMIT_MEMLOCK (5.11 moved them to the memory
/// cgroup), whose default (64 KiB or 8 MiB) is below what the maps need: the kernel then
/// refuses to create them (EPERM, "failed to create map"). As libbpf does, the limit is
/// raised for the load, and put back before the program starts, which inherits it.
struct MemlockRaised(Option<libc::rlimit>);

impl MemlockRaised {
    fn raise() -> MemlockRaised {
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit with valid pointers to rlimit structs.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut old) != 0 {
                return MemlockRaised(None);
            }
            let inf = libc::rlimit {
                rlim_cur: libc::RLIM_INFINITY,
                rlim_max: libc::RLIM_INFINITY,
            };
            if old.rlim_cur == libc::RLIM_INFINITY
                || libc::setrlimit(libc::RLIMIT_MEMLOCK, &inf) != 0
            {
                return MemlockRaised(None);
            }
        }
        MemlockRaised(Some(old))
    }
}

impl Drop for MemlockRaised {
    fn drop(&mut self) {
        if let Some(old) = self.0 {
            // SAFETY: as above. Lowering the limit again is always allowed.
            unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &old) };
        }
    }
}

/// Where the programs came from, for the recording's note (kept.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// Loaded by this recording, not kept (keeping off, or every slot in use).
    No,
    /// Loaded by this recording and kept for the next ones.
    Stored,
    /// Kept loaded by an earlier recording: no map created, no program verified.
    Reused,
}

/// The programs of a loaded object: loaded by this recording (with their maps), or
/// opened from a kept slot.
enum Programs {
    Loaded(Ebpf),
    Kept(Vec<(&'static str, BtfTracePoint)>),
}

/// Loading begun: on a thread of its own, the kernel's BTF prepared, the maps created and
/// the programs verified, while dejavu starts the program (`record`); what is left (the
/// settings, the program followed, attaching) is `attach`'s.
struct Pending {
    /// Taken by `attach`; joined when dropped before (a program that could not start).
    loading: Option<std::thread::JoinHandle<Loading>>,
    ring_bytes: u32,
    stacks: bool,
}

/// What the loading thread made of the object (`build`).
type Built = Result<Object, Refusal>;

/// The loading thread's work: the object prepared (kept for a build again; None when it
/// was opened from a kept slot), then built.
type Loading = Result<(Option<Prepared>, Built), RecordError>;

impl Drop for Pending {
    fn drop(&mut self) {
        // What the thread loaded is closed before `record` returns its error.
        if let Some(h) = self.loading.take() {
            let _ = h.join();
        }
    }
}

/// Begins loading (`Pending`). The CO-RE relocations and the BTF tracepoints' type ids are
/// taken from the cache when this kernel and this build made them before (core_cache.rs),
/// else computed from a parse of the kernel's BTF of our own. (aya's loader is made in
/// `build`: the vendored aya, vendor/aya/DEJAVU-PATCH.md, no longer parses the kernel's BTF
/// in `EbpfLoader::new`, which took 15-25 ms on a thread of its own.)
///
/// The maps are created without RLIMIT_MEMLOCK raised, so that a program started meanwhile
/// does not inherit a raised limit: Linux 5.11 and later do not charge BPF maps to it. An
/// older kernel refuses them then, and `attach` builds again with the limit raised, once
/// the program was started (`MemlockRaised`).
///
/// When a kept slot of this object holds its programs (kept.rs), they are opened and their
/// maps reset instead: nothing is created or verified. Else the object is loaded, and
/// kept in the slot for the next recordings when one is free.
fn begin_load(ring_bytes: u32, stacks: bool) -> Pending {
    Pending {
        loading: Some(std::thread::spawn(move || {
            let debug = std::env::var_os("DEJAVU_EBPF_DEBUG").is_some();
            let mut keep = kept::root()
                .and_then(|root| {
                    let key = kept::key(OBJECT, ring_bytes, stack_ring_bytes(ring_bytes, stacks));
                    kept::checkout(&root, key)
                        .map(|slot| (root, slot))
                        .ok_or_else(|| "every slot of this object is in use".to_string())
                })
                .inspect_err(|why| {
                    if debug {
                        eprintln!("dejavu: no kept programs: {why}");
                    }
                })
                .ok();
            if let Some((_, slot)) = &mut keep {
                if slot.ready {
                    match open_kept(slot, stacks) {
                        Ok(mut object) => {
                            object.slot = keep.map(|(_, s)| s);
                            object.kept = Kept::Reused;
                            // Attached here, while the program starts: attaching within an
                            // RCU grace period of the last recording's detach waits for it
                            // (docs/ebpf-backend.md, "Kept loaded"). Nothing is followed
                            // yet (`traced` is empty), so nothing is recorded before the
                            // settings and the program are in place (`attach`).
                            if let Programs::Kept(progs) = &mut object.programs {
                                for (prog, p) in progs {
                                    p.attach().map_err(|e| load_error(prog, e))?;
                                }
                            }
                            return Ok((None, Ok(object)));
                        }
                        // Whatever it was, loaded again and kept anew.
                        Err(why) => {
                            if debug {
                                eprintln!("dejavu: the kept programs were not used: {why}");
                            }
                            slot.clear();
                        }
                    }
                } else {
                    slot.clear();
                }
            }
            let prepared = prepare(
                core_cache::kernel_identity().as_deref(),
                || core_cache::FileBytes::open("/sys/kernel/btf/vmlinux"),
                core_cache::dir(),
            )?;
            let built = build(&prepared, ring_bytes, stacks, keep);
            Ok((Some(prepared), built))
        })),
        ring_bytes,
        stacks,
    }
}

/// The size of each ring buffer: `--buffer-size`, a page at least, up to a power of two.
fn ring_bytes(eopts: &Options) -> Result<u32, RecordError> {
    Ok(eopts
        .buffer_bytes
        .max(4096)
        .checked_next_power_of_two()
        .filter(|&n| n <= 1 << 31)
        .ok_or_else(|| unavailable("--buffer-size is too large", "At most 2 GiB."))? as u32)
}

/// The size of the copies' ring: twice `ring_bytes` (the calls' ring, a power of two; at
/// most 2 GiB), a page when stacks are off.
fn stack_ring_bytes(ring_bytes: u32, stacks: bool) -> u32 {
    if stacks {
        ring_bytes.saturating_mul(2).min(1 << 31)
    } else {
        4096
    }
}

/// Takes map `name` out of the object as a `T`.
fn take<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
    bpf: &mut Ebpf,
    name: &str,
) -> Result<T, RecordError> {
    T::try_from(
        bpf.take_map(name)
            .ok_or_else(|| load_error(name, "missing"))?,
    )
    .map_err(|e| load_error(name, e))
}

/// The object loaded: its maps created (those user space uses taken out) and its programs
/// verified, not attached.
struct Object {
    programs: Programs,
    slot: Option<kept::Slot>,
    kept: Kept,
    cfg: Array<MapData, Config>,
    traced: Traced,
    lost: PerCpuArray<MapData, u64>,
    stack_map: HashMap<MapData, StkKey, StkVal>,
    stack_map_gen: Array<MapData, u64>,
    events: RingBuf<MapData>,
    stackbuf: RingBuf<MapData>,
}

/// Why `build` failed.
enum Refusal {
    /// The kernel refused to create a map (EPERM): on a kernel before 5.11, RLIMIT_MEMLOCK
    /// (`begin_load`).
    Map(RecordError),
    Other(RecordError),
}

impl From<RecordError> for Refusal {
    fn from(e: RecordError) -> Self {
        Refusal::Other(e)
    }
}

/// Creates the maps of the object `prepared` made ready, and verifies its programs: the
/// calls' ring `ring_bytes`, the copies' ring as `stack_ring_bytes` says. The syscall filter
/// (`wanted`) is filled while the programs are verified; nothing is attached. With `keep`
/// (the slots' directory and a slot this recording holds), what was loaded is pinned in
/// the slot for the next recordings (kept.rs); a failure there only leaves it unkept.
fn build(
    prepared: &Prepared,
    ring_bytes: u32,
    stacks: bool,
    mut keep: Option<(std::path::PathBuf, kept::Slot)>,
) -> Built {
    let mut loader = EbpfLoader::new();
    loader
        .set_max_entries("events", ring_bytes)
        // Copies of stacks get a ring of their own, twice the size (a page when off): a
        // new place in a fast loop sends a copy per call until the reader has answered the
        // kernel's cache, 8 KiB each (docs/ebpf-backend.md, "Copies").
        .set_max_entries("stackbuf", stack_ring_bytes(ring_bytes, stacks));
    // The maps are created here; the programs are loaded (verified) below.
    let mut bpf = match &prepared.object {
        // Relocated here: aya's own relocation off.
        Some(object) => loader.btf(None).load(object.bytes()),
        // Whatever failed, aya relocates as it always did (and says what is wrong).
        None => loader.btf(prepared.btf.as_ref()).load(OBJECT),
    }
    .map_err(|e| {
        let refused = matches!(
            &e,
            aya::EbpfError::MapError(aya::maps::MapError::CreateError { io_error, .. })
                if io_error.raw_os_error() == Some(libc::EPERM)
        );
        let e = load_error("loading the BPF program", e);
        if refused {
            Refusal::Map(e)
        } else {
            Refusal::Other(e)
        }
    })?;
    if let Some((_, slot)) = &mut keep {
        if let Err(why) = bpf
            .maps()
            .try_for_each(|(name, map)| slot.pin_map(name, map))
        {
            kept_failed(&mut keep, &why);
        }
    }
    // The maps out of the object first, to be filled while the programs are verified
    // (their descriptors are already in the programs' instructions, and stay open).
    let mut wanted: Array<MapData, u8> = take(&mut bpf, "wanted")?;
    let cfg: Array<MapData, Config> = take(&mut bpf, "config")?;
    let traced = Traced {
        set: take(&mut bpf, "traced")?,
        awaiting: take(&mut bpf, "awaiting")?,
        changes: Changes::new(take(&mut bpf, "gens")?, GEN_USER),
    };
    let lost: PerCpuArray<MapData, u64> = take(&mut bpf, "lost")?;
    let stack_map: HashMap<MapData, StkKey, StkVal> = take(&mut bpf, "stacks")?;
    let stack_map_gen: Array<MapData, u64> = take(&mut bpf, "stacks_gen")?;
    let events = bpf
        .take_map("events")
        .ok_or_else(|| load_error("events", "missing"))?;
    let stackbuf = bpf
        .take_map("stackbuf")
        .ok_or_else(|| load_error("stackbuf", "missing"))?;
    let mut all: std::collections::HashMap<&str, &mut aya::programs::Program> =
        bpf.programs_mut().collect();
    let mut progs = Vec::with_capacity(PROGRAMS.len());
    for (i, (prog, tp)) in PROGRAMS.into_iter().enumerate() {
        let p: &mut BtfTracePoint = all
            .remove(prog)
            .ok_or_else(|| load_error(prog, "missing from the object"))?
            .try_into()
            .map_err(|e| load_error(prog, e))?;
        let id = prepared.ids.as_ref().and_then(|ids| ids.get(i).copied());
        progs.push((prog, (tp, id), p));
    }
    // The verifier takes most of the loading, most of it on sys_exit: that one is verified
    // on a thread of its own while the others are, and meanwhile the filter is filled and
    // the ring buffers mapped into dejavu (docs/ebpf-backend.md, "Start-up").
    let btf = prepared.btf.as_ref();
    let (loaded, rings) = std::thread::scope(|s| {
        let (exit, rest): (Vec<_>, Vec<_>) = progs
            .iter_mut()
            .partition(|(prog, _, _)| *prog == "on_sys_exit");
        let exit = exit
            .into_iter()
            .map(|(prog, at, p)| s.spawn(move || load_program(prog, *at, p, btf)));
        let exit: Vec<_> = exit.collect();
        let mut res: Vec<_> = rest
            .into_iter()
            .map(|(prog, at, p)| load_program(prog, *at, p, btf))
            .collect();
        let rings = (|| -> Result<(RingBuf<MapData>, RingBuf<MapData>), RecordError> {
            fill_wanted(&mut wanted, stacks)?;
            let events = RingBuf::try_from(events).map_err(|e| load_error("events", e))?;
            let stackbuf = RingBuf::try_from(stackbuf).map_err(|e| load_error("stackbuf", e))?;
            Ok((events, stackbuf))
        })();
        res.extend(exit.into_iter().map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(load_error("on_sys_exit", "the loading thread panicked")))
        }));
        (res, rings)
    });
    for r in loaded {
        r?;
    }
    let (events, stackbuf) = rings?;
    drop(progs);
    let mut kept_as = Kept::No;
    if let Some((root, slot)) = &mut keep {
        let pinned = (|| {
            for (name, prog) in bpf.programs_mut() {
                slot.pin_program(name, prog)?;
            }
            let last = bpf
                .program_mut(PROGRAMS[PROGRAMS.len() - 1].0)
                .ok_or_else(|| "no program to seal the slot with".to_string())?;
            slot.seal(last)
        })();
        match pinned {
            Ok(()) => {
                kept::evict(root, &slot.dir);
                kept_as = Kept::Stored;
            }
            Err(why) => kept_failed(&mut keep, &why),
        }
    }
    Ok(Object {
        programs: Programs::Loaded(bpf),
        slot: keep.map(|(_, s)| s),
        kept: kept_as,
        cfg,
        traced,
        lost,
        stack_map,
        stack_map_gen,
        events,
        stackbuf,
    })
}

/// Fills the syscall filter: the calls dejavu decodes (and munmap with stacks).
fn fill_wanted(wanted: &mut Array<MapData, u8>, stacks: bool) -> Result<(), RecordError> {
    for &(nr, _) in arch::table() {
        wanted
            .set(nr, 1u8, 0)
            .map_err(|e| load_error("filling the syscall filter", e))?;
    }
    if stacks {
        // For the trace's Unmap records (dejavu_capture::codemaps); no stack copied.
        wanted
            .set(arch::NR_MUNMAP as u32, 1u8, 0)
            .map_err(|e| load_error("filling the syscall filter", e))?;
    }
    Ok(())
}

/// Keeping the loaded object failed (`build`): the slot emptied and let go; the recording
/// goes on with what it loaded.
fn kept_failed(keep: &mut Option<(std::path::PathBuf, kept::Slot)>, why: &str) {
    if std::env::var_os("DEJAVU_EBPF_DEBUG").is_some() {
        eprintln!("dejavu: the loaded programs are not kept: {why}");
    }
    if let Some((_, mut slot)) = keep.take() {
        slot.clear();
    }
}

/// Opens the object kept in `slot` (kept.rs): every map reset to its state at creation,
/// the rings drained, the syscall filter filled; the programs not attached.
fn open_kept(slot: &kept::Slot, stacks: bool) -> Result<Object, String> {
    let mut maps = std::collections::HashMap::new();
    for name in slot.map_names() {
        let data = slot.open_map(&name)?;
        kept::reset(&data).map_err(|e| format!("resetting map {name}: {e}"))?;
        maps.insert(name, data);
    }
    let mut get = |name: &str| -> Result<aya::maps::Map, String> {
        kept::as_map(maps.remove(name).ok_or_else(|| format!("no map {name}"))?)
    };
    fn typed<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
        m: aya::maps::Map,
    ) -> Result<T, String> {
        T::try_from(m).map_err(|e| e.to_string())
    }
    let mut wanted: Array<MapData, u8> = typed(get("wanted")?)?;
    fill_wanted(&mut wanted, stacks).map_err(|e| e.to_string())?;
    let cfg = typed(get("config")?)?;
    let traced = Traced {
        set: typed(get("traced")?)?,
        awaiting: typed(get("awaiting")?)?,
        changes: Changes::new(typed(get("gens")?)?, GEN_USER),
    };
    let lost = typed(get("lost")?)?;
    let stack_map = typed(get("stacks")?)?;
    let stack_map_gen = typed(get("stacks_gen")?)?;
    let mut events: RingBuf<MapData> = typed(get("events")?)?;
    let mut stackbuf: RingBuf<MapData> = typed(get("stackbuf")?)?;
    // What a recording that ended without reading all left behind.
    for (name, ring) in [("events", &mut events), ("stackbuf", &mut stackbuf)] {
        let mut n = 0u64;
        while ring.next().is_some() {
            n += 1;
            if n > 1 << 20 {
                return Err(format!("draining {name}: no end"));
            }
        }
        if n > 0 && std::env::var_os("DEJAVU_EBPF_DEBUG").is_some() {
            eprintln!("dejavu: {n} records left in the kept ring {name}");
        }
    }
    let programs = PROGRAMS
        .iter()
        .map(|&(name, _)| Ok((name, slot.open_program(name)?)))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Object {
        programs: Programs::Kept(programs),
        slot: None,
        kept: Kept::No,
        cfg,
        traced,
        lost,
        stack_map,
        stack_map_gen,
        events,
        stackbuf,
    })
}

/// Finishes loading (`begin_load`): `config` in effect, `follow` (a program dejavu
/// started, stopped until it is resumed) followed, then the programs attached in order.
/// Nothing is traced before the program starts.
fn attach(
    mut pending: Pending,
    config: Config,
    follow: Option<(i32, dejavu_capture::stacks::ExecRole)>,
) -> Result<Loaded, RecordError> {
    let panicked = |_| load_error("loading the BPF program", "a loading thread panicked");
    let loading = pending
        .loading
        .take()
        .ok_or_else(|| load_error("loading the BPF program", "already attached"))?;
    let (prepared, built) = loading.join().map_err(panicked)??;
    let object = match (built, &prepared) {
        (Ok(o), _) => o,
        // Refused without RLIMIT_MEMLOCK raised (a kernel before 5.11, `begin_load`): again
        // with it raised, now that the program was started; put back before it runs (not
        // kept: kept programs are for kernels that do not charge maps to the limit).
        (Err(Refusal::Map(e)), Some(prepared)) => match MemlockRaised::raise() {
            MemlockRaised(None) => return Err(e),
            _memlock => match build(prepared, pending.ring_bytes, pending.stacks, None) {
                Ok(o) => o,
                Err(Refusal::Map(e) | Refusal::Other(e)) => return Err(e),
            },
        },
        (Err(Refusal::Map(e) | Refusal::Other(e)), _) => return Err(e),
    };
    let Object {
        mut programs,
        slot,
        kept,
        mut cfg,
        mut traced,
        lost,
        stack_map,
        stack_map_gen,
        events,
        stackbuf,
    } = object;
    cfg.set(0, config, 0).map_err(|e| load_error("config", e))?;
    if let Some((pid, role)) = follow {
        traced.insert(pid)?;
        if role == dejavu_capture::stacks::ExecRole::Program {
            traced.set_role(pid, role);
        }
    }
    match &mut programs {
        Programs::Loaded(bpf) => {
            for (prog, _) in PROGRAMS {
                let p: &mut BtfTracePoint = bpf
                    .program_mut(prog)
                    .ok_or_else(|| load_error(prog, "missing from the object"))?
                    .try_into()
                    .map_err(|e| load_error(prog, e))?;
                p.attach().map_err(|e| load_error(prog, e))?;
            }
        }
        // Attached by the loading thread (`begin_load`).
        Programs::Kept(_) => {}
    }
    // The kernel accepted every program: the relocations are worth keeping. A cache that
    // cannot be written costs the next run the relocation, nothing else.
    if let Some((dir, key, entry)) = prepared.as_ref().and_then(|p| p.store.as_ref()) {
        let _ = core_cache::write(dir, OBJECT, *key, entry);
    }
    Ok(Loaded {
        _programs: programs,
        slot,
        kept,
        rings: Some(Rings {
            events,
            stacks: stackbuf,
            lost,
            bytes: pending.ring_bytes,
        }),
        traced,
        stacks: StackCache {
            copies: FxHashMap::default(),
            gen: 0,
            last: None,
            agent_keys: FxHashMap::default(),
            next_handle: 0,
            stored: FxHashMap::default(),
            marked: FxHashMap::default(),
            agent_skips: 0,
            agent_misses: 0,
            sticky_skips: 0,
            sticky_misses: 0,
            map: stack_map,
            map_changes: Changes::new(stack_map_gen, 0),
            gen_failures: 0,
            deps: Deps::default(),
            spare: Vec::new(),
            pending: Vec::new(),
            debug: std::env::var_os("DEJAVU_EBPF_DEBUG").is_some(),
            batch_updates: true,
            slices: 0,
            hits: 0,
            cached: 0,
            inline: 0,
        },
        ring_bytes: pending.ring_bytes,
    })
}

/// Loads (verifies) program `prog` for its tracepoint `at`: (name, the kernel's type id of
/// its `btf_trace_` typedef when known), else found by name in `btf`.
fn load_program(
    prog: &str,
    at: (&str, Option<u32>),
    p: &mut BtfTracePoint,
    btf: Option<&Btf>,
) -> Result<(), RecordError> {
    match (at, btf) {
        ((_, Some(id)), _) => p.load_by_id(id),
        ((tp, None), Some(btf)) => p.load(tp, btf),
        ((tp, None), None) => {
            return Err(load_error(
                prog,
                format!("no type id for the tracepoint {tp}"),
            ))
        }
    }
    .map_err(|e| load_error(prog, e))
}

/// The BPF programs and the tracepoints they attach to, in the order they are attached.
const PROGRAMS: [(&str, &str); 6] = [
    ("on_sys_enter", "sys_enter"),
    ("on_sys_exit", "sys_exit"),
    ("on_fork", "sched_process_fork"),
    ("on_exec", "sched_process_exec"),
    ("on_exit", "sched_process_exit"),
    ("on_signal", "signal_generate"),
];

/// What loading the object needs of the kernel's BTF.
struct Prepared {
    /// The object with its CO-RE relocations for this kernel applied; None when they could
    /// not be computed here (aya then relocates `OBJECT` itself against `btf`).
    object: Option<core_cache::AlignedBytes>,
    /// The kernel's BTF, parsed: on a cache miss only (a hit needs none of it).
    btf: Option<Btf>,
    /// The kernel's type ids of the tracepoints (`PROGRAMS`' order) the programs are
    /// loaded for (`core_cache::usable_ids`); None when they could not be found here
    /// (each program then searches `btf` by name, as aya does).
    ids: Option<Vec<u32>>,
    /// Computed here, not read from the cache: where and under which key to keep it.
    store: Option<(std::path::PathBuf, u128, core_cache::Entry)>,
}

/// Prepares the load against the kernel's BTF (/sys/kernel/btf/vmlinux, as `read_btf`
/// gives it): from the cache in `dir` when it holds this kernel's and this build's entry,
/// else from a parse of it.
///
/// The cache key names the kernel by `identity` (`core_cache::kernel_identity`) when there
/// is one, else by the BTF's bytes; the BTF is read (`read_btf`) only when the cache cannot
/// answer, or to hash it.
fn prepare(
    identity: Option<&[u8]>,
    read_btf: impl FnOnce() -> std::io::Result<core_cache::FileBytes>,
    dir: Option<std::path::PathBuf>,
) -> Result<Prepared, RecordError> {
    let features = aya::features();
    let mut read_btf = Some(read_btf);
    let mut read = || {
        read_btf.take().map_or_else(
            || Err(load_error("reading the kernel's BTF", "read twice")),
            |f| f().map_err(|e| load_error("reading the kernel's BTF", e)),
        )
    };
    let mut data = None;
    let key = match identity {
        Some(id) => core_cache::key(OBJECT, id, &format!("{features:?}")),
        None => {
            let d = data.insert(read()?);
            core_cache::key(OBJECT, d.bytes(), &format!("{features:?}"))
        }
    };
    let tracepoints = PROGRAMS.map(|(_, tp)| tp);
    if let Some(entry) = dir
        .as_deref()
        .and_then(|d| core_cache::read(d, OBJECT, key))
    {
        if core_cache::usable_ids(&tracepoints, &entry.attach) {
            return Ok(Prepared {
                object: Some(core_cache::apply(OBJECT, &entry.patches)),
                btf: None,
                ids: Some(entry.attach),
                store: None,
            });
        }
    }
    let data = match data {
        Some(d) => d,
        None => read()?,
    };
    let btf = Btf::parse(data.bytes(), aya::Endianness::default())
        .map_err(|e| load_error("reading the kernel's BTF", e))?;
    let computed = features.btf().and_then(|f| {
        let patches = core_cache::relocate(OBJECT, &btf, f).ok()?;
        let attach = core_cache::attach_ids(&btf, &tracepoints).ok()?;
        Some(core_cache::Entry { attach, patches })
    });
    Ok(match computed {
        Some(entry) => Prepared {
            object: Some(core_cache::apply(OBJECT, &entry.patches)),
            ids: Some(entry.attach.clone()),
            btf: Some(btf),
            store: dir.map(|d| (d, key, entry)),
        },
        None => Prepared {
            object: None,
            ids: None,
            btf: Some(btf),
            store: None,
        },
    })
}

/// The kernel half's settings for this recording (bpf/dejavu.bpf.c, `struct config`).
fn config(opts: &RecordOptions, agent_fd: Option<i32>, ring_bytes: u32) -> Config {
    Config {
        payload_bytes: opts.payload_bytes.min(PAYLOAD_MAX),
        agent_fd: agent_fd.unwrap_or(-1),
        stacks: if opts.stacks.on() {
            std::env::var("DEJAVU_EBPF_STACK_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(STACK_BYTES)
                .clamp(64, SLICE_MAX as u32 - 8)
        } else {
            0
        },
        wake_bytes: ring_bytes / 4,
        open_identity: opts.open_identity as u32,
        // Only `on`: with `all` an interpreter's start-up keeps its stacks too.
        await_agent: (opts.stacks == dejavu_capture::StackMode::On && agent_fd.is_some()) as u32,
    }
}

/// Records `target` (see `crate::record`).
pub fn record<W: Write>(
    target: Target,
    opts: &RecordOptions,
    eopts: &Options,
    make_writer: impl FnOnce(&Meta) -> Result<TraceWriter<W>, TraceError>,
) -> Result<(Outcome, W), RecordError> {
    let payload = opts.payload_bytes.min(PAYLOAD_MAX);
    let (t0, cwd, mut meta) = dejavu_capture::start("ebpf", payload);
    meta.notes
        .push("eBPF: calls recorded in the kernel; the program never stops".into());
    // Caught from the start (loading takes a while): a SIGTERM meanwhile is forwarded to
    // the program once it runs, not the death of dejavu.
    let _sig = signals::install(matches!(target, Target::Command(_)));
    let stacks_on = opts.stacks.on();
    let ring_bytes = ring_bytes(eopts)?;
    let pending = begin_load(ring_bytes, stacks_on);
    let capped = opts.payload_bytes > PAYLOAD_MAX;
    let mut opts = opts.clone();
    opts.payload_bytes = payload;
    match target {
        Target::Command(argv) => {
            // The program is started (and stops itself before its exec) while the loading
            // threads work; it runs once the programs are attached and it is followed.
            let (path, command) = spawn::command(&argv)?;
            meta.command = command;
            let mut stacks = dejavu_capture::stacks::Stacks::new(opts.stacks);
            let (env, inherit) = stacks.program_env();
            let agent_at = inherit.as_ref().map(|i| i.at);
            let child = spawn::fork_child(&path, &argv, None, &env, inherit)?;
            let pid = child.pid;
            let started = (|| {
                let c = config(&opts, agent_at, ring_bytes);
                spawn::wait_stopped(&child, &path)?;
                // Followed before the programs are attached: it is stopped until resumed.
                let role = dejavu_capture::stacks::ExecRole::of_launched(
                    opts.stacks,
                    std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()),
                    &argv,
                );
                // The trace begun while the programs are verified (`begin_load`).
                let mut feed = Feed::new(make_writer(&meta)?, t0, opts.clone(), stacks);
                if capped {
                    feed.warn_once("payload", payload_capped());
                }
                feed.launched(pid, &cwd);
                let l = attach(pending, c, Some((pid, role)))?;
                Ok((l, feed))
            })();
            let (l, feed) = match started {
                Ok(lf) => lf,
                Err(e) => {
                    let _ = kernel::kill(pid, libc::SIGKILL);
                    let _ = kernel::wait_one(pid, libc::__WALL);
                    return Err(e);
                }
            };
            kernel::kill(pid, libc::SIGCONT).map_err(|e| RecordError::os("kill(SIGCONT)", e))?;
            let mut r = Reader::new(l, feed, Some(pid))?;
            r.run(Some(pid))?;
            let exit = r.root_status;
            let (out, w) = r.finish(false)?;
            if let Some((stage, errno)) = child.failure() {
                if stage == 2 && exit == Some(ExitStatus::Code(127)) {
                    return Err(spawn::exec_error(&path, errno));
                }
            }
            Ok((out, w))
        }
        Target::Attach(pids) => {
            for &p in &pids {
                if !std::path::Path::new(&format!("/proc/{p}")).exists() {
                    return Err(RecordError::NoSuchProcess(p));
                }
                if dejavu_capture::is_zombie(p) {
                    return Err(RecordError::Unattachable(
                        dejavu_capture::unattachable(p).unwrap_or_default(),
                    ));
                }
            }
            // Only what this user could ptrace (access.rs): the capabilities that load
            // the programs do not make other users' processes ours to record.
            if !crate::access::can_ptrace_anything() {
                for &p in &pids {
                    match crate::access::may_ptrace(p) {
                        Ok(true) => {}
                        Ok(false) => {
                            return Err(RecordError::Denied {
                                what: format!(
                                    "recording process {p} ({}) needs the permission to ptrace it, \
                                     which this user does not have (it runs as another user, or \
                                     runs a set-user-ID or otherwise privileged program)",
                                    dejavu_capture::proc_cmdline(p).join(" ")
                                ),
                                advice: "Record your own processes, or run dejavu as root \
                                         (sudo). CAP_BPF and CAP_PERFMON let dejavu load its \
                                         tracing programs; they do not let it record other \
                                         users' processes."
                                    .into(),
                            })
                        }
                        Err(_) => return Err(RecordError::NoSuchProcess(p)),
                    }
                }
            }
            meta.attached = pids.iter().map(|&p| p as u32).collect();
            meta.command = pids
                .first()
                .map(|&p| dejavu_capture::proc_cmdline(p))
                .unwrap_or_default();
            if let Some(&p) = pids.first() {
                if let Ok(c) = kernel::readlink(format!("/proc/{p}/cwd").as_bytes()) {
                    meta.cwd = String::from_utf8_lossy(&c).into_owned();
                }
            }
            let c = config(&opts, None, ring_bytes);
            let mut l = attach(pending, c, None)?;
            // Followed once every program is attached (a fork before the fork hook would
            // be missed); follow first, then list threads: a thread created in between is
            // reported by the fork hook, one listed twice is ignored.
            for &p in &pids {
                l.traced.insert(p)?;
            }
            let w = make_writer(&meta)?;
            let mut feed = Feed::new(
                w,
                t0,
                opts.clone(),
                dejavu_capture::stacks::Stacks::new(dejavu_capture::StackMode::Off),
            );
            if capped {
                feed.warn_once("payload", payload_capped());
            }
            for &p in &pids {
                feed.attached(p, &threads(p));
            }
            let mut r = Reader::new(l, feed, None)?;
            r.run(None)?;
            r.finish(true)
        }
    }
}

fn payload_capped() -> String {
    format!("the eBPF backend keeps at most {PAYLOAD_MAX} bytes of each write (--payload-bytes was larger)")
}

fn threads(pid: i32) -> Vec<i32> {
    let mut t: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    t.sort_unstable();
    t
}

struct Reader<W: Write> {
    l: Loaded,
    feed: Feed<W>,
    /// Takes the records out of the kernel's ring buffers as they come.
    drainer: Drainer,
    /// A pause per batch (DEJAVU_EBPF_READER_DELAY_MS).
    delay: Option<Duration>,
    lost_seen: u64,
    lost_per_cpu: Vec<u64>,
    /// Agent reports the ring buffer had no room for.
    lost_agent: u64,
    /// Calls sent without their native stack (the ring buffer was half full).
    lost_stacks: u64,
    malformed: u64,
    records: u64,
    root_status: Option<ExitStatus>,
    /// What a signal meant for the program does (forward, or stop recording).
    policy: signals::Policy,
    /// When the program exited, and whether what it left running was said.
    root_ended_at: Option<Instant>,
    orphans_said: bool,
    /// Processes this user could not ptrace (access.rs), left out of the trace.
    guard: Guard,
    /// The kept slot of the programs (kept.rs), let go last: after the drainer stopped
    /// reading its rings and the programs were detached.
    _slot: Option<kept::Slot>,
}

/// Processes that executed a program with privileges dejavu's user lacks: not recorded.
#[derive(Default)]
struct Guard {
    /// Checking at all (the user lacks CAP_SYS_PTRACE).
    on: bool,
    /// Their pids (and their children's).
    denied: std::collections::HashSet<i32>,
    /// To take out of the kernel's traced set.
    untrace: Vec<i32>,
}

impl<W: Write> Reader<W> {
    fn new(mut l: Loaded, feed: Feed<W>, root: Option<i32>) -> Result<Self, RecordError> {
        // The drainer watches the program's pidfd: its end is noticed at once, not at the
        // next look. (Linux 5.3+; without it, the reader's wait does.)
        let pidfd = root.and_then(|pid| {
            // SAFETY: pidfd_open on our own child; the descriptor is owned below.
            let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            (r >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(r as i32) })
        });
        let rings = l
            .rings
            .take()
            .ok_or_else(|| load_error("the ring buffers", "already taken"))?;
        // DEJAVU_EBPF_BACKLOG_MIB: the backlog's limit in MiB instead (tests and
        // docs/ebpf-backend.md).
        let limit = std::env::var("DEJAVU_EBPF_BACKLOG_MIB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .map_or_else(|| drainer::backlog_limit(l.ring_bytes), |m| m << 20);
        let drainer = Drainer::start(rings, pidfd, limit)
            .map_err(|e| RecordError::os("starting the drainer thread", e))?;
        let slot = l.slot.take();
        Ok(Reader {
            _slot: slot,
            l,
            feed,
            drainer,
            // DEJAVU_EBPF_READER_DELAY_MS: a reader that much slower per batch, as on a
            // loaded machine (tests: the drainer keeps what a slow reader has not read).
            delay: std::env::var("DEJAVU_EBPF_READER_DELAY_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis),
            lost_seen: 0,
            lost_per_cpu: Vec::new(),
            lost_agent: 0,
            lost_stacks: 0,
            malformed: 0,
            records: 0,
            root_status: None,
            policy: signals::Policy::default(),
            root_ended_at: None,
            orphans_said: false,
            guard: Guard {
                on: !crate::access::can_ptrace_anything(),
                ..Guard::default()
            },
        })
    }

    /// Reads until the program and everything it started has ended (`root`), or, when
    /// attached, until every traced process has ended or dejavu is interrupted.
    fn run(&mut self, root: Option<i32>) -> Result<(), RecordError> {
        // The reader works only when the program makes calls, and a starved one falls
        // behind (copies of stacks are not answered from the kernel's cache, the backlog
        // grows): it runs at a higher priority than the program (nice -10; this thread
        // only, set after the program was started, so the program does not inherit it).
        // Not permitted without CAP_SYS_NICE: it then stays as it is.
        // SAFETY: setpriority on the calling thread (PRIO_PROCESS with 0 is the thread).
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, READER_NICE) };
        let mut last_alive_check = Instant::now();
        loop {
            while let Some((sig, from_tty)) = signals::take() {
                match root {
                    // We started the program: it decides what the signal means (a
                    // terminal already delivered it to the program's process group),
                    // until a second request to stop soon after the first, or the first
                    // once the program exited, stops the recording: what runs goes on,
                    // unrecorded.
                    Some(pid) => {
                        let ended = self.root_status.is_some();
                        match self.policy.on_signal(sig, ended) {
                            signals::Action::Forward => {
                                if !from_tty && !ended {
                                    let _ = kernel::kill(pid, sig);
                                }
                            }
                            signals::Action::Stop => {
                                self.drain();
                                let left = dejavu_capture::process_names(&self.feed.processes());
                                eprintln!(
                                    "dejavu: {}: stopped recording; {} running, unrecorded",
                                    if ended {
                                        dejavu_trace::names::signal_label(sig).into_owned()
                                    } else {
                                        format!(
                                            "a second {} within {} s",
                                            dejavu_trace::names::signal_label(sig),
                                            signals::SECOND_SIGNAL.as_secs()
                                        )
                                    },
                                    if left.is_empty() {
                                        "nothing was left".to_string()
                                    } else {
                                        format!("left {}", left.join(", "))
                                    }
                                );
                                if !ended {
                                    self.feed.set_stopped_by(sig);
                                }
                                return Ok(());
                            }
                        }
                    }
                    // Attached: stop recording; the processes go on untouched.
                    None => {
                        self.drain();
                        return Ok(());
                    }
                }
            }
            if let Some(b) = self.drainer.next(POLL) {
                self.process(b);
            }
            self.feed.tick();
            if let (Some(t), false) = (self.root_ended_at, self.orphans_said) {
                if t.elapsed() >= Duration::from_secs(1) && self.feed.tasks() > 0 {
                    self.orphans_said = true;
                    let left = dejavu_capture::process_names(&self.feed.processes());
                    eprintln!(
                        "dejavu: the program exited ({}) and left running: {}. Recording goes \
                         on until they end; Ctrl-C (or SIGTERM) stops it and leaves them \
                         running, unrecorded",
                        self.root_status
                            .map_or_else(String::new, |e| dejavu_capture::exit_text(&e)),
                        left.join(", ")
                    );
                }
            }
            if let (Some(pid), None) = (root, self.root_status) {
                // Also without a pidfd (and so without the drainer's word), in case.
                // WNOHANG answers 0 while the program runs (a zero status that would
                // read as "exited with 0").
                if let Ok((who, st)) = kernel::wait_one(pid, libc::WNOHANG | libc::__WALL) {
                    if who == pid && (libc::WIFEXITED(st) || libc::WIFSIGNALED(st)) {
                        let s = if libc::WIFEXITED(st) {
                            ExitStatus::Code(libc::WEXITSTATUS(st))
                        } else {
                            ExitStatus::Signal {
                                signal: libc::WTERMSIG(st),
                                core: libc::WCOREDUMP(st),
                            }
                        };
                        self.root_status = Some(s);
                        self.root_ended_at = Some(Instant::now());
                        // Its last records were written before it could be reaped.
                        self.drain();
                    }
                }
            }
            let done = root.is_none() || self.root_status.is_some();
            if done && self.feed.tasks() == 0 {
                return Ok(());
            }
            if done && last_alive_check.elapsed() >= Duration::from_millis(200) {
                // Tasks whose end was lost with a full buffer would keep us waiting. A task
                // leaves /proc after its end is in the ring buffer: read that first, and
                // forget only the tasks whose end really is missing.
                last_alive_check = Instant::now();
                let gone = self.feed.vanished();
                if !gone.is_empty() {
                    self.drain();
                    if self.feed.forget(&gone) > 0 && self.feed.tasks() == 0 {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Everything the kernel has written by now, decoded.
    fn drain(&mut self) {
        let mut got = Vec::new();
        self.drainer.drain(|b| got.push(b));
        for b in got {
            self.process(b);
        }
    }

    /// Decodes one batch of records: its copies of stacks first (each was sent before its
    /// call), then the records, then the kernel's counts of what did not fit.
    fn process(&mut self, b: Batch) {
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        self.l.stacks.take(&b.copies);
        for rec in b.records.iter() {
            self.records += 1;
            if !handle(
                &mut self.feed,
                &mut self.l.stacks,
                &mut self.guard,
                &b.copies,
                rec,
            ) {
                if std::env::var_os("DEJAVU_EBPF_DEBUG").is_some() {
                    eprintln!("malformed: {:02x?}", &rec[..rec.len().min(400)]);
                }
                self.malformed += 1;
            }
        }
        self.l.stacks.keep(&b.copies);
        self.l.stacks.flush();
        for pid in self.guard.untrace.drain(..) {
            self.l.traced.remove(pid);
        }
        for (pid, role) in self.feed.take_roles() {
            self.l.traced.set_role(pid, role);
        }
        for pid in self.feed.take_no_agent() {
            self.l.traced.no_agent(pid);
        }
        if let Some(lost) = &b.lost {
            // events: the program's (written as Lost records); agent: the agents' reports,
            // which are not events of the program (their calls keep native stacks).
            let total: u64 = lost.events.iter().sum();
            if total > self.lost_seen {
                self.feed.lost(lost.at, total - self.lost_seen);
                self.lost_seen = total;
            }
            self.lost_per_cpu.clone_from(&lost.events);
            self.lost_agent = lost.agent;
            self.lost_stacks = lost.stacks;
        }
        self.drainer.done(b);
    }

    fn finish(mut self, detached: bool) -> Result<(Outcome, W), RecordError> {
        let mut got = Vec::new();
        self.drainer.stop(|b| got.push(b));
        for b in got {
            self.process(b);
        }
        let peak = self.drainer.peak();
        if peak > self.l.ring_bytes as usize {
            // Not lost, later: said with the recording's notes (`record -v`).
            self.feed.note(format!(
                "the reader fell behind the program: up to {} MiB of records waited in memory \
                 (the ring buffer holds {} MiB)",
                peak.div_ceil(1 << 20),
                self.l.ring_bytes >> 20
            ));
        }
        if self.drainer.times_full() > 0 {
            self.feed.warn_once(
                "ebpf-backlog",
                format!(
                    "the reader fell {} MiB behind the program, the most dejavu keeps in \
                     memory: records past it waited in the kernel's ring buffer (what did \
                     not fit there is counted as lost)",
                    self.drainer.limit() >> 20
                ),
            );
        }
        if let Some(st) = self.root_status {
            self.feed.set_exit(st);
        }
        if self.lost_seen > 0 {
            let cpus: Vec<String> = self
                .lost_per_cpu
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, n)| format!("cpu{i}: {n}"))
                .collect();
            self.feed.warn_once(
                "ebpf-lost",
                format!(
                    "{} records were lost because the kernel's ring buffer was full ({}); \
                     a larger --buffer-size keeps them",
                    self.lost_seen,
                    cpus.join(", ")
                ),
            );
        }
        if self.lost_agent > 0 {
            self.feed.warn_once(
                "ebpf-lost-agent",
                format!(
                    "{} reports of the language agents were lost because the kernel's ring \
                     buffer was full (no call of the program was: the calls they would have \
                     named keep native stacks); a larger --buffer-size keeps them",
                    self.lost_agent
                ),
            );
        }
        if self.lost_stacks > 0 {
            // Not lost: shorter (the innermost frames, which name the call site, are
            // there). Said with the recording's other notes (`record -v`), not as a warning.
            let msg = format!(
                "{} calls were recorded with a short native stack (the frames in the first \
                 {INLINE_STACK} bytes of the stack, which name the call site): the ring \
                 buffer for copies of stacks was full; a larger --buffer-size keeps them whole",
                self.lost_stacks
            );
            self.feed.note(msg);
        }
        if self.malformed > 0 {
            self.feed.warn_once(
                "ebpf-malformed",
                format!(
                    "{} kernel records could not be parsed and were skipped",
                    self.malformed
                ),
            );
        }
        if self.feed.unknown_tasks > 0 {
            self.feed.note(format!(
                "{} records came from tasks whose start was not seen",
                self.feed.unknown_tasks
            ));
        }
        self.feed.note(format!(
            "eBPF: {} kernel records, ring buffer {} KiB, {} lost; {}",
            self.records,
            self.l.ring_bytes / 1024,
            self.lost_seen,
            match self.l.kept {
                Kept::No => "programs loaded",
                Kept::Stored => "programs loaded and kept for the next recordings",
                Kept::Reused => "programs kept loaded by an earlier recording",
            }
        ));
        if std::env::var_os("DEJAVU_NATIVE_STATS").is_some() {
            let c = &self.l.stacks;
            eprintln!(
                "dejavu: eBPF stacks: {} copies unwound, {} cached in the kernel, {} calls \
                 answered from that cache, {} with a short copy, {} left to the agents \
                 ({} of them not named: their place copies again), {} to an agent's \
                 STICKY ({} of them not named); {} batches, at most {} KiB waited for the \
                 reader{}",
                c.slices,
                c.cached,
                c.hits,
                c.inline,
                c.agent_skips,
                c.agent_misses,
                c.sticky_skips,
                c.sticky_misses,
                self.drainer.batches(),
                peak.div_ceil(1024),
                if c.gen_failures > 0 {
                    format!(
                        "; {} changes of the cache not told to the CPUs' kept entries",
                        c.gen_failures
                    )
                } else {
                    String::new()
                }
            );
        }
        // Detach the programs before the trace is closed.
        drop(self.l);
        Ok(self.feed.finish(detached))
    }
}

/// Feeds one kernel record to the decoder; false when it is malformed.
fn handle<W: Write>(
    feed: &mut Feed<W>,
    stacks: &mut StackCache,
    guard: &mut Guard,
    copies: &Packed,
    b: &[u8],
) -> bool {
    let Some(h) = event::header(b) else {
        return false;
    };
    // A process this user could not ptrace: only its tree's shape (forks, exits) is kept,
    // so the recording knows when it ends; its children are left out too.
    let denied = guard.on && guard.denied.contains(&h.pid);
    if denied && h.kind != event::EV_FORK && h.kind != event::EV_EXIT {
        return true;
    }
    match h.kind {
        event::EV_CALL => {
            let Some((c, inline)) = event::call(b, feed.snapshot()) else {
                return false;
            };
            let native = if c.flags & (event::CF_STACK_HIT | event::CF_STACK_SLICE) != 0 {
                stacks.native(feed, h.pid, h.tid, c.flags, c.stack_id, copies)
            } else if let Some(sl) = inline {
                stacks.inline += 1;
                let regs = arch::SyscallRegs {
                    ip: sl.ip,
                    sp: sl.sp,
                    fp: sl.bp,
                    ..arch::SyscallRegs::default()
                };
                // A short copy: unwound, never remembered (a full one would go further).
                feed.stack_slice(h.pid, h.tid, &regs, sl.bytes, &mut stacks.deps, false);
                NativeStack::Pending
            } else {
                // Also CF_STACK_AGENT: the agent names it (`after_call` checks).
                NativeStack::None
            };
            feed.call(&RawCall {
                enter_ns: c.enter_ts,
                exit_ns: h.ts,
                pid: h.pid,
                tid: h.tid,
                nr: c.nr,
                args: c.args,
                ret: c.ret,
                unfinished: c.flags & CF_UNFINISHED != 0,
                no_enter: c.flags & event::CF_NO_ENTER != 0,
                native,
            });
            stacks.after_call(
                h.pid as u32,
                c.flags,
                c.stack_id,
                c.place,
                feed.named_by_agent(),
            );
        }
        event::EV_FORK => {
            let Some(f) = event::fork(b) else {
                return false;
            };
            let (cpid, ctid, bits) = (f.child_pid, f.child_tid, f.bits);
            // A new process: its parent's stack in the clone (see `Stacks::spawned`).
            let native = stacks.native(feed, h.pid, h.tid, f.sflags, f.stack_id, copies);
            stacks.last = None;
            if denied && bits & 1 == 0 {
                guard.denied.insert(cpid);
                guard.untrace.push(cpid);
            }
            feed.fork(
                h.ts,
                h.tid,
                ctid,
                NewTask {
                    thread: bits & 1 != 0,
                    files: bits & 2 != 0,
                    fs: bits & 4 != 0,
                    vm: bits & 8 != 0,
                    same_stack: bits & 16 != 0,
                },
                native,
            );
        }
        event::EV_EXEC => {
            let Some(x) = event::exec(b) else {
                return false;
            };
            let (old, fname, argv) = (x.old, x.fname, x.argv);
            let image = (x.at_phdr != 0).then_some((x.at_phdr, x.at_base));
            // The execve's stack, taken at its entry: unwound now, with the old program's
            // code, before the exec forgets it.
            let native = stacks.native(feed, h.pid, old, x.sflags, x.stack_id, copies);
            stacks.last = None;
            if x.truncated {
                let mut v = argv.strip_suffix(b"\0").unwrap_or(argv).to_vec();
                v.extend_from_slice(b"\0...");
                feed.exec(h.ts, h.tid, old, fname, &v, image, native, x.awaiting);
            } else {
                feed.exec(h.ts, h.tid, old, fname, argv, image, native, x.awaiting);
            }
            if guard.on {
                // The kernel's answer while the process lives; else the file's bits.
                use std::os::unix::ffi::OsStrExt;
                let path = std::path::Path::new(std::ffi::OsStr::from_bytes(fname));
                let denied = match crate::access::may_ptrace(h.pid) {
                    Ok(ok) => !ok,
                    Err(_) => crate::access::privileged_file(path),
                };
                if denied {
                    guard.denied.insert(h.pid);
                    guard.untrace.push(h.pid);
                    let msg = format!(
                        "process {} executed {}, which runs with privileges this user does \
                         not have (set-user-ID, set-group-ID or file capabilities): it and what \
                         it starts are not recorded (dejavu records only what its user could \
                         ptrace)",
                        h.pid,
                        path.display()
                    );
                    eprintln!("dejavu: {msg}");
                    feed.warn_once("privileged-exec", msg);
                }
            }
        }
        event::EV_EXIT => {
            let Some((code, _group_dead)) = event::exit(b) else {
                return false;
            };
            feed.exit(h.ts, h.tid, code);
        }
        event::EV_SIGNAL => {
            let Some(sig) = event::signal(b) else {
                return false;
            };
            feed.signal(h.ts, h.pid, h.tid, sig);
        }
        event::EV_AGENT => {
            let Some(bytes) = event::agent(b) else {
                return false;
            };
            feed.agent(h.ts, bytes);
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Each function of the object (program or BPF-to-BPF subprogram): its section, its
    /// first instruction, how many, and its name.
    struct Func {
        section: object::SectionIndex,
        start: usize,
        len: usize,
        name: String,
    }

    /// The BPF stack a function uses, as the verifier counts it: the deepest slot below the
    /// frame pointer (r10) it reads, writes or passes a pointer to.
    fn stack_depth(insns: &[[u8; 8]]) -> u64 {
        let mut depth = 0i64;
        let mut fp_copy = [false; 11];
        for i in insns {
            let (code, dst, src) = (i[0], i[1] & 0xf, i[1] >> 4);
            let off = i16::from_le_bytes([i[2], i[3]]) as i64;
            let imm = i32::from_le_bytes([i[4], i[5], i[6], i[7]]) as i64;
            let class = code & 0x07;
            // *(size *)(r10 + off) = ..., or ... = *(size *)(r10 + off).
            if (matches!(class, 0x02 | 0x03) && dst == 10) || (class == 0x01 && src == 10) {
                depth = depth.max(-off);
            }
            // rX = r10, then rX += -K: a pointer to a slot (a helper's or a call's argument).
            if code == 0xbf && src == 10 && (dst as usize) < 11 {
                fp_copy[dst as usize] = true;
                continue;
            }
            if code == 0x07 && (dst as usize) < 11 && fp_copy[dst as usize] {
                depth = depth.max(-imm);
            }
            if (dst as usize) < 11 && class != 0x02 && class != 0x03 && class != 0x05 {
                fp_copy[dst as usize] = false;
            }
        }
        depth.max(0) as u64
    }

    /// Linux 6.1 refused the last stop's `sys_exit` ("combined stack size of 5 calls is
    /// 544. Too large"): the BPF stack of a chain of BPF-to-BPF calls may not pass 512
    /// bytes, and kernels before 6.x's rewrite count every frame rounded up to 32 bytes, at
    /// least 32 (`check_max_stack_depth`); Linux 6.18, where the tests run, says nothing.
    /// Every chain from every program, counted that way from the object's instructions
    /// (the stack each function uses, its pseudo calls, and the relocations of calls into
    /// .text), stays within 512 (docs/ebpf-backend.md, after its requirements).
    #[test]
    fn every_chain_of_bpf_calls_fits_the_stack_as_linux_6_1_counts_it() {
        use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};
        let obj = object::File::parse(OBJECT).unwrap();
        let code = |s: &object::Section| -> Vec<[u8; 8]> {
            s.data()
                .unwrap()
                .chunks_exact(8)
                .map(|c| c.try_into().unwrap())
                .collect()
        };
        let mut funcs: Vec<Func> = obj
            .symbols()
            .filter(|sym| sym.kind() == object::SymbolKind::Text && sym.size() > 0)
            .filter_map(|sym| {
                Some(Func {
                    section: sym.section_index()?,
                    start: sym.address() as usize / 8,
                    len: sym.size() as usize / 8,
                    name: sym.name().ok()?.to_string(),
                })
            })
            .collect();
        funcs.sort_by_key(|f| (f.section.0, f.start));
        let at = |sec: object::SectionIndex, insn: usize| {
            funcs
                .iter()
                .position(|f| f.section == sec && f.start <= insn && insn < f.start + f.len)
        };
        let mut depth = vec![0u64; funcs.len()];
        let mut calls: Vec<Vec<usize>> = vec![Vec::new(); funcs.len()];
        for sec in obj.sections() {
            let insns = code(&sec);
            if insns.is_empty() || sec.kind() != object::SectionKind::Text {
                continue;
            }
            let relocs: std::collections::HashMap<u64, RelocationTarget> = sec
                .relocations()
                .map(|(off, r)| (off, r.target()))
                .collect();
            for (fi, f) in funcs
                .iter()
                .enumerate()
                .filter(|(_, f)| f.section == sec.index())
            {
                depth[fi] = stack_depth(&insns[f.start..f.start + f.len]);
                for (k, i) in insns[f.start..f.start + f.len].iter().enumerate() {
                    // call, src_reg = BPF_PSEUDO_CALL: a BPF-to-BPF call.
                    if i[0] != 0x85 || i[1] >> 4 != 1 {
                        continue;
                    }
                    let idx = f.start + k;
                    let imm = i32::from_le_bytes([i[4], i[5], i[6], i[7]]) as i64;
                    let target = match relocs.get(&(idx as u64 * 8)) {
                        // Into another section (.text): the symbol's instruction + imm + 1.
                        Some(RelocationTarget::Symbol(si)) => {
                            let sym = obj.symbol_by_index(*si).unwrap();
                            let sec = sym.section_index().unwrap();
                            at(sec, (sym.address() as i64 / 8 + imm + 1) as usize)
                        }
                        _ => at(sec.index(), (idx as i64 + imm + 1) as usize),
                    };
                    calls[fi].push(target.unwrap_or_else(|| panic!("{}: a call nowhere", f.name)));
                }
            }
        }
        fn deepest(f: usize, depth: &[u64], calls: &[Vec<usize>], seen: &mut Vec<usize>) -> u64 {
            assert!(!seen.contains(&f), "a recursive BPF call");
            seen.push(f);
            let own = depth[f].max(1).div_ceil(32) * 32;
            let below = calls[f]
                .iter()
                .map(|&g| deepest(g, depth, calls, seen))
                .max()
                .unwrap_or(0);
            seen.pop();
            own + below
        }
        let mut programs = 0;
        for (fi, f) in funcs.iter().enumerate() {
            let sec = obj.section_by_index(f.section).unwrap();
            if !sec.name().unwrap().starts_with("tp_btf/") {
                continue;
            }
            programs += 1;
            let total = deepest(fi, &depth, &calls, &mut Vec::new());
            assert!(
                total <= 512,
                "{}: its deepest chain of calls uses {total} bytes of BPF stack as Linux 6.1 \
                 counts it (512 at most)",
                f.name
            );
        }
        assert_eq!(programs, PROGRAMS.len());
    }

    #[test]
    fn the_copies_ring_is_twice_the_calls_ring_and_a_page_without_stacks() {
        assert_eq!(stack_ring_bytes(4 << 20, true), 8 << 20);
        assert_eq!(stack_ring_bytes(4 << 20, false), 4096);
        // At most 2 GiB, a power of two, however large --buffer-size is.
        assert_eq!(stack_ring_bytes(1 << 31, true), 1 << 31);
        assert_eq!(stack_ring_bytes(1 << 30, true), 1 << 31);
    }

    #[test]
    fn an_entry_keeps_the_other_stacks_of_its_place_newest_first() {
        let at = |w: u64, id: u32| {
            let deps = Deps {
                words: vec![(0, 0x401234), (64, w)],
                fp: false,
                cut: false,
            };
            cache_entry(0, id, &deps, 2048).unwrap()
        };
        let (a, b, c, d, e) = (at(1, 1), at(2, 2), at(3, 3), at(4, 4), at(5, 5));
        let ab = b.with_older(&a);
        assert_eq!((ab.id, ab.ways, ab.ids[0], ab.hashes[0]), (2, 1, 1, a.hash));
        assert!(ab.holds(a.hash) && ab.holds(b.hash) && !ab.holds(c.hash));
        // Newest first; the one seen again moves to the front, not twice.
        let bab = a.with_older(&ab);
        assert_eq!((bab.id, bab.ways, bab.ids[0]), (1, 1, 2));
        // At most STK_MORE more: the oldest goes.
        let full = e.with_older(&d.with_older(&c.with_older(&b.with_older(&a))));
        assert_eq!((full.id, full.ways, full.ids), (5, 3, [4, 3, 2]));
        assert!(!full.holds(a.hash));
        // Stacks read from other words replace the entry.
        let other = Deps {
            words: vec![(0, 0x401234), (72, 9)],
            fp: false,
            cut: false,
        };
        let o = cache_entry(0, 9, &other, 2048).unwrap().with_older(&ab);
        assert_eq!((o.id, o.ways), (9, 0));
    }

    #[test]
    fn a_cache_entry_names_the_words_the_unwind_depended_on() {
        let deps = Deps {
            words: vec![(0, 0x401234), (40, 0x7fff_0000_1000), (1000, 0x401500)],
            fp: false,
            cut: false,
        };
        let v = cache_entry(0x1234, 7, &deps, 2048).unwrap();
        assert_eq!((v.n, v.span, v.id, v.bp_any), (3, 1008, 7, 1));
        assert_eq!(&v.off[..3], &[0, 5, 125]);
        // The kernel half's hash: the same fold over the values, in the order of off[].
        let mut h: u64 = 0x243F_6A88_85A3_08D3;
        for w in [0x401234u64, 0x7fff_0000_1000, 0x401500] {
            h ^= w;
            h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            h ^= h >> 29;
        }
        assert_eq!(v.hash, h);
        let fp = Deps {
            fp: true,
            ..deps.clone()
        };
        assert_eq!(cache_entry(0x1234, 7, &fp, 2048).unwrap().bp_any, 0);
        // Not checkable in the kernel: nothing, a word past the copy, a misaligned word,
        // more words than the map holds.
        assert!(cache_entry(0, 7, &Deps::default(), 2048).is_none());
        assert!(cache_entry(0, 7, &deps, 1000).is_none());
        let odd = Deps {
            words: vec![(4, 1)],
            fp: false,
            cut: false,
        };
        assert!(cache_entry(0, 7, &odd, 2048).is_none());
        let many = Deps {
            words: (0..65).map(|i| (i * 8, i)).collect(),
            fp: false,
            cut: false,
        };
        assert!(cache_entry(0, 7, &many, 2048).is_none());
    }

    #[test]
    fn a_relative_entry_holds_stack_addresses_as_distances_from_the_stack_pointer() {
        // A copy of 2,048 bytes at sp: a return address, a saved frame pointer (an address
        // in the copy), another return address; the frame pointer register mattered.
        let sp = 0x7fff_0000_0000u64;
        let deps = Deps {
            words: vec![(0, 0x401234), (40, sp + 0x200), (48, 0x401500)],
            fp: true,
            cut: false,
        };
        let v = cache_entry(sp + 0x40, 7, &deps, 2048).unwrap();
        let r = rel_entry(&v, &deps, sp, 2048);
        assert_eq!((r.n, r.span, r.id, r.bp_any), (v.n, v.span, v.id, 0));
        assert_eq!(&r.off[..3], &[0, 5 | STK_OFF_REL, 6]);
        assert_eq!(r.bp, 0x40);
        // The kernel half's hash, over the words as stk_check reads them on another stack
        // (sp moved by 0x12345000): the return addresses as they are, the stack address
        // less the stack pointer.
        let other = sp - 0x1234_5000;
        let words = [0x401234u64, other + 0x200, 0x401500];
        let flags = r.off[..3].iter().map(|o| (o >> 15) as u64);
        let h = words
            .iter()
            .zip(flags)
            .fold(0x243F_6A88_85A3_08D3u64, |h, (&w, f)| {
                let mut h = h ^ w.wrapping_sub(other & 0u64.wrapping_sub(f));
                h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                h ^ (h >> 29)
            });
        assert_eq!(r.hash, h);
        // Its key: the stack pointer's offset in its page, marked.
        let k = StkKey {
            mm: 1,
            ip: 2,
            sp: sp + 0x1238,
            tgid: 3,
            pad: 0,
        };
        assert_eq!(rel_key(&k).sp, STK_REL | 0x238);
        // A word that is not a stack address (past the copy, below sp) is kept as it is.
        let far = Deps {
            words: vec![(0, sp + 4096)],
            fp: false,
            cut: false,
        };
        let v = cache_entry(0, 7, &far, 2048).unwrap();
        assert_eq!(rel_entry(&v, &far, sp, 2048).off[0], 0);
    }

    #[test]
    fn the_stack_records_layouts_match_the_kernel_halfs() {
        assert_eq!(std::mem::size_of::<StkKey>(), 32);
        assert_eq!(std::mem::size_of::<StkVal>(), 200);
    }

    /// A kept object opened again (kept.rs) is as a new load leaves it: every map a
    /// recording writes (each given a value its creation does not) reads as created, but
    /// the object's constants, and the syscall filter is filled as a load fills it. Needs
    /// root (a BPF filesystem of the test's own is mounted; skipped without).
    #[test]
    fn a_kept_object_is_opened_with_every_map_as_new() {
        // Root and a BPF filesystem of the test's own (the machine's is not touched).
        let tmp = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(tmp.path())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("skipped: no BPF filesystem can be mounted here (not root?)");
            return;
        }
        struct Unmount<'a>(&'a std::path::Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount").arg(self.0).status();
            }
        }
        let _unmount = Unmount(tmp.path());
        let root = tmp.path().join("dejavu");
        std::fs::create_dir(&root).unwrap();
        let (ring, stacks) = (1 << 16, true);
        let key = kept::key(OBJECT, ring, stack_ring_bytes(ring, stacks));
        let slot = kept::checkout(&root, key).unwrap();
        let prepared = prepare(
            core_cache::kernel_identity().as_deref(),
            || core_cache::FileBytes::open("/sys/kernel/btf/vmlinux"),
            None,
        )
        .unwrap();
        let Ok(object) = build(&prepared, ring, stacks, Some((root.clone(), slot))) else {
            panic!("the object did not load")
        };
        assert_eq!(object.kept, Kept::Stored);
        // Every map a recording could leave changed, changed.
        let slot = object.slot.as_ref().unwrap();
        let names = slot.map_names();
        for want in [
            "traced", "stacks", "inflight", "sticky", "tcache", "gens", "dying",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{want} not kept: {names:?}"
            );
        }
        for name in &names {
            kept::dirty(&slot.open_map(name).unwrap()).unwrap();
            assert!(
                name.starts_with("_rodata")
                    || ["events", "stackbuf"].contains(&name.as_str())
                    || kept::as_new(&slot.open_map(name).unwrap()).is_err(),
                "{name} was not changed"
            );
        }
        drop(object);
        let slot = kept::checkout(&root, key).unwrap();
        assert!(slot.ready);
        let again = open_kept(&slot, stacks).unwrap();
        for name in slot.map_names().into_iter().filter(|n| n != "wanted") {
            kept::as_new(&slot.open_map(&name).unwrap())
                .unwrap_or_else(|e| panic!("kept map {name}: {e}"));
        }
        // The syscall filter: filled again, and only as a new load fills it.
        let wanted: Array<MapData, u8> =
            Array::try_from(kept::as_map(slot.open_map("wanted").unwrap()).unwrap()).unwrap();
        for nr in 0..wanted.len() {
            let want = arch::table().iter().any(|&(n, _)| n == nr)
                || (stacks && nr == arch::NR_MUNMAP as u32);
            assert_eq!(wanted.get(&nr, 0).unwrap(), want as u8, "syscall {nr}");
        }
        drop(again);
    }

    /// The relocations are computed on the first run, kept, read back on the next (the
    /// same bytes, the same tracepoint ids), and recomputed when the file is corrupt or was
    /// made for another kernel or build. Needs the kernel's BTF (skipped without it).
    #[test]
    fn relocations_are_kept_per_kernel_and_rebuilt_when_wrong() {
        let Ok(kernel) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            eprintln!("skipped: no /sys/kernel/btf/vmlinux");
            return;
        };
        let tracepoints = PROGRAMS.map(|(_, tp)| tp);
        let real = Btf::parse(&kernel, aya::Endianness::default()).unwrap();
        let ids = core_cache::attach_ids(&real, &tracepoints).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("dejavu");
        let btf = || Ok(core_cache::FileBytes::Read(kernel.clone()));
        let boot: &[u8] = b"boot 1";
        let first = prepare(Some(boot), btf, Some(dir.clone())).unwrap();
        let (d, key, entry) = first.store.clone().unwrap();
        assert_eq!(d, dir);
        assert!(
            !entry.patches.is_empty(),
            "the object has CO-RE relocations"
        );
        assert_eq!(entry.attach, ids);
        let object = first.object.as_ref().unwrap().bytes().to_vec();
        assert_ne!(object, OBJECT);
        // Nothing kept until the caller says the kernel took the programs.
        assert!(!dir.join(core_cache::file(OBJECT)).exists());
        core_cache::write(&dir, OBJECT, key, &entry).unwrap();

        let unread = || -> std::io::Result<core_cache::FileBytes> {
            panic!("a hit under a known identity reads no BTF")
        };
        let hit = prepare(Some(boot), unread, Some(dir.clone())).unwrap();
        assert!(hit.store.is_none(), "read from the cache");
        assert_eq!(hit.object.as_ref().unwrap().bytes(), object);
        assert_eq!(hit.ids.as_deref(), Some(ids.as_slice()));
        assert!(hit.btf.is_none(), "a hit parses no BTF");

        // A corrupt file: recomputed, the same bytes, to be written again.
        let path = dir.join(core_cache::file(OBJECT));
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n / 2] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let again = prepare(Some(boot), btf, Some(dir.clone())).unwrap();
        assert!(again.store.is_some(), "a corrupt entry is not used");
        assert_eq!(again.object.as_ref().unwrap().bytes(), object);

        // An entry made for another kernel (its BTF one byte different, or another boot):
        // a miss.
        let mut other = kernel.clone();
        let last = other.len() - 1;
        other[last] ^= 1;
        let features = format!("{:?}", aya::features());
        let other_key = core_cache::key(OBJECT, &other, &features);
        assert_ne!(other_key, key);
        let mut wrong = entry.clone();
        wrong.patches.pop();
        core_cache::write(&dir, OBJECT, other_key, &wrong).unwrap();
        let miss = prepare(None, btf, Some(dir.clone())).unwrap();
        assert!(miss.store.is_some(), "another kernel's entry is not used");
        assert_eq!(miss.object.as_ref().unwrap().bytes(), object);
        let (_, by_bytes, _) = miss.store.unwrap();
        core_cache::write(&dir, OBJECT, by_bytes, &entry).unwrap();
        let next_boot = prepare(Some(b"boot 2"), btf, Some(dir.clone())).unwrap();
        assert!(
            next_boot.store.is_some(),
            "another boot's entry is not used"
        );
        assert_ne!(next_boot.store.unwrap().1, key);

        // No cache directory: computed, nothing to keep.
        assert!(prepare(Some(boot), btf, None).unwrap().store.is_none());
    }
}
