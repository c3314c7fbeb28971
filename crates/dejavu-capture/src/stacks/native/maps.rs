//! /proc/PID/maps: which file (or anonymous memory) backs each address range of a process.
//! The unwinder needs the executable mappings (code and its module) and the mapping that
//! holds the stack pointer (how far up the stack can be read).

/// One line of /proc/PID/maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `x` permission: code.
    pub exec: bool,
    /// `r` permission.
    pub read: bool,
    /// File offset of `start`.
    pub offset: u64,
    /// Device of the backing file (major, minor), as the kernel prints it.
    pub dev: (u32, u32),
    /// Inode of the backing file; 0 for anonymous memory and pseudo-files.
    pub inode: u64,
    /// The path, `[stack]`, `[vdso]`, `[anon:...]`, or empty; " (deleted)" removed.
    pub path: Vec<u8>,
    /// The file was deleted after it was mapped (the path no longer names it).
    pub deleted: bool,
}

impl Mapping {
    /// Backed by a file that can be opened by its path (not anonymous, not `[vdso]`).
    pub fn is_file(&self) -> bool {
        self.inode != 0 && self.path.first() == Some(&b'/') && !self.deleted
    }

    /// Whether `addr` falls inside.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }
}

fn hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | u64::from(d);
    }
    Some(v)
}

fn dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |v, &c| {
        c.is_ascii_digit()
            .then(|| v.checked_mul(10)?.checked_add(u64::from(c - b'0')))
            .flatten()
    })
}

/// Splits off the next space-separated field; returns (field, rest after the spaces).
fn field(s: &[u8]) -> (&[u8], &[u8]) {
    let end = s.iter().position(|&c| c == b' ').unwrap_or(s.len());
    let mut rest = &s[end..];
    while let [b' ', r @ ..] = rest {
        rest = r;
    }
    (&s[..end], rest)
}

/// Parses one line; None for a line that does not have the kernel's format.
pub fn parse_line(line: &[u8]) -> Option<Mapping> {
    let (range, rest) = field(line);
    let (perms, rest) = field(rest);
    let (offset, rest) = field(rest);
    let (dev, rest) = field(rest);
    let (inode, rest) = field(rest);
    let dash = range.iter().position(|&c| c == b'-')?;
    let start = hex(&range[..dash])?;
    let end = hex(&range[dash + 1..])?;
    let colon = dev.iter().position(|&c| c == b':')?;
    let major = u32::try_from(hex(&dev[..colon])?).ok()?;
    let minor = u32::try_from(hex(&dev[colon + 1..])?).ok()?;
    if perms.len() < 4 || start > end {
        return None;
    }
    // The path is the rest of the line: it may contain spaces (but not a newline; the
    // kernel escapes that as \012).
    let mut path = rest.to_vec();
    const DELETED: &[u8] = b" (deleted)";
    let deleted = path.ends_with(DELETED);
    if deleted {
        path.truncate(path.len() - DELETED.len());
    }
    Some(Mapping {
        start,
        end,
        read: perms[0] == b'r',
        exec: perms[2] == b'x',
        offset: hex(offset)?,
        dev: (major, minor),
        inode: dec(inode)?,
        path,
        deleted,
    })
}

/// Parses a whole maps file; lines that do not parse are skipped. Sorted by address, as
/// the kernel prints them.
pub fn parse(text: &[u8]) -> Vec<Mapping> {
    let mut v: Vec<Mapping> = text
        .split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(parse_line)
        .collect();
    // The kernel prints in address order; sorting keeps lookups right if it ever did not.
    if !v.windows(2).all(|w| w[0].start <= w[1].start) {
        v.sort_by_key(|m| m.start);
    }
    v
}

/// Reads and parses /proc/PID/maps; None if the process is gone.
pub fn read(pid: i32) -> Option<Vec<Mapping>> {
    std::fs::read(format!("/proc/{pid}/maps"))
        .ok()
        .map(|t| parse(&t))
}

