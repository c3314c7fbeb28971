//! The agents' channel: a pipe whose write end the program inherits at a fixed
//! descriptor, a background thread that keeps it drained, and the agent files written to
//! a private directory for the length of the recording.

use super::protocol::{AgentMark, State};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The Node.js agent, embedded so the installed binary needs nothing beside it.
const NODE_AGENT: &str = include_str!("../../../../../agents/node/dejavu-agent.js");
/// The Python loader (run as `sitecustomize`, from a zip on PYTHONPATH) and the agent it
/// loads from beside the zip.
const PYTHON_LOADER: &str = include_str!("../../../../../agents/python/sitecustomize.py");
/// What the loader runs, beside the zip (its bytecode cached, as the agent's).
const PYTHON_SITE: &str = include_str!("../../../../../agents/python/_dejavu_site.py");
const PYTHON_AGENT: &str = include_str!("../../../../../agents/python/_dejavu_agent.py");

/// The variable that tells the agents where to write: `FD:INODE` (the inode lets an agent
/// check that the descriptor is still our pipe, not a file that took its number).
pub const FD_VAR: &str = "DEJAVU_AGENT_FD";

/// How often the background thread drains the pipe. The tracer also drains it at every
/// stop it asks about; the thread only keeps the pipe from filling between stops. A timer
/// rather than poll(): an agent's write then never wakes a sleeping reader on another
/// CPU, which on a VM costs the writer more than the write itself.
const DRAIN_EVERY: Duration = Duration::from_millis(10);

/// The pipe's capacity, when the system allows it.
const PIPE_BYTES: i32 = 1 << 20;

/// Highest descriptor number we place the channel at.
const TOP_FD: i32 = 1023;

struct Shared {
    read: OwnedFd,
    state: Mutex<State>,
    stop: AtomicBool,
    /// The reports arrive another way (the eBPF backend copies each write in the kernel,
    /// in order with the calls around it): what the pipe holds is read and dropped.
    external: AtomicBool,
    /// The state holds marks for the trace: the tracer, which checks this at every record
    /// it writes, takes the lock only when there are some.
    marks: AtomicBool,
}

impl Shared {
    /// Locks the state after reading everything the pipe holds into it. The lock is held
    /// while reading, so whoever holds it next sees every message written before.
    ///
    /// When the reports arrive another way (`external`), the pipe holds nothing the state
    /// needs: it is only locked (the background thread keeps the pipe drained, with
    /// `drain_pipe`). Reading it at every call cost the eBPF reader a system call and the
    /// zeroing of a 16 KiB buffer per recorded call.
    fn drained(&self) -> MutexGuard<'_, State> {
        if self.external.load(Ordering::Relaxed) {
            return self.state.lock().unwrap_or_else(|e| e.into_inner());
        }
        self.drain_pipe()
    }

    /// Locks the state after reading everything the pipe holds (applied to the state, or
    /// dropped when the reports arrive another way).
    fn drain_pipe(&self) -> MutexGuard<'_, State> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // The state's buffer, allocated once (not a zeroed array on the stack per read).
        let mut buf = std::mem::take(&mut st.read_buf);
        if buf.len() != 16 << 10 {
            buf = vec![0u8; 16 << 10];
        }
        loop {
            // SAFETY: reading into a local buffer from our own non-blocking pipe.
            let n =
                unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break; // EAGAIN (empty), 0 (no writer left), or an error: nothing more now
            }
            if !self.external.load(Ordering::Relaxed) {
                // Read now, so written before now: the marks' time.
                st.feed(&buf[..n as usize], crate::os::now_ns());
                if st.has_marks() {
                    self.marks.store(true, Ordering::Relaxed);
                }
            }
            if (n as usize) < buf.len() {
                break;
            }
        }
        st.read_buf = buf;
        st
    }
}

