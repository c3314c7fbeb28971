//! The drainer: a thread that takes the kernel's records out of its ring buffers as they
//! come, so that the reader, which decodes them, unwinds stacks and writes the trace, can
//! fall behind for a while (a burst of new stacks, a module symbolized for the first time,
//! a loaded machine) without the kernel running out of room and losing records. perf
//! record does the same: it copies the ring buffers out and leaves the work for later.

use crate::event;
use aya::maps::{MapData, PerCpuArray, RingBuf};
use dejavu_capture::os as kernel;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the drainer sleeps between looks at the ring buffers, unless the kernel half
/// wakes it (a quarter of the buffer waiting, or a copy of a new stack while idle), the
/// program exits or the reader asks for a drain.
const POLL: Duration = Duration::from_millis(10);
/// Most record bytes in one batch: the reader starts on the first part of a large drain
/// while the drainer goes on with the rest.
const BATCH_BYTES: usize = 4 << 20;
/// After a look that found records, the drainer waits this long before the next one (a
/// ring buffer is readable as soon as it holds one record: looking at once would hand the
/// reader a batch per record), unless that look found an eighth of the ring or more.
const GAP: Duration = Duration::from_millis(1);
/// The wait after a look that found a few calls (under a 32nd of the ring) and no copies of
/// stacks: nothing in it waits for the reader's answer (a place's stack, which the kernel
/// half sends copies of until the reader has unwound one), so the drainer hands over fewer,
/// larger batches; a copy ends the wait at once, as it ends an idle one. Each handoff
/// wakes the reader and the drainer: on a build that makes calls all the time (make -j2)
/// they were ~20% of dejavu's own CPU at GAP (docs/ebpf-backend.md, "The drainer").
/// The calls' ring is not watched then (it holds calls: poll would return at once), so
/// the bound on what a look found keeps a burst from filling it: 32 times the rate of the
/// last gap, within 5 ms, to fill it.
const QUIET_GAP: Duration = Duration::from_millis(5);
/// How far past the time of the last call of a batch the drainer takes copies of stacks
/// for it (see `drain_loop`).
const COPIES_PAST_NS: u64 = 1_000_000;
/// The least memory the records waiting for the reader may take; more with a larger ring
/// buffer (`backlog_limit`).
const MIN_BACKLOG: usize = 256 << 20;

/// How much may wait in memory for the reader: 256 MiB, or 8 ring buffers where that is
/// more. Past it the drainer leaves the records in the kernel's buffer, which counts what
/// does not fit (reported as lost, as without a drainer).
pub(crate) fn backlog_limit(ring_bytes: u32) -> usize {
    MIN_BACKLOG.max((ring_bytes as usize).saturating_mul(8))
}

/// The kernel's ring buffers and its counters of records that did not fit.
pub(crate) struct Rings {
    pub events: RingBuf<MapData>,
    pub stacks: RingBuf<MapData>,
    pub lost: PerCpuArray<MapData, u64>,
    /// The size of each ring.
    pub bytes: u32,
}

/// Records packed one after another.
#[derive(Default, Debug)]
pub(crate) struct Packed {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Packed {
    pub fn push(&mut self, b: &[u8]) {
        self.data.extend_from_slice(b);
        self.ends.push(self.data.len());
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let s = &self.data[start..end];
            start = end;
            s
        })
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Item `i`.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let start = match i {
            0 => 0,
            _ => *self.ends.get(i - 1)?,
        };
        self.data.get(start..*self.ends.get(i)?)
    }

    fn bytes(&self) -> usize {
        self.data.len() + self.ends.len() * std::mem::size_of::<usize>()
    }

    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }
}

/// The kernel's counts of records it had no room for, when a batch was taken.
#[derive(Debug, Clone)]
pub(crate) struct Lost {
    /// When they were read (ns, CLOCK_MONOTONIC, as the records' times).
    pub at: u64,
    /// The program's records, per CPU.
    pub events: Vec<u64>,
    /// The language agents' reports.
    pub agent: u64,
    /// Copies of stacks (the call then carried a short one).
    pub stacks: u64,
}

