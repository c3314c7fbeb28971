//! One ELF file (executable or shared object) as the unwinder and the symbolizer need it:
//! its load segments (to turn file offsets into the addresses its tables use), its unwind
//! sections (read when the file is first seen), and, only when a frame in it has to be
//! named, its symbol table and DWARF line tables (from the file or from a separate debug
//! file found by build id or debug link).
//!
//! Files are read with `object` through a read cache that pulls in only the parts asked
//! for: a 100 MB node binary costs its headers and .eh_frame up front, not a full read.
//! The cache reads through [`FileReads`]: positioned reads, the small ones (section names)
//! from one window of the file.
//! Section data is copied into owned buffers, so nothing stays mapped or open, and a file
//! replaced on disk later is noticed (its identity is checked again before a lazy read).

use super::gopcln::GoLineTable;
use dejavu_trace::is_runtime_module;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};
use std::borrow::Cow;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Owned section bytes, cheap to share with framehop's per-process modules.
pub type Bytes = Arc<[u8]>;

/// How much of a file a small read brings in around it ([`FileReads`]).
const WINDOW: usize = 16 << 10;

/// A file as `object`'s read cache reads it: positioned reads (`pread`, no `lseek` before
/// each), and the reads smaller than [`WINDOW`] served from one window of the file that
/// the first of them fills. The read cache asks for each section's name on its own (up to
/// 256 bytes at the name's offset: ~30-40 reads for a shared library's section names,
/// at every parse of the file); they are near each other in the file, and now cost one
/// read between them. A read larger than the window (a section's data) goes straight
/// into the caller's buffer.
struct FileReads {
    file: std::fs::File,
    pos: u64,
    /// The window's bytes and their offset in the file.
    win: Vec<u8>,
    win_at: u64,
    /// Reads of the file so far.
    reads: u32,
}

impl FileReads {
    fn new(file: std::fs::File) -> FileReads {
        FileReads {
            file,
            pos: 0,
            win: Vec::new(),
            win_at: 0,
            reads: 0,
        }
    }
}

impl object::ReadCacheOps for FileReads {
    fn len(&mut self) -> Result<u64, ()> {
        self.file.metadata().map(|m| m.len()).map_err(|_| ())
    }

    fn seek(&mut self, pos: u64) -> Result<u64, ()> {
        self.pos = pos;
        Ok(pos)
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ()> {
        use std::os::unix::fs::FileExt;
        let in_window = self.pos >= self.win_at && self.pos - self.win_at < self.win.len() as u64;
        if !in_window {
            self.reads += 1;
            if buf.len() >= WINDOW {
                let n = self.file.read_at(buf, self.pos).map_err(|_| ())?;
                self.pos += n as u64;
                return Ok(n);
            }
            self.win.resize(WINDOW, 0);
            let n = self.file.read_at(&mut self.win, self.pos).map_err(|_| ())?;
            self.win.truncate(n);
            self.win_at = self.pos;
            if n == 0 {
                return Ok(0);
            }
        }
        let at = (self.pos - self.win_at) as usize;
        let n = buf.len().min(self.win.len() - at);
        buf[..n].copy_from_slice(&self.win[at..at + n]);
        self.pos += n as u64;
        Ok(n)
    }

    fn read_exact(&mut self, mut buf: &mut [u8]) -> Result<(), ()> {
        while !buf.is_empty() {
            let n = self.read(buf)?;
            if n == 0 {
                return Err(());
            }
            buf = &mut buf[n..];
        }
        Ok(())
    }
}

/// `object`'s read cache over `f`, read through [`FileReads`].
fn read_cache(f: std::fs::File) -> object::ReadCache<FileReads> {
    object::ReadCache::new(FileReads::new(f))
}

/// What identifies a file's content well enough to reuse what was parsed from it: a file
/// rewritten in place (same inode) by a build has a new size or mtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl FileKey {
    fn of(meta: &std::fs::Metadata) -> FileKey {
        FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }

    /// The key of the file at `path` now.
    pub fn stat(path: &Path) -> Option<FileKey> {
        std::fs::metadata(path).ok().map(|m| FileKey::of(&m))
    }

    /// Whether this is surely not the file /proc/PID/maps shows as device `dev`
    /// (major, minor) and `inode`: same device, another inode. On another device (an
    /// overlay file system shows the layer's) nothing can be told, and the path is trusted.
    pub fn names_other_than(&self, dev: (u32, u32), inode: u64) -> bool {
        self.dev == libc::makedev(dev.0, dev.1) && self.ino != inode
    }
}

/// A PT_LOAD segment: file bytes [offset, offset + filesz) are mapped at `vaddr`.
#[derive(Clone, Copy, Debug)]
struct Load {
    offset: u64,
    vaddr: u64,
    filesz: u64,
    exec: bool,
}

/// The unwind tables framehop reads, at the addresses the file states (SVMAs).
#[derive(Clone, Debug, Default)]
struct UnwindSections {
    text_svma: Option<Range<u64>>,
    got_svma: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, Bytes)>,
    eh_frame_hdr: Option<(Range<u64>, Bytes)>,
    debug_frame: Option<Bytes>,
}

/// A function symbol: [addr, addr + size) in SVMA space, name in `Symbols::names`.
#[derive(Clone, Copy, Debug)]
struct Sym {
    addr: u64,
    size: u64,
    name: (u32, u32),
}

/// The function symbols of a file (.symtab, else .dynsym), sorted by address.
#[derive(Debug, Default)]
struct Symbols {
    syms: Vec<Sym>,
    names: Vec<u8>,
}

