//! Native stacks: unwinding the stopped thread's user stack at its syscall stop (DWARF CFI
//! from .eh_frame/.debug_frame, frame pointers where a function has no CFI) and naming
//! each frame (function, file, line) from the module's DWARF or symbol table.
//!
//! At a stop, `process_vm_readv` copies the top of the thread's stack (from the stack
//! pointer, at most [`STACK_BYTES`], never past the end of its mapping; 4 KiB first, more
//! only if the unwinder reads further); framehop unwinds that copy with the modules of
//! /proc/PID/maps. The list of return addresses is the key
//! of a per-process cache of stack ids: a loop that makes the same call from the same
//! place costs one copy and one unwind per call, and is symbolized once. Each distinct
//! code address is symbolized once per recording (cached by module and file offset).
//!
//! Caches: parsed modules are shared by every process of the recording, keyed by file
//! identity (device, inode, size, mtime); each process has its list of mappings, re-read
//! when the stack pointer or a return address falls outside it (a new thread's stack, a
//! dlopen), and dropped at exec and exit.

mod elf;
mod gopcln;
mod layout;
pub use layout::build_id;

/// A code mapping: (start, end, file offset, path).
pub type CodeRange = (u64, u64, u64, Vec<u8>);
mod maps;
mod names;

use crate::arch::SyscallRegs;
use crate::os::{self, Tid};
use dejavu_trace::{Frame, FrameKind, StackId, StrId, TraceWriter};
use elf::{Bytes, ElfModule, FileKey, SourceFrame};
use framehop::{FrameAddress, Unwinder};
use rustc_hash::{FxHashMap, FxHashSet};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Bytes of stack copied at most, from the stack pointer up. Deeper frames are not seen.
pub const STACK_BYTES: usize = 32 * 1024;
/// Return addresses followed at most.
pub const MAX_DEPTH: usize = 64;
/// Frames per stack at most, inlined frames included.
const MAX_FRAMES: usize = 128;
/// Distinct stacks remembered per process before the cache starts over (deep recursion
/// can make every stack distinct; memory stays bounded).
const MAX_CACHED_STACKS: usize = 1 << 16;
/// Shapes of stacks remembered (see `shape_of`) before the memory starts over.
const MAX_SHAPES: usize = 1 << 16;
/// Mappings learned for one stack at most (see `Native::learn`).
const MAX_LEARNED: usize = 4;
/// Unknown pages remembered per process: an address that stays unknown after a re-read
/// of the maps (a garbage return address) does not cause another re-read.
const MAX_MISSING: usize = 4096;

type UnwinderN = framehop::UnwinderNative<Bytes, framehop::MayAllocateDuringUnwind>;
type CacheN = framehop::CacheNative<framehop::MayAllocateDuringUnwind>;

/// What an unwind from a stack copy depended on (see `Native::capture_slice`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Deps {
    /// The stack words (offset from the stack pointer, value) whose values decided it.
    pub words: Vec<(u64, u64)>,
    /// Whether the frame pointer register's value did.
    pub fp: bool,
    /// Whether the unwind went past the end of the copy (it stopped there, not where the
    /// stack ends: the same words on a stack that goes on further would unwind further).
    pub cut: bool,
}

/// An executable mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Code {
    start: u64,
    end: u64,
    offset: u64,
    /// Index into `Native::modules`; None for anonymous code (JIT), [vdso], or a file
    /// that could not be parsed.
    module: Option<u32>,
    /// File offset + delta = the address the module's tables use (see `svma_delta`).
    delta: Option<u64>,
    /// The mapping's path; empty for anonymous memory.
    path: Vec<u8>,
}

/// What is known about one process's address space.
struct Proc {
    maps: Vec<maps::Mapping>,
    code: Vec<Code>,
    unwinder: UnwinderN,
    /// Stack id by the list of code addresses (innermost first).
    stacks: FxHashMap<Box<[u64]>, StackId>,
    /// Pages (address >> 12) of addresses no mapping held after a re-read.
    missing: FxHashSet<u64>,
    /// Stacks unwound from copies, by instruction and stack pointer: what the unwind
    /// depended on, the frame pointer's value, and the stack.
    slices: FxHashMap<(u64, u64), (Deps, u64, StackId)>,
    /// Code addresses (as looked up) known to be in Go's `runtime.goexit`, the frame every
    /// goroutine's stack begins with: unwinding stops there (`is_goexit`).
    goexit: Vec<u64>,
}