/// What one look at the ring buffers found, in the order the reader must see it.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Copies of stacks, read before the records and again after them: the kernel sends a
    /// call's copy before the call, so every call here has its copy in this batch or an
    /// earlier one.
    pub copies: Packed,
    pub records: Packed,
    pub lost: Option<Lost>,
    /// The reader's drain requests this batch answers (all up to this number): everything
    /// the kernel had written when the request was made is in this batch or before it.
    pub ack: u64,
    /// The program's pidfd was readable (it has exited) before the records were read.
    pub root_exited: bool,
    bytes: usize,
}

impl Batch {
    /// As `Batch::default()`, keeping the memory.
    fn empty(&mut self) {
        self.copies.clear();
        self.records.clear();
        self.lost = None;
        self.ack = 0;
        self.root_exited = false;
        self.bytes = 0;
    }
}

/// Emptied batches kept for the drainer to fill again.
const SPARES: usize = 2;

struct Shared {
    /// An eventfd: the reader's requests and the stop wake the drainer.
    wake: OwnedFd,
    requests: AtomicU64,
    stop: AtomicBool,
    /// Bytes sent to the reader and not yet done with, and the most there were.
    backlog: AtomicUsize,
    peak: AtomicUsize,
    limit: usize,
    /// Looks at the ring buffers skipped because the backlog was at its limit.
    full: AtomicU64,
    /// Batches sent.
    batches: AtomicU64,
    /// Batches the reader is done with, emptied, for the drainer to fill again: their
    /// memory is already the size a batch grows to (no growing by copies, no fresh pages
    /// to fault in at every batch).
    spares: std::sync::Mutex<Vec<Batch>>,
}

impl Shared {
    fn poke(&self) {
        let one: u64 = 1;
        // SAFETY: an 8-byte write from a valid u64 to our eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// The reader's end: batches in order, drain requests, the stop.
pub(crate) struct Drainer {
    rx: mpsc::Receiver<Batch>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    requested: u64,
    answered: u64,
    /// The program exited (its pidfd was readable) in a batch already handed out.
    pub root_exited: bool,
}

impl std::fmt::Debug for Drainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drainer")
            .field("requested", &self.requested)
            .field("answered", &self.answered)
            .finish_non_exhaustive()
    }
}

