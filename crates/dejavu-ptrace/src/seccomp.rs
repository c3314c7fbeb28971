//! The seccomp-bpf filter installed in the tracee: calls in the traced set stop it for the
//! tracer (SECCOMP_RET_TRACE); every other call runs at full speed (SECCOMP_RET_ALLOW).
//!
//! The filter is a balanced binary search over the runs of traced/untraced syscall
//! numbers, so an untraced call (futex, mmap, epoll_wait...) costs about seven BPF
//! instructions, not one comparison per traced call as a linear rule list would.
//!
//! A few traced calls are traced only for some arguments (`arch::seccomp_arg_checks`:
//! mmap of a file, not anonymous memory). Such a number is a leaf of its own whose code
//! tests the arguments (two loads and two bit tests for mmap): only those calls pay for
//! it, and an anonymous mmap (malloc's arenas, thread stacks, the loader's bss) still runs
//! at full speed, never stopping the program.
//!
//! With language agents, a short prelude lets the agents' own calls on their channel
//! descriptor through untraced (`allow_on_fd`): they cost no stop and are not recorded.

/// One classic BPF instruction (`struct sock_filter`).
pub type Insn = libc::sock_filter;

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const BPF_JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const BPF_JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
/// offsetof(struct seccomp_data, nr)
const OFF_NR: u32 = 0;
/// offsetof(struct seccomp_data, arch)
const OFF_ARCH: u32 = 4;
/// offsetof(struct seccomp_data, args[0]); its low 32 bits on a little-endian machine
/// (x86_64 and aarch64, the architectures the backend supports).
const OFF_ARG0_LO: u32 = 16;

fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

/// What a run of syscall numbers decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Allow,
    Trace,
    /// Traced unless an argument check (index into the checks) lets it through.
    Check(usize),
}

/// A run of consecutive syscall numbers with the same verdict.
#[derive(Debug, Clone, Copy)]
struct Run {
    start: u32,
    verdict: Verdict,
}

/// An argument test: the call runs untraced when the low 32 bits of any listed argument
/// have any of the bits set.
pub type ArgCheck = (u32, Vec<(usize, u32)>);

/// Builds the filter for `traced` syscall numbers of the architecture `audit_arch`.
/// Calls of any other ABI (32-bit programs on a 64-bit kernel) are allowed untraced; the
/// tracer notices such programs at exec and reports them.
pub fn build_filter(audit_arch: u32, traced: &[u32]) -> Vec<Insn> {
    build_filter_checked(audit_arch, traced, &[])
}

/// `build_filter`, where the numbers of `checks` (also in `traced`) stop the program only
/// when their arguments pass the test (see [`ArgCheck`]).
pub fn build_filter_checked(audit_arch: u32, traced: &[u32], checks: &[ArgCheck]) -> Vec<Insn> {
    let mut nrs: Vec<u32> = traced.to_vec();
    nrs.sort_unstable();
    nrs.dedup();
    let verdict = |nr: u32| match checks.iter().position(|c| c.0 == nr) {
        Some(i) => Verdict::Check(i),
        None => Verdict::Trace,
    };
    // Runs over [0, u32::MAX]: untraced gaps, traced runs, and a run of its own for each
    // checked number.
    let mut runs = Vec::new();
    let mut covered = 0u64; // first number no run covers yet
    let mut i = 0;
    while i < nrs.len() {
        let a = nrs[i];
        let v = verdict(a);
        let mut b = a;
        while v == Verdict::Trace
            && i + 1 < nrs.len()
            && nrs[i + 1] == b + 1
            && verdict(nrs[i + 1]) == Verdict::Trace
        {
            i += 1;
            b = nrs[i];
        }
        i += 1;
        if a as u64 > covered {
            runs.push(Run {
                start: covered as u32,
                verdict: Verdict::Allow,
            });
        }
        runs.push(Run {
            start: a,
            verdict: v,
        });
        covered = b as u64 + 1;
    }
    if covered <= u32::MAX as u64 {
        runs.push(Run {
            start: covered as u32,
            verdict: Verdict::Allow,
        });
    }
    let mut prog = vec![
        stmt(BPF_LD_W_ABS, OFF_ARCH),
        jump(BPF_JEQ_K, audit_arch, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
        stmt(BPF_LD_W_ABS, OFF_NR),
    ];
    prog.extend(tree(&runs, checks));
    prog
}

/// The code of one leaf.
fn leaf(v: Verdict, checks: &[ArgCheck]) -> Vec<Insn> {
    let allow = stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW);
    let trace = stmt(BPF_RET_K, libc::SECCOMP_RET_TRACE);
    match v {
        Verdict::Allow => vec![allow],
        Verdict::Trace => vec![trace],
        Verdict::Check(i) => {
            // [ld arg][jset bits -> allow]* [ret trace] [ret allow]
            let tests = &checks[i].1;
            let n = tests.len();
            let mut code = Vec::with_capacity(2 * n + 2);
            for (j, &(arg, bits)) in tests.iter().enumerate() {
                code.push(stmt(BPF_LD_W_ABS, OFF_ARG0_LO + 8 * arg as u32));
                code.push(jump(BPF_JSET_K, bits, (2 * (n - 1 - j) + 1) as u8, 0));
            }
            code.push(trace);
            code.push(allow);
            code
        }
    }
}