/// An open channel: the agents' directory, the pipe's read end and its reader.
pub struct Channel {
    shared: Arc<Shared>,
    reader: Option<std::thread::JoinHandle<()>>,
    dir: tempfile::TempDir,
    /// Descriptor number the program sees the write end at.
    at: i32,
    ino: u64,
    /// Where the Python agent's compiled bytecode is kept between recordings (see
    /// [`bytecode`]), if there is a cache directory.
    bytecode: Option<PathBuf>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("dir", &self.dir.path())
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

/// What the program needs from an open channel.
#[derive(Debug)]
pub struct Setup {
    /// The channel itself (kept by the tracer).
    pub channel: Channel,
    /// The write end, for the program to inherit at `channel.at()`.
    pub write: OwnedFd,
}

/// Where the agents' directory goes: /dev/shm, a tmpfs every Linux system has outside
/// /tmp, so that a program run in a mount namespace with a /tmp of its own (systemd's
/// PrivateTmp, `unshare -m` and a tmpfs on /tmp) still reaches its agent (Node.js fails
/// to start on a `--require` it cannot find); where /dev/shm cannot be written, the
/// temporary directory ([`agent_base_in_tmp`]).
fn agent_base(tmp: &Path) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let c = c"/dev/shm";
    // SAFETY: access(2) on a constant C string.
    if shm.is_dir() && unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        return shm.to_path_buf();
    }
    agent_base_in_tmp(tmp)
}

/// The temporary directory, unless its path holds a character that PYTHONPATH or
/// NODE_OPTIONS would split it at (`:`, blanks, quotes, backslashes), then /tmp.
fn agent_base_in_tmp(tmp: &Path) -> PathBuf {
    let bad = |b: u8| matches!(b, b':' | b'"' | b'\\' | b'\'') || b.is_ascii_whitespace();
    if tmp.as_os_str().as_bytes().iter().any(|&b| bad(b)) {
        PathBuf::from("/tmp")
    } else {
        tmp.to_path_buf()
    }
}

/// Removes the agents' directories that recordings killed with SIGKILL left in `base`:
/// `dejavu-agents-PID-*` of this user whose PID no longer runs. Best effort: errors are
/// ignored (another user's directory, a race with another cleanup).
fn remove_stale_agent_dirs(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("dejavu-agents-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(md) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !md.is_dir() || md.uid() != me || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let _ = std::fs::remove_dir_all(e.path());
    }
}

impl Channel {
    /// Writes the agents, opens the pipe and starts its reader.
    pub fn open() -> io::Result<Setup> {
        let base = agent_base(&std::env::temp_dir());
        remove_stale_agent_dirs(&base);
        let dir = tempfile::Builder::new()
            .prefix(&format!("dejavu-agents-{}-", std::process::id()))
            .tempdir_in(&base)?;
        write_agents(dir.path())?;
        let bytecode = crate::cache::dir().map(|d| d.join(bytecode::dir_name()));
        if let Some(kept) = &bytecode {
            bytecode::seed(kept, &dir.path().join("python"));
        }
        let mut fds = [0i32; 2];
        // SAFETY: fds is a valid out-array. Non-blocking on both ends: an agent drops a
        // message rather than block the program on a full pipe.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on our own pipe; failure leaves the default size, which works.
        unsafe { libc::fcntl(read.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES) };
        let ino = fd_inode(&write)?;
        let at = free_high_fd().ok_or_else(|| io::Error::other("no free descriptor number"))?;
        let shared = Arc::new(Shared {
            read,
            state: Mutex::new(State::default()),
            stop: AtomicBool::new(false),
            external: AtomicBool::new(false),
            marks: AtomicBool::new(false),
        });
        let bg = Arc::clone(&shared);
        let reader = std::thread::Builder::new()
            .name("dejavu-agents".into())
            .spawn(move || {
                while !bg.stop.load(Ordering::Relaxed) {
                    // Parked, not asleep: the end of the recording unparks it, so dejavu
                    // does not wait out the rest of a period before it can exit.
                    std::thread::park_timeout(DRAIN_EVERY);
                    drop(bg.drain_pipe());
                }
            })?;
        Ok(Setup {
            channel: Channel {
                shared,
                reader: Some(reader),
                dir,
                at,
                ino,
                bytecode,
            },
            write,
        })
    }

    /// Where the agents' files are.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The descriptor number the program sees the write end at.
    pub fn at(&self) -> i32 {
        self.at
    }

    /// From now on the reports come through `feed`; the pipe is only kept drained.
    pub fn set_external(&self) {
        self.shared.external.store(true, Ordering::Relaxed);
    }

