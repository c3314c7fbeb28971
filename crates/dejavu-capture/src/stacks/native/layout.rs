//! A process's code mappings as its exec and mmap calls made them, for naming the frames
//! of a process that has exited before its stacks were unwound (the eBPF backend unwinds
//! after the fact; /proc/PID/maps is gone with the process).
//!
//! At exec the kernel maps the program and its interpreter (ld.so) itself; the kernel
//! half reports where: AT_PHDR (the program's program headers in memory) and AT_BASE
//! (the interpreter's load address) from the auxiliary vector. Their executable PT_LOAD
//! segments, placed by those addresses, are the first code mappings. Each later mmap of a
//! file with PROT_EXEC (ld.so loading a library, dlopen) adds one.

use super::maps::Mapping;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const PAGE: u64 = 4096;

/// A file's identity as /proc/PID/maps gives it: (major, minor), inode.
fn identity(path: &Path) -> Option<((u32, u32), u64)> {
    let m = std::fs::metadata(path).ok()?;
    let dev = m.dev();
    Some(((libc::major(dev), libc::minor(dev)), m.ino()))
}

/// The executable PT_LOAD segments of the ELF file at `path` loaded with `bias` (memory
/// address = file address + bias), as mappings; and its interpreter (PT_INTERP), if any.
/// `at_phdr`, when given, says where its program headers are in memory and so decides the
/// bias (the program's own image, whose bias the kernel chose).
fn load(
    path: &Path,
    bias: Option<u64>,
    at_phdr: Option<u64>,
) -> Option<(Vec<Mapping>, Option<Vec<u8>>)> {
    let data = std::fs::read(path).ok()?;
    let data = data.as_slice();
    let hdr = elf::FileHeader64::<object::Endianness>::parse(data).ok()?;
    let endian = hdr.endian().ok()?;
    let phdrs = hdr.program_headers(endian, data).ok()?;
    let bias = match (bias, at_phdr) {
        (Some(b), _) => b,
        (None, Some(at)) => {
            // Where the program headers are, by the file's own addresses: PT_PHDR, else
            // the segment that maps the file's start plus their file offset.
            let vaddr = phdrs
                .iter()
                .find(|p| p.p_type(endian) == elf::PT_PHDR)
                .map(|p| p.p_vaddr(endian))
                .or_else(|| {
                    phdrs
                        .iter()
                        .find(|p| p.p_type(endian) == elf::PT_LOAD && p.p_offset(endian) == 0)
                        .map(|p| p.p_vaddr(endian) + hdr.e_phoff(endian))
                })?;
            at.wrapping_sub(vaddr)
        }
        (None, None) => return None,
    };
    let (dev, inode) = identity(path)?;
    let interp = phdrs
        .iter()
        .find_map(|p| p.interpreter(endian, data).ok().flatten())
        .map(|i| i.to_vec());
    let maps = phdrs
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD && p.p_flags(endian) & elf::PF_X != 0)
        .filter_map(|p| {
            let vaddr = p.p_vaddr(endian);
            let start = bias.checked_add(vaddr & !(PAGE - 1))?;
            let end = bias
                .checked_add(vaddr.checked_add(p.p_memsz(endian))?)?
                .checked_add(PAGE - 1)?
                & !(PAGE - 1);
            Some(Mapping {
                start,
                end,
                exec: true,
                read: true,
                offset: p.p_offset(endian) & !(PAGE - 1),
                dev,
                inode,
                path: path.as_os_str().as_bytes().to_vec(),
                deleted: false,
            })
        })
        .collect();
    Some((maps, interp))
}

/// The code mappings of a process right after it exec'd `exe` (an absolute path), with
/// the auxiliary vector's AT_PHDR and AT_BASE (0: no interpreter).
pub fn at_exec(exe: &Path, at_phdr: u64, at_base: u64) -> Vec<Mapping> {
    let Some((mut maps, interp)) = load(exe, None, Some(at_phdr)) else {
        return Vec::new();
    };
    if let (Some(i), true) = (interp, at_base != 0) {
        let i = i.strip_suffix(b"\0").unwrap_or(&i).to_vec();
        // By its real path (/lib64/ld-linux-x86-64.so.2 is a link), as /proc names it.
        let given = Path::new(std::ffi::OsStr::from_bytes(&i));
        let ipath = std::fs::canonicalize(given).unwrap_or_else(|_| given.to_path_buf());
        if let Some((m, _)) = load(&ipath, Some(at_base), None) {
            maps.extend(m);
        }
    }
    maps.sort_by_key(|m| m.start);
    maps
}

