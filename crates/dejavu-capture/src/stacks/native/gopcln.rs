//! Go's own line table (`.gopclntab`), which every Go executable keeps for its runtime's
//! tracebacks, also when it was built without DWARF (`-ldflags=-w`, most release builds
//! and the Go toolchain's own tools) or stripped of its symbol table too (`-s`): function,
//! file and line of a code address, as `runtime.FuncForPC` and `go tool addr2line` give
//! them. The layout of Go 1.18 and later (magic 0xfffffff0 and 0xfffffff1), read as the
//! standard library's debug/gosym reads it; older layouts are not read.
//!
//! Code the compiler inlined into another function gives a frame per inlined call, as
//! DWARF does, from the function's inline tree (in the `go:func.*` data the symbol table
//! locates, or without a symbol table (`-s`) the runtime's module data: elf.rs,
//! `go_moduledata`; Go 1.20 and later). Where neither finds it, the address is
//! named by the function the code was inlined into, at the file and line of the inlined
//! code (what `runtime.FuncForPC(pc).FileLine` says).

/// A parsed line table: the section's bytes and where its parts start.
pub struct GoLineTable {
    data: Vec<u8>,
    text_start: u64,
    quantum: u32,
    nfunc: usize,
    funcnametab: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    functab: usize,
    /// Bytes of a _func before its pcdata offsets (Go 1.20 added startLine).
    func_fixed: usize,
    /// The `go:func.*` data that inline trees are offsets into: its bytes, from the
    /// start of the section holding it (section bytes, offset of go:func.* in them).
    gofunc: Option<(Vec<u8>, usize)>,
}

/// A frame of the source-level stack at an address.
pub type GoFrame<'a> = (&'a [u8], Option<&'a [u8]>, u32);

/// pcdata and funcdata indexes of the inline tree (internal/abi).
const PCDATA_INL_TREE_INDEX: usize = 2;
const FUNCDATA_INL_TREE: usize = 3;
/// Inlined calls per address followed at most.
const MAX_INLINED: usize = 32;

/// Go 1.18's and Go 1.20's magic numbers (the layouts read here are the same).
const MAGIC_118: u32 = 0xffff_fff0;
const MAGIC_120: u32 = 0xffff_fff1;