impl Symbols {
    fn lookup(&self, svma: u64) -> Option<&[u8]> {
        let i = self
            .syms
            .partition_point(|s| s.addr <= svma)
            .checked_sub(1)?;
        let s = self.syms[i];
        // A sized symbol must contain the address; an unsized one (hand-written assembly)
        // is taken to reach up to the next symbol.
        if s.size != 0 && svma >= s.addr.saturating_add(s.size) {
            return None;
        }
        let (off, len) = (s.name.0 as usize, s.name.1 as usize);
        self.names.get(off..off + len)
    }
}

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// A named place in the code: one frame of the source-level stack at an address (an
/// address inside inlined code gives several, innermost first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceFrame {
    /// Function, demangled.
    pub function: Option<String>,
    /// Source file (as the compiler recorded it, joined with the compilation directory).
    pub file: Option<String>,
    /// Line, 0 when unknown.
    pub line: u32,
    /// Column, 0 when unknown.
    pub column: u32,
}

/// A parsed ELF file.
pub struct ElfModule {
    path: PathBuf,
    key: FileKey,
    loads: Vec<Load>,
    unwind: UnwindSections,
    build_id: Option<Vec<u8>>,
    debuglink: Option<Vec<u8>>,
    /// Loaded on the first symbolization in this file.
    symbols: OnceLock<Symbols>,
    dwarf: OnceLock<Option<addr2line::Context<Reader>>>,
    /// Go's line table, read on the first symbolization DWARF could not name a line for.
    go: OnceLock<Option<GoLineTable>>,
    /// Whether the file has one (a Go executable): only then is it read again for it.
    has_go_table: bool,
    /// The file's byte order and address size, for its unwind tables.
    endian: gimli::RunTimeEndian,
    address_size: u8,
    /// Where its functions are by the unwind tables, read on the first address no symbol
    /// named (`function_start`).
    fde_ranges: OnceLock<Vec<(u64, u64)>>,
}

impl std::fmt::Debug for ElfModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfModule")
            .field("path", &self.path)
            .field("loads", &self.loads.len())
            .field("eh_frame", &self.unwind.eh_frame.is_some())
            .field("symbols", &self.symbols.get().map(|s| s.syms.len()))
            .field("dwarf", &self.dwarf.get().map(|d| d.is_some()))
            .finish()
    }
}

fn section_bytes<'d, O: Object<'d>>(file: &O, name: &str) -> Option<(Range<u64>, Bytes)> {
    let s = file.section_by_name(name)?;
    // SHT_NOBITS sections (in separate debug files, every code section) have no bytes.
    s.file_range()?;
    let data = s.uncompressed_data().ok()?;
    let range = s.address()..s.address().saturating_add(s.size());
    Some((range, Bytes::from(&*data)))
}

/// Go's line table section: .gopclntab, or .data.rel.ro.gopclntab in a position-independent
/// executable (as cmd/internal/objfile looks for it).
fn go_table_section<'d, O: Object<'d>>(file: &O) -> Option<O::Section<'_>> {
    file.section_by_name(".gopclntab")
        .or_else(|| file.section_by_name(".data.rel.ro.gopclntab"))
}

/// The runtime's `firstmoduledata` of a Go executable without a symbol table: its `text`
/// (where the line table's function offsets start) and where `go:func.*` (the data inline
/// trees are offsets into) is. Found in the `.go.module` section (Go 1.26), else at the
/// word of `.noptrdata` that points at the line table (`pcHeader`, the struct's first
/// field). Its layout (runtime/symtab.go, Go 1.20 to 1.26) is checked against the section
/// headers before it is believed: `text` (word 22) must lie in .text (it is .text's
/// address, but for an executable linked by the system's linker, cgo's
/// `-linkmode=external`, where .text starts with C code and the Go code 0x100 bytes or so
/// later), `noptrdata` (24) must be .noptrdata's, `rodata` (39) must lie in .rodata (the
/// system's linker puts its own data first there too), and `gofunc` (40) must lie in
/// .rodata or the line table (`table`: its addresses).
fn go_moduledata<'d, O: Object<'d>>(file: &O, table: Range<u64>) -> Option<(u64, u64)> {
    let pclntab = table.start;
    const WORDS: usize = 41;
    let word = |d: &[u8], i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            d.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    let text = section_range(file, ".text")?;
    let noptr = file.section_by_name(".noptrdata")?;
    let rodata = section_range(file, ".rodata")?;
    let fits = |d: &[u8]| -> Option<(u64, u64)> {
        let start = word(d, 22)?;
        let ok = word(d, 0)? == pclntab
            && text.contains(&start)
            && word(d, 24)? == noptr.address()
            && rodata.contains(&word(d, 39)?);
        let gofunc = word(d, 40)?;
        (ok && (rodata.contains(&gofunc) || table.contains(&gofunc))).then_some((start, gofunc))
    };
    if let Some(m) = file.section_by_name(".go.module") {
        if let Some(g) = m.data().ok().and_then(fits) {
            return Some(g);
        }
    }
    let data = noptr.data().ok()?;
    (0..data.len() / 8)
        .filter(|&i| word(data, i) == Some(pclntab))
        .find_map(|i| fits(data.get(i * 8..i * 8 + WORDS * 8)?))
}