/// Whether `function` is Go's `runtime.goexit`, the frame a goroutine's stack begins with
/// (its assembly symbol is `runtime.goexit.abi0`; a Go binary's DWARF says
/// `runtime.goexit`).
fn is_goexit(function: &str) -> bool {
    function
        .strip_prefix("runtime.goexit")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

impl Proc {
    fn code_at(&self, addr: u64) -> Option<&Code> {
        let i = self
            .code
            .partition_point(|c| c.start <= addr)
            .checked_sub(1)?;
        let c = &self.code[i];
        (addr < c.end).then_some(c)
    }
}

/// What the unwinds of one shape of stack depended on: whether the frame pointer register
/// did, and the offsets (from the stack pointer) of the tried words that did.
type ShapeDeps = (bool, Box<[u64]>);

/// Counters for `DEJAVU_NATIVE_STATS=1` (printed when the recording ends).
#[derive(Debug, Default)]
struct Stats {
    captures: u64,
    stack_hits: u64,
    /// Of those, copies of a place unwound before with the same words where that unwind
    /// read (`capture_slice`): not unwound again.
    slice_hits: u64,
    maps_reads: u64,
    /// Of those, layouts from exec and mmap (the process was gone).
    layouts: u64,
    symbolized: u64,
    /// Of those, named from an earlier recording's (names.rs).
    names_kept: u64,
    frames: u64,
    /// Unwinds of a copy again with some of its words replaced (`capture_slice`).
    trials: u64,
    /// The words those unwinds tried (one unwind each, tried alone).
    tried_words: u64,
    /// Copies whose stack had a shape seen before (no tries).
    shape_hits: u64,
    /// Copies of a stack through code of no file (JIT code): not tried, every word read
    /// kept.
    untried: u64,
    /// Processes that started with their parent's mappings (fork).
    inherited: u64,
    /// Mappings asked of the kernel one address at a time (PROCMAP_QUERY).
    queries: u64,
    modules: u64,
    bytes_read: u64,
    /// Time spent parsing modules and symbolizing sites (DWARF and symbol tables are
    /// loaded on a module's first symbolization, so that is in `symbolize_ns`).
    load_ns: u64,
    symbolize_ns: u64,
}

/// The copy of the top of one thread's stack, filled on demand up to its limit: most
/// unwinds need only the first few hundred bytes, so the first read is a small one.
struct StackCopy {
    pid: Tid,
    base: u64,
    buf: Vec<u8>,
    have: usize,
    limit: usize,
    reads: u64,
    /// The offsets (from `base`) of the words the unwinder read, and their values, when
    /// `log` is on: an unwind is a function of the registers and of these words.
    words: Vec<(u64, u64)>,
    log: bool,
    /// The unwinder asked for a word past what can be read (`Deps::cut`).
    past_end: bool,
}

/// First read of a stack copy (bytes); more, up to the limit, is read only if the
/// unwinder goes further.
const FIRST_READ: usize = 4 * 1024;

impl StackCopy {
    fn reset(&mut self, pid: Tid, sp: u64, limit: usize) {
        self.pid = pid;
        self.base = sp;
        self.have = 0;
        self.log = false;
        self.past_end = false;
        self.words.clear();
        self.limit = limit.min(STACK_BYTES);
        if self.buf.len() < self.limit {
            self.buf.resize(self.limit, 0);
        }
    }

    fn fill(&mut self, need: usize) {
        // Growing by 4x keeps deep stacks at two or three reads, and a shallow one at a
        // single small read (process_vm_readv costs about 1.4 us for 4 KiB, 4.3 us for
        // 32 KiB here).
        let want = need.max(FIRST_READ).max(self.have * 4).min(self.limit);
        if want <= self.have {
            return;
        }
        let n = os::read_mem(
            self.pid,
            self.base + self.have as u64,
            &mut self.buf[self.have..want],
        )
        .unwrap_or(0);
        self.reads += n as u64;
        self.have += n;
        if self.have < want {
            // Unreadable beyond this point: do not ask again.
            self.limit = self.have;
        }
    }

    fn read_u64(&mut self, addr: u64) -> Result<u64, ()> {
        let off = usize::try_from(addr.checked_sub(self.base).ok_or(())?).map_err(|_| ())?;
        let end = off.checked_add(8).ok_or(())?;
        if end > self.limit {
            self.past_end = true;
            return Err(());
        }
        if end > self.have {
            self.fill(end);
            if end > self.have {
                self.past_end = true;
                return Err(());
            }
        }
        let b = self.buf.get(off..end).ok_or(())?;
        let v = u64::from_ne_bytes(b.try_into().map_err(|_| ())?);
        if self.log {
            self.words.push((off as u64, v));
        }
        Ok(v)
    }

    /// A copy made elsewhere (`bytes` from `sp` up): nothing more can be read.
    fn preset(&mut self, sp: u64, bytes: &[u8]) {
        self.pid = 0;
        self.base = sp;
        let n = bytes.len().min(STACK_BYTES);
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        self.buf[..n].copy_from_slice(&bytes[..n]);
        self.have = n;
        self.limit = n;
        self.log = true;
        self.past_end = false;
        self.words.clear();
    }
}

/// The native unwinder and its caches.
pub struct Native {
    enabled: bool,
    modules: Vec<ElfModule>,
    by_key: FxHashMap<FileKey, Option<u32>>,
    procs: FxHashMap<Tid, Proc>,
    /// Code mappings by process as its exec and mmap calls made them (`layout`), for
    /// when /proc/PID/maps is gone with the process. Kept only where reported (eBPF).
    layouts: FxHashMap<Tid, Vec<maps::Mapping>>,
    layout_only: bool,
    cache: CacheN,
    /// What the unwinds of a shape of stack depended on (`shape_of`): the frame pointer
    /// register, and the offsets of the tried words that matter.
    shapes: FxHashMap<Box<[u64]>, ShapeDeps>,
    /// Frames by (module, file offset): each code address is named once.
    sites: FxHashMap<(u32, u64), Box<[Frame]>>,
    /// The sites (as `sites`) in Go's `runtime.goexit`.
    goexit_sites: FxHashSet<(u32, u64)>,
    stack: StackCopy,
    /// The last unwind ended at an address no mapping holds (garbage, or code mapped
    /// since): not a stack to remember by the words it read.
    incomplete: bool,
    addrs: Vec<u64>,
    frames: Vec<Frame>,
    source: Vec<SourceFrame>,
    /// Where the names of code addresses are kept between recordings (names.rs), and
    /// each module's kept names (by module index), opened at its first address to name.
    names_dir: Option<PathBuf>,
    names: FxHashMap<u32, Option<names::KeptNames>>,
    stats: Stats,
}

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Native")
            .field("enabled", &self.enabled)
            .field("modules", &self.modules.len())
            .field("procs", &self.procs.len())
            .field("sites", &self.sites.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        for kept in self.names.values_mut().flatten() {
            kept.save();
        }
        if self.stats.captures > 0 && std::env::var_os("DEJAVU_NATIVE_STATS").is_some() {
            let s = &self.stats;
            eprintln!(
                "dejavu: native stacks: {} captures, {} from the stack cache, {} maps reads \
                 ({} from exec and mmap; {} processes started with their parent's; {} addresses asked alone), {} modules ({:.1} ms), {} sites symbolized \
                 ({:.1} ms; {} of them named by an earlier recording), {} frames unwound, {} stack bytes read, {} unwinds to find \
                 what a copy's stack depended on ({} words tried; {} copies of a shape seen \
                 before; {} copies through JIT code, not tried); \
                 {} copies the same as one unwound before (not unwound again)",
                s.captures,
                s.stack_hits,
                s.maps_reads,
                s.layouts,
                s.inherited,
                s.queries,
                s.modules,
                s.load_ns as f64 / 1e6,
                s.symbolized,
                s.symbolize_ns as f64 / 1e6,
                s.names_kept,
                s.frames,
                s.bytes_read,
                s.trials,
                s.tried_words,
                s.shape_hits,
                s.untried,
                s.slice_hits
            );
        }
    }
}

/// The shape of an unwound stack, the same in every process that runs the same files
/// the same way: each frame by module and file offset, then the offsets (from the stack
/// pointer) of the words the unwind read (`words`, sorted), those that were tried
/// (`tried`, a sorted part of them) marked. None when a frame
/// is in code of no file (JIT code, [vdso]): such code may change under the same address.
fn shape_of(
    p: &Proc,
    addrs: &[u64],
    words: &[(u64, u64)],
    tried: &[(u64, u64)],
) -> Option<Box<[u64]>> {
    let mut k = Vec::with_capacity(addrs.len() + words.len() + 2);
    k.push(addrs.len() as u64);
    for &a in addrs {
        let c = p.code_at(a)?;
        let off = a - c.start + c.offset;
        if off >> 40 != 0 {
            return None;
        }
        k.push(u64::from(c.module?) << 40 | off);
    }
    k.push(words.len() as u64);
    k.extend(
        words
            .iter()
            .map(|w| w.0 << 1 | u64::from(tried.binary_search(w).is_ok())),
    );
    Some(k.into_boxed_slice())
}

#[cfg(target_arch = "x86_64")]
fn unwind_regs(r: &SyscallRegs) -> framehop::UnwindRegsNative {
    framehop::UnwindRegsNative::new(r.ip, r.sp, r.fp)
}

#[cfg(target_arch = "aarch64")]
fn unwind_regs(r: &SyscallRegs) -> framehop::UnwindRegsNative {
    // The link register is not among the registers the tracer passes: a leaf function
    // (every libc syscall wrapper) then ends the stack at its own frame.
    framehop::UnwindRegsNative::new(0, r.sp, r.fp)
}

