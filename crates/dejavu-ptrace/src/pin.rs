//! Keeping the tracer next to the program's hot thread.
//!
//! Every traced call hands the CPU from the program to the tracer and back. When the two
//! run on different CPUs each hand-off is a cross-CPU wake-up, and in a VM that costs tens
//! of microseconds: on this project's 2-core VM a 200,000-stat Node.js loop takes ~25 s
//! under any ptrace tracer left to the scheduler, and ~3.5 s with tracer and program on
//! one CPU. Pinning only the tracer does not help: the scheduler then wakes the program on
//! the idle CPU.
//!
//! So when one thread makes most of the traced calls (a hot loop), dejavu pins that
//! thread and itself to one CPU, and unpins both when that stops being true. Other
//! threads and processes are never pinned, so a parallel build keeps its parallelism. The
//! program does not see the pin: `sched_getaffinity` is intercepted and answers the mask
//! the thread would have had; threads and processes it starts get that mask back; and a
//! thread that sets its own affinity is left alone from then on. (`/proc/self/status`
//! would still show the pin while it lasts.)

use dejavu_capture::os::Tid;
use rustc_hash::FxHashMap;
use std::io;

/// A CPU mask as the kernel's sched_*affinity calls see it (1024 bits).
pub type Mask = [u8; 128];

fn set_affinity(tid: Tid, mask: &Mask) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array of the same size as Mask.
    let r =
        unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<Mask>(), mask.as_ptr().cast()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn get_affinity(tid: Tid) -> io::Result<Mask> {
    let mut m: Mask = [0; 128];
    // SAFETY: as above; the kernel writes at most size_of::<Mask>() bytes.
    let r =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<Mask>(), m.as_mut_ptr().cast()) };
    if r == 0 {
        Ok(m)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn one_cpu(cpu: usize) -> Mask {
    let mut m: Mask = [0; 128];
    if cpu < 1024 {
        m[cpu / 8] |= 1 << (cpu % 8);
    }
    m
}

fn current_cpu() -> Option<usize> {
    // SAFETY: plain call.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// Stops per evaluation window.
const WINDOW: u32 = 512;
/// Share of a window's stops one thread must make to be pinned (percent).
const HOT_PERCENT: u32 = 80;
/// A window longer than this is too slow to be worth pinning (ns).
const HOT_WINDOW_NS: u64 = 200_000_000;

/// The pinning policy and what it did.
#[derive(Debug)]
pub struct Pinning {
    enabled: bool,
    /// The affinity dejavu started with: every task's unless the program set its own.
    all: Mask,
    /// Masks threads set themselves (sched_setaffinity): never touched again.
    user: FxHashMap<Tid, Mask>,
    /// The pinned thread and its CPU.
    pinned: Option<(Tid, usize)>,
    counts: FxHashMap<Tid, u32>,
    stops: u32,
    window_start: u64,
    /// Times a thread was pinned (for -v).
    pub pins: u64,
}

impl Pinning {
    /// A policy; `enabled` false makes every method a no-op.
    pub fn new(enabled: bool) -> Pinning {
        let all = get_affinity(0).unwrap_or([0xff; 128]);
        // One usable CPU: nothing to gain.
        let cpus: u32 = all.iter().map(|b| b.count_ones()).sum();
        Pinning {
            enabled: enabled && cpus > 1,
            all,
            user: FxHashMap::default(),
            pinned: None,
            counts: FxHashMap::default(),
            stops: 0,
            window_start: 0,
            pins: 0,
        }
    }

    #[cfg(test)]
    fn enabled(&self) -> bool {
        self.enabled
    }

    /// The mask thread `tid` should believe it has.
    pub fn mask_of(&self, tid: Tid) -> Mask {
        *self.user.get(&tid).unwrap_or(&self.all)
    }

    /// The thread is pinned by us right now.
    pub fn is_pinned(&self, tid: Tid) -> bool {
        self.pinned.is_some_and(|(t, _)| t == tid)
    }

    /// One ptrace stop of `tid` at `now` ns.
    #[inline]
    pub fn observe(&mut self, tid: Tid, now: u64) {
        if !self.enabled {
            return;
        }
        *self.counts.entry(tid).or_insert(0) += 1;
        self.stops += 1;
        if self.stops >= WINDOW {
            self.evaluate(now);
        }
    }

    fn evaluate(&mut self, now: u64) {
        let fast = now.saturating_sub(self.window_start) <= HOT_WINDOW_NS;
        let hot = self
            .counts
            .iter()
            .max_by_key(|(_, &n)| n)
            .filter(|(_, &n)| fast && n * 100 >= self.stops * HOT_PERCENT)
            .map(|(&t, _)| t)
            .filter(|t| !self.user.contains_key(t));
        self.counts.clear();
        self.stops = 0;
        self.window_start = now;
        match (hot, self.pinned) {
            (Some(t), Some((p, _))) if t == p => {}
            (Some(t), _) => {
                self.unpin();
                let Some(cpu) = current_cpu() else { return };
                if set_affinity(t, &one_cpu(cpu)).is_ok() {
                    let _ = set_affinity(0, &one_cpu(cpu));
                    self.pinned = Some((t, cpu));
                    self.pins += 1;
                }
            }
            (None, Some(_)) => self.unpin(),
            (None, None) => {}
        }
    }

    /// Gives the pinned thread (if any) and the tracer their affinity back.
    pub fn unpin(&mut self) {
        if let Some((t, _)) = self.pinned.take() {
            let _ = set_affinity(t, &self.mask_of(t));
            let _ = set_affinity(0, &self.all);
        }
    }

    /// `child` was created by `parent`: it inherited the pin, give it the real mask.
    pub fn on_clone(&mut self, parent: Tid, child: Tid) {
        if self.is_pinned(parent) {
            let m = self.mask_of(parent);
            let _ = set_affinity(child, &m);
            if m != self.all {
                self.user.insert(child, m);
            }
        }
    }

    /// The thread is gone.
    pub fn on_exit(&mut self, tid: Tid) {
        if self.is_pinned(tid) {
            self.pinned = None;
            let _ = set_affinity(0, &self.all);
        }
        self.user.remove(&tid);
        self.counts.remove(&tid);
    }

    /// Thread `target` set its own affinity to `mask` (and so undid any pin of ours).
    pub fn user_set(&mut self, target: Tid, mask: Mask) {
        self.user.insert(target, mask);
        if self.is_pinned(target) {
            self.pinned = None;
            let _ = set_affinity(0, &self.all);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_making_most_stops_is_pinned_and_unpinned_when_it_cools() {
        let mut p = Pinning::new(true);
        if !p.enabled() {
            eprintln!("SKIP: one CPU");
            return;
        }
        let me = unsafe { libc::gettid() };
        // A hot window: all stops from `me`.
        for i in 0..WINDOW {
            p.observe(me, i as u64);
        }
        assert!(p.is_pinned(me));
        let mask = get_affinity(me).unwrap();
        assert_eq!(mask.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
        // The program asks: it sees what it had.
        assert_eq!(p.mask_of(me), p.all);
        // A window spread over many threads: unpinned, mask restored.
        for i in 0..WINDOW {
            p.observe(100_000 + i as i32, 1_000_000 + i as u64);
        }
        assert!(!p.is_pinned(me));
        assert_eq!(get_affinity(me).unwrap(), p.all);
    }
}