/// Where the line table's function offsets start: the `runtime.text` symbol; without a
/// symbol table, the line table's own `textStart` (pcHeader's third word, Go 1.18 to
/// 1.22; zero in later files, where the runtime fills it in) or the runtime's module data
/// (`moduledata`); else .text's address. They differ from .text's in an executable the
/// system's linker made (cgo's `-linkmode=external`: C start-up code first), where .text's
/// address had shifted every Go frame by 0x100 bytes (hugo's lstat named at
/// `afero.(*OsFs).Mkdir`).
fn go_text_start(text: u64, symbol: Option<u64>, header: &[u8], moduledata: Option<u64>) -> u64 {
    let from_header = (header.get(7) == Some(&8))
        .then(|| header.get(24..32))
        .flatten()
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .filter(|&t| t != 0);
    symbol.or(from_header).or(moduledata).unwrap_or(text)
}

fn section_range<'d, O: Object<'d>>(file: &O, name: &str) -> Option<Range<u64>> {
    let s = file.section_by_name(name)?;
    Some(s.address()..s.address().saturating_add(s.size()))
}

impl ElfModule {
    /// Opens and parses the file at `path`; None if it cannot be read or is not ELF.
    pub fn open(path: &Path) -> Option<ElfModule> {
        let f = std::fs::File::open(path).ok()?;
        let key = FileKey::of(&f.metadata().ok()?);
        let cache = read_cache(f);
        let file = object::File::parse(&cache).ok()?;
        if file.format() != object::BinaryFormat::Elf {
            return None;
        }
        let loads = file
            .segments()
            .map(|s| {
                let (offset, filesz) = s.file_range();
                let exec = match s.flags() {
                    object::SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
                    _ => false,
                };
                Load {
                    offset,
                    vaddr: s.address(),
                    filesz,
                    exec,
                }
            })
            .collect();
        let mut unwind = UnwindSections {
            text_svma: section_range(&file, ".text"),
            got_svma: section_range(&file, ".got"),
            eh_frame_hdr: section_bytes(&file, ".eh_frame_hdr"),
            eh_frame: section_bytes(&file, ".eh_frame"),
            debug_frame: section_bytes(&file, ".debug_frame").map(|(_, b)| b),
        };
        // framehop reads one CFI table per module, and .eh_frame when there is one. A
        // program built with -g but without unwind tables has both: .eh_frame only for
        // the C runtime's start-up objects, .debug_frame for its own code. Keep the table
        // that covers more code.
        let endian = if file.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let address_size = if file.is_64() { 8 } else { 4 };
        if let (Some(eh), Some(debug)) = (&unwind.eh_frame, &unwind.debug_frame) {
            let bases = gimli::BaseAddresses::default()
                .set_eh_frame(eh.0.start)
                .set_text(unwind.text_svma.as_ref().map_or(0, |r| r.start))
                .set_got(unwind.got_svma.as_ref().map_or(0, |r| r.start));
            let mut eh_frame = gimli::EhFrame::new(&eh.1, endian);
            eh_frame.set_address_size(address_size);
            let mut debug_frame = gimli::DebugFrame::new(debug, endian);
            debug_frame.set_address_size(address_size);
            if cfi_coverage(&debug_frame, &bases) > cfi_coverage(&eh_frame, &bases) {
                unwind.eh_frame = None;
                unwind.eh_frame_hdr = None;
            } else {
                unwind.debug_frame = None;
            }
        }
        Some(ElfModule {
            path: path.to_path_buf(),
            key,
            loads,
            unwind,
            build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
            debuglink: file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, _crc)| name.to_vec()),
            symbols: OnceLock::new(),
            dwarf: OnceLock::new(),
            go: OnceLock::new(),
            has_go_table: go_table_section(&file).is_some(),
            endian,
            address_size,
            fde_ranges: OnceLock::new(),
        })
    }

    /// The identity of the file this was parsed from.
    pub fn key(&self) -> FileKey {
        self.key
    }

    /// For code mapped from file bytes [offset, offset + len): what to add to a file
    /// offset in it to get the address the file's tables use (SVMA), from the executable
    /// PT_LOAD segment the mapping holds. The mapping starts at a page boundary, which
    /// can be inside the segment before (when the code segment's file offset and address
    /// differ, as in lld's output), so the segment is chosen by overlap and flags, not
    /// by the mapping's first byte.
    pub fn svma_delta(&self, offset: u64, len: u64) -> Option<u64> {
        let end = offset.saturating_add(len);
        let overlaps = |l: &&Load| l.offset < end && offset < l.offset.saturating_add(l.filesz);
        let l = self
            .loads
            .iter()
            .filter(overlaps)
            .find(|l| l.exec)
            .or_else(|| self.loads.iter().find(overlaps))?;
        Some(l.vaddr.wrapping_sub(l.offset))
    }

    /// The unwind sections in the form framehop takes.
    pub fn section_info(&self) -> framehop::ExplicitModuleSectionInfo<Bytes> {
        let u = &self.unwind;
        framehop::ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: u.text_svma.clone(),
            got_svma: u.got_svma.clone(),
            eh_frame_svma: u.eh_frame.as_ref().map(|e| e.0.clone()),
            eh_frame: u.eh_frame.as_ref().map(|e| e.1.clone()),
            eh_frame_hdr_svma: u.eh_frame_hdr.as_ref().map(|e| e.0.clone()),
            eh_frame_hdr: u.eh_frame_hdr.as_ref().map(|e| e.1.clone()),
            debug_frame: u.debug_frame.clone(),
            ..Default::default()
        }
    }

    /// Reopens the file for a lazy read, if it is still the one parsed at first.
    fn reopen(&self) -> Option<std::fs::File> {
        let f = std::fs::File::open(&self.path).ok()?;
        (FileKey::of(&f.metadata().ok()?) == self.key).then_some(f)
    }

    fn symbols(&self) -> &Symbols {
        self.symbols
            .get_or_init(|| self.load_symbols().unwrap_or_default())
    }

    fn load_symbols(&self) -> Option<Symbols> {
        // A stripped file keeps only .dynsym (exported functions); its debug file, when
        // installed, has the full .symtab.
        let own = self.reopen()?;
        const FULL: (&str, &str) = (".symtab", ".strtab");
        const DYNAMIC: (&str, &str) = (".dynsym", ".dynstr");
        // The module's code, as its executable segments place it (a debug file's own
        // segments are empty).
        let is_code = |a: u64| {
            self.loads
                .iter()
                .any(|l| l.exec && l.vaddr <= a && a < l.vaddr.saturating_add(l.filesz))
        };
        read_symbols(own, FULL, &is_code)
            .or_else(|| {
                let debug = std::fs::File::open(self.debug_file()?).ok()?;
                read_symbols(debug, FULL, &is_code)
            })
            .or_else(|| read_symbols(self.reopen()?, DYNAMIC, &is_code))
    }

    /// The separate debug file for this one, if installed: by build id under
    /// /usr/lib/debug/.build-id, else by .gnu_debuglink next to the file, in its .debug
    /// directory, or under /usr/lib/debug.
    fn debug_file(&self) -> Option<PathBuf> {
        if let Some(id) = self.build_id.as_deref().filter(|id| id.len() >= 2) {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let p = PathBuf::from(format!(
                "/usr/lib/debug/.build-id/{}/{}.debug",
                &hex[..2],
                &hex[2..]
            ));
            if p.is_file() {
                return Some(p);
            }
            // What `debuginfod-find debuginfo FILE` fetched (elfutils' client keeps it by
            // build id in its cache).
            if let Some(p) = debuginfod_cache_dirs()
                .into_iter()
                .map(|d| d.join(&hex).join("debuginfo"))
                .find(|p| p.is_file())
            {
                return Some(p);
            }
        }
        let link = Path::new(std::ffi::OsStr::from_bytes(self.debuglink.as_deref()?));
        let dir = self.path.parent()?;
        let global = Path::new("/usr/lib/debug").join(dir.strip_prefix("/").unwrap_or(dir));
        [
            dir.join(link),
            dir.join(".debug").join(link),
            global.join(link),
        ]
        .into_iter()
        .find(|p| p.is_file() && p.as_path() != self.path.as_path())
    }

    fn dwarf(&self) -> Option<&addr2line::Context<Reader>> {
        self.dwarf
            .get_or_init(|| {
                let own = self.reopen().and_then(load_dwarf);
                // The C runtime's separate debug file (libc6-dbg) costs ~80 ms to
                // decompress and parse, once per recording, for line numbers inside
                // libc that no report shows as a call site; its symbol table, which
                // names the functions, is read by `symbols` all the same.
                if is_runtime_module(self.path.as_os_str().as_bytes()) {
                    return own;
                }
                own.or_else(|| load_dwarf(std::fs::File::open(self.debug_file()?).ok()?))
            })
            .as_ref()
    }

    /// Go's line table (.gopclntab, or .data.rel.ro.gopclntab in a position-independent
    /// executable), when this is a Go executable of 1.18 or later.
    fn go_table(&self) -> Option<&GoLineTable> {
        if !self.has_go_table {
            // Not Go: the file is not parsed a second time.
            return None;
        }
        self.go
            .get_or_init(|| {
                let f = self.reopen()?;
                let cache = read_cache(f);
                let file = object::File::parse(&cache).ok()?;
                let s = go_table_section(&file)?;
                let data = s.uncompressed_data().ok()?.into_owned();
                let moduledata = go_moduledata(&file, s.address()..s.address() + s.size());
                // The two symbols asked for, in one pass over the table.
                let (mut runtime_text, mut gofunc_sym) = (None, None);
                for sym in file.symbols() {
                    match sym.name_bytes() {
                        Ok(b"runtime.text") => runtime_text = Some(sym.address()),
                        Ok(b"go:func.*") => gofunc_sym = Some(sym.address()),
                        _ => continue,
                    }
                    if runtime_text.is_some() && gofunc_sym.is_some() {
                        break;
                    }
                }
                let text = go_text_start(
                    file.section_by_name(".text")?.address(),
                    runtime_text,
                    &data,
                    moduledata.map(|m| m.0),
                );
                // The inline trees are offsets from go:func.* (in .rodata), which only the
                // symbol table locates.
                let at = |addr: u64| {
                    let sec = file
                        .sections()
                        .find(|sec| (sec.address()..sec.address() + sec.size()).contains(&addr))?;
                    sec.file_range()?;
                    let off = usize::try_from(addr - sec.address()).ok()?;
                    Some((sec.uncompressed_data().ok()?.into_owned(), off))
                };
                let gofunc = gofunc_sym
                    // Stripped (`-s`: every `go test` and `go run` binary): the runtime's
                    // module data says where go:func.* is.
                    .or(moduledata.map(|m| m.1))
                    .and_then(at);
                GoLineTable::parse_with(data, text, gofunc)
            })
            .as_ref()
    }

    /// What the names `symbolize` gives depend on, as the key of the names kept between
    /// recordings (names.rs): this file's path and identity, its build id, and the
    /// identity of its separate debug file, if one is installed.
    pub fn names_key(&self) -> u64 {
        let debug = self.debug_file();
        let debug_key = debug.as_deref().and_then(FileKey::stat);
        super::names::key((&self.path, self.key, &self.build_id, &debug, debug_key))
    }

    /// The source frames at `svma` (innermost first), from DWARF where the file (or its
    /// debug file) has it, else from Go's line table in a Go executable, else the symbol
    /// name alone. Empty when nothing is known.
    pub fn symbolize(&self, svma: u64, out: &mut Vec<SourceFrame>) {
        out.clear();
        if let Some(ctx) = self.dwarf() {
            if let Ok(mut frames) = ctx.find_frames(svma).skip_all_loads() {
                while let Ok(Some(f)) = frames.next() {
                    let function = f
                        .function
                        .as_ref()
                        .and_then(|n| n.demangle().ok())
                        .map(Cow::into_owned);
                    let (file, line, column) = match f.location {
                        Some(l) => (
                            l.file.map(str::to_owned),
                            l.line.unwrap_or(0),
                            l.column.unwrap_or(0),
                        ),
                        None => (None, 0, 0),
                    };
                    out.push(SourceFrame {
                        function,
                        file,
                        line,
                        column,
                    });
                    if out.len() >= 32 {
                        break;
                    }
                }
            }
        }
        // No DWARF line here: a Go executable built without DWARF (-w) still has its line
        // table, which names function, file and line (also when -s took the symbols).
        if out.first().is_none_or(|f| f.file.is_none()) {
            if let Some(t) = self.go_table() {
                let mut frames = Vec::new();
                t.frames(svma, &mut frames);
                if !frames.is_empty() {
                    out.clear();
                    out.extend(frames.iter().map(|&(function, file, line)| SourceFrame {
                        function: Some(String::from_utf8_lossy(function).into_owned()),
                        file: file.map(|f| String::from_utf8_lossy(f).into_owned()),
                        line,
                        column: 0,
                    }));
                    return;
                }
            }
        }
        // DWARF without a name for the function that holds the code (or no DWARF at all):
        // the symbol table names it; in a stripped file, the start of the code's entry in
        // the unwind tables (`sub_1c1500`), so that a function's calls are one site.
        if out.last().is_none_or(|f| f.function.is_none()) {
            let function = match self.symbols().lookup(svma) {
                Some(name) => {
                    let name = String::from_utf8_lossy(name);
                    Some(addr2line::demangle_auto(name, None).into_owned())
                }
                None => self
                    .function_start(svma)
                    .map(dejavu_trace::unnamed_function),
            };
            if let Some(function) = function {
                match out.last_mut() {
                    Some(f) => f.function = Some(function),
                    None => out.push(SourceFrame {
                        function: Some(function),
                        ..SourceFrame::default()
                    }),
                }
            }
        }
    }

    /// Where the function that holds `svma` starts, by the unwind tables: the start of the
    /// CFI entry (FDE) that covers it. A compiler writes one entry per function (and one
    /// per part it moved out: `.cold`), so the entries say where functions are in a file
    /// without symbols.
    fn function_start(&self, svma: u64) -> Option<u64> {
        let starts = self.fde_ranges.get_or_init(|| self.read_fde_ranges());
        let i = starts.partition_point(|r| r.0 <= svma).checked_sub(1)?;
        let (start, len) = starts[i];
        (svma < start.saturating_add(len)).then_some(start)
    }

    /// Every CFI entry's [start, start + len) of the table the unwinder reads (.eh_frame,
    /// else .debug_frame), sorted: read once, on the first address nothing else named.
    fn read_fde_ranges(&self) -> Vec<(u64, u64)> {
        fn collect<'a, S>(section: &S, bases: &gimli::BaseAddresses, out: &mut Vec<(u64, u64)>)
        where
            S: gimli::UnwindSection<gimli::EndianSlice<'a, gimli::RunTimeEndian>>,
        {
            let mut entries = section.entries(bases);
            // Bounded, as cfi_coverage: a damaged table ends the walk.
            for _ in 0..1_000_000 {
                match entries.next() {
                    Ok(Some(gimli::CieOrFde::Fde(partial))) => {
                        if let Ok(fde) = partial.parse(S::cie_from_offset) {
                            if fde.len() > 0 {
                                out.push((fde.initial_address(), fde.len()));
                            }
                        }
                    }
                    Ok(Some(gimli::CieOrFde::Cie(_))) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        }
        let u = &self.unwind;
        let mut out = Vec::new();
        let bases = gimli::BaseAddresses::default()
            .set_text(u.text_svma.as_ref().map_or(0, |r| r.start))
            .set_got(u.got_svma.as_ref().map_or(0, |r| r.start));
        if let Some((at, data)) = &u.eh_frame {
            let bases = bases.set_eh_frame(at.start);
            let mut eh = gimli::EhFrame::new(data, self.endian);
            eh.set_address_size(self.address_size);
            collect(&eh, &bases, &mut out);
        } else if let Some(data) = &u.debug_frame {
            let mut debug = gimli::DebugFrame::new(data, self.endian);
            debug.set_address_size(self.address_size);
            collect(&debug, &bases, &mut out);
        }
        out.sort_unstable();
        out
    }
}

/// Where elfutils' debuginfod client keeps what it fetched: $DEBUGINFOD_CACHE_PATH when
/// set, else $XDG_CACHE_HOME/debuginfod_client (~/.cache/debuginfod_client), and its
/// older place, ~/.debuginfod_client_cache.
fn debuginfod_cache_dirs() -> Vec<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = env("DEBUGINFOD_CACHE_PATH") {
        return vec![p];
    }
    let home = env("HOME");
    let mut dirs = Vec::new();
    match (env("XDG_CACHE_HOME"), &home) {
        (Some(x), _) => dirs.push(x.join("debuginfod_client")),
        (None, Some(h)) => dirs.push(h.join(".cache/debuginfod_client")),
        (None, None) => {}
    }
    if let Some(h) = home {
        dirs.push(h.join(".debuginfod_client_cache"));
    }
    dirs
}