    /// Applies reports that arrived another way (see `set_external`), written at `at_ns`
    /// (CLOCK_MONOTONIC).
    pub fn feed(&self, bytes: &[u8], at_ns: u64) {
        let mut st = self.shared.drained();
        st.feed(bytes, at_ns);
        if st.has_marks() {
            self.shared.marks.store(true, Ordering::Relaxed);
        }
    }

    /// The marks read so far and not yet taken. Cheap when there are none (an atomic
    /// load), unless `drain`: then the pipe is read first, so every mark written before
    /// now is in (before an exec or an exit is recorded).
    pub fn take_marks(&self, drain: bool) -> Vec<AgentMark> {
        if !drain && !self.shared.marks.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let mut st = self.shared.drained();
        self.shared.marks.store(false, Ordering::Relaxed);
        st.take_marks()
    }

    /// The state, with everything written so far applied.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.shared.drained()
    }

    /// The state as it is, without reading the pipe first (for updates that follow a
    /// `state()` of the same stop).
    pub fn state_undrained(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether process `pid` holds the channel where its agent looks for it (a program
    /// that closed every descriptor before it exec'd an interpreter left the agent
    /// nothing to write to, and the agent then says nothing).
    pub fn held_by(&self, pid: i32) -> bool {
        std::fs::read_link(format!("/proc/{pid}/fd/{}", self.at)).is_ok_and(|l| {
            l.as_os_str().as_encoded_bytes() == format!("pipe:[{}]", self.ino).as_bytes()
        })
    }

    /// Whether the environment `environ` (a process's, NUL-separated, as
    /// /proc/PID/environ holds it) loads this recording's agent into Python (`python`) or
    /// Node.js: it names this channel, and PYTHONPATH or NODE_OPTIONS names the agent's file
    /// (as `env` set them; a program that rewrote them without it loads none).
    pub fn loads_agent(&self, environ: &[u8], python: bool) -> bool {
        let fd = format!("{FD_VAR}={}:{}", self.at, self.ino);
        let (var, file): (&[u8], _) = if python {
            (
                b"PYTHONPATH=",
                self.dir.path().join("python").join("agent.zip"),
            )
        } else {
            (
                b"NODE_OPTIONS=",
                self.dir.path().join("node").join("dejavu-agent.js"),
            )
        };
        let file = file.as_os_str().as_encoded_bytes();
        let (mut channel, mut agent) = (false, false);
        for v in environ.split(|&b| b == 0) {
            if v == fd.as_bytes() {
                channel = true;
            } else if v.starts_with(var) {
                agent = v.windows(file.len()).any(|w| w == file);
            }
        }
        channel && agent
    }

    /// Environment additions that load the agents: the channel, NODE_OPTIONS (appended to
    /// the one dejavu was given) and PYTHONPATH (ours first, then the one given).
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let node = self.dir.path().join("node").join("dejavu-agent.js");
        let python = self.dir.path().join("python").join("agent.zip");
        let mut node_options = std::env::var_os("NODE_OPTIONS").unwrap_or_default();
        if !node_options.is_empty() {
            node_options.push(" ");
        }
        node_options.push("--require ");
        node_options.push(node_quote(&node));
        let mut pythonpath = python.into_os_string();
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|v| !v.is_empty()) {
            pythonpath.push(":");
            pythonpath.push(old);
        }
        vec![
            (FD_VAR.into(), format!("{}:{}", self.at, self.ino).into()),
            ("NODE_OPTIONS".into(), node_options),
            ("PYTHONPATH".into(), pythonpath),
        ]
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            r.thread().unpark();
            let _ = r.join();
        }
        // The directory goes with `dir`: every program that loaded an agent has exited
        // (the recording ends with them). What Python compiled there is kept first.
        if let Some(kept) = &self.bytecode {
            bytecode::harvest(&self.dir.path().join("python"), kept);
        }
    }
}