impl Native {
    /// An unwinder; `enabled` false captures nothing.
    pub fn new(enabled: bool) -> Native {
        Native {
            enabled,
            modules: Vec::new(),
            by_key: FxHashMap::default(),
            procs: FxHashMap::default(),
            layouts: FxHashMap::default(),
            layout_only: std::env::var_os("DEJAVU_NATIVE_LAYOUT_ONLY").is_some(),
            cache: CacheN::new(),
            shapes: FxHashMap::default(),
            sites: FxHashMap::default(),
            goexit_sites: FxHashSet::default(),
            stack: StackCopy {
                pid: 0,
                base: 0,
                buf: Vec::new(),
                have: 0,
                limit: 0,
                reads: 0,
                words: Vec::new(),
                log: false,
                past_end: false,
            },
            incomplete: false,
            addrs: Vec::with_capacity(MAX_DEPTH),
            frames: Vec::with_capacity(MAX_FRAMES),
            source: Vec::new(),
            names_dir: None,
            names: FxHashMap::default(),
            stats: Stats::default(),
        }
    }

    /// Keeps the names of code addresses in `dir` between recordings (names.rs): read
    /// from there where an earlier recording named the same address of the same file,
    /// added there when this recording ends.
    pub fn keep_names_in(&mut self, dir: Option<PathBuf>) {
        self.names_dir = dir;
    }

    /// The module parsed from the file mapped by `m`, parsing it the first time this file
    /// (by identity) is seen.
    fn module_for(&mut self, m: &maps::Mapping) -> Option<u32> {
        let path = Path::new(std::ffi::OsStr::from_bytes(&m.path));
        let key = FileKey::stat(path)?;
        if key.names_other_than(m.dev, m.inode) {
            // The path now names another file (the program was rebuilt while it ran):
            // the mapped code is not that file's.
            return None;
        }
        if let Some(&m) = self.by_key.get(&key) {
            return m;
        }
        let t = std::time::Instant::now();
        let m = ElfModule::open(path)
            .filter(|m| m.key() == key)
            .and_then(|m| {
                let id = u32::try_from(self.modules.len()).ok()?;
                self.modules.push(m);
                self.stats.modules += 1;
                Some(id)
            });
        self.by_key.insert(key, m);
        self.stats.load_ns += t.elapsed().as_nanos() as u64;
        m
    }

    /// Reads /proc/PID/maps and builds the process's code list and unwinder; keeps the
    /// stack cache of an earlier state.
    fn load_proc(&mut self, pid: Tid, old: Option<Proc>) -> Option<Proc> {
        // DEJAVU_NATIVE_LAYOUT_ONLY=1 (for tests): as if every process were gone.
        let from_proc = self.layouts.is_empty() || !self.layout_only;
        // A process that is exiting (a zombie) has no mappings left to read.
        let maps = match from_proc
            .then(|| maps::read(pid))
            .flatten()
            .filter(|m| m.iter().any(|m| m.exec))
        {
            Some(m) => m,
            // Gone: its code as its exec and mmap calls laid it out.
            None => {
                let m = self.layouts.get(&pid).filter(|l| !l.is_empty())?.clone();
                self.stats.layouts += 1;
                m
            }
        };
        self.stats.maps_reads += 1;
        let mut code = Vec::new();
        let mut unwinder = UnwinderN::new();
        // A file often has several executable mappings (node has three): stat it once.
        let mut seen: Vec<(&[u8], Option<u32>)> = Vec::new();
        for m in maps.iter().filter(|m| m.exec) {
            let module = if m.is_file() {
                match seen.iter().find(|s| s.0 == m.path.as_slice()) {
                    Some(s) => s.1,
                    None => {
                        let id = self.module_for(m);
                        seen.push((&m.path, id));
                        id
                    }
                }
            } else {
                None
            };
            let c = self.code_of(m, module);
            if let Some(um) = self.unwind_module(&c) {
                unwinder.add_module(um);
            }
            code.push(c);
        }
        let (stacks, missing, slices, goexit) = match old {
            // Stack ids by address stay right as long as every code mapping they may name
            // is still there (a dlclose, then another library at the same addresses, would
            // make them wrong).
            Some(p) if p.code.iter().all(|c| code.contains(c)) => {
                (p.stacks, p.missing, p.slices, p.goexit)
            }
            Some(p) => (
                FxHashMap::default(),
                p.missing,
                FxHashMap::default(),
                Vec::new(),
            ),
            None => Default::default(),
        };
        Some(Proc {
            maps,
            code,
            unwinder,
            stacks,
            missing,
            slices,
            goexit,
        })
    }

    /// The code entry of executable mapping `m`, whose file is `module`.
    fn code_of(&self, m: &maps::Mapping, module: Option<u32>) -> Code {
        let elf = module.and_then(|i| self.modules.get(i as usize));
        Code {
            start: m.start,
            end: m.end,
            offset: m.offset,
            module,
            delta: elf.and_then(|e| e.svma_delta(m.offset, m.end - m.start)),
            path: m.path.clone(),
        }
    }

    /// What framehop needs to unwind through code entry `c`, when its file was parsed.
    fn unwind_module(&self, c: &Code) -> Option<framehop::Module<Bytes>> {
        let elf = self.modules.get(c.module? as usize)?;
        // framehop addresses a module by its load bias: where the file's address 0 would
        // be in memory (address = SVMA + bias).
        let bias = c.start.wrapping_sub(c.offset).wrapping_sub(c.delta?);
        (bias <= c.start).then(|| {
            framehop::Module::new(
                String::from_utf8_lossy(&c.path).into_owned(),
                c.start..c.end,
                bias,
                elf.section_info(),
            )
        })
    }

    /// Learns the mapping that holds `addr` (an address the process's list does not
    /// hold): asked of the kernel for that address alone (`maps::query`) and added to the
    /// list, its module to the unwinder; the whole list read again (`refresh`) where the
    /// kernel cannot say, or where the mapping overlaps one the list holds (the list is
    /// stale there: a library unloaded, a heap grown).
    fn learn(&mut self, pid: Tid, addr: u64) {
        if self.layout_only || !self.procs.contains_key(&pid) {
            return self.refresh(pid);
        }
        let m = match maps::query(pid, addr) {
            Err(()) => return self.refresh(pid),
            Ok(None) => {
                self.stats.queries += 1;
                return;
            }
            Ok(Some(m)) => m,
        };
        self.stats.queries += 1;
        let overlaps = self
            .procs
            .get(&pid)
            .is_some_and(|p| p.maps.iter().any(|x| x.start < m.end && m.start < x.end));
        if overlaps {
            return self.refresh(pid);
        }
        let module = (m.exec && m.is_file())
            .then(|| self.module_for(&m))
            .flatten();
        let c = m.exec.then(|| self.code_of(&m, module));
        let um = c.as_ref().and_then(|c| self.unwind_module(c));
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if let Some(c) = c {
            if let Some(um) = um {
                p.unwinder.add_module(um);
            }
            let i = p.code.partition_point(|x| x.start < c.start);
            p.code.insert(i, c);
        }
        let i = p.maps.partition_point(|x| x.start < m.start);
        p.maps.insert(i, m);
    }

    fn refresh(&mut self, pid: Tid) {
        let old = self.procs.remove(&pid);
        if let Some(p) = self.load_proc(pid, old) {
            self.procs.insert(pid, p);
        }
    }