/// The function symbols of a file's symbol table (`names`: the table and its strings);
/// None if the file has no such table.
fn read_symbols(
    f: std::fs::File,
    names: (&str, &str),
    is_code: &dyn Fn(u64) -> bool,
) -> Option<Symbols> {
    let cache = read_cache(f);
    let file = object::File::parse(&cache).ok()?;
    // The tables are read whole (two reads) and parsed here: through the read cache, every
    // name would be a read of its own, and node has 100,000 of them.
    let table = file.section_by_name(names.0)?.data().ok()?;
    let strings = file.section_by_name(names.1)?.data().ok()?;
    if table.is_empty() {
        return None;
    }
    let little = file.is_little_endian();
    Some(parse_symbols(table, strings, file.is_64(), little, is_code))
}

/// The function symbols of an ELF symbol table (`table`: its entries, `strings`: the
/// string table it names), sorted by address, one per address.
fn parse_symbols(
    table: &[u8],
    strings: &[u8],
    is_64: bool,
    little: bool,
    is_code: &dyn Fn(u64) -> bool,
) -> Symbols {
    let u16_at = |b: &[u8], o: usize| {
        let v = [b[o], b[o + 1]];
        if little {
            u16::from_le_bytes(v)
        } else {
            u16::from_be_bytes(v)
        }
    };
    let u32_at = |b: &[u8], o: usize| {
        let v = [b[o], b[o + 1], b[o + 2], b[o + 3]];
        if little {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }
    };
    let u64_at = |b: &[u8], o: usize| {
        let (hi, lo) = if little {
            (u32_at(b, o + 4), u32_at(b, o))
        } else {
            (u32_at(b, o), u32_at(b, o + 4))
        };
        (u64::from(hi) << 32) | u64::from(lo)
    };
    let mut out = Symbols::default();
    let size = if is_64 { 24 } else { 16 };
    for e in table.chunks_exact(size) {
        // Elf64_Sym: name u32, info u8, other u8, shndx u16, value u64, size u64.
        // Elf32_Sym: name u32, value u32, size u32, info u8, other u8, shndx u16.
        let (name, info, shndx, addr, len) = if is_64 {
            (
                u32_at(e, 0),
                e[4],
                u16_at(e, 6),
                u64_at(e, 8),
                u64_at(e, 16),
            )
        } else {
            let (v, l) = (u32_at(e, 4), u32_at(e, 8));
            (
                u32_at(e, 0),
                e[12],
                u16_at(e, 14),
                u64::from(v),
                u64::from(l),
            )
        };
        let kind = info & 0xf;
        // Functions; and untyped labels in code (hand-written assembly such as _start),
        // which are kept below only where no sized function covers them.
        let wanted = kind == object::elf::STT_FUNC
            || kind == object::elf::STT_GNU_IFUNC
            || (kind == object::elf::STT_NOTYPE && is_code(addr));
        if !wanted || shndx == object::elf::SHN_UNDEF || addr == 0 {
            continue;
        }
        let Some(rest) = strings.get(name as usize..) else {
            continue;
        };
        let name = &rest[..rest.iter().position(|&c| c == 0).unwrap_or(rest.len())];
        let (Ok(off), Ok(n)) = (u32::try_from(out.names.len()), u32::try_from(name.len())) else {
            break;
        };
        out.names.extend_from_slice(name);
        out.syms.push(Sym {
            addr,
            size: len,
            name: (off, n),
        });
    }
    // Aliases share an address: keep one, preferring a sized symbol (it can say where the
    // function ends).
    out.syms
        .sort_by(|a, b| a.addr.cmp(&b.addr).then((b.size != 0).cmp(&(a.size != 0))));
    out.syms.dedup_by_key(|s| s.addr);
    // An unsized symbol inside a sized function is a label in it, not a function: it
    // would otherwise name the rest of the function.
    let mut covered = 0u64;
    out.syms.retain(|s| {
        let keep = s.size != 0 || s.addr >= covered;
        if s.size != 0 {
            covered = covered.max(s.addr.saturating_add(s.size));
        }
        keep
    });
    out
}