fn write_agents(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // Readable by all: a program that drops privileges (a server started as root) must
    // still load its agent, or Node.js refuses to start on a missing --require. Only we
    // can write here.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    // The loader goes on PYTHONPATH as a zip: a directory there would be stat'ed once
    // per module Python imports at startup (dozens of recorded calls per process).
    // zipimport opens the zip twice and reads from offset 0 in 4 KiB buffers: a padding
    // entry after the loader keeps those reads partial, so they are never whole-file
    // rereads of an unchanged file (reread-unchanged) in the program's findings.
    let padding = vec![b'#'; 16 << 10];
    let zip = stored_zip(&[
        ("sitecustomize.py", PYTHON_LOADER.as_bytes()),
        ("padding.txt", &padding),
    ]);
    for (sub, name, bytes) in [
        ("node", "dejavu-agent.js", NODE_AGENT.as_bytes()),
        ("python", "_dejavu_agent.py", PYTHON_AGENT.as_bytes()),
        ("python", "_dejavu_site.py", PYTHON_SITE.as_bytes()),
        ("python", "agent.zip", zip.as_slice()),
    ] {
        let d: PathBuf = dir.join(sub);
        if !d.exists() {
            std::fs::create_dir(&d)?;
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755))?;
        }
        let f = d.join(name);
        std::fs::write(&f, bytes)?;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644))?;
        if bytecode::SOURCES.contains(&name) {
            // The same time at every recording, so that the bytecode Python compiled
            // from it at an earlier one, which records its source's time and size, is
            // taken as up to date (bytecode::seed).
            std::fs::File::options()
                .write(true)
                .open(&f)?
                .set_modified(bytecode::source_time())?;
        }
    }
    Ok(())
}

/// The Python agent's bytecode, kept between recordings. Python compiles the agent at
/// its first import in a recording's agents' directory (~5 ms for each recording's first
/// Python process; the program's processes after it in the same recording use the
/// bytecode it wrote beside the agent). When the recording ends, the bytecode files
/// Python wrote there (`__pycache__/_dejavu_agent.<interpreter tag>.pyc`, one per Python
/// version that ran, and `_dejavu_site.<tag>.pyc`, the loader's part that the zip's
/// `sitecustomize` runs: ~0.4 ms of compiling at every Python start while it was in the
/// zip) are copied to the cache directory, under a name that holds a hash of their
/// sources; the next recording puts them beside its copies, whose
/// modification time is always [`source_time`], so Python finds them up to date (its
/// check: the source's time and size, as recorded in the bytecode file) and does not
/// compile. Only files that are this user's own are taken, either way (the cache's files
/// private, as the CO-RE cache's); anything else is left alone. Best effort: an error
/// only means Python compiles the agent as before.
pub(crate) mod bytecode {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    /// The files whose bytecode is kept: the agent and the loader's part beside the zip.
    pub(crate) const SOURCES: [&str; 2] = ["_dejavu_agent.py", "_dejavu_site.py"];
    /// The agent's modification time in every recording: 2000-01-01T00:00:00Z.
    pub(crate) fn source_time() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800)
    }
    /// Bytecode files larger than this are not Python's of the agent (~45 KiB).
    const MAX_BYTES: u64 = 1 << 20;
    /// The cache's bytecode directories of other agents (other dejavu builds) not used
    /// for this long are removed when one is written.
    const UNUSED: Duration = Duration::from_secs(30 * 24 * 3600);
    /// A kept entry used again after this long gets its modification time renewed.
    const RENEW: Duration = Duration::from_secs(24 * 3600);
    const PREFIX: &str = "python-agent-";

    /// The cache directory's entry for this build's agent and loader: a hash and the
    /// length of their sources.
    pub(crate) fn dir_name() -> String {
        name_for(
            [super::PYTHON_AGENT, super::PYTHON_SITE]
                .concat()
                .as_bytes(),
        )
    }

    pub(super) fn name_for(source: &[u8]) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        source.hash(&mut h);
        format!("{PREFIX}{:016x}-{}", h.finish(), source.len())
    }

    /// Whether `name` is a bytecode file of the agent or the loader's part beside the zip:
    /// `_dejavu_agent.` or `_dejavu_site.`, an interpreter tag and optimization level
    /// (cpython-311, cpython-311.opt-1, pypy39, ...: letters, digits, `-`, `_`, `.`),
    /// `.pyc`.
    pub(super) fn is_bytecode(name: &str) -> bool {
        SOURCES
            .iter()
            .filter_map(|s| s.strip_suffix("py"))
            .find_map(|stem| name.strip_prefix(stem))
            .and_then(|n| n.strip_suffix(".pyc"))
            .is_some_and(|tag| {
                !tag.is_empty()
                    && tag
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            })
    }

    /// The agent's bytecode files in `dir` that are regular files of this user's own
    /// (and, with `private`, nobody else's), with their contents.
    fn files(dir: &Path, private: bool) -> Vec<(String, Vec<u8>)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !is_bytecode(&name) {
                continue;
            }
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            let ok = if private {
                crate::cache::private(&m)
            } else {
                m.uid() == me
            };
            if !m.is_file() || !ok || m.len() > MAX_BYTES {
                continue;
            }
            if let Ok(b) = std::fs::read(e.path()) {
                out.push((name, b));
            }
        }
        out
    }

    /// Puts the bytecode kept in `kept` beside the agent in `python` (the recording's
    /// agents' directory for Python).
    pub(crate) fn seed(kept: &Path, python: &Path) {
        let private =
            std::fs::symlink_metadata(kept).is_ok_and(|m| m.is_dir() && crate::cache::private(&m));
        if !private {
            return;
        }
        let found = files(kept, true);
        if found.is_empty() {
            return;
        }
        let pycache = python.join("__pycache__");
        if std::fs::create_dir(&pycache).is_err()
            || std::fs::set_permissions(&pycache, std::fs::Permissions::from_mode(0o755)).is_err()
        {
            return;
        }
        for (name, bytes) in found {
            let f = pycache.join(name);
            if std::fs::write(&f, bytes).is_ok() {
                let _ = std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644));
            }
        }
        // Used: not one of the unused entries `harvest` removes.
        crate::cache::renew(kept, RENEW);
    }

    /// Copies the bytecode Python wrote beside the agent in `python` to `kept`, where it
    /// is not there already; removes other agents' entries unused for 30 days.
    pub(crate) fn harvest(python: &Path, kept: &Path) {
        let wrote = files(&python.join("__pycache__"), false);
        if wrote.is_empty() {
            return;
        }
        let have = files(kept, true);
        let new: Vec<_> = wrote
            .into_iter()
            .filter(|(n, b)| !have.iter().any(|(hn, hb)| hn == n && hb == b))
            .collect();
        if new.is_empty() || crate::cache::make_private_subdir(kept).is_err() {
            return;
        }
        for (name, bytes) in new {
            let _ = crate::cache::write_private(kept, &name, &bytes);
        }
        if let Some(cache) = kept.parent() {
            let ours = dir_name();
            crate::cache::remove_unused(cache, UNUSED, |n| n.starts_with(PREFIX) && n != ours);
        }
    }
}