/// Code deciding among `runs` (the accumulator holds nr, known >= runs[0].start).
fn tree(runs: &[Run], checks: &[ArgCheck]) -> Vec<Insn> {
    if runs.len() == 1 {
        return leaf(runs[0].verdict, checks);
    }
    let mid = runs.len() / 2;
    let left = tree(&runs[..mid], checks);
    let right = tree(&runs[mid..], checks);
    // jge runs[mid].start -> right (after left), else fall into left.
    assert!(
        left.len() <= 255,
        "seccomp filter subtree too large for a BPF jump"
    );
    let mut v = Vec::with_capacity(1 + left.len() + right.len());
    v.push(jump(BPF_JGE_K, runs[mid].start, left.len() as u8, 0));
    v.extend(left);
    v.extend(right);
    v
}

/// `filter`, preceded by a prelude that allows the calls `nrs` untraced when their first
/// argument is `fd` (native ABI only). The language agents write their reports to `fd`
/// (and check it with fstat once): those calls must neither stop the program nor appear
/// in the trace. The kernel reads a descriptor argument as a 32-bit int, so only the low
/// half of the register is compared, exactly as the kernel would use it.
pub fn allow_on_fd(filter: &[Insn], audit_arch: u32, fd: u32, nrs: &[u32]) -> Vec<Insn> {
    let n = nrs.len();
    // Layout: [ld arch][jeq arch][ld nr][jeq nr_i]*n [ja rest][ld arg0][jeq fd][ret allow] rest
    // Every jump is relative to the next instruction.
    let mut prog = Vec::with_capacity(filter.len() + n + 7);
    prog.push(stmt(BPF_LD_W_ABS, OFF_ARCH));
    // Foreign ABI: straight to `filter` (it decides), skipping n + 5 instructions.
    prog.push(jump(BPF_JEQ_K, audit_arch, 0, (n + 5) as u8));
    prog.push(stmt(BPF_LD_W_ABS, OFF_NR));
    for (i, &nr) in nrs.iter().enumerate() {
        // Match: jump over the rest of the list and the `ja` to the fd check.
        prog.push(jump(BPF_JEQ_K, nr, (n - i) as u8, 0));
    }
    prog.push(stmt(BPF_JA, 3));
    prog.push(stmt(BPF_LD_W_ABS, OFF_ARG0_LO));
    prog.push(jump(BPF_JEQ_K, fd, 0, 1));
    prog.push(stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW));
    prog.extend_from_slice(filter);
    prog
}

/// Runs the filter over one `(arch, nr)` the way the kernel would; for tests.
pub fn simulate(prog: &[Insn], arch: u32, nr: u32) -> u32 {
    simulate_call(prog, arch, nr, &[0; 6])
}