/// Bytes of code a CFI table has unwind rules for (at most the first 100,000 entries: the
/// tables compared are small, a big one wins anyway).
fn cfi_coverage<'a, S>(section: &S, bases: &gimli::BaseAddresses) -> u64
where
    S: gimli::UnwindSection<gimli::EndianSlice<'a, gimli::RunTimeEndian>>,
{
    let mut entries = section.entries(bases);
    let mut total = 0u64;
    for _ in 0..100_000 {
        match entries.next() {
            Ok(Some(gimli::CieOrFde::Fde(partial))) => {
                if let Ok(fde) = partial.parse(S::cie_from_offset) {
                    total = total.saturating_add(fde.len());
                }
            }
            Ok(Some(gimli::CieOrFde::Cie(_))) => {}
            Ok(None) | Err(_) => break,
        }
    }
    total
}

/// Builds an addr2line context from a file's DWARF sections (copied); None without
/// .debug_info.
fn load_dwarf(f: std::fs::File) -> Option<addr2line::Context<Reader>> {
    let cache = read_cache(f);
    let file = object::File::parse(&cache).ok()?;
    file.section_by_name(".debug_info")?.file_range()?;
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let empty: Bytes = Arc::from(&[][..]);
    let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
        use gimli::SectionId as S;
        // Only what names functions and lines: location lists and macros (often the
        // largest sections, compressed in distributions' debug files) are never read.
        let wanted = matches!(
            id,
            S::DebugAbbrev
                | S::DebugAddr
                | S::DebugAranges
                | S::DebugInfo
                | S::DebugLine
                | S::DebugLineStr
                | S::DebugRanges
                | S::DebugRngLists
                | S::DebugStr
                | S::DebugStrOffsets
        );
        let data = wanted
            .then(|| section_bytes(&file, id.name()))
            .flatten()
            .map_or_else(|| empty.clone(), |(_, b)| b);
        Ok(gimli::EndianArcSlice::new(data, endian))
    })
    .ok()?;
    addr2line::Context::from_dwarf(dwarf).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_exe() -> ElfModule {
        let exe = std::env::current_exe().expect("current exe");
        ElfModule::open(&exe).expect("the test binary is ELF")
    }

    #[test]
    fn a_go_line_tables_text_start_is_runtime_text() {
        // pcHeader: magic, pads, quantum, ptr size 8, then nfunc, nfiles, textStart.
        let mut header = vec![0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8];
        header.extend(7u64.to_le_bytes());
        header.extend(3u64.to_le_bytes());
        header.extend(0x40_4740u64.to_le_bytes());
        // The symbol first, then the header's textStart (Go 1.18 to 1.22), then the module
        // data's text (a later Go writes no textStart), then .text's address.
        assert_eq!(
            go_text_start(0x40_4640, Some(0x40_2400), &header, None),
            0x40_2400
        );
        assert_eq!(go_text_start(0x40_4640, None, &header, Some(1)), 0x40_4740);
        header[24..32].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(
            go_text_start(0x40_2300, None, &header, Some(0x40_2400)),
            0x40_2400
        );
        assert_eq!(go_text_start(0x40_2300, None, &header, None), 0x40_2300);
        assert_eq!(
            go_text_start(0x40_2300, None, &header[..20], None),
            0x40_2300
        );
    }

    #[test]
    fn the_test_binary_has_unwind_tables_and_segments() {
        let m = own_exe();
        let info = m.section_info();
        assert!(info.eh_frame.is_some() && info.eh_frame_hdr.is_some());
        assert!(info.text_svma.is_some());
        // The first page holds the ELF header, in the first PT_LOAD segment.
        assert!(m.svma_delta(0, 4096).is_some());
        assert_eq!(m.svma_delta(u64::MAX - 4096, 4096), None);
    }

    fn module(loads: Vec<Load>) -> ElfModule {
        ElfModule {
            path: PathBuf::new(),
            key: FileKey {
                dev: 0,
                ino: 0,
                size: 0,
                mtime: 0,
                mtime_nsec: 0,
            },
            loads,
            unwind: UnwindSections::default(),
            build_id: None,
            debuglink: None,
            symbols: OnceLock::new(),
            dwarf: OnceLock::new(),
            go: OnceLock::new(),
            has_go_table: false,
            endian: gimli::RunTimeEndian::Little,
            address_size: 8,
            fde_ranges: OnceLock::new(),
        }
    }

    #[test]
    fn the_code_segment_is_found_when_its_page_starts_in_the_one_before() {
        // As lld lays out a Rust binary: the code segment starts mid-page in the file
        // and one page higher in memory; its mapping starts at the page boundary.
        let m = module(vec![
            Load {
                offset: 0,
                vaddr: 0,
                filesz: 0x14c88,
                exec: false,
            },
            Load {
                offset: 0x14c90,
                vaddr: 0x15c90,
                filesz: 0x40a60,
                exec: true,
            },
        ]);
        assert_eq!(m.svma_delta(0x14000, 0x42000), Some(0x1000));
        assert_eq!(m.svma_delta(0, 0x1000), Some(0), "the header page");
        assert_eq!(m.svma_delta(0x100000, 0x1000), None, "past every segment");
        // A non-PIE executable: addresses far above offsets.
        let exe = module(vec![Load {
            offset: 0x1000,
            vaddr: 0x401000,
            filesz: 0x2000,
            exec: true,
        }]);
        assert_eq!(exe.svma_delta(0x1000, 0x1000), Some(0x400000));
    }

    /// An Elf64_Sym (little-endian).
    fn sym64(name: u32, kind: u8, shndx: u16, addr: u64, size: u64) -> Vec<u8> {
        let mut e = name.to_le_bytes().to_vec();
        e.extend([kind, 0]);
        e.extend(shndx.to_le_bytes());
        e.extend(addr.to_le_bytes());
        e.extend(size.to_le_bytes());
        e
    }

    #[test]
    fn symbol_tables_are_parsed_and_looked_up_by_address() {
        use object::elf::{STT_FUNC, STT_NOTYPE, STT_OBJECT};
        let strings = b"\0a\0asm\0alias\0data\0undef\0label\0_start\0";
        let table: Vec<u8> = [
            sym64(0, 0, 0, 0, 0), // the null symbol
            sym64(1, STT_FUNC, 1, 0x100, 0x10),
            sym64(3, STT_FUNC, 1, 0x200, 0),
            sym64(7, STT_FUNC, 1, 0x100, 0),
            sym64(13, STT_OBJECT, 2, 0x300, 8),
            sym64(18, STT_FUNC, 0, 0x400, 8),
            sym64(24, STT_NOTYPE, 1, 0x108, 0), // a label inside `a`
            sym64(30, STT_NOTYPE, 1, 0x50, 0),  // assembly entry point
            sym64(30, STT_NOTYPE, 2, 0x5000, 0), // a data label
        ]
        .concat();
        let code = |a: u64| a < 0x1000;
        let s = parse_symbols(&table, strings, true, true, &code);
        assert_eq!(s.syms.len(), 3, "functions, defined, one per address");
        assert_eq!(s.lookup(0x105), Some(&b"a"[..]), "the sized alias wins");
        assert_eq!(s.lookup(0x110), None, "past the end of a sized symbol");
        assert_eq!(
            s.lookup(0x2ff),
            Some(&b"asm"[..]),
            "unsized: up to the next"
        );
        assert_eq!(s.lookup(0x10), None, "before every symbol");
        assert_eq!(
            s.lookup(0x60),
            Some(&b"_start"[..]),
            "an untyped label in code"
        );
        assert_eq!(
            s.lookup(0x10c),
            Some(&b"a"[..]),
            "a label does not split a function"
        );
        assert_eq!(
            s.lookup(0x404),
            Some(&b"asm"[..]),
            "data and undefined are skipped"
        );
        // A truncated table or a name past the string table: no panic.
        let s = parse_symbols(&table[..30], b"", true, true, &code);
        assert!(s.syms.len() <= 1);
    }

    #[inline(never)]
    fn a_named_function() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn symbolizes_a_function_of_the_test_binary() {
        let m = own_exe();
        // This function's address in our own process, back to a file offset through our
        // own maps, then to the file's SVMA: the path every traced frame takes.
        let addr = a_named_function as *const () as usize as u64;
        assert_eq!(a_named_function(), 7);
        let maps = super::super::maps::read(std::process::id() as i32).expect("maps");
        let map = super::super::maps::find(&maps, addr).expect("mapped");
        let delta = m
            .svma_delta(map.offset, map.end - map.start)
            .expect("in a segment");
        let svma = (addr - map.start + map.offset).wrapping_add(delta);
        let mut out = Vec::new();
        m.symbolize(svma, &mut out);
        let f = out.last().expect("some frame");
        let name = f.function.as_deref().unwrap_or("");
        assert!(name.ends_with("a_named_function"), "{out:?}");
    }

    #[test]
    fn file_reads_serve_small_reads_from_one_window_and_large_ones_directly() {
        use object::ReadCacheOps;
        let bytes: Vec<u8> = (0..3 * WINDOW + 100).map(|i| (i % 251) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, &bytes).unwrap();
        let mut r = FileReads::new(std::fs::File::open(&path).unwrap());
        assert_eq!(r.len(), Ok(bytes.len() as u64));
        let at = |r: &mut FileReads, pos: usize, len: usize| {
            let mut b = vec![0u8; len];
            r.seek(pos as u64).unwrap();
            r.read_exact(&mut b).map(|()| b)
        };
        // Names near each other: one read of the file between them.
        for (pos, len) in [(100, 10), (356, 256), (5000, 256), (110, 3)] {
            assert_eq!(at(&mut r, pos, len).unwrap(), bytes[pos..pos + len]);
        }
        assert_eq!(r.reads, 1);
        // Across the window's end: the rest comes from a read at the window's end.
        let pos = 100 + WINDOW - 5;
        assert_eq!(at(&mut r, pos, 20).unwrap(), bytes[pos..pos + 20]);
        assert_eq!(r.reads, 2);
        // A section's data, larger than the window: read whole where it is.
        assert_eq!(at(&mut r, 7, 2 * WINDOW).unwrap(), bytes[7..7 + 2 * WINDOW]);
        // The end of the file: a short read, then nothing; read_exact past it fails.
        let end = bytes.len();
        r.seek(end as u64 - 4).unwrap();
        let mut b = [0u8; 64];
        assert_eq!(r.read(&mut b), Ok(4));
        assert_eq!(&b[..4], &bytes[end - 4..]);
        assert_eq!(r.read(&mut b), Ok(0));
        assert!(at(&mut r, end - 4, 8).is_err());
    }

    #[test]
    fn an_elf_file_parses_through_the_windowed_reads_as_from_memory() {
        let exe = std::env::current_exe().unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        let mem = object::File::parse(&*bytes).unwrap();
        let cache = read_cache(std::fs::File::open(&exe).unwrap());
        let file = object::File::parse(&cache).unwrap();
        fn names<'d, O: Object<'d>>(f: &O) -> Vec<(String, u64, u64)> {
            f.sections()
                .map(|s| (s.name().unwrap_or("?").to_owned(), s.address(), s.size()))
                .collect()
        }
        let want = names(&mem);
        assert!(want.len() > 20, "{} sections", want.len());
        assert_eq!(names(&file), want);
        assert_eq!(file.build_id().unwrap(), mem.build_id().unwrap());
        // Every section's name was read, yet only a few reads went to the file (the
        // read cache alone asks for each name at its own offset: one read per name).
        let reads = cache.into_inner().reads;
        assert!(reads <= 8, "{reads} reads for {} section names", want.len());
    }

    #[test]
    fn a_file_that_is_not_elf_is_none() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("x");
        std::fs::write(&p, b"#!/bin/sh\necho hi\n").expect("write");
        assert!(ElfModule::open(&p).is_none());
        assert!(ElfModule::open(&d.path().join("missing")).is_none());
    }
}