impl Drainer {
    /// Starts the thread. `pidfd`, when given, is the program's: the drainer watches it too,
    /// so the reader hears of the program's end at once.
    pub fn start(rings: Rings, pidfd: Option<OwnedFd>, limit: usize) -> std::io::Result<Self> {
        // SAFETY: eventfd with valid flags; the descriptor is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nobody else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        let shared = Arc::new(Shared {
            wake,
            requests: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            backlog: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            limit,
            full: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            spares: std::sync::Mutex::new(Vec::new()),
        });
        let (tx, rx) = mpsc::channel();
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("dejavu-drainer".into())
            .spawn(move || drain_loop(rings, pidfd, &s, &tx))?;
        Ok(Drainer {
            rx,
            shared,
            thread: Some(thread),
            requested: 0,
            answered: 0,
            root_exited: false,
        })
    }

    /// The next batch, waiting at most `timeout`; None when none came (or the drainer is
    /// gone).
    pub fn next(&mut self, timeout: Duration) -> Option<Batch> {
        let b = self.rx.recv_timeout(timeout).ok()?;
        Some(self.seen(b))
    }

    fn seen(&mut self, b: Batch) -> Batch {
        self.answered = self.answered.max(b.ack);
        self.root_exited |= b.root_exited;
        b
    }

    /// Says the reader is done with a batch (its memory no longer waits).
    pub fn done(&self, mut b: Batch) {
        self.shared.backlog.fetch_sub(b.bytes, Ordering::Relaxed);
        if let Ok(mut spares) = self.shared.spares.lock() {
            // (Not one that grew past a few batches' size: a burst's memory goes back.)
            let kept = b.copies.data.capacity() + b.records.data.capacity();
            if spares.len() < SPARES && kept <= 4 * BATCH_BYTES {
                b.empty();
                spares.push(b);
            }
        }
    }

    /// Asks for everything the kernel has written by now; `each` gets every batch up to
    /// the one that answers, in order.
    pub fn drain(&mut self, mut each: impl FnMut(Batch)) {
        self.requested += 1;
        self.shared.requests.store(self.requested, Ordering::SeqCst);
        self.shared.poke();
        while self.answered < self.requested {
            match self.rx.recv() {
                Ok(b) => {
                    let b = self.seen(b);
                    each(b);
                }
                Err(_) => return, // the drainer is gone (it never panics; nothing more comes)
            }
        }
    }

    /// Stops the drainer after a last drain; `each` gets every batch left, in order.
    pub fn stop(&mut self, mut each: impl FnMut(Batch)) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.poke();
        while let Ok(b) = self.rx.recv() {
            let b = self.seen(b);
            each(b);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The most bytes that waited for the reader at once.
    pub fn peak(&self) -> usize {
        self.shared.peak.load(Ordering::Relaxed)
    }

    /// How often the drainer left records in the kernel because the backlog was full.
    pub fn times_full(&self) -> u64 {
        self.shared.full.load(Ordering::Relaxed)
    }

    /// Batches handed to the reader.
    pub fn batches(&self) -> u64 {
        self.shared.batches.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.shared.limit
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop(|_| {});
        }
    }
}

fn read_lost(lost: &PerCpuArray<MapData, u64>) -> Lost {
    let get = |i: u32| -> Vec<u64> {
        lost.get(&i, 0)
            .map(|v| v.iter().copied().collect())
            .unwrap_or_default()
    };
    Lost {
        at: kernel::now_ns(),
        events: get(0),
        agent: get(1).iter().sum(),
        stacks: get(2).iter().sum(),
    }
}