/// Adds a file mapping made by mmap (`start..start+len` of `path` from `offset`) to
/// `maps`, replacing what it overlaps (MAP_FIXED over a reservation, as ld.so does).
pub fn mapped(maps: &mut Vec<Mapping>, start: u64, len: u64, offset: u64, path: &[u8]) {
    let Some(end) = start.checked_add(len) else {
        return;
    };
    // By its real path, as /proc names it (ld.so opens libraries by their search path).
    let given = Path::new(std::ffi::OsStr::from_bytes(path));
    let real = std::fs::canonicalize(given).unwrap_or_else(|_| given.to_path_buf());
    let Some((dev, inode)) = identity(&real) else {
        return;
    };
    unmapped(maps, start, len);
    maps.push(Mapping {
        start,
        end: (end + PAGE - 1) & !(PAGE - 1),
        exec: true,
        read: true,
        offset,
        dev,
        inode,
        path: real.as_os_str().as_bytes().to_vec(),
        deleted: false,
    });
    maps.sort_by_key(|m| m.start);
}

/// Removes `start..start+len` from `maps` (munmap, or a new mapping over it).
pub fn unmapped(maps: &mut Vec<Mapping>, start: u64, len: u64) {
    let end = start.saturating_add(len);
    let mut out = Vec::with_capacity(maps.len() + 1);
    for m in maps.drain(..) {
        if m.end <= start || m.start >= end {
            out.push(m);
            continue;
        }
        if m.start < start {
            out.push(Mapping {
                end: start,
                ..m.clone()
            });
        }
        if m.end > end {
            out.push(Mapping {
                offset: m.offset + (end - m.start),
                start: end,
                ..m
            });
        }
    }
    *maps = out;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Our own process: the layout built from the auxiliary vector (read from /proc here)
    /// holds the same code mappings for the program and ld.so as /proc/self/maps.
    #[test]
    fn the_exec_layout_matches_proc_maps_for_the_program_and_its_interpreter() {
        let auxv = std::fs::read("/proc/self/auxv").unwrap();
        let mut at = std::collections::HashMap::new();
        for pair in auxv.chunks_exact(16) {
            let k = u64::from_ne_bytes(pair[..8].try_into().unwrap());
            let v = u64::from_ne_bytes(pair[8..].try_into().unwrap());
            at.insert(k, v);
        }
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let got = at_exec(&exe, at[&3], at.get(&7).copied().unwrap_or(0));
        let real = super::super::maps::read(std::process::id() as i32).unwrap();
        let exe_b = exe.as_os_str().as_bytes();
        let code: Vec<&Mapping> = real
            .iter()
            .filter(|m| m.exec && (m.path == exe_b || m.path.windows(5).any(|w| w == b"ld-li")))
            .collect();
        assert!(!code.is_empty());
        for m in code {
            let g = got
                .iter()
                .find(|g| g.start == m.start)
                .unwrap_or_else(|| panic!("{m:x?} not in {got:x?}"));
            assert_eq!(
                (g.end, g.offset, g.inode),
                (m.end, m.offset, m.inode),
                "{m:x?}"
            );
        }
    }

    #[test]
    fn a_mapping_over_others_replaces_what_it_covers() {
        let m = |s: u64, e: u64, o: u64| Mapping {
            start: s,
            end: e,
            exec: true,
            read: true,
            offset: o,
            dev: (0, 0),
            inode: 1,
            path: b"/x".to_vec(),
            deleted: false,
        };
        let mut maps = vec![m(0x1000, 0x5000, 0)];
        unmapped(&mut maps, 0x2000, 0x1000);
        assert_eq!(maps, [m(0x1000, 0x2000, 0), m(0x3000, 0x5000, 0x2000)]);
        unmapped(&mut maps, 0, 0x10000);
        assert!(maps.is_empty());
    }
}