/// A zip archive holding `files` uncompressed ("stored"), as Python's zipimport reads it.
fn stored_zip(files: &[(&str, &[u8])]) -> Vec<u8> {
    const DOS_DATE_1980_01_01: u16 = 0x21;
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in files {
        let crc = crc32fast::hash(data);
        let offset = out.len() as u32;
        let (size, nlen) = (data.len() as u32, name.len() as u16);
        // Local file header.
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        for v in [20u16, 0, 0, 0, DOS_DATE_1980_01_01] {
            out.extend_from_slice(&v.to_le_bytes()); // version, flags, stored, time, date
        }
        for v in [crc, size, size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&nlen.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        // Its central directory entry.
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        for v in [20u16, 20, 0, 0, 0, DOS_DATE_1980_01_01] {
            central.extend_from_slice(&v.to_le_bytes()); // made by, needed, flags, method, time, date
        }
        for v in [crc, size, size] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [nlen, 0, 0, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes()); // name, extra, comment, disk, attrs
        }
        central.extend_from_slice(&0u32.to_le_bytes()); // external attributes
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let (cd_offset, cd_size) = (out.len() as u32, central.len() as u32);
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    let n = files.len() as u16;
    for v in [0u16, 0, n, n] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&cd_size.to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

fn fd_inode(fd: &OwnedFd) -> io::Result<u64> {
    // SAFETY: fstat into a zeroed local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.st_ino)
}

/// A high descriptor number that is free here (so the program would not have inherited
/// anything there from us) and below the soft descriptor limit (so dup2 can place it).
fn free_high_fd() -> Option<i32> {
    // SAFETY: getrlimit into a local struct.
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0 {
        rl.rlim_cur.min(TOP_FD as u64 + 1) as i32
    } else {
        256
    };
    // SAFETY: F_GETFD only asks whether the number is open.
    (64..soft)
        .rev()
        .find(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1)
}

/// `path` as one NODE_OPTIONS word: double-quoted, with `"` and `\` escaped, the way
/// Node.js splits that variable.
fn node_quote(path: &Path) -> OsString {
    let mut v = vec![b'"'];
    for &b in path.as_os_str().as_bytes() {
        if b == b'"' || b == b'\\' {
            v.push(b'\\');
        }
        v.push(b);
    }
    v.push(b'"');
    use std::os::unix::ffi::OsStringExt;
    OsString::from_vec(v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_the_agents_own_bytecode_files_of_this_user_are_kept_and_seeded() {
        use std::os::unix::fs::PermissionsExt;
        for (name, ok) in [
            ("_dejavu_agent.cpython-311.pyc", true),
            ("_dejavu_agent.pypy39.pyc", true),
            ("_dejavu_agent.cpython-311.opt-1.pyc", true),
            ("_dejavu_agent..pyc", false),
            ("_dejavu_agent.cpython-311.pyc.tmp", false),
            ("other.cpython-311.pyc", false),
            ("_dejavu_agent.../x.pyc", false),
            ("_dejavu_site.cpython-311.pyc", true),
            ("_dejavu_site.pyc", false),
            ("_dejavu_sitecustomize.cpython-311.pyc", false),
            ("sitecustomize.cpython-311.pyc", false),
        ] {
            assert_eq!(bytecode::is_bytecode(name), ok, "{name}");
        }
        let d = tempfile::tempdir().unwrap();
        let python = d.path().join("python");
        let pycache = python.join("__pycache__");
        std::fs::create_dir_all(&pycache).unwrap();
        std::fs::write(pycache.join("_dejavu_agent.cpython-311.pyc"), b"compiled").unwrap();
        std::fs::write(pycache.join("_dejavu_agent.cpython-312.pyc"), b"theirs").unwrap();
        std::fs::write(pycache.join("other.cpython-311.pyc"), b"other").unwrap();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            std::os::unix::fs::chown(
                pycache.join("_dejavu_agent.cpython-312.pyc"),
                Some(65534),
                None,
            )
            .unwrap();
        }
        let kept = d.path().join("cache").join(bytecode::dir_name());
        bytecode::harvest(&python, &kept);
        let mut names: Vec<String> = std::fs::read_dir(&kept)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let want: &[&str] = if root {
            &["_dejavu_agent.cpython-311.pyc"]
        } else {
            &[
                "_dejavu_agent.cpython-311.pyc",
                "_dejavu_agent.cpython-312.pyc",
            ]
        };
        assert_eq!(names, want);
        let f = std::fs::metadata(kept.join("_dejavu_agent.cpython-311.pyc")).unwrap();
        assert_eq!(f.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read(kept.join("_dejavu_agent.cpython-311.pyc")).unwrap(),
            b"compiled"
        );
        // Seeded into a new recording's directory, readable by the program.
        let next = d.path().join("next");
        std::fs::create_dir(&next).unwrap();
        bytecode::seed(&kept, &next);
        let seeded = next
            .join("__pycache__")
            .join("_dejavu_agent.cpython-311.pyc");
        assert_eq!(std::fs::read(&seeded).unwrap(), b"compiled");
        assert_eq!(
            std::fs::metadata(&seeded).unwrap().permissions().mode() & 0o777,
            0o644
        );
        // A cache directory others may write is not taken from.
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o777)).unwrap();
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        bytecode::seed(&kept, &open);
        assert!(!open.join("__pycache__").exists());
        // Another agent (another source) has another entry.
        assert_ne!(bytecode::name_for(b"a"), bytecode::name_for(b"b"));
    }

    #[test]
    fn a_path_is_quoted_as_one_node_options_word() {
        assert_eq!(
            node_quote(Path::new("/tmp/a b/x.js")),
            OsString::from("\"/tmp/a b/x.js\"")
        );
        assert_eq!(
            node_quote(Path::new("/t/\"q\\")),
            OsString::from("\"/t/\\\"q\\\\\"")
        );
    }

    #[test]
    fn the_channel_writes_the_agents_and_drains_what_they_write() {
        let setup = Channel::open().unwrap();
        let ch = setup.channel;
        let env = ch.env();
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        let fdv = get(FD_VAR).into_string().unwrap();
        let (at, ino) = fdv.split_once(':').unwrap();
        assert_eq!(at.parse::<i32>().unwrap(), ch.at());
        assert_eq!(ino.parse::<u64>().unwrap(), fd_inode(&setup.write).unwrap());
        let zip = PathBuf::from(
            get("PYTHONPATH")
                .into_string()
                .unwrap()
                .split(':')
                .next()
                .unwrap(),
        );
        assert!(zip.ends_with("python/agent.zip"));
        let py = zip.parent().unwrap().to_path_buf();
        assert_eq!(
            std::fs::read_to_string(py.join("_dejavu_agent.py")).unwrap(),
            PYTHON_AGENT
        );
        assert_eq!(
            std::fs::read_to_string(py.join("_dejavu_site.py")).unwrap(),
            PYTHON_SITE
        );
        let node = get("NODE_OPTIONS").into_string().unwrap();
        let node = node
            .rsplit("--require ")
            .next()
            .unwrap()
            .trim_matches('"')
            .to_string();
        assert_eq!(std::fs::read_to_string(&node).unwrap(), NODE_AGENT);
        // What an agent writes is applied by the time the state is asked for.
        let msg = super::super::protocol::encode::hello(1, 1, 1);
        assert!(ch.take_marks(false).is_empty());
        // SAFETY: writing a local buffer to our pipe.
        let n = unsafe { libc::write(setup.write.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
        assert_eq!(n as usize, msg.len());
        assert_eq!(ch.state().counters.agents, 1);
        // Its hello is a mark, timed when it was read.
        let before = crate::os::now_ns();
        let marks = ch.take_marks(false);
        assert_eq!(marks.len(), 1);
        assert_eq!(marks[0].kind, dejavu_trace::MarkKind::AgentReady);
        assert!(marks[0].at_ns > 0 && marks[0].at_ns <= before);
        assert!(ch.take_marks(true).is_empty());
        let dir = py.parent().unwrap().to_path_buf();
        drop(ch);
        assert!(
            !dir.exists(),
            "the agents' directory is removed with the channel"
        );
    }

    #[test]
    fn python_reads_the_loader_zip() {
        if std::process::Command::new("python3")
            .arg("-c")
            .arg("pass")
            .status()
            .is_err()
        {
            eprintln!("SKIP: python3 is not installed");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let zip = d.path().join("a.zip");
        std::fs::write(
            &zip,
            stored_zip(&[("m.py", b"X = 42\n"), ("n.py", b"Y = 'y'\n")]),
        )
        .unwrap();
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys; sys.path.insert(0, sys.argv[1]); import m, n, zipfile; \
                 z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; print(m.X, n.Y)",
            ])
            .arg(&zip)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "42 y\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[cfg(test)]
mod temp_dir_tests {
    use super::{agent_base_in_tmp, remove_stale_agent_dirs};
    use std::path::{Path, PathBuf};

    #[test]
    fn a_temp_dir_that_pythonpath_would_split_is_not_used() {
        assert_eq!(
            agent_base_in_tmp(Path::new("/var/tmp/x")),
            PathBuf::from("/var/tmp/x")
        );
        for bad in ["/tmp/a:b", "/tmp/with space", "/tmp/q\"uote"] {
            assert_eq!(
                agent_base_in_tmp(Path::new(bad)),
                PathBuf::from("/tmp"),
                "{bad}"
            );
        }
    }

    #[test]
    fn directories_left_by_a_killed_recording_are_removed_live_ones_kept() {
        let base = tempfile::tempdir().unwrap();
        // A pid that cannot run (above pid_max's hard limit), ours, and a foreign name.
        let dead = base.path().join("dejavu-agents-4194999-abc");
        let live = base
            .path()
            .join(format!("dejavu-agents-{}-def", std::process::id()));
        let other = base.path().join("dejavu-agentsX");
        for d in [&dead, &live, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("agent.js"), "x").unwrap();
        }
        remove_stale_agent_dirs(base.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }
}