fn drain_loop(rings: Rings, pidfd: Option<OwnedFd>, s: &Shared, tx: &mpsc::Sender<Batch>) {
    let Rings {
        mut events,
        mut stacks,
        lost,
        bytes: ring_bytes,
    } = rings;
    // As the reader (recorder.rs, `Reader::run`): ahead of the program, which keeps its
    // priority. Not permitted without CAP_SYS_NICE: it then stays as it is.
    // SAFETY: setpriority on the calling thread (PRIO_PROCESS with 0 is the thread).
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, crate::recorder::READER_NICE) };
    let mut watch_pid = pidfd.is_some();
    let mut last_lost = Instant::now();
    let mut sent_ack = 0;
    let mut sent_lost: Option<(u64, u64, u64)> = None;
    // A drain stopped at BATCH_BYTES goes on without waiting; otherwise what the look
    // found decides the pause before the next (pause_after).
    let mut more = false;
    let mut found = 0;
    let mut found_copies = false;
    loop {
        let stopping = s.stop.load(Ordering::SeqCst);
        let mut exited = false;
        let pause = pause_after(found, found_copies, ring_bytes as usize);
        if !more
            && !stopping
            && s.requests.load(Ordering::SeqCst) == sent_ack
            && pause != Pause::None
        {
            let ring_fd = |fd: i32, watch: bool| if watch { fd } else { -1 };
            let mut p = [
                pollfd(ring_fd(events.as_raw_fd(), pause == Pause::Idle)),
                pollfd(ring_fd(stacks.as_raw_fd(), pause != Pause::Gap)),
                pollfd(s.wake.as_raw_fd()),
                pollfd(match (&pidfd, watch_pid) {
                    (Some(p), true) => p.as_raw_fd(),
                    _ => -1, // ignored by poll
                }),
            ];
            let wait = match pause {
                Pause::Idle => POLL,
                Pause::Quiet => QUIET_GAP,
                _ => GAP,
            };
            // SAFETY: four valid pollfds (a negative fd is ignored).
            unsafe { libc::poll(p.as_mut_ptr(), 4, wait.as_millis() as i32) };
            if p[2].revents != 0 {
                let mut n: u64 = 0;
                // SAFETY: an 8-byte read into a valid u64 from our eventfd.
                unsafe { libc::read(s.wake.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
            }
            if watch_pid && p[3].revents != 0 {
                watch_pid = false;
                exited = true;
            }
        }
        // Read before the rings: what they hold from here on answers it.
        let req = s.requests.load(Ordering::SeqCst);
        let stopping = stopping || s.stop.load(Ordering::SeqCst);
        if !stopping && req == sent_ack && !exited && s.backlog.load(Ordering::Relaxed) >= s.limit {
            // The reader is that far behind: leave the records in the kernel's buffer (it
            // counts what does not fit), and look again when the reader caught up a bit.
            s.full.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
            more = false;
            continue;
        }
        let mut b = s
            .spares
            .lock()
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_default();
        b.root_exited = exited;
        more = look(&mut stacks, &mut events, &mut b);
        found = b.records.data.len() + b.copies.data.len();
        found_copies = !b.copies.data.is_empty();
        if !more {
            b.ack = req;
        } else {
            b.ack = sent_ack;
        }
        let answer = b.ack > sent_ack;
        if answer || stopping || last_lost.elapsed() >= Duration::from_millis(100) {
            // Sent when they changed (or to answer), not every time they were read.
            let l = read_lost(&lost);
            let key = (l.events.iter().sum(), l.agent, l.stacks);
            if answer || stopping || sent_lost != Some(key) {
                sent_lost = Some(key);
                b.lost = Some(l);
            }
            last_lost = Instant::now();
        }
        b.bytes = b.copies.bytes() + b.records.bytes();
        let send = b.records.len() > 0
            || b.copies.len() > 0
            || b.lost.is_some()
            || answer
            || b.root_exited;
        if send {
            sent_ack = b.ack;
            let now = s.backlog.fetch_add(b.bytes, Ordering::Relaxed) + b.bytes;
            s.peak.fetch_max(now, Ordering::Relaxed);
            s.batches.fetch_add(1, Ordering::Relaxed);
            if tx.send(b).is_err() {
                return; // the reader is gone
            }
        }
        if stopping && !more {
            return;
        }
    }
}

/// The drainer's pause before its next look, from what its last look found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pause {
    /// An eighth of the ring or more was waiting: the next look follows at once.
    None,
    /// Nothing found: POLL, woken by either ring (the kernel half wakes it when a copy comes
    /// to an empty copies' ring, or a quarter of the calls' ring is waiting).
    Idle,
    /// A few calls and no copies: QUIET_GAP, woken by a copy.
    Quiet,
    /// Copies (a reader's answer is awaited), or more calls than Quiet takes: GAP, woken by
    /// neither ring (both hold records: poll would return at once).
    Gap,
}

/// Always also woken by the reader's request and the program's end (drain_loop).
fn pause_after(found: usize, found_copies: bool, ring_bytes: usize) -> Pause {
    if found == 0 {
        Pause::Idle
    } else if found >= (ring_bytes / 8).max(1) {
        Pause::None
    } else if !found_copies && found < ring_bytes / 32 {
        Pause::Quiet
    } else {
        Pause::Gap
    }
}

/// A ring buffer the drainer reads (the kernel's, or a test's).
trait Source {
    /// Takes the next record into `out` and returns its time (u64::MAX when it has no
    /// readable header), or None when the ring is empty.
    fn take_into(&mut self, out: &mut Packed) -> Option<u64>;
}