/// Whether this kernel answers PROCMAP_QUERY (cleared at the first refusal).
static QUERY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// The mapping of process `pid` that holds `addr`, asked of the kernel alone
/// (PROCMAP_QUERY, Linux 6.11: one ioctl on /proc/PID/maps instead of reading every line):
/// Ok(None) when no mapping holds it; Err(()) when the kernel cannot say (older than 6.11,
/// the process gone): read the whole file then.
pub fn query(pid: i32, addr: u64) -> Result<Option<Mapping>, ()> {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;
    if !QUERY.load(Ordering::Relaxed) {
        return Err(());
    }
    // struct procmap_query (include/uapi/linux/fs.h).
    #[repr(C)]
    #[derive(Default)]
    struct Query {
        size: u64,
        query_flags: u64,
        query_addr: u64,
        vma_start: u64,
        vma_end: u64,
        vma_flags: u64,
        vma_page_size: u64,
        vma_offset: u64,
        inode: u64,
        dev_major: u32,
        dev_minor: u32,
        vma_name_size: u32,
        build_id_size: u32,
        vma_name_addr: u64,
        build_id_addr: u64,
    }
    // _IOWR('f', 17, struct procmap_query)
    const PROCMAP_QUERY: libc::c_ulong = 0xC068_6611;
    let f = std::fs::File::open(format!("/proc/{pid}/maps")).map_err(|_| ())?;
    let mut name = vec![0u8; 4096];
    let mut q = Query {
        size: std::mem::size_of::<Query>() as u64,
        query_addr: addr,
        vma_name_size: name.len() as u32,
        vma_name_addr: name.as_mut_ptr() as u64,
        ..Query::default()
    };
    // SAFETY: the ioctl reads and writes `q` (its size given in it) and writes at most
    // vma_name_size bytes into `name`, both alive for the call.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), PROCMAP_QUERY as _, &mut q as *mut Query) };
    if r != 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            Some(libc::ENOTTY | libc::EINVAL | libc::EOPNOTSUPP) => {
                QUERY.store(false, Ordering::Relaxed);
                Err(())
            }
            _ => Err(()),
        };
    }
    if !(q.vma_start <= addr && addr < q.vma_end) {
        return Ok(None);
    }
    // The name's size includes its terminating NUL; none for anonymous memory.
    name.truncate((q.vma_name_size as usize).saturating_sub(1).min(4096));
    const DELETED: &[u8] = b" (deleted)";
    let deleted = name.ends_with(DELETED);
    if deleted {
        name.truncate(name.len() - DELETED.len());
    }
    Ok(Some(Mapping {
        start: q.vma_start,
        end: q.vma_end,
        read: q.vma_flags & 1 != 0,
        exec: q.vma_flags & 4 != 0,
        offset: q.vma_offset,
        dev: (q.dev_major, q.dev_minor),
        inode: q.inode,
        path: name,
        deleted,
    }))
}