    /// Unwinds the copied stack into `self.addrs` (code addresses, innermost first);
    /// returns the first return address no code mapping holds, where it stopped.
    fn unwind(&mut self, pid: Tid, regs: &SyscallRegs) -> Option<u64> {
        self.addrs.clear();
        self.stack.words.clear();
        let proc = self.procs.get(&pid)?;
        let stack = &mut self.stack;
        let mut read = |a: u64| stack.read_u64(a);
        let mut it =
            proc.unwinder
                .iter_frames(regs.ip, unwind_regs(regs), &mut self.cache, &mut read);
        while self.addrs.len() < MAX_DEPTH {
            let addr = match it.next() {
                // The instruction pointer is just past the syscall instruction; one byte
                // back is inside it, so the frame is named by the line that made the call
                // even when the call ends a line or a function.
                Ok(Some(FrameAddress::InstructionPointer(ip))) => ip.saturating_sub(1),
                // A return address: one byte back is inside the call instruction.
                Ok(Some(a)) => a.address_for_lookup(),
                Ok(None) | Err(_) => break,
            };
            if proc.code_at(addr).is_none() {
                return Some(addr);
            }
            self.addrs.push(addr);
            // A goroutine's stack begins at runtime.goexit: what the unwinder would find
            // past it is another goroutine's stale frames (or nothing).
            if proc.goexit.contains(&addr) {
                break;
            }
        }
        None
    }