impl Source for RingBuf<MapData> {
    fn take_into(&mut self, out: &mut Packed) -> Option<u64> {
        let item = self.next()?;
        out.push(&item);
        Some(event::header(&item).map_or(u64::MAX, |h| h.ts))
    }
}

/// One look at the rings into `b`: copies of stacks, calls and other records, then the
/// copies of the calls just read. Returns whether a bound stopped it (more is waiting).
///
/// Copies are read at most BATCH_BYTES at a time: a program that sends copies as fast as
/// they are taken (a loop whose place the kernel's cache does not have yet sends one per
/// call, gigabytes a second) would otherwise keep the drainer in its first loop until the
/// program stopped, and the reader, given nothing, would never fill that cache: a C loop
/// of 60,000 calls waited 380 ms for its first batch, with 280 MiB of copies behind it.
/// The records are read at every look, whatever the copies do.
fn look(stacks: &mut impl Source, events: &mut impl Source, b: &mut Batch) -> bool {
    let mut more = false;
    while stacks.take_into(&mut b.copies).is_some() {
        if b.copies.data.len() >= BATCH_BYTES {
            more = true;
            break;
        }
    }
    let mut last = 0;
    while let Some(ts) = events.take_into(&mut b.records) {
        if ts != u64::MAX {
            last = last.max(ts);
        }
        if b.records.data.len() >= BATCH_BYTES {
            more = true;
            break;
        }
    }
    // The copies of the calls just read, each sent before its call: those up to the last
    // record's time (and a little past it: CPUs put their records in the ring in an order
    // close to, not always exactly, that of their times).
    while let Some(ts) = stacks.take_into(&mut b.copies) {
        if ts > last.saturating_add(COPIES_PAST_NS) {
            break;
        }
    }
    more
}