/// The mapping holding `addr` in a sorted list.
pub fn find(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    let i = maps.partition_point(|m| m.start <= addr);
    let m = maps.get(i.checked_sub(1)?)?;
    m.contains(addr).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_for_one_address_says_what_the_maps_file_says() {
        let me = std::process::id() as i32;
        let maps = read(me).unwrap();
        let code = query as *const () as u64;
        let stack = &maps as *const _ as u64;
        match query(me, code) {
            // A kernel before 6.11: the callers read the file.
            Err(()) => {
                eprintln!("PROCMAP_QUERY: not here");
                return;
            }
            Ok(m) => {
                let m = m.expect("our own code is mapped");
                let f = find(&maps, code).unwrap();
                assert_eq!(&m, f);
                assert!(m.exec && m.is_file());
            }
        }
        let s = query(me, stack).unwrap().expect("our stack is mapped");
        assert!(!s.exec && s.path.is_empty() || s.path == b"[stack]");
        assert_eq!(query(me, 8).unwrap(), None, "page 0 is never mapped");
    }

    const SAMPLE: &[u8] = b"\
00400000-00401000 r--p 00000000 08:01 1311                               /usr/bin/prog
00401000-00402000 r-xp 00001000 08:01 1311                               /usr/bin/prog
7f1c2e000000-7f1c2e021000 rw-p 00000000 00:00 0 
7f1c2e200000-7f1c2e228000 r--p 00000000 fd:00 4096                       /lib/x86_64-linux-gnu/libc.so.6
7f1c2e228000-7f1c2e39d000 r-xp 00028000 fd:00 4096                       /lib/x86_64-linux-gnu/libc.so.6
7f1c2e400000-7f1c2e401000 r-xp 00000000 00:1f 77                         /tmp/with space/lib.so (deleted)
7ffd5a3e1000-7ffd5a402000 rw-p 00000000 00:00 0                          [stack]
7ffd5a5f6000-7ffd5a5f8000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    #[test]
    fn parses_every_field() {
        let m = parse(SAMPLE);
        assert_eq!(m.len(), 9);
        assert_eq!(
            m[1],
            Mapping {
                start: 0x401000,
                end: 0x402000,
                exec: true,
                read: true,
                offset: 0x1000,
                dev: (8, 1),
                inode: 1311,
                path: b"/usr/bin/prog".to_vec(),
                deleted: false,
            }
        );
        assert_eq!(m[3].dev, (0xfd, 0));
        assert_eq!(m[4].offset, 0x28000);
        assert!(m[4].exec && m[4].is_file());
        assert!(!m[3].exec);
    }

    #[test]
    fn anonymous_and_pseudo_mappings_are_not_files() {
        let m = parse(SAMPLE);
        assert!(m[2].path.is_empty() && !m[2].is_file());
        assert_eq!(m[6].path, b"[stack]");
        assert!(!m[6].is_file());
        assert!(!m[7].is_file(), "[vdso] has no file to open");
        assert_eq!(m[8].start, 0xffffffffff600000);
        assert!(!m[8].read && m[8].exec);
    }

    #[test]
    fn paths_keep_spaces_and_lose_the_deleted_mark() {
        let m = parse(SAMPLE);
        assert_eq!(m[5].path, b"/tmp/with space/lib.so");
        assert!(m[5].deleted);
        assert!(!m[5].is_file(), "a deleted file's path names nothing");
    }

    #[test]
    fn find_uses_half_open_ranges() {
        let m = parse(SAMPLE);
        assert_eq!(find(&m, 0x401000).map(|x| x.offset), Some(0x1000));
        assert_eq!(find(&m, 0x401fff).map(|x| x.offset), Some(0x1000));
        assert_eq!(find(&m, 0x402000), None, "gap after the program");
        assert_eq!(find(&m, 0x3fffff), None, "before the first mapping");
        assert_eq!(
            find(&m, 0x7ffd5a401ff8).map(|x| x.path.clone()),
            Some(b"[stack]".to_vec())
        );
        assert_eq!(find(&[], 5), None);
    }

    #[test]
    fn malformed_lines_are_skipped_not_fatal() {
        let text = b"garbage\n00400000-00401000 r-xp 00000000 08:01 7 /a\n\
                     zz-10 r-xp 0 0:0 0\n00500000-00400000 r-xp 0 0:0 0 /backwards\n\
                     00600000-00601000 r 0 0:0 0\n";
        let m = parse(text);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].path, b"/a");
    }

    #[test]
    fn unsorted_input_is_sorted() {
        let text = b"00500000-00501000 r-xp 0 0:0 1 /b\n00400000-00401000 r-xp 0 0:0 1 /a\n";
        let m = parse(text);
        assert_eq!(m[0].path, b"/a");
        assert_eq!(
            find(&m, 0x500010).map(|x| x.path.clone()),
            Some(b"/b".to_vec())
        );
    }

    #[test]
    fn reads_our_own_maps() {
        let m = read(std::process::id() as i32).expect("own maps");
        let here = reads_our_own_maps as *const () as usize as u64;
        let code = find(&m, here).expect("this function is mapped");
        assert!(code.exec && code.is_file(), "{code:?}");
    }
}