    /// The native stack of `tid` (of process `pid`) at its syscall stop; None when
    /// nothing could be unwound (the process is gone, its stack is unreadable).
    pub fn capture<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
        regs: &SyscallRegs,
    ) -> Option<StackId> {
        let _ = tid; // threads share their process's mappings; registers are per thread
        self.capture_from(w, pid, regs, None)
    }

    /// The native stack of a call from a copy of the top of its thread's stack made
    /// elsewhere (the eBPF backend's kernel half copies up to 16 KiB from the stack
    /// pointer, as perf --call-graph dwarf does), unwound here with the process's
    /// modules. The process's mappings are read now, after the fact: a process that has
    /// already exited gets no stack.
    ///
    /// `deps` receives what the unwind depended on: the stack words (offset from the
    /// stack pointer, value) whose values decided it, and whether the frame pointer
    /// register did. The same instruction and stack pointers with the same values there
    /// give the same stack. Found by trying: a word that holds none of the return
    /// addresses (a saved register the unwind restored, or the one that ended the walk)
    /// is replaced by a code address and the copy unwound again; if the stack stays the
    /// same it did not matter (in code built without frame pointers rbp is an ordinary
    /// register, saved and restored with a different value on every call).
    pub fn capture_slice<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        regs: &SyscallRegs,
        bytes: &[u8],
        deps: &mut Deps,
        remember: bool,
    ) -> Option<StackId> {
        deps.words.clear();
        deps.fp = true;
        deps.cut = false;
        if !remember {
            return self.capture_from(w, pid, regs, Some(bytes));
        }
        // The same place as a copy unwound before, with the same values where that unwind
        // looked: the same stack (the check the kernel half makes once it has the answer;
        // its copies come faster than that at first).
        if let Some((d, fp, id)) = self
            .procs
            .get(&pid)
            .and_then(|p| p.slices.get(&(regs.ip, regs.sp)))
        {
            let word = |o: u64| {
                let o = usize::try_from(o).ok()?;
                Some(u64::from_ne_bytes(bytes.get(o..o + 8)?.try_into().ok()?))
            };
            if (!d.fp || *fp == regs.fp) && d.words.iter().all(|&(o, v)| word(o) == Some(v)) {
                self.stats.captures += 1;
                self.stats.stack_hits += 1;
                self.stats.slice_hits += 1;
                deps.clone_from(d);
                return Some(*id);
            }
        }
        let id = self.capture_from(w, pid, regs, Some(bytes));
        let cut = self.stack.past_end;
        if id.is_none() || self.incomplete || !self.procs.contains_key(&pid) {
            // Nothing it depended on is said: such a stack is unwound each time.
            return id;
        }
        let addrs = std::mem::take(&mut self.addrs);
        let mut words = std::mem::take(&mut self.stack.words);
        // Each word once, by offset.
        words.sort_unstable();
        words.dedup_by_key(|w| w.0);
        const POISON: u64 = 0x5a5a_5a5a_5a5a_5a5a;
        let same = |n: &mut Native, regs: &SyscallRegs| {
            n.unwind(pid, regs);
            n.addrs == addrs
        };
        // A code address: where a return address was read, it makes the walk go on.
        let code = addrs[0].wrapping_add(1);
        // The words that hold a return address (or the code address itself) matter; the
        // others (saved registers, the word that ended the walk) are tried: replaced by
        // the code address, the copy unwound again.
        let mut tried = Vec::new();
        for &(off, v) in &words {
            if addrs.contains(&v.wrapping_sub(1)) || v == code {
                deps.words.push((off, v));
            } else {
                tried.push((off, v));
            }
        }
        // Which of them matter is a matter of the unwind rules of the code the frames are
        // in, not of the values: another process running the same files (each compiler
        // of a build) that unwound the same frames (by file and offset) reading the same
        // offsets needs no tries. Found by tries once per such shape of stack.
        let shape = self
            .procs
            .get(&pid)
            .and_then(|p| shape_of(p, &addrs, &words, &tried));
        // A stack through JIT code has no shape (its code may change under the same
        // address), so each copy was tried again, word by word: a Node.js test run's 8,800
        // copies took 270,000 unwinds. Such a stack depends on every word its unwind read
        // and on the frame pointer: an entry that asks more than the tries would (a saved
        // register that did not matter), never less, found without a second unwind.
        if shape.is_none() {
            deps.words.extend_from_slice(&tried);
            deps.fp = true;
            self.stats.untried += 1;
        } else if let Some((fp, matter)) = shape.as_ref().and_then(|k| self.shapes.get(k)) {
            deps.fp = *fp;
            deps.words
                .extend(tried.iter().filter(|w| matter.contains(&w.0)));
            self.stats.shape_hits += 1;
        } else {
            let other_fp = SyscallRegs {
                fp: regs.fp ^ POISON,
                ..*regs
            };
            deps.fp = !same(self, &other_fp);
            self.stats.trials += 1;
            self.stats.tried_words += tried.len() as u64;
            let first = deps.words.len();
            // Tried in groups (all at once, then the halves of a group whose replacement
            // changed the stack, down to single words): the same words as trying each
            // alone, since a word that changes the stack alone changes it in any group
            // (the others get the same code address, which cannot bring the walk back to
            // the same return addresses).
            let mut groups = vec![&tried[..]];
            while let Some(g) = groups.pop() {
                if g.is_empty() {
                    continue;
                }
                for &(off, _) in g {
                    let o = off as usize;
                    self.stack.buf[o..o + 8].copy_from_slice(&code.to_ne_bytes());
                }
                let s = same(self, regs);
                self.stats.trials += 1;
                for &(off, v) in g {
                    let o = off as usize;
                    self.stack.buf[o..o + 8].copy_from_slice(&v.to_ne_bytes());
                }
                match (s, g.len()) {
                    (true, _) => {}
                    (false, 1) => deps.words.push(g[0]),
                    (false, n) => {
                        groups.push(&g[n / 2..]);
                        groups.push(&g[..n / 2]);
                    }
                }
            }
            if let Some(k) = shape {
                if self.shapes.len() >= MAX_SHAPES {
                    self.shapes.clear();
                }
                let matter = deps.words[first..].iter().map(|w| w.0).collect();
                self.shapes.insert(k, (deps.fp, matter));
            }
        }
        deps.words.sort_unstable();
        deps.cut = cut;
        self.addrs = addrs;
        self.stack.words = words;
        if let (Some(p), Some(id)) = (self.procs.get_mut(&pid), id) {
            if p.slices.len() >= MAX_CACHED_STACKS {
                p.slices.clear();
            }
            p.slices
                .insert((regs.ip, regs.sp), (deps.clone(), regs.fp, id));
        }
        id
    }

    fn capture_from<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        regs: &SyscallRegs,
        slice: Option<&[u8]>,
    ) -> Option<StackId> {
        if !self.enabled {
            return None;
        }
        self.stats.captures += 1;
        if !self.procs.contains_key(&pid) {
            let p = self.load_proc(pid, None)?;
            self.procs.insert(pid, p);
        }
        // The stack pointer and the instruction pointer are mapped for certain: a list
        // that does not hold them is stale (a thread's new stack, a dlopen'd library).
        // If the kernel does not find them either, their page is remembered, so that
        // whatever is odd about this process does not cost a look per call.
        // Mappings learned for this stack (`learn`): one per library loaded since the list
        // was made, a few at most.
        let mut learned = 0;
        // (With a copy of the stack, where the stack pointer's mapping ends does not
        // matter: the copy says how far the stack can be read.)
        let copied = slice.is_some();
        let unknown = |p: &Proc| {
            [
                (regs.sp, copied || maps::find(&p.maps, regs.sp).is_some()),
                (regs.ip, p.code_at(regs.ip).is_some()),
            ]
            .into_iter()
            .find(|&(a, known)| !known && !p.missing.contains(&(a >> 12)))
            .map(|(a, _)| a)
        };
        if let Some(a) = self.procs.get(&pid).and_then(unknown) {
            self.learn(pid, a);
            learned += 1;
            if let Some(p) = self.procs.get_mut(&pid) {
                if unknown(p) == Some(a) && p.missing.len() < MAX_MISSING {
                    p.missing.insert(a >> 12);
                }
            }
        }
        let end = self
            .procs
            .get(&pid)
            .and_then(|p| maps::find(&p.maps, regs.sp))
            .map_or(regs.sp, |m| m.end);
        match slice {
            Some(b) => self.stack.preset(regs.sp, b),
            None => {
                let limit = usize::try_from(end - regs.sp).unwrap_or(usize::MAX);
                self.stack.reset(pid, regs.sp, limit);
            }
        }
        let before = self.stack.reads;
        self.incomplete = false;
        while let Some(addr) = self.unwind(pid, regs) {
            // A return address outside every known mapping: a library loaded since the
            // maps were read, or garbage where unwinding went wrong. Learn its mapping; if
            // there is none, remember its page so garbage costs one look.
            let page = addr >> 12;
            self.incomplete = true;
            let Some(p) = self.procs.get(&pid) else { break };
            if learned >= MAX_LEARNED || p.missing.contains(&page) || p.missing.len() >= MAX_MISSING
            {
                break;
            }
            self.incomplete = false;
            self.learn(pid, addr);
            learned += 1;
            if let Some(p) = self.procs.get_mut(&pid) {
                if p.code_at(addr).is_none() {
                    p.missing.insert(page);
                }
            }
        }
        self.stats.bytes_read += self.stack.reads - before;
        self.intern_addrs(w, pid)
    }

    /// The stack id of `self.addrs` in `pid`, symbolizing sites not seen before.
    fn intern_addrs<W: Write>(&mut self, w: &mut TraceWriter<W>, pid: Tid) -> Option<StackId> {
        self.stats.frames += self.addrs.len() as u64;
        if self.addrs.is_empty() {
            return None;
        }
        let proc = self.procs.get(&pid)?;
        if let Some(&id) = proc.stacks.get(self.addrs.as_slice()) {
            self.stats.stack_hits += 1;
            return Some(id);
        }
        self.frames.clear();
        for i in 0..self.addrs.len() {
            let addr = self.addrs[i];
            if self.push_frames(w, pid, addr) {
                // Go's runtime.goexit, learned just now (the unwinds after this stop
                // there): the frames past it are not this goroutine's.
                if let Some(p) = self.procs.get_mut(&pid) {
                    if !p.goexit.contains(&addr) {
                        p.goexit.push(addr);
                    }
                }
                self.addrs.truncate(i + 1);
                break;
            }
            if self.frames.len() >= MAX_FRAMES {
                self.frames.truncate(MAX_FRAMES);
                break;
            }
        }
        let id = w.intern_stack(&self.frames);
        let proc = self.procs.get_mut(&pid)?;
        if proc.stacks.len() >= MAX_CACHED_STACKS {
            proc.stacks.clear();
        }
        proc.stacks.insert(self.addrs.as_slice().into(), id);
        Some(id)
    }

    /// Appends the frames of one code address of `pid` to `self.frames`; whether the
    /// address is in Go's `runtime.goexit` (`is_goexit`).
    fn push_frames<W: Write>(&mut self, w: &mut TraceWriter<W>, pid: Tid, addr: u64) -> bool {
        let Some(code) = self.procs.get(&pid).and_then(|p| p.code_at(addr)) else {
            return false;
        };
        let offset = addr - code.start + code.offset;
        let module_name = |w: &mut TraceWriter<W>, path: &[u8]| -> Option<StrId> {
            (!path.is_empty()).then(|| w.intern(path))
        };
        let Some(mid) = code.module else {
            // Anonymous code (a JIT's) has no module and no stable address: keep the
            // absolute one. A [vdso] or an unparsable file keeps its name and offset.
            let module = module_name(w, &code.path);
            self.frames.push(Frame {
                kind: FrameKind::Native,
                function: None,
                file: None,
                line: 0,
                column: 0,
                module,
                addr: if module.is_some() { offset } else { addr },
            });
            return false;
        };
        if let Some(f) = self.sites.get(&(mid, offset)) {
            self.frames.extend_from_slice(f);
            return self.goexit_sites.contains(&(mid, offset));
        }
        let module = module_name(w, &code.path);
        let mut source = std::mem::take(&mut self.source);
        source.clear();
        let t = std::time::Instant::now();
        if let (Some(elf), Some(delta)) = (self.modules.get(mid as usize), code.delta) {
            let svma = offset.wrapping_add(delta);
            let dir = &self.names_dir;
            let kept = self
                .names
                .entry(mid)
                .or_insert_with(|| {
                    let dir = dir.as_deref()?;
                    Some(names::KeptNames::open(dir, elf.names_key()))
                })
                .as_mut();
            match kept {
                Some(k) => match k.get(svma) {
                    Some(f) => {
                        source.extend_from_slice(f);
                        self.stats.names_kept += 1;
                    }
                    None => {
                        elf.symbolize(svma, &mut source);
                        k.add(svma, &source);
                    }
                },
                None => elf.symbolize(svma, &mut source),
            }
        }
        self.stats.symbolize_ns += t.elapsed().as_nanos() as u64;
        self.stats.symbolized += 1;
        let mut site: Vec<Frame> = source
            .iter()
            .map(|s| Frame {
                kind: FrameKind::Native,
                function: s.function.as_deref().map(|f| w.intern(f.as_bytes())),
                file: s.file.as_deref().map(|f| w.intern(f.as_bytes())),
                line: s.line,
                column: s.column,
                module,
                addr: offset,
            })
            .collect();
        if site.is_empty() {
            site.push(Frame {
                kind: FrameKind::Native,
                function: None,
                file: None,
                line: 0,
                column: 0,
                module,
                addr: offset,
            });
        }
        let goexit = source
            .iter()
            .any(|s| s.function.as_deref().is_some_and(is_goexit));
        if goexit {
            self.goexit_sites.insert((mid, offset));
        }
        self.source = source;
        self.frames.extend_from_slice(&site);
        self.sites.insert((mid, offset), site.into_boxed_slice());
        goexit
    }

    /// `pid` mapped a file: the pages no mapping held may be code now.
    pub fn mappings_changed(&mut self, pid: Tid) {
        if let Some(p) = self.procs.get_mut(&pid) {
            p.missing.clear();
        }
    }

    /// `pid` exec'd: forget its mappings.
    pub fn on_exec(&mut self, pid: Tid) {
        self.procs.remove(&pid);
        self.layouts.remove(&pid);
    }

    /// `pid` ended.
    pub fn on_exit(&mut self, pid: Tid) {
        self.procs.remove(&pid);
        self.layouts.remove(&pid);
    }

    /// `pid` exec'd `exe`; the kernel put its program headers at `at_phdr` and its
    /// interpreter at `at_base` (0: none): its first code mappings.
    pub fn exec_layout(&mut self, pid: Tid, exe: &[u8], at_phdr: u64, at_base: u64) {
        if !self.enabled {
            return;
        }
        let path = Path::new(std::ffi::OsStr::from_bytes(exe));
        self.layouts
            .insert(pid, layout::at_exec(path, at_phdr, at_base));
    }

    /// `pid` mapped `len` bytes of `path` from `offset` at `start`, executable.
    pub fn mapped_code(&mut self, pid: Tid, start: u64, len: u64, offset: u64, path: &[u8]) {
        if let Some(l) = self.layouts.get_mut(&pid) {
            layout::mapped(l, start, len, offset, path);
        }
    }

    /// The code mappings known for `pid` from its exec and mmap calls (`exec_layout`,
    /// `mapped_code`): (start, end, file offset, path); None before its exec layout.
    pub fn layout(&self, pid: Tid) -> Option<Vec<CodeRange>> {
        let l = self.layouts.get(&pid)?;
        Some(
            l.iter()
                .map(|m| (m.start, m.end, m.offset, m.path.clone()))
                .collect(),
        )
    }

    /// The executable file mappings of the live process `pid`, from /proc/PID/maps.
    pub fn proc_code(pid: Tid) -> Vec<CodeRange> {
        maps::read(pid)
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.exec && m.is_file())
            .map(|m| (m.start, m.end, m.offset, m.path))
            .collect()
    }

    /// `child` is a copy of `parent` (fork): the same code where it was. The child starts
    /// with what is known of the parent's mappings, not with a read of its own (a build
    /// forks a process per command, and each stack its child unwinds before its exec
    /// would read /proc/PID/maps first); an address they do not hold reads the child's, as
    /// for any process.
    pub fn forked(&mut self, parent: Tid, child: Tid) {
        if let Some(l) = self.layouts.get(&parent).cloned() {
            self.layouts.insert(child, l);
        }
        if !self.enabled || self.procs.contains_key(&child) {
            return;
        }
        let Some(p) = self.procs.get(&parent) else {
            return;
        };
        let mut unwinder = UnwinderN::new();
        for um in p.code.iter().filter_map(|c| self.unwind_module(c)) {
            unwinder.add_module(um);
        }
        let proc = Proc {
            maps: p.maps.clone(),
            code: p.code.clone(),
            unwinder,
            stacks: FxHashMap::default(),
            missing: FxHashSet::default(),
            slices: FxHashMap::default(),
            goexit: p.goexit.clone(),
        };
        self.stats.inherited += 1;
        self.procs.insert(child, proc);
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use dejavu_trace::{Meta, Record, Sys, Syscall, TraceReader, WriterOptions};
    use std::os::unix::fs::MetadataExt;

    fn writer() -> TraceWriter<Vec<u8>> {
        TraceWriter::new(Vec::new(), &Meta::default(), WriterOptions::default()).unwrap()
    }

    /// The frames of `id` as (function, file, line), read back from a finished trace.
    fn frames_of(mut w: TraceWriter<Vec<u8>>, id: StackId) -> Vec<(String, String, u32)> {
        let mut c = Syscall::new(0, 1, 1, Sys::Stat);
        c.stack = Some(id);
        w.push(&Record::Syscall(c)).unwrap();
        let bytes = w.finish(Default::default()).unwrap();
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        while r.next_record().unwrap().is_some() {}
        let s = |id: Option<StrId>| id.map(|i| r.strings().lossy(i).into_owned());
        r.stack(id)
            .iter()
            .map(|f| {
                (
                    s(f.function).unwrap_or_default(),
                    s(f.file).unwrap_or_default(),
                    f.line,
                )
            })
            .collect()
    }

    fn me() -> Tid {
        std::process::id() as Tid
    }

    /// This thread's instruction, stack and frame pointers where the macro is used (a
    /// macro: a function would have a frame of its own).
    macro_rules! registers_here {
        () => {{
            let (ip, sp, fp): (u64, u64, u64);
            // SAFETY: reads three registers into outputs; no memory is touched.
            unsafe {
                std::arch::asm!(
                    "lea {ip}, [rip]",
                    "mov {sp}, rsp",
                    "mov {fp}, rbp",
                    ip = out(reg) ip,
                    sp = out(reg) sp,
                    fp = out(reg) fp,
                );
            }
            (ip, sp, fp)
        }};
    }

    /// Captures this thread's own stack as if it were stopped here: the registers at the
    /// asm block, then the same unwinding as for a tracee (process_vm_readv on ourselves).
    /// The frames above the captured stack pointer stay untouched while this function runs.
    #[inline(never)]
    fn capture_here(n: &mut Native, w: &mut TraceWriter<Vec<u8>>) -> Option<StackId> {
        let (ip, sp, fp) = registers_here!();
        let regs = SyscallRegs {
            nr: 0,
            args: [0; 6],
            ret: 0,
            ip,
            sp,
            fp,
        };
        n.capture(w, me(), me(), &regs)
    }

    #[inline(never)]
    fn outer_caller(n: &mut Native, w: &mut TraceWriter<Vec<u8>>) -> Option<StackId> {
        let id = capture_here(n, w);
        std::hint::black_box(id)
    }

    /// `outer_caller`, after an "exec" of this process when `exec`.
    #[inline(never)]
    fn step(n: &mut Native, w: &mut TraceWriter<Vec<u8>>, exec: bool) -> Option<StackId> {
        if std::hint::black_box(exec) {
            n.on_exec(me());
            assert!(n.procs.is_empty());
        }
        outer_caller(n, w)
    }

    #[test]
    fn our_own_stack_is_unwound_and_named_once_and_cached() {
        let mut n = Native::new(true);
        let mut w = writer();
        // Three captures from one call site (the loop's); the process "execs" before the
        // third. Counters after each: (maps reads, stack cache hits, sites symbolized).
        let mut ids = Vec::new();
        let mut after = Vec::new();
        let mut modules = Vec::new();
        // (A trip count the optimiser cannot see: an unrolled loop would make the calls
        // from three places. The exec is the callee's, not a branch of the loop, which an
        // optimised build would split at it: two calls, from two places.)
        for i in 0..std::hint::black_box(3) {
            ids.push(step(&mut n, &mut w, i == 2).expect("a stack"));
            after.push((n.stats.maps_reads, n.stats.stack_hits, n.stats.symbolized));
            modules.push(n.modules.len());
        }
        let symbolized = after[0].2;
        assert!(symbolized >= 3, "{after:?}");
        assert_eq!(after[0], (1, 0, symbolized));
        // The same place again: the stack cache answers, nothing is symbolized again.
        assert_eq!(ids[1], ids[0]);
        assert_eq!(after[1], (1, 1, symbolized));
        // After an exec the mappings are read again; the modules are not parsed again,
        // the sites are not symbolized again, and the same frames are the same stack.
        assert_eq!(ids[2], ids[0]);
        assert_eq!(after[2], (2, 1, symbolized));
        assert_eq!(modules[2], modules[0]);
        n.on_exit(me());
        assert!(n.procs.is_empty());
        let a = ids[0];

        let frames = frames_of(w, a);
        // A function's name, qualified when it is a function of its own (DWARF names one
        // inlined into another, as an optimised build makes it, without its path).
        let at = |name: &str| {
            frames
                .iter()
                .position(|f| f.0 == name || f.0.ends_with(&format!("::{name}")))
                .unwrap_or_else(|| panic!("{name} in {frames:#?}"))
        };
        let (inner, outer) = (at("capture_here"), at("outer_caller"));
        assert!(inner < outer, "{frames:#?}");
        assert!(frames[inner].1.ends_with("native.rs") && frames[inner].2 > 0);
        assert!(
            frames.iter().any(|f| f
                .0
                .ends_with("our_own_stack_is_unwound_and_named_once_and_cached")),
            "the test function is further out: {frames:#?}"
        );
    }

    #[test]
    fn disabled_captures_nothing() {
        let mut n = Native::new(false);
        let mut w = writer();
        assert_eq!(outer_caller(&mut n, &mut w), None);
        assert_eq!(n.stats.maps_reads, 0);
    }

    #[test]
    fn a_process_that_is_gone_gives_none() {
        let mut n = Native::new(true);
        let mut w = writer();
        let regs = SyscallRegs {
            nr: 0,
            args: [0; 6],
            ret: 0,
            ip: 0x1000,
            sp: 0x2000,
            fp: 0,
        };
        // Pid numbers stop well below i32::MAX (pid_max is at most 2^22).
        assert_eq!(n.capture(&mut w, i32::MAX - 1, i32::MAX - 1, &regs), None);
    }

    /// A mapping of the file at `path` as /proc/PID/maps would show it.
    fn mapping_of(path: &Path) -> maps::Mapping {
        let meta = std::fs::metadata(path).unwrap();
        let dev = meta.dev();
        maps::Mapping {
            start: 0x1000,
            end: 0x2000,
            exec: true,
            read: true,
            offset: 0,
            dev: (libc::major(dev), libc::minor(dev)),
            inode: meta.ino(),
            path: path.as_os_str().as_bytes().to_vec(),
            deleted: false,
        }
    }

    #[test]
    fn an_address_outside_any_mapping_reads_the_mappings_once_until_a_file_is_mapped() {
        // A stack copy whose unwind ends in garbage (a return address no mapping holds)
        // must not read /proc/PID/maps per call.
        let mut n = Native::new(true);
        let mut w = writer();
        let ours = an_address_outside_any_mapping_reads_the_mappings_once_until_a_file_is_mapped
            as *const () as u64
            + 1;
        let garbage = 0x10u64 << 40; // no mapping there
        let local = [0u64; 4];
        let regs = SyscallRegs {
            ip: ours,
            sp: std::hint::black_box(&local) as *const _ as u64,
            ..SyscallRegs::default()
        };
        let bytes = garbage.to_ne_bytes().repeat(64);
        let mut deps = Deps::default();
        for _ in 0..100 {
            let id = n.capture_slice(&mut w, me(), &regs, &bytes, &mut deps, true);
            assert!(id.is_some());
        }
        // A look: a read of /proc/PID/maps, or a query for the one address where the
        // kernel answers those (PROCMAP_QUERY).
        let looks = |n: &Native| n.stats.maps_reads + n.stats.queries;
        assert_eq!(looks(&n), 2, "the first load, and one look for the garbage");
        assert_eq!(n.stats.maps_reads, 1 + u64::from(n.stats.queries == 0));
        // A walk that ended at an address no mapping holds is not remembered (code mapped
        // later could make it go on): nothing it depended on is said.
        assert!(deps.words.is_empty());
        n.mappings_changed(me());
        n.capture_slice(&mut w, me(), &regs, &bytes, &mut deps, true);
        assert_eq!(
            looks(&n),
            3,
            "a new file mapping may hold it: looked for once more"
        );
    }

    #[test]
    fn code_mapped_after_the_list_was_made_is_learned_alone() {
        use std::os::fd::AsRawFd;
        let mut n = Native::new(true);
        let mut w = writer();
        let mut deps = Deps::default();
        assert!(slice_here(&mut n, &mut w, &mut deps).0.is_some());
        assert_eq!(n.stats.maps_reads, 1);
        // Our own file mapped again, executable, somewhere new (as a dlopen would).
        let f = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
        // SAFETY: a new private read-only mapping of a file we hold open; unmapped below.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        let start = at as u64;
        let (_, sp, _) = registers_here!();
        let regs = SyscallRegs {
            ip: start + 0x10,
            sp,
            ..SyscallRegs::default()
        };
        n.capture_slice(&mut w, me(), &regs, &[0u8; 64], &mut deps, true);
        let p = n.procs.get(&me()).unwrap();
        let known = p.code_at(start + 0x10).map(|c| (c.start, c.end));
        // SAFETY: the mapping made above, not used after this.
        unsafe { libc::munmap(at, 4096) };
        assert_eq!(known, Some((start, start + 4096)), "the new code is known");
        if n.stats.queries > 0 {
            assert_eq!(n.stats.maps_reads, 1, "asked alone, not read again");
        } else {
            assert_eq!(n.stats.maps_reads, 2, "a kernel before 6.11: read again");
        }
    }

    /// This thread's registers and a copy of the top of its stack (as the eBPF side
    /// sends), made here.
    #[inline(never)]
    fn copy_here() -> (SyscallRegs, Vec<u8>) {
        let (ip, sp, fp) = registers_here!();
        let mut copy = vec![0u8; 16 * 1024];
        let got = os::read_mem(me(), sp, &mut copy).unwrap_or(0);
        copy.truncate(got);
        let regs = SyscallRegs {
            ip,
            sp,
            fp,
            ..SyscallRegs::default()
        };
        (regs, copy)
    }

    /// Like `capture_here`, from a copy of our own stack (as the eBPF side sends).
    #[inline(never)]
    fn slice_here(
        n: &mut Native,
        w: &mut TraceWriter<Vec<u8>>,
        deps: &mut Deps,
    ) -> (Option<StackId>, Vec<u8>, u64) {
        let (regs, copy) = copy_here();
        (
            n.capture_slice(w, me(), &regs, &copy, deps, true),
            copy,
            regs.sp,
        )
    }

    #[test]
    fn a_stack_of_a_shape_seen_before_needs_no_tries_and_depends_on_the_same_words() {
        let mut n = Native::new(true);
        let mut w = writer();
        let (regs, copy) = copy_here();
        let mut first = Deps::default();
        let id = n.capture_slice(&mut w, me(), &regs, &copy, &mut first, true);
        assert!(id.is_some());
        let trials = n.stats.trials;
        assert!(trials >= 1, "the first copy of a shape is tried");
        assert_eq!(n.stats.shape_hits, 0);
        // As another process running the same files would: the same place, not in this
        // process's cache of unwound copies.
        n.procs.get_mut(&me()).unwrap().slices.clear();
        let mut again = Deps::default();
        assert_eq!(
            n.capture_slice(&mut w, me(), &regs, &copy, &mut again, true),
            id
        );
        assert_eq!(n.stats.shape_hits, 1);
        assert_eq!(n.stats.trials, trials, "no tries for a shape seen before");
        assert_eq!(again, first);
        // Found by tries again, the same words.
        n.procs.get_mut(&me()).unwrap().slices.clear();
        n.shapes.clear();
        let mut tried = Deps::default();
        assert_eq!(
            n.capture_slice(&mut w, me(), &regs, &copy, &mut tried, true),
            id
        );
        assert_eq!(tried, first);
        assert_eq!(n.stats.trials, 2 * trials);
    }

    #[test]
    fn a_forked_child_unwinds_with_its_parents_mappings_without_reading_its_own() {
        let mut n = Native::new(true);
        let mut w = writer();
        let (regs, copy) = copy_here();
        let mut deps = Deps::default();
        let id = n.capture_slice(&mut w, me(), &regs, &copy, &mut deps, true);
        assert!(id.is_some());
        assert_eq!(n.stats.maps_reads, 1);
        // A pid that is no process (as a child that has exec'd or exited by the time its
        // copies are read): only the parent's mappings can name its frames.
        let child: Tid = 0x3fff_fff0;
        n.forked(me(), child);
        assert_eq!(n.stats.inherited, 1);
        let mut again = Deps::default();
        let cid = n.capture_slice(&mut w, child, &regs, &copy, &mut again, true);
        assert!(
            cid.is_some(),
            "the child's stack, from its parent's mappings"
        );
        assert_eq!(n.stats.maps_reads, 1, "no read of the child's");
        assert_eq!(again, deps);
        assert_eq!(cid, id, "the same frames: the same stack of the trace");
        // Nothing known of a parent: nothing inherited.
        n.forked(0x3fff_fff1, 0x3fff_fff2);
        assert_eq!(n.stats.inherited, 1);
    }

    #[test]
    fn a_copy_of_the_stack_unwinds_and_says_which_words_it_read() {
        let mut n = Native::new(true);
        let mut w = writer();
        let mut deps = Deps::default();
        let (id, copy, _) = slice_here(&mut n, &mut w, &mut deps);
        let id = id.expect("a stack");
        let words = &deps.words;
        assert!(words.len() >= 2, "{words:?}");
        for &(off, v) in words {
            assert_eq!(off % 8, 0);
            let o = off as usize;
            let at = u64::from_ne_bytes(copy[o..o + 8].try_into().unwrap());
            assert_eq!(at, v, "the value at offset {off}");
        }
        let frames = frames_of(w, id);
        // (Qualified when it is a function of its own; DWARF names a function inlined into
        // another, as an optimised build makes it, without its path.)
        assert!(
            frames
                .iter()
                .any(|f| f.0 == "slice_here" || f.0.ends_with("::slice_here")),
            "{frames:#?}"
        );
        assert!(
            frames.iter().any(|f| f
                .0
                .ends_with("a_copy_of_the_stack_unwinds_and_says_which_words_it_read")),
            "the test function is further out: {frames:#?}"
        );
    }

    #[test]
    fn modules_are_cached_by_file_identity() {
        let mut n = Native::new(true);
        let d = tempfile::tempdir().unwrap();
        let copy = d.path().join("prog");
        std::fs::copy(std::env::current_exe().unwrap(), &copy).unwrap();
        let first = n.module_for(&mapping_of(&copy)).expect("an ELF file");
        assert_eq!(n.module_for(&mapping_of(&copy)), Some(first), "parsed once");
        assert_eq!(n.modules.len(), 1);
        // Rewritten in place (same inode, new size): parsed again.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&copy)
            .unwrap();
        f.write_all(b"\0").unwrap();
        drop(f);
        let second = n.module_for(&mapping_of(&copy)).expect("still ELF");
        assert_ne!(first, second);
        assert_eq!(n.modules.len(), 2);
        // Replaced by another file (a new inode) after it was mapped: the mapping's code
        // is not the new file's.
        let mapped = mapping_of(&copy);
        let other = d.path().join("other");
        std::fs::copy(&copy, &other).unwrap();
        std::fs::rename(&other, &copy).unwrap();
        assert_eq!(n.module_for(&mapped), None);
        assert!(n.module_for(&mapping_of(&copy)).is_some());
        // Not ELF: remembered as such, not retried.
        let text = d.path().join("text");
        std::fs::write(&text, b"hello").unwrap();
        assert_eq!(n.module_for(&mapping_of(&text)), None);
        let known = n.by_key.len();
        assert_eq!(n.module_for(&mapping_of(&text)), None);
        assert_eq!(n.by_key.len(), known);
        let mut gone = mapping_of(&text);
        gone.path = b"/nonexistent/file".to_vec();
        assert_eq!(n.module_for(&gone), None);
    }

    #[test]
    fn only_runtime_goexit_is_a_goroutines_first_frame() {
        assert!(is_goexit("runtime.goexit"));
        assert!(is_goexit("runtime.goexit.abi0"));
        // goexit1 and goexit0 run when a goroutine ends, inside its stack.
        assert!(!is_goexit("runtime.goexit1"));
        assert!(!is_goexit("runtime.goexit0"));
        assert!(!is_goexit("main.goexit"));
    }

    #[test]
    fn stack_copies_stop_at_their_limit_and_at_unreadable_memory() {
        let data: Vec<u64> = (0..2048u64).collect();
        let base = data.as_ptr() as u64;
        let mut s = StackCopy {
            pid: 0,
            base: 0,
            buf: Vec::new(),
            have: 0,
            limit: 0,
            reads: 0,
            words: Vec::new(),
            log: false,
            past_end: false,
        };
        s.reset(me(), base, 100 * 8);
        assert_eq!(s.read_u64(base + 8 * 5), Ok(5));
        assert_eq!(s.read_u64(base + 8 * 99), Ok(99));
        assert_eq!(s.read_u64(base + 8 * 100), Err(()), "past the limit");
        assert_eq!(s.read_u64(base - 8), Err(()), "below the stack pointer");
        // The whole array, read in two parts (a first small read, then 4x as much).
        s.reset(me(), base, data.len() * 8);
        let before = s.reads as usize;
        assert_eq!(s.read_u64(base), Ok(0));
        assert_eq!(s.reads as usize - before, FIRST_READ);
        assert_eq!(s.read_u64(base + 8 * 2047), Ok(2047));
        assert_eq!(s.reads as usize - before, data.len() * 8);
        // Unmapped memory: an error, not a panic.
        s.reset(me(), 8, 4096);
        assert_eq!(s.read_u64(8), Err(()));
        assert_eq!(s.read_u64(16), Err(()), "not read again");
    }
}