fn u32_at(d: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        d.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn cstr(d: &[u8], off: usize) -> Option<&[u8]> {
    let s = d.get(off..)?;
    Some(&s[..s.iter().position(|&b| b == 0)?])
}

impl GoLineTable {
    #[cfg(test)]
    /// The table in `data` (the .gopclntab section's bytes) of a file whose .text section
    /// starts at `text_start`; None if it is not a little-endian Go 1.18+ table or its
    /// header points outside it.
    pub fn parse(data: Vec<u8>, text_start: u64) -> Option<GoLineTable> {
        Self::parse_with(data, text_start, None)
    }

    /// As `parse`, with the `go:func.*` data (`gofunc`: the bytes of the section holding
    /// it, and its offset in them) for the inline trees.
    pub fn parse_with(
        data: Vec<u8>,
        text_start: u64,
        gofunc: Option<(Vec<u8>, usize)>,
    ) -> Option<GoLineTable> {
        let magic = u32_at(&data, 0)?;
        if (magic != MAGIC_118 && magic != MAGIC_120) || data.get(4..6)? != [0, 0] {
            return None;
        }
        let quantum = u32::from(*data.get(6)?);
        let ptr = usize::from(*data.get(7)?);
        if quantum == 0 || (ptr != 4 && ptr != 8) {
            return None;
        }
        let word = |w: usize| -> Option<usize> {
            let off = 8 + w * ptr;
            let b = data.get(off..off + ptr)?;
            let v = if ptr == 8 {
                u64::from_le_bytes(b.try_into().ok()?)
            } else {
                u64::from(u32::from_le_bytes(b.try_into().ok()?))
            };
            usize::try_from(v).ok()
        };
        let nfunc = word(0)?;
        let (funcnametab, cutab, filetab, pctab, functab) =
            (word(3)?, word(4)?, word(5)?, word(6)?, word(7)?);
        let functab_end = nfunc
            .checked_mul(2)?
            .checked_add(1)?
            .checked_mul(4)?
            .checked_add(functab)?;
        let len = data.len();
        if nfunc == 0
            || functab_end > len
            || [funcnametab, cutab, filetab, pctab]
                .iter()
                .any(|&o| o >= len)
        {
            return None;
        }
        let go120 = magic == MAGIC_120;
        Some(GoLineTable {
            data,
            text_start,
            quantum,
            nfunc,
            funcnametab,
            cutab,
            filetab,
            pctab,
            functab,
            func_fixed: if go120 { 44 } else { 40 },
            // Go 1.18's inline tree entries have another layout: not read.
            gofunc: gofunc.filter(|_| go120),
        })
    }

    /// Entry address of the i-th function (i == nfunc: the end of the last one).
    fn entry(&self, i: usize) -> Option<u64> {
        let off = u32_at(&self.data, self.functab + 8 * i)?;
        self.text_start.checked_add(u64::from(off))
    }

    /// (function, file, line) of code address `pc`, the innermost frame of `frames`.
    #[cfg(test)]
    pub fn lookup(&self, pc: u64) -> Option<GoFrame<'_>> {
        let mut v = Vec::new();
        self.frames(pc, &mut v);
        v.first().copied()
    }

    /// The frames at code address `pc` (the address the file's tables use), innermost
    /// first: one per inlined call (when the inline tree is known), then the function
    /// the code is in. Empty outside the table's functions. A file is None, or a line 0,
    /// where the table says nothing.
    pub fn frames<'a>(&'a self, pc: u64, out: &mut Vec<GoFrame<'a>>) {
        out.clear();
        let Some((func, entry, name)) = self.func_at(pc) else {
            return;
        };
        let field = |n: usize| u32_at(&self.data, func + 4 * n);
        let at = |pc: u64| -> (Option<&'a [u8]>, u32) {
            let file = field(5).and_then(|t| self.file(func, self.pcvalue(t, entry, pc)?));
            let line = field(6)
                .and_then(|t| self.pcvalue(t, entry, pc))
                .and_then(|l| u32::try_from(l).ok())
                .unwrap_or(0);
            (file, line)
        };
        let mut pc = pc;
        if let Some(tree) = self.inline_tree(func) {
            let npcdata = field(7).and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
            let index_table = (PCDATA_INL_TREE_INDEX < npcdata)
                .then(|| {
                    u32_at(
                        &self.data,
                        func + self.func_fixed + 4 * PCDATA_INL_TREE_INDEX,
                    )
                })
                .flatten();
            while let Some(ix) = index_table.and_then(|t| self.pcvalue(t, entry, pc)) {
                // inlinedCall: funcID u8, 3 bytes, nameOff i32, parentPc i32, startLine i32.
                let call = usize::try_from(ix)
                    .ok()
                    .and_then(|i| tree.get(i * 16..i * 16 + 16));
                let Some(call) = call else { break };
                let name_off = u32::from_le_bytes(call[4..8].try_into().unwrap_or_default());
                let parent = u32::from_le_bytes(call[8..12].try_into().unwrap_or_default());
                let name = usize::try_from(name_off)
                    .ok()
                    .and_then(|o| cstr(&self.data, self.funcnametab.checked_add(o)?));
                let Some(name) = name else { break };
                let (file, line) = at(pc);
                out.push((name, file, line));
                let Some(parent) = entry.checked_add(u64::from(parent)) else {
                    break;
                };
                pc = parent;
                if out.len() >= MAX_INLINED {
                    break;
                }
            }
        }
        let (file, line) = at(pc);
        out.push((name, file, line));
    }

    /// The inline tree of the _func at `func`, when it has one and go:func.* is known.
    fn inline_tree(&self, func: usize) -> Option<&[u8]> {
        let (bytes, base) = self.gofunc.as_ref()?;
        let npcdata = usize::try_from(u32_at(&self.data, func + 28)?).ok()?;
        let nfuncdata = usize::from(*self.data.get(func + self.func_fixed - 1)?);
        if FUNCDATA_INL_TREE >= nfuncdata {
            return None;
        }
        let off = u32_at(
            &self.data,
            func + self.func_fixed + 4 * (npcdata + FUNCDATA_INL_TREE),
        )?;
        if off == u32::MAX {
            return None;
        }
        bytes.get(base.checked_add(usize::try_from(off).ok()?)?..)
    }

    /// The file numbered `fno` in the compilation unit of the _func at `func`.
    fn file(&self, func: usize, fno: i32) -> Option<&[u8]> {
        let cu = usize::try_from(u32_at(&self.data, func + 32)?).ok()?;
        let at = self
            .cutab
            .checked_add(cu.checked_add(usize::try_from(fno).ok()?)?.checked_mul(4)?)?;
        let off = u32_at(&self.data, at)?;
        if off == u32::MAX {
            return None;
        }
        cstr(
            &self.data,
            self.filetab.checked_add(usize::try_from(off).ok()?)?,
        )
    }

    /// The _func holding `pc` (its offset in the table), its entry address and name.
    fn func_at(&self, pc: u64) -> Option<(usize, u64, &[u8])> {
        if pc < self.entry(0)? || pc >= self.entry(self.nfunc)? {
            return None;
        }
        // The last function whose entry is at or before pc.
        let (mut lo, mut hi) = (0, self.nfunc);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid)? <= pc {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let func = self
            .functab
            .checked_add(usize::try_from(u32_at(&self.data, self.functab + 8 * lo + 4)?).ok()?)?;
        let entry = self
            .text_start
            .checked_add(u64::from(u32_at(&self.data, func)?))?;
        let name_off = usize::try_from(u32_at(&self.data, func + 4)?).ok()?;
        let name = cstr(&self.data, self.funcnametab.checked_add(name_off)?)?;
        Some((func, entry, name))
    }

    /// The value a pc-value table (at `off` in the pc tables) gives `target`, in a
    /// function that starts at `entry`; None where it has none (-1) or is malformed.
    fn pcvalue(&self, off: u32, entry: u64, target: u64) -> Option<i32> {
        if off == 0 {
            return None;
        }
        let mut p = self.pctab.checked_add(usize::try_from(off).ok()?)?;
        let d = &self.data;
        let varint = |p: &mut usize| -> Option<u32> {
            let (mut v, mut shift) = (0u32, 0u32);
            loop {
                let b = *d.get(*p)?;
                *p += 1;
                v |= u32::from(b & 0x7f).checked_shl(shift)?;
                if b & 0x80 == 0 {
                    return Some(v);
                }
                shift += 7;
                if shift > 28 {
                    return None;
                }
            }
        };
        let (mut pc, mut val) = (entry, -1i32);
        let mut first = true;
        // A function's table has one step per change of value; bounded all the same.
        for _ in 0..1_000_000 {
            let uv = varint(&mut p)?;
            if uv == 0 && !first {
                return None;
            }
            first = false;
            let delta = if uv & 1 != 0 { !(uv >> 1) } else { uv >> 1 } as i32;
            val = val.wrapping_add(delta);
            pc = pc.checked_add(u64::from(varint(&mut p)?.checked_mul(self.quantum)?))?;
            if target < pc {
                return (val >= 0).then_some(val);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table with one function, `main.f` at text+0x10..text+0x30 in file `a.go`: lines
    /// 7 for its first 0x8 bytes, then 9.
    fn table() -> Vec<u8> {
        let mut d = vec![0u8; 8 + 8 * 8];
        d[0..4].copy_from_slice(&MAGIC_120.to_le_bytes());
        d[6] = 1;
        d[7] = 8;
        let set = |d: &mut Vec<u8>, w: usize, v: usize| {
            d[8 + 8 * w..16 + 8 * w].copy_from_slice(&(v as u64).to_le_bytes())
        };
        set(&mut d, 0, 1);
        set(&mut d, 1, 1);
        let names = d.len();
        d.extend_from_slice(b"main.f\0");
        let cutab = d.len();
        d.extend_from_slice(&0u32.to_le_bytes());
        let filetab = d.len();
        d.extend_from_slice(b"a.go\0");
        let pctab = d.len();
        d.push(0); // a table at offset 0 is none
        let pcfile = d.len() - pctab;
        d.extend_from_slice(&[2, 0x20, 0]); // file 0 for 0x20 bytes
        let pcln = d.len() - pctab;
        d.extend_from_slice(&[16, 0x08, 4, 0x18, 0]); // 7 (-1 + 8) for 8 bytes, then 9
        let functab = d.len();
        d.extend_from_slice(&0x10u32.to_le_bytes()); // entry off
        d.extend_from_slice(&((3 * 4) as u32).to_le_bytes()); // func off from functab
        d.extend_from_slice(&0x30u32.to_le_bytes()); // end
                                                     // _func: entryOff, nameOff, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset
        for v in [0x10, 0, 0, 0, 0, pcfile as u32, pcln as u32, 0, 0] {
            d.extend_from_slice(&u32::to_le_bytes(v));
        }
        set(&mut d, 3, names);
        set(&mut d, 4, cutab);
        set(&mut d, 5, filetab);
        set(&mut d, 6, pctab);
        set(&mut d, 7, functab);
        d
    }

    #[test]
    fn a_table_names_function_file_and_line() {
        let t = GoLineTable::parse(table(), 0x1000).unwrap();
        assert_eq!(
            t.lookup(0x1010),
            Some((&b"main.f"[..], Some(&b"a.go"[..]), 7))
        );
        assert_eq!(
            t.lookup(0x1017),
            Some((&b"main.f"[..], Some(&b"a.go"[..]), 7))
        );
        assert_eq!(
            t.lookup(0x1018),
            Some((&b"main.f"[..], Some(&b"a.go"[..]), 9))
        );
        assert_eq!(t.lookup(0x100f), None);
        assert_eq!(t.lookup(0x1030), None);
    }

    #[test]
    fn damaged_tables_never_panic() {
        // Every byte of a good table set to values that break it, one at a time and a few
        // at once (a fixed pseudo-random sequence), and a text start at the top of the
        // address space: a lookup answers or says nothing.
        let good = table();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for text in [0x1000, u64::MAX - 0x20] {
            for i in 0..good.len() {
                for v in [0u8, 0x7f, 0x80, 0xff] {
                    let mut d = good.clone();
                    d[i] = v;
                    if let Some(t) = GoLineTable::parse(d, text) {
                        for pc in [text, text.wrapping_add(0x10), text.wrapping_add(0x18)] {
                            let _ = t.lookup(pc);
                        }
                    }
                }
            }
            for _ in 0..2000 {
                let mut d = good.clone();
                for _ in 0..4 {
                    let i = (next() % d.len() as u64) as usize;
                    d[i] = next() as u8;
                }
                if let Some(t) = GoLineTable::parse_with(d, text, Some((vec![0xff; 64], 8))) {
                    let _ = t.lookup(text.wrapping_add(next() % 0x40));
                }
            }
        }
    }

    #[test]
    fn other_layouts_and_cut_tables_are_none() {
        let mut d = table();
        d[0] = 0xfb; // Go 1.2's magic
        assert!(GoLineTable::parse(d, 0).is_none());
        let d = table();
        assert!(GoLineTable::parse(d[..40].to_vec(), 0).is_none());
        assert!(GoLineTable::parse(Vec::new(), 0).is_none());
        // Every cut of a good table parses or not, and looks up without a panic.
        let d = table();
        for n in 0..d.len() {
            if let Some(t) = GoLineTable::parse(d[..n].to_vec(), 0x1000) {
                for pc in 0x1000..0x1040 {
                    let _ = t.lookup(pc);
                }
            }
        }
    }
}