fn pollfd(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_look_that_found_only_a_few_calls_is_followed_by_a_longer_pause_woken_by_a_copy() {
        let ring = 4 << 20;
        assert_eq!(pause_after(0, false, ring), Pause::Idle);
        // A build's calls (make -j2: ~30 KiB per 5 ms), no copies: fewer handoffs.
        assert_eq!(pause_after(30 << 10, false, ring), Pause::Quiet);
        // A copy is waiting for the reader's answer: the short pause, as before.
        assert_eq!(pause_after(30 << 10, true, ring), Pause::Gap);
        // More than a 32nd of the ring: a burst could fill it within the longer pause.
        assert_eq!(pause_after(ring / 32, false, ring), Pause::Gap);
        assert_eq!(pause_after(ring / 8 - 1, false, ring), Pause::Gap);
        assert_eq!(pause_after(ring / 8, false, ring), Pause::None);
        assert_eq!(pause_after(ring / 8, true, ring), Pause::None);
        // A ring of a few bytes (a test's): never the longer pause.
        assert_eq!(pause_after(1, false, 16), Pause::Gap);
        assert!(QUIET_GAP > GAP && QUIET_GAP < POLL);
    }

    #[test]
    fn packed_records_come_back_whole_and_in_order() {
        let mut p = Packed::default();
        p.push(b"abc");
        p.push(b"");
        p.push(&[7u8; 300]);
        let v: Vec<&[u8]> = p.iter().collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], b"abc");
        assert!(v[1].is_empty());
        assert_eq!(v[2], &[7u8; 300][..]);
        assert_eq!(p.len(), 3);
        // Each by its index too, as iter gives them.
        for (i, r) in v.iter().enumerate() {
            assert_eq!(p.get(i), Some(*r));
        }
        assert_eq!(p.get(3), None);
    }

    /// A ring of records of `size` bytes with times `first`, `first + step`, ...; `left`
    /// of them (as many as asked: a program that keeps sending).
    struct Fake {
        next: u64,
        step: u64,
        size: usize,
        left: usize,
    }

    impl Source for Fake {
        fn take_into(&mut self, out: &mut Packed) -> Option<u64> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            let mut r = vec![0u8; self.size];
            r[4..8].copy_from_slice(&(self.size as u32).to_le_bytes());
            r[8..16].copy_from_slice(&self.next.to_le_bytes());
            out.push(&r);
            let ts = self.next;
            self.next += self.step;
            Some(ts)
        }
    }

    fn times(p: &Packed) -> Vec<u64> {
        p.iter().map(|r| event::header(r).unwrap().ts).collect()
    }

    #[test]
    fn copies_sent_faster_than_they_are_read_still_let_the_calls_through() {
        // A program that sends copies as fast as the drainer takes them: a million waiting
        // (one every 2 us), and the calls between them. A look reads a bounded part of
        // the copies, then calls, so the reader can answer (fill the kernel's cache) at
        // once; before, the first loop read every copy there was.
        let mut stacks = Fake {
            next: 0,
            step: 2_000,
            size: 64,
            left: 1_000_000,
        };
        let mut events = Fake {
            next: 1_000,
            step: 2_000,
            size: 160,
            left: 10_000,
        };
        let mut b = Batch::default();
        assert!(look(&mut stacks, &mut events, &mut b));
        assert_eq!(b.records.len(), 10_000, "the calls in the first batch");
        // BATCH_BYTES of copies (those of the calls read are among them), and the one
        // past the last call that ends the second read of copies.
        let copies = b.copies.len();
        assert_eq!(copies, BATCH_BYTES / 64 + 1, "{copies} copies");
    }

    #[test]
    fn an_emptied_batch_is_a_new_one_that_keeps_its_memory() {
        let mut stacks = Fake {
            next: 0,
            step: 10,
            size: 64,
            left: 100,
        };
        let mut events = Fake {
            next: 1,
            step: 10,
            size: 160,
            left: 100,
        };
        let mut b = Batch::default();
        look(&mut stacks, &mut events, &mut b);
        b.ack = 7;
        b.root_exited = true;
        b.lost = Some(Lost {
            at: 1,
            events: vec![1],
            agent: 0,
            stacks: 0,
        });
        assert!(b.records.len() > 0 && b.copies.len() > 0);
        let cap = b.records.data.capacity();
        b.empty();
        assert_eq!((b.records.len(), b.copies.len()), (0, 0));
        assert_eq!(b.records.iter().count() + b.copies.iter().count(), 0);
        assert!(b.lost.is_none() && b.ack == 0 && !b.root_exited && b.bytes == 0);
        assert_eq!(b.records.data.capacity(), cap);
    }

    #[test]
    fn every_call_has_its_copy_in_its_batch_or_an_earlier_one() {
        // Copy i at time 10 i, its call at 10 i + 1, and in between the drainer's looks
        // stop at their bounds (large records: a few per batch).
        let mut stacks = Fake {
            next: 0,
            step: 10,
            size: 1 << 20,
            left: 40,
        };
        let mut events = Fake {
            next: 1,
            step: 10,
            size: 1 << 20,
            left: 40,
        };
        let mut copies_seen = std::collections::BTreeSet::new();
        let mut calls = 0;
        for _ in 0..100 {
            let mut b = Batch::default();
            let more = look(&mut stacks, &mut events, &mut b);
            copies_seen.extend(times(&b.copies));
            for t in times(&b.records) {
                assert!(copies_seen.contains(&(t - 1)), "call {t} before its copy");
                calls += 1;
            }
            if !more && stacks.left == 0 && events.left == 0 {
                break;
            }
        }
        assert_eq!(calls, 40);
        assert_eq!(copies_seen.len(), 40);
    }

    #[test]
    fn the_backlog_holds_at_least_256_mib_or_eight_ring_buffers() {
        assert_eq!(backlog_limit(16 << 20), 256 << 20);
        assert_eq!(backlog_limit(1 << 30), 8 << 30);
    }
}