/// Runs the filter over one call with its arguments, the way the kernel would; for tests.
pub fn simulate_call(prog: &[Insn], arch: u32, nr: u32, args: &[u64; 6]) -> u32 {
    let mut acc = 0u32;
    let mut pc = 0usize;
    while let Some(i) = prog.get(pc) {
        match i.code {
            BPF_LD_W_ABS => {
                acc = match i.k {
                    OFF_NR => nr,
                    OFF_ARCH => arch,
                    k if (16..64).contains(&k) && k % 4 == 0 => {
                        let a = args[(k as usize - 16) / 8];
                        if k % 8 == 0 {
                            a as u32
                        } else {
                            (a >> 32) as u32
                        }
                    }
                    _ => return u32::MAX,
                }
            }
            BPF_JEQ_K => pc += if acc == i.k { i.jt } else { i.jf } as usize,
            BPF_JGE_K => pc += if acc >= i.k { i.jt } else { i.jf } as usize,
            BPF_JSET_K => pc += if acc & i.k != 0 { i.jt } else { i.jf } as usize,
            BPF_JA => pc += i.k as usize,
            BPF_RET_K => return i.k,
            _ => return u32::MAX,
        }
        pc += 1;
    }
    u32::MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_exactly_the_set_and_nothing_else() {
        let sets: Vec<Vec<u32>> = vec![
            dejavu_capture::arch::table()
                .iter()
                .map(|&(n, _)| n)
                .collect(),
            vec![0],
            vec![0, 1, 2, 5, 6, 9],
            vec![7],
            vec![3, 4, 1000],
        ];
        for set in sets {
            let prog = build_filter(0xc000_003e, &set);
            assert!(prog.len() < 400);
            for nr in 0..2000u32 {
                let want = if set.contains(&nr) {
                    libc::SECCOMP_RET_TRACE
                } else {
                    libc::SECCOMP_RET_ALLOW
                };
                assert_eq!(simulate(&prog, 0xc000_003e, nr), want, "nr {nr} of {set:?}");
            }
            assert_eq!(
                simulate(&prog, 0xc000_003e, 0x4000_0000),
                libc::SECCOMP_RET_ALLOW
            );
            assert_eq!(
                simulate(&prog, 0x4000_0003, 0),
                libc::SECCOMP_RET_ALLOW,
                "foreign arch"
            );
        }
    }

    #[test]
    fn the_agent_prelude_lets_calls_on_its_descriptor_through_and_nothing_else() {
        const ARCH: u32 = 0xc000_003e;
        let set: Vec<u32> = dejavu_capture::arch::table()
            .iter()
            .map(|&(n, _)| n)
            .collect();
        let base = build_filter(ARCH, &set);
        let (write, writev, fstat) = (1u32, 20u32, 5u32);
        let prog = allow_on_fd(&base, ARCH, 1021, &[write, writev, fstat]);
        let call = |nr: u32, a0: u64| simulate_call(&prog, ARCH, nr, &[a0, 7, 8, 0, 0, 0]);
        for nr in [write, writev, fstat] {
            assert_eq!(
                call(nr, 1021),
                libc::SECCOMP_RET_ALLOW,
                "nr {nr} on the agent fd"
            );
            // The kernel reads an int: garbage in the upper half still means fd 1021.
            assert_eq!(call(nr, 0xdead_0000_0000_03fd), libc::SECCOMP_RET_ALLOW);
            assert_eq!(
                call(nr, 3),
                libc::SECCOMP_RET_TRACE,
                "nr {nr} on another fd"
            );
            assert_eq!(call(nr, 1022), libc::SECCOMP_RET_TRACE);
        }
        // Everything else decides exactly as without the prelude, whatever its arguments.
        for nr in 0..600u32 {
            if [write, writev, fstat].contains(&nr) {
                continue;
            }
            for a0 in [0u64, 3, 1021] {
                assert_eq!(call(nr, a0), simulate(&base, ARCH, nr), "nr {nr} a0 {a0}");
            }
        }
        assert_eq!(
            simulate_call(&prog, 0x4000_0003, write, &[1021, 0, 0, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW,
            "foreign arch still allowed"
        );
        // A filter with the prelude but an empty list is the base filter.
        let none = allow_on_fd(&base, ARCH, 1021, &[]);
        for nr in 0..600u32 {
            assert_eq!(simulate(&none, ARCH, nr), simulate(&base, ARCH, nr));
        }
    }

    #[test]
    fn mmap_stops_the_program_only_for_a_file() {
        let arch = dejavu_capture::arch::AUDIT_ARCH;
        let set: Vec<u32> = dejavu_capture::arch::table()
            .iter()
            .map(|&(n, _)| n)
            .collect();
        let checks = dejavu_capture::arch::seccomp_arg_checks();
        let prog = build_filter_checked(arch, &set, &checks);
        let base = build_filter(arch, &set);
        let mmap = libc::SYS_mmap as u32;
        let (private, anon) = (libc::MAP_PRIVATE as u64, libc::MAP_ANONYMOUS as u64);
        let call =
            |flags: u64, fd: u64| simulate_call(&prog, arch, mmap, &[0, 4096, 1, flags, fd, 0]);
        assert_eq!(call(private, 3), libc::SECCOMP_RET_TRACE, "a file");
        assert_eq!(
            call(libc::MAP_SHARED as u64, 0),
            libc::SECCOMP_RET_TRACE,
            "fd 0"
        );
        assert_eq!(
            call(private | anon, u32::MAX as u64),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            call(private | anon, 0xffff_ffff_ffff_ffff),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            call(private | anon, 5),
            libc::SECCOMP_RET_ALLOW,
            "fd ignored"
        );
        assert_eq!(
            call(private, u32::MAX as u64),
            libc::SECCOMP_RET_ALLOW,
            "no file"
        );
        // The kernel reads an int: the upper half of the register means nothing.
        assert_eq!(call(private | 0x20_0000_0000, 3), libc::SECCOMP_RET_TRACE);
        assert_eq!(call(private, 0x1_0000_0003), libc::SECCOMP_RET_TRACE);
        // Every other call decides as without the check, whatever its arguments.
        for nr in 0..2000u32 {
            if nr == mmap {
                continue;
            }
            for args in [[0u64; 6], [1, 2, 3, anon, u64::MAX, 0]] {
                assert_eq!(
                    simulate_call(&prog, arch, nr, &args),
                    simulate(&base, arch, nr),
                    "nr {nr}"
                );
            }
        }
        assert_eq!(
            simulate_call(&prog, 0x4000_0003, mmap, &[0, 1, 1, private, 3, 0]),
            libc::SECCOMP_RET_ALLOW,
            "foreign arch"
        );
    }

    #[test]
    fn an_untraced_call_costs_a_handful_of_instructions() {
        let set: Vec<u32> = dejavu_capture::arch::table()
            .iter()
            .map(|&(n, _)| n)
            .collect();
        let prog = build_filter_checked(
            0xc000_003e,
            &set,
            &dejavu_capture::arch::seccomp_arg_checks(),
        );
        // Depth of the search tree: log2(runs) + the 4-instruction prologue.
        let mut max_steps = 0;
        for nr in 0..500u32 {
            let mut pc = 0usize;
            let mut steps = 0;
            let mut acc = 0u32;
            loop {
                let i = prog[pc];
                steps += 1;
                match i.code {
                    BPF_LD_W_ABS => acc = if i.k == OFF_ARCH { 0xc000_003e } else { nr },
                    BPF_JEQ_K => pc += if acc == i.k { i.jt } else { i.jf } as usize,
                    BPF_JGE_K => pc += if acc >= i.k { i.jt } else { i.jf } as usize,
                    _ => break,
                }
                pc += 1;
            }
            max_steps = max_steps.max(steps);
        }
        assert!(max_steps <= 14, "{max_steps} steps");
    }
}
