// SPDX-License-Identifier: GPL-2.0
/* dejavu's eBPF recorder: the kernel half of the eBPF backend (docs/ebpf-backend.md).
 *
 * It follows the traced program's process tree in the kernel (sched_process_fork adds
 * every child of a traced process to `traced`, sched_process_exit removes it), filters
 * each syscall by number (`wanted`) and by process before doing any work, and at the
 * syscall's exit copies what user space needs to decode the call exactly as the ptrace
 * backend does: the registers, the strings and buffers the call read or wrote (paths,
 * stat answers, write prefixes, iovecs...), and for every new descriptor the identity of
 * the file behind it. Records go to one ring buffer without waking the reader; the reader
 * polls on a timer, and is woken early only when the buffer is filling up.
 *
 * Record layouts are mirrored in src/event.rs; keep the two in step. */
#include <linux/types.h>
#include <linux/bpf.h>
#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define NR_MAX 512
#define BUF_SIZE 32768
/* Blobs start below OFF_LIMIT; each is at most 16 + 4096 bytes, so a record never
 * reaches BUF_SIZE. */
#define OFF_LIMIT 16384
#define OFF_MASK (OFF_LIMIT - 1)
#define STR_MAX 4096
#define MEM_MAX 4096
#define ARGV_LIMIT 12288
#define AUXV_WORDS 48
#define MAX_IOV 64
#define PAYLOAD_IOV 4
/* The first bytes of every write, for its fingerprint (dejavu_trace::mask). */
#define FINGERPRINT_BYTES 256

/* Record kinds. */
#define EV_CALL 1
#define EV_FORK 2
#define EV_EXEC 3
#define EV_EXIT 4
#define EV_SIGNAL 5
#define EV_AGENT 6
#define EV_STACK 7

/* Blob kinds and flags. */
#define B_MEM 1
#define B_STR 2
#define B_FDSTAT 3
#define B_ARGV 4
#define B_STACK 5 /* ip, bp, then the top of the stack (see blob_stack) */
#define B_PLACE 6 /* mm, ip; addr: sp (see blob_place) */
#define INLINE_STACK 256
#define BF_FAULT 1
#define BF_TRUNC 2
/* An exec's: the kernel half waits for the new program's agent (the `awaiting` map). */
#define BF_AWAIT 4

/* CALL flags. */
#define CF_UNFINISHED 1
#define CF_NO_ENTER 2
#define CF_STACK_SLICE 4 /* a copy of the stack was sent (EV_STACK, stackbuf) */
#define CF_STACK_HIT 8   /* the stack is the one user space unwound before: id in stack_id */
#define CF_STACK_INLINE 16 /* no room for a copy: a short one is in the call's record */
#define CF_STACK_AGENT 32  /* an agent names the calls made from here: none (handle in stack_id) */
#define CF_STACK_STICKY 64 /* an agent's STICKY names the call (sticky_names): no stack */

/* `wanted` bits. */
#define W_TRACE 1

/* x86_64 syscall numbers the kernel side treats specially. */
#define NR_read 0
#define NR_write 1
#define NR_open 2
#define NR_stat 4
#define NR_fstat 5
#define NR_lstat 6
#define NR_mmap 9
#define NR_munmap 11
#define NR_pwrite64 18
#define NR_readv 19
#define NR_writev 20
#define NR_access 21
#define NR_pipe 22
#define NR_dup 32
#define NR_dup2 33
#define NR_sendfile 40
#define NR_socket 41
#define NR_connect 42
#define NR_accept 43
#define NR_execve 59
#define NR_fcntl 72
#define NR_truncate 76
#define NR_chdir 80
#define NR_rename 82
#define NR_mkdir 83
#define NR_rmdir 84
#define NR_creat 85
#define NR_link 86
#define NR_unlink 87
#define NR_symlink 88
#define NR_readlink 89
#define NR_chmod 90
#define NR_chown 92
#define NR_lchown 94
#define NR_openat 257
#define NR_mkdirat 258
#define NR_fchownat 260
#define NR_newfstatat 262
#define NR_unlinkat 263
#define NR_renameat 264
#define NR_linkat 265
#define NR_symlinkat 266
#define NR_readlinkat 267
#define NR_fchmodat 268
#define NR_faccessat 269
#define NR_utimensat 280
#define NR_accept4 288
#define NR_dup3 292
#define NR_pipe2 293
#define NR_preadv 295
#define NR_pwritev 296
#define NR_renameat2 316
#define NR_memfd_create 319
#define NR_execveat 322
#define NR_preadv2 327
#define NR_pwritev2 328
#define NR_statx 332
#define NR_openat2 437
#define NR_faccessat2 439
#define NR_fchmodat2 452

/* Bytes of a statx buffer copied: up to and with stx_dev_minor, what dejavu decodes (keep in
 * step with dejavu-capture's arch::STATX_SIZE); the struct's last 112 bytes are unused. */
#define STATX_USED 144

#define TS_COMPAT 0x0002
#define S_IFMT 00170000
#define S_IFREG 0100000
#define O_APPEND 02000
#define MAP_ANONYMOUS 0x20
#define AT_EMPTY_PATH 0x1000
#define AT_SYMLINK_NOFOLLOW 0x100

struct config {
	u32 payload_bytes; /* write prefix kept, at most MEM_MAX */
	s32 agent_fd;      /* the language agents' channel descriptor, -1 for none */
	u32 stacks;        /* native stacks: bytes of stack to copy (<= SLICE_MAX), 0 for none */
	u32 wake_bytes;    /* wake the reader when this much is waiting */
	u32 open_identity; /* record the identity of each new descriptor's file */
	u32 await_agent;   /* an interpreter goes without native stacks until its agent's hello */
};

struct hdr {
	u32 kind;
	u32 size;
	u64 ts;
	u32 pid;
	u32 tid;
};

struct call_ev {
	struct hdr h;
	u64 enter_ts;
	s64 ret;
	u64 args[6];
	u32 nr;
	u16 nips; /* always 0 (a frame-pointer walk's place, kept for the layout) */
	u16 flags;
	/* With CF_STACK_HIT: the id of the stack user space unwound for the same
	 * instruction pointer, stack pointer and stack words before; with CF_STACK_SLICE,
	 * the `seq` of the copy of the stack sent for this call (EV_STACK, in `stackbuf`). */
	u64 stack_id;
};

/* The top of a thread's user stack at a call (its registers and up to SLICE_MAX bytes
 * from the stack pointer up), for user space to unwind with the modules' unwind tables,
 * as perf --call-graph dwarf does. Its data follows, `len` bytes. */
struct stack_ev {
	struct hdr h;
	u64 mm; /* the address space (with tgid, the stack cache's key) */
	u64 ip;
	u64 sp;
	u64 bp;
	u32 len;
	u32 pad; /* 1: sp is on the main thread's stack */
	u64 seq; /* the call record's stack_id names its copy by this */
};

/* A copy of user memory (or kernel facts). Its data follows, padded to 8 bytes; a string's
 * data includes its NUL, so it takes pad8(len + 1). */
struct blob {
	u64 addr;
	u32 len;
	u16 kind;
	u16 flags;
};

struct fdstat {
	u32 dev;
	u32 mode;
	u64 ino;
	s64 size;
	u32 nlink;
	u32 uid;
	u32 gid;
	u32 rdev;
	s64 mtime_sec;
	s64 mtime_nsec;
	s64 ctime_sec;
	s64 ctime_nsec;
	u32 f_flags;
	u32 pad;
};

struct fork_ev {
	struct hdr h;
	u32 child_pid;
	u32 child_tid;
	u64 flags;
	/* A new process: the parent's native stack at the clone (as a call's flags and
	 * stack_id), which names where the child's exec was asked for (a child of
	 * posix_spawn or vfork has a few frames of libc's on a stack of its own). */
	u64 stack_id;
	u32 sflags;
	u32 pad;
};

struct exec_ev {
	struct hdr h;
	u32 old_pid;
	u32 fname_len;
	u32 argv_len;
	u32 flags;
	/* From the auxiliary vector: where the program's program headers are (AT_PHDR) and
	 * where its interpreter was loaded (AT_BASE, 0 for none): where the kernel put the
	 * code, for naming frames after the process is gone. */
	u64 at_phdr;
	u64 at_base;
	/* The native stack of the execve, taken at its entry in the old program (as a
	 * call's flags and stack_id): the new program's stack is all its exit has. */
	u64 stack_id;
	u32 sflags;
	u32 pad;
};

struct exit_ev {
	struct hdr h;
	s32 exit_code;
	u32 group_dead;
};

struct signal_ev {
	struct hdr h;
	s32 sig;
	u32 pad;
};

struct agent_ev {
	struct hdr h;
	u32 len;
	u32 pad;
};

/* One step of the copy plan (see on_sys_exit). */
#define MAX_OPS 4
#define OP_IOV_PAYLOAD 10
struct op {
	u64 kind;
	u64 addr;
	u64 len;
};

struct inflight {
	u64 ts; /* 0: not inside a traced call */
	u32 tid;
	u32 nr;
	/* execve and execveat only: the native stack taken at the call's entry, while the
	 * old program's memory is there (stk_call's sid and native_stack's flags). */
	u64 sid;
	u32 sflags;
	u32 nostk; /* its process is traced without native stacks */
};

struct scratch {
	u8 buf[BUF_SIZE];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20); /* resized by the loader (--buffer-size) */
} events SEC(".maps");

/* Copies of user stacks (EV_STACK), in a ring of their own so that they never take the
 * room of calls; resized by the loader (twice --buffer-size with stacks, a page without). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);
} stackbuf SEC(".maps");

/* Per CPU, the number of stack copies sent: with the CPU, a copy's name (`seq`). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} stackseq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	/* Allocated as entries come (a fork's, a few at a time), as `awaiting`: preallocated,
	 * its 65,536 entries took ~1.2 ms of every start to create, on the longer of the two
	 * threads that create the maps. Its lookups are the same; the CPUs' answers are kept
	 * in `tcache` anyway. */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, u32);
	__type(value, u8);
} traced SEC(".maps");

/* Processes running an interpreter whose language agent has not said hello yet (set at
 * the exec when config.await_agent, see on_exec): their calls until then are the
 * runtime's start-up (the report's rule: docs/report-format.md, owners), about a thousand
 * new places each sending a copy of its stack, so they go without native stacks. Gone at
 * the agent's hello (agent_write), when user space finds that no agent will load (the
 * environment does not load one), at the next exec and at the exit. Read where `traced`
 * is (is_traced): its changes count in `gens` too. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	/* Allocated as entries come (a few at a time): a preallocated 65,536-entry hash
	 * took ~2 ms of every start to create. */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, u32);
	__type(value, u8);
} awaiting SEC(".maps");

/* Processes whose last thread has been seen exiting (on_exit: `live` was 0), taken out of
 * `traced` then: the threads of a group exit at once on several CPUs, each counts itself out
 * of `live` before its sched_process_exit, and one of them may reach that tracepoint after
 * the thread that found `live` at 0 took the process out of `traced`. Its end is still
 * recorded from here (cargo's linker: one build in three lost a thread's end, and the
 * recording waited 200 ms for it before it gave up, with a warning of lost records). A
 * later process given the same number meanwhile is not traced: it has no call in its
 * threads' `inflight` slots, and user space knows no task of it, so its end is ignored
 * there. LRU: old entries make room by themselves. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u8);
} dying SEC(".maps");

/* The agents' repeated calls (docs/agents.md, "Repeated calls"). An agent says a repeated
 * call's site once for its thread and path (a STICKY message on its channel), and from
 * then on user space gives that site to the thread's calls on the path, of the kind of
 * the first one after it: their native stacks are never used. Until the reader has
 * decoded such a call and marked its place as the agent's, each one sent a copy of its
 * stack (thousands per loop, hundreds of MB: the default's main cost and spread, and
 * lost records). So the kernel half reads the STICKY messages in the channel's writes
 * (agent_write) and keeps each thread's last one here, in slot tid % STICKY_SLOTS, and
 * a call user space will give that site to goes without a stack (sticky_names).
 * user space's rule is followed to the letter or not at all: what the kernel cannot
 * tell (a slot another thread took, a path longer than STICKY_PATH, a relative path) it
 * leaves to the stack as before. */
#define STICKY_SLOTS 4096
#define STICKY_PATH 256
#define STICKY_MSGS 8
/* sticky.state */
#define STK_NONE 0
#define STK_SAID 1 /* said: the thread's next call on a path fixes the calls' kind */
#define STK_KIND 2 /* its kind fixed (nr, nofollow) */
struct sticky {
	u32 tid;
	u32 tgid;
	u32 state;
	u32 nr;
	u32 nofollow;
	u32 len;
	u8 path[STICKY_PATH];
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STICKY_SLOTS);
	/* Mappable: a kept object (kept.rs) zeroes it through a mapping at each recording's
	 * start, not an update per slot. */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, u32);
	__type(value, struct sticky);
} sticky SEC(".maps");

static __always_inline struct sticky *sticky_slot(u32 tid)
{
	u32 k = tid & (STICKY_SLOTS - 1);
	return bpf_map_lookup_elem(&sticky, &k);
}

/* Thread `tid` exited or exec'd: its STICKY is not to name a later thread's calls. */
static __always_inline void sticky_forget(u32 tid)
{
	struct sticky *s = sticky_slot(tid);
	if (s && s->tid == tid)
		s->state = STK_NONE;
}

/* The call each traced thread is inside (entry time and number), in slot tid % SLOTS: an
 * array lookup instead of a hash update and delete per call (task-local storage would be
 * exact; aya 0.13 cannot create that map type). Two traced threads whose tids share a
 * slot and are inside calls at once overwrite each other: the first one's call is then
 * recorded without its entry time (CF_NO_ENTER, duration 0), never dropped. */
#define SLOTS 65536
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE); /* as `sticky` */
	__type(key, u32);
	__type(value, struct inflight);
} inflight SEC(".maps");

/* Whether the last process a CPU asked about is traced, kept per CPU (`tcache`) while
 * `gens` says `traced` did not change: a tight loop's calls ask the hash map once,
 * not twice per call (a hash lookup is a chain of calls in the kernel, each paying the
 * return-thunk mitigations of today's CPUs: ~80 ns per call, docs/ebpf-backend.md). */
struct tcache {
	u32 tgid;
	u32 state; /* 0: nothing kept, 1: not traced, 2: traced, 3: traced without stacks */
	u64 gen;   /* gens[0] + gens[1] when kept */
	u64 since; /* bytes this CPU sent since it last looked at the ring's fill */
	u64 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct tcache);
} tcache SEC(".maps");

/* Changes of `traced`: [0] counted by the kernel half (fork, exit), [1] by user space
 * (the first process, attaching, a process let go). Each only grows, so their sum
 * changes with any change of the set. */
#define GEN_KERNEL 0
#define GEN_USER 1
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} gens SEC(".maps");

static __always_inline struct tcache *tcache_get(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&tcache, &zero);
}

/* `traced` changed: the CPUs' kept answers are stale. Called after the change. */
static __always_inline void traced_changed(void)
{
	u32 k = GEN_KERNEL;
	u64 *g = bpf_map_lookup_elem(&gens, &k);
	if (g)
		__sync_fetch_and_add(g, 1);
}

/* `traced` values: followed, with native stacks unless NO_STACKS is set (a system tool the
 * program ran: user space decides at its exec, a fork inherits its parent's). */
#define TRACED 1
#define TRACED_NO_STACKS 2
/* A program (not a launcher, not a tool): a system program one of its children execs is a
 * tool, without stacks from its exec on (user space says so at the program's exec: the
 * kernel then need not wait for user space to read each short-lived tool's exec). */
#define TRACED_CHILD_TOOLS 4

/* Whether `s` (an exec's file name) starts with a directory where a system's package
 * manager installs programs (as `system_exe` in crates/dejavu-detect/src/program.rs; the
 * toolchains' directories it also counts are left to user space). */
static __always_inline int prefix_is(const u8 *s, const char *p, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i] != (u8)p[i])
			return 0;
	return 1;
}

static __always_inline int system_path(const u8 *s)
{
	return prefix_is(s, "/usr/bin/", 9) || prefix_is(s, "/usr/sbin/", 10) ||
	       prefix_is(s, "/bin/", 5) || prefix_is(s, "/sbin/", 6) ||
	       prefix_is(s, "/usr/lib/", 9) || prefix_is(s, "/usr/lib64/", 11) ||
	       prefix_is(s, "/usr/libexec/", 13) || prefix_is(s, "/lib/", 5) ||
	       prefix_is(s, "/lib64/", 7);
}

/* 0: not traced; 1: traced; 2: traced, without native stacks. */
static __always_inline int traced_value(u8 *v)
{
	if (!v)
		return 0;
	return (*v & TRACED_NO_STACKS) ? 2 : 1;
}

/* traced_value of `tgid`, and 2 while it awaits its agent's hello. */
static __always_inline int traced_or_awaiting(u32 tgid)
{
	int yes = traced_value(bpf_map_lookup_elem(&traced, &tgid));
	if (yes == 1 && bpf_map_lookup_elem(&awaiting, &tgid))
		yes = 2;
	return yes;
}

static __always_inline int is_traced(u32 tgid)
{
	u32 k0 = GEN_KERNEL, k1 = GEN_USER;
	struct tcache *tc = tcache_get();
	u64 *g0 = bpf_map_lookup_elem(&gens, &k0);
	u64 *g1 = bpf_map_lookup_elem(&gens, &k1);
	if (!tc || !g0 || !g1)
		return traced_or_awaiting(tgid);
	/* Read before the set: a change after this read makes the kept answer stale. */
	u64 gen = *(volatile u64 *)g0 + *(volatile u64 *)g1;
	if (tc->state && tc->tgid == tgid && tc->gen == gen)
		return tc->state - 1;
	int yes = traced_or_awaiting(tgid);
	tc->tgid = tgid;
	tc->gen = gen;
	tc->state = yes + 1;
	return yes;
}

static __always_inline struct inflight *slot(u32 tid)
{
	u32 k = tid & (SLOTS - 1);
	return bpf_map_lookup_elem(&inflight, &k);
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NR_MAX);
	__type(key, u32);
	__type(value, u8);
} wanted SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* Stacks already unwound. An unwind is a function of the registers and of the stack
 * words the unwinder read: user space, after unwinding a slice, stores which words it
 * read (offsets from the stack pointer) and a hash of their values under the address
 * space, instruction pointer and stack pointer. The same call from the same place then
 * reads those words again (one copy of `span` bytes), and if the hash and the frame
 * pointer agree, reports the stack's id instead of a copy of the stack. */
#define SLICE_MAX 16384
#define STK_WORDS 64
#define STK_MORE 3
/* A relative entry's key (see stk_check): its stack pointer field is STK_REL and the stack
 * pointer's offset in its page (a goroutine's stack, 8 KiB-aligned, and a thread's, page-
 * aligned, put the same code at the same offset); a word of it that held a stack address
 * is marked STK_OFF_REL in off[]. No user address has bit 63 set. */
#define STK_REL (1ULL << 63)
#define STK_REL_MASK 4095ULL
#define STK_OFF_REL 0x8000
#define WAKE_IDLE_BYTES 65536
struct stk_key {
	u64 mm;
	u64 ip;
	u64 sp;
	u32 tgid;
	u32 pad;
};
struct stk_val {
	u64 bp;
	u64 hash;
	u32 id;
	u16 n;    /* words in off[] */
	u16 span; /* bytes from sp that hold them */
	u16 off[STK_WORDS]; /* in words from sp */
	u32 bp_any; /* the frame pointer register did not matter */
	u32 agent;  /* a language agent names the calls made here: no stack (id: a handle) */
	/* Up to STK_MORE more stacks of the same place, read from the same words (a helper
	 * called from several lines of a loop: its callers' return addresses differ), newest
	 * first: their hashes and ids, `ways` of them. Lines taking turns no longer replace
	 * each other's entry. */
	u64 hashes[STK_MORE];
	u32 ids[STK_MORE];
	u32 ways;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stk_key);
	__type(value, struct stk_val);
} stacks SEC(".maps");

/* The entry of `stacks` a CPU found last, kept while user space has not changed the map
 * since (`stacks_gen`, counted by user space at each change): a loop's calls from one
 * place ask the LRU map once (a lookup, and the LRU's bookkeeping, per call otherwise).
 * What an entry says stays true once the LRU dropped it (a stack's id is the trace's). */
struct scache {
	struct stk_key k;
	struct stk_val v;
	u64 gen;
	u64 kept; /* 0: nothing kept */
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct scache);
} scache SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} stacks_gen SEC(".maps");

/* The entry of `stacks` for `k`, always as this CPU's kept copy (one kind of pointer for
 * the code after it: a pointer that may be either map's made the verifier walk the
 * stack's hash loop twice, 50% more of dejavu's start-up). */
static __always_inline struct stk_val *stack_entry(struct stk_key *k)
{
	u32 zero = 0;
	struct scache *pc = bpf_map_lookup_elem(&scache, &zero);
	u64 *g = bpf_map_lookup_elem(&stacks_gen, &zero);
	if (!pc || !g)
		return 0; /* (never: both are arrays of one entry) a copy is sent */
	/* Read before the map: a change after this read makes the kept entry stale. */
	u64 gen = *(volatile u64 *)g;
	if (pc->kept && pc->gen == gen && pc->k.mm == k->mm && pc->k.ip == k->ip &&
	    pc->k.sp == k->sp && pc->k.tgid == k->tgid)
		return &pc->v;
	struct stk_val *v = bpf_map_lookup_elem(&stacks, k);
	if (!v)
		return 0;
	pc->k = *k;
	__builtin_memcpy(&pc->v, v, sizeof(*v));
	pc->gen = gen;
	pc->kept = 1;
	return &pc->v;
}

/* Keep in step with dejavu-ebpf's stack_hash. */
static __always_inline u64 stk_mix(u64 h, u64 w)
{
	h ^= w;
	h *= 0x9E3779B97F4A7C15ULL;
	h ^= h >> 29;
	return h;
}
#define STK_SEED 0x243F6A8885A308D3ULL

/* Records the ring buffer had no room for, per CPU: [LOST_EVENTS] the calls, processes and
 * signals; [LOST_AGENT] the agents' reports (not events of the program: counted apart). */
#define LOST_EVENTS 0
#define LOST_AGENT 1
/* [LOST_STACK]: calls sent without their native stack, the stack copies' ring buffer
 * being full. */
#define LOST_STACK 2
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

static __always_inline struct config *cfg(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&config, &zero);
}

static __always_inline struct scratch *scratch_get(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&scratch, &zero);
}

static __always_inline u8 *scratch_buf(void)
{
	struct scratch *s = scratch_get();
	return s ? s->buf : 0;
}

/* One record of kind `which` (LOST_*) the ring buffer had no room for, on this CPU. */
static __always_inline void count_lost_of(u32 which)
{
	u64 *n = bpf_map_lookup_elem(&lost, &which);
	if (n)
		*n += 1;
}

static __always_inline void count_lost(void)
{
	count_lost_of(LOST_EVENTS);
}

/* Sends `size` bytes of the scratch buffer; counts a loss of kind `which` when there is
 * no room. Whether it was sent. */
static __always_inline int submit_as(u8 *buf, u32 size, struct config *c, u32 which)
{
	u64 flags = BPF_RB_NO_WAKEUP;
	size &= (BUF_SIZE - 1);
	/* The fill is looked at once per wake_bytes / 16 bytes this CPU sent, not per record
	 * (a helper call, and the reader's line of the ring): the reader is then woken at
	 * most that much later than the threshold. */
	struct tcache *tc = tcache_get();
	if (c && tc) {
		tc->since += size;
		if (tc->since >= c->wake_bytes / 16) {
			tc->since = 0;
			if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= c->wake_bytes)
				flags = BPF_RB_FORCE_WAKEUP;
		}
	}
	if (bpf_ringbuf_output(&events, buf, size, flags) != 0) {
		count_lost_of(which);
		return 0;
	}
	return 1;
}

static __always_inline void submit(u8 *buf, u32 size, struct config *c)
{
	submit_as(buf, size, c, LOST_EVENTS);
}

/* off &= OFF_MASK, in a form the compiler cannot drop after a comparison that makes it
 * a no-op: the verifier needs to see the bound where the pointer is formed. */
#define BOUND(x) asm volatile("%0 &= 16383" : "+r"(x))

static __always_inline u32 pad8(u32 n)
{
	return (n + 7) & ~7u;
}

/* A NUL-terminated string of user memory at `addr`. */
__noinline u32 blob_str(struct scratch *sc, u32 off, u64 addr)
{
	if (!sc)
		return off;
	u8 *buf = sc->buf;
	if (off > OFF_MASK)
		return off;
	BOUND(off);
	struct blob *b = (struct blob *)(buf + off);
	long n = bpf_probe_read_user_str(buf + off + sizeof(*b), STR_MAX, (const void *)addr);
	b->addr = addr;
	b->kind = B_STR;
	if (n <= 0) {
		b->len = 0;
		b->flags = BF_FAULT;
		return off + sizeof(*b) + 8; /* as for an empty string */
	}
	b->len = n - 1;
	b->flags = n >= STR_MAX ? BF_TRUNC : 0;
	return off + sizeof(*b) + pad8(n);
}

/* `len` bytes of user memory at `addr` (at most MEM_MAX). */
__noinline u32 blob_mem(struct scratch *sc, u32 off, u64 addr, u64 len)
{
	if (!sc)
		return off;
	u8 *buf = sc->buf;
	if (off > OFF_MASK)
		return off;
	BOUND(off);
	struct blob *b = (struct blob *)(buf + off);
	u32 flags = 0;
	if (len > MEM_MAX) {
		len = MEM_MAX;
		flags = BF_TRUNC;
	}
	len &= (2 * MEM_MAX - 1);
	if (len > MEM_MAX)
		len = MEM_MAX;
	b->addr = addr;
	b->kind = B_MEM;
	if (bpf_probe_read_user(buf + off + sizeof(*b), len, (const void *)addr) != 0) {
		b->len = 0;
		b->flags = BF_FAULT;
		return off + sizeof(*b);
	}
	b->len = len;
	b->flags = flags;
	return off + sizeof(*b) + pad8(len);
}

static __always_inline struct file *fd_file(struct task_struct *t, s64 fd)
{
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	if (!fdt || fd < 0)
		return 0;
	unsigned int max = BPF_CORE_READ(fdt, max_fds);
	if ((u64)fd >= max)
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

/* The identity of the file behind descriptor `fd` (the stat the ptrace backend takes
 * through /proc/PID/fd/FD). */
__noinline u32 blob_fdstat(struct scratch *sc, u32 off, u64 task, s64 fd)
{
	if (!sc)
		return off;
	u8 *buf = sc->buf;
	struct task_struct *t = (struct task_struct *)task;
	if (off > OFF_MASK)
		return off;
	BOUND(off);
	struct file *f = fd_file(t, fd);
	if (!f)
		return off;
	struct inode *ino = BPF_CORE_READ(f, f_inode);
	if (!ino)
		return off;
	struct blob *b = (struct blob *)(buf + off);
	struct fdstat *s = (struct fdstat *)(buf + off + sizeof(*b));
	b->addr = fd;
	b->len = sizeof(*s);
	b->kind = B_FDSTAT;
	b->flags = 0;
	s->dev = BPF_CORE_READ(ino, i_sb, s_dev);
	s->mode = BPF_CORE_READ(ino, i_mode);
	s->ino = BPF_CORE_READ(ino, i_ino);
	s->size = BPF_CORE_READ(ino, i_size);
	s->nlink = BPF_CORE_READ(ino, __i_nlink);
	s->uid = BPF_CORE_READ(ino, i_uid.val);
	s->gid = BPF_CORE_READ(ino, i_gid.val);
	s->rdev = BPF_CORE_READ(ino, i_rdev);
	if (bpf_core_field_exists(ino->i_mtime_sec)) {
		s->mtime_sec = BPF_CORE_READ(ino, i_mtime_sec);
		s->mtime_nsec = BPF_CORE_READ(ino, i_mtime_nsec);
		s->ctime_sec = BPF_CORE_READ(ino, i_ctime_sec);
		/* Multigrain timestamps (6.13+) keep a flag in bit 31 (I_CTIME_QUERIED). */
		s->ctime_nsec = BPF_CORE_READ(ino, i_ctime_nsec) & 0x3fffffff;
	} else if (bpf_core_field_exists(((struct inode___v67 *)ino)->__i_mtime)) {
		struct inode___v67 *i = (void *)ino;
		s->mtime_sec = BPF_CORE_READ(i, __i_mtime.tv_sec);
		s->mtime_nsec = BPF_CORE_READ(i, __i_mtime.tv_nsec);
		s->ctime_sec = BPF_CORE_READ(i, __i_ctime.tv_sec);
		s->ctime_nsec = BPF_CORE_READ(i, __i_ctime.tv_nsec);
	} else if (bpf_core_field_exists(((struct inode___v66 *)ino)->__i_ctime)) {
		struct inode___v66 *i = (void *)ino;
		s->mtime_sec = BPF_CORE_READ(i, i_mtime.tv_sec);
		s->mtime_nsec = BPF_CORE_READ(i, i_mtime.tv_nsec);
		s->ctime_sec = BPF_CORE_READ(i, __i_ctime.tv_sec);
		s->ctime_nsec = BPF_CORE_READ(i, __i_ctime.tv_nsec);
	} else {
		struct inode___old *i = (void *)ino;
		s->mtime_sec = BPF_CORE_READ(i, i_mtime.tv_sec);
		s->mtime_nsec = BPF_CORE_READ(i, i_mtime.tv_nsec);
		s->ctime_sec = BPF_CORE_READ(i, i_ctime.tv_sec);
		s->ctime_nsec = BPF_CORE_READ(i, i_ctime.tv_nsec);
	}
	s->f_flags = BPF_CORE_READ(f, f_flags);
	s->pad = 0;
	return off + sizeof(*b) + sizeof(*s);
}

/* Whether a write on `fd` may keep a payload prefix: the standard streams, and anything
 * but a regular file opened without O_APPEND (user space decides finally, from its
 * descriptor table; a regular file with a log's name keeps what the fingerprint copied). */
static __always_inline int wants_payload(struct task_struct *t, s64 fd)
{
	if (fd >= 0 && fd <= 2)
		return 1;
	struct file *f = fd_file(t, fd);
	if (!f)
		return 1;
	unsigned int flags = BPF_CORE_READ(f, f_flags);
	unsigned short mode = BPF_CORE_READ(f, f_inode, i_mode);
	return (mode & S_IFMT) != S_IFREG || (flags & O_APPEND);
}

/* How argv_eight's copies ended (above the bytes it added, in its answer's high half):
 * all eight there, the end of argv (or an argument that cannot be read), no room. */
#define ARGV_MORE 0
#define ARGV_END 1
#define ARGV_FULL 2

/* Arguments `first` to `first + 7` of execve's argv, copied after the `at` bytes
 * blob_argv has at `off`, each with its NUL: the bytes added, and (<< 32) how it ended. A
 * global function, verified once: blob_argv's loop then costs the verifier a call per
 * eight arguments (a call per argument cost it 1,600 instructions of the 8,160 it walked
 * for sys_exit, a tenth of dejavu's start-up). */
__noinline long argv_eight(struct scratch *sc, u32 off, u32 at, u64 argv, u32 first)
{
	if (!sc || !argv)
		return (long)ARGV_END << 32;
	u32 added = 0;
	for (u32 k = 0; k < 8; k++) {
		u64 p = 0;
		if (bpf_probe_read_user(&p, sizeof(p), (const void *)(argv + (u64)(first + k) * 8)) != 0 || !p)
			return ((long)ARGV_END << 32) | added;
		u32 cur = at + added;
		if (cur >= ARGV_LIMIT || off + sizeof(struct blob) + cur > OFF_MASK)
			return ((long)ARGV_FULL << 32) | added;
		u32 pos = (off + sizeof(struct blob) + cur) & (BUF_SIZE / 2 - 1);
		long n = bpf_probe_read_user_str(sc->buf + pos, 1024, (const void *)p);
		if (n <= 0)
			return ((long)ARGV_END << 32) | added;
		added += n;
	}
	return ((long)ARGV_MORE << 32) | added;
}

/* execve's argv, NUL-joined, as one blob (a failed exec: its memory is still there). */
__noinline u32 blob_argv(struct scratch *sc, u32 off, u64 argv)
{
	if (!sc)
		return off;
	u8 *buf = sc->buf;
	if (off > OFF_MASK)
		return off;
	BOUND(off);
	struct blob *b = (struct blob *)(buf + off);
	u32 at = 0;
	u16 flags = 0;
	b->addr = argv;
	b->kind = B_ARGV;
	/* 64 arguments at most: past them, truncated (as when there is no room). */
	for (u32 j = 0; j < 8; j++) {
		long r = argv_eight(sc, off, at, argv, j * 8);
		at += (u32)r;
		u32 how = (u64)r >> 32;
		if (how == ARGV_FULL) {
			flags = BF_TRUNC;
			break;
		}
		if (how != ARGV_MORE)
			break;
		if (j == 7)
			flags = BF_TRUNC;
	}
	b->len = at;
	b->flags = flags;
	return off + sizeof(*b) + pad8(at);
}

/* Up to PAYLOAD_IOV iovecs' data, up to `want` bytes: the payload of a vectored write. */
__noinline u32 blob_iov_payload(struct scratch *sc, u32 off, u64 iov, u64 cnt, u64 want)
{
	for (int i = 0; i < PAYLOAD_IOV; i++) {
		if (i >= cnt || want == 0)
			break;
		u64 v[2] = {};
		if (bpf_probe_read_user(v, sizeof(v), (const void *)(iov + i * 16)) != 0)
			break;
		u64 n = v[1] < want ? v[1] : want;
		if (n == 0)
			continue;
		off = blob_mem(sc, off, v[0], n);
		want -= n;
	}
	return off;
}

/* mmap is traced for files only: an anonymous mapping (malloc's arenas, thread stacks)
 * or one without a descriptor is left out before any other work, as the ptrace
 * backend's seccomp filter leaves it out (arch::traced_call in user space). The kernel
 * reads both arguments as ints. */
static __always_inline int untraced_mmap(u64 nr, u64 flags, u64 fd)
{
	return nr == NR_mmap && (((u32)flags & MAP_ANONYMOUS) || (s32)fd < 0);
}

struct stk_call {
	u64 mm;
	u64 ip;
	u64 sp;
	u64 bp;
	u64 sid;
	u64 id; /* pid_tgid */
	/* The call (for sticky_names): its number (NR_MAX for none: a fork's stack) and
	 * first five arguments. */
	u64 nr;
	u64 a[5];
};

__noinline int sticky_names(struct scratch *sc, struct stk_call *k);

__noinline u32 native_stack(struct scratch *sc, struct config *c, struct stk_call *call);

/* The native stack of a call at this point (entry, or a fork's parent in the clone), as
 * native_stack gives it, without the short copy that only a call's record can carry. */
static __always_inline u32 stack_here(struct task_struct *t, struct pt_regs *regs, u64 id,
				      u64 *sid)
{
	struct config *c = cfg();
	struct scratch *sc = scratch_get();
	*sid = 0;
	if (!c || !sc || !c->stacks || !regs)
		return 0;
	struct stk_call call = {
		.mm = (u64)BPF_CORE_READ(t, mm),
		.ip = BPF_CORE_READ(regs, ip),
		.sp = BPF_CORE_READ(regs, sp),
		.bp = BPF_CORE_READ(regs, bp),
		.sid = 0,
		.id = id,
		.nr = NR_MAX,
	};
	u32 f = native_stack(sc, c, &call);
	if (f & CF_STACK_INLINE)
		return 0;
	*sid = call.sid;
	return f;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long id)
{
	u64 nr = id;
	if (nr >= NR_MAX)
		return 0;
	u32 k = nr;
	u8 *w = bpf_map_lookup_elem(&wanted, &k);
	if (!w || !(*w & W_TRACE))
		return 0;
	if (untraced_mmap(nr, regs->r10, regs->r8))
		return 0;
	/* One helper call for the ids and the 32-bit test (plain loads of a trusted task). */
	struct task_struct *task = bpf_get_current_task_btf();
	u32 tgid = task->tgid, tid = task->pid;
	int tr = is_traced(tgid);
	if (!tr)
		return 0;
	/* A 32-bit call (int 0x80, or a 32-bit program) numbers syscalls differently: it
	 * is not in the traced set (as with ptrace, docs/ebpf-backend.md). */
	if (bpf_core_field_exists(task->thread_info.status) &&
	    (task->thread_info.status & TS_COMPAT))
		return 0;
	struct inflight *v = slot(tid);
	if (v) {
		v->ts = bpf_ktime_get_ns();
		v->tid = tid;
		v->nr = nr;
		v->nostk = tr == 2;
		if (tr == 2) {
			v->sid = 0;
			v->sflags = 0;
		} else if (nr == NR_execve || nr == NR_execveat) {
			/* Its stack now: a successful exec returns in the new program. */
			u64 sid = 0;
			u32 f = stack_here(task, regs, ((u64)tgid << 32) | tid, &sid);
			v->sid = sid;
			v->sflags = f;
		}
	}
	return 0;
}

/* A little-endian u32 of the agents' messages (unaligned). */
static __always_inline u32 le32(const u8 *p)
{
	return p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

/* One STICKY message of an agent's write (`ml` bytes after its length, at `o` in the
 * write): pid u32, tid u32, ns u32, site u32, path (u16 len, bytes), kept for its thread.
 * A global function: verified once, not once per message of agent_stickies' loop. */
__noinline int sticky_msg(struct scratch *sc, u32 o, u32 ml)
{
	if (!sc)
		return 0;
	u8 *p = sc->buf + sizeof(struct agent_ev) + (o & (MEM_MAX - 1));
	u32 pid = le32(p + 3), tid = le32(p + 7);
	u32 plen = p[19] | ((u32)p[20] << 8);
	/* (An empty path is malformed: user space ignores it.) */
	if (ml < 19 || ml != 19 + plen || plen == 0)
		return 0;
	struct sticky *s = sticky_slot(tid);
	if (!s)
		return 0;
	s->tid = tid;
	s->tgid = pid;
	s->state = STK_NONE;
	/* Site 0: the agent forgot the path (code it does not wrap made the same call on
	 * it, docs/agents.md): the thread's calls take their stacks again. */
	if (le32(p + 15) == 0)
		return 0;
	__builtin_memset(s->path, 0, STICKY_PATH);
	/* Shorter than STICKY_PATH - 1: a longer path read at a call is cut there, and must
	 * not look the same as this one. */
	if (plen < STICKY_PATH - 1 &&
	    bpf_probe_read_kernel(s->path, plen & (STICKY_PATH - 1), p + 21) == 0) {
		s->len = plen;
		s->state = STK_SAID;
	}
	return 0;
}

/* The agent's message at `at` of the `len` bytes after the agent record in `sc`: a STICKY
 * is kept (sticky_msg); the offset of the next message, or -1 when this one is malformed.
 * A function of its own: agent_stickies' loop walks a call, not this body, at each turn. */
__noinline s64 sticky_one(struct scratch *sc, u64 at, u64 len)
{
	if (!sc)
		return -1;
	u32 o = at & (MEM_MAX - 1);
	u8 *p = sc->buf + sizeof(struct agent_ev) + o;
	u32 ml = p[0] | ((u32)p[1] << 8);
	u64 next = at + 2 + ml;
	if (at + 3 > len || ml == 0 || next > len)
		return -1;
	if (p[2] == 10)
		sticky_msg(sc, o, ml);
	return next;
}

/* The STICKY messages of an agent's write (`len` bytes after its record's header in the
 * scratch buffer, framed as user space frames them: u16 length, kind, body;
 * docs/agents.md), kept per thread (`sticky`). A write user space may frame otherwise (a
 * malformed or partial message, more than STICKY_MSGS messages) leaves its writer's
 * STICKY unknown here. */
__noinline int agent_stickies(struct scratch *sc, u32 len, u32 wtid)
{
	if (!sc)
		return 0;
	u64 at = 0;
	int bad = 0;
	for (int i = 0; i < STICKY_MSGS; i++) {
		if (at >= len)
			break;
		s64 next = sticky_one(sc, at, len);
		if (next < 0) {
			bad = 1;
			break;
		}
		at = next;
	}
	if (bad || at < len)
		sticky_forget(wtid);
	return 0;
}

/* The channel's write: the agents' report, in order with the calls around it. */
static __always_inline void agent_write(u8 *buf, struct config *c, u64 id, u64 data, s64 ret)
{
	if (ret <= 0)
		return;
	struct agent_ev *e = (void *)buf;
	u64 len = ret > MEM_MAX ? MEM_MAX : ret;
	len &= (2 * MEM_MAX - 1);
	if (len > MEM_MAX)
		len = MEM_MAX;
	if (bpf_probe_read_user(buf + sizeof(*e), len, (const void *)data) != 0)
		return;
	/* A write that begins with a hello (u16 length, then the kind: HELLO is 1): the
	 * process's start-up is over, its calls take native stacks again. */
	u32 tgid = id >> 32;
	if (len >= 3 && buf[sizeof(*e) + 2] == 1 && bpf_map_delete_elem(&awaiting, &tgid) == 0)
		traced_changed();
	e->h.kind = EV_AGENT;
	e->h.ts = bpf_ktime_get_ns();
	e->h.pid = id >> 32;
	e->h.tid = (u32)id;
	e->len = len;
	e->pad = 0;
	e->h.size = sizeof(*e) + pad8(len);
	u32 wtid = (u32)id;
	if (submit_as(buf, e->h.size, c, LOST_AGENT))
		agent_stickies(scratch_get(), len, wtid);
	else
		/* User space will not read these messages: the writer's last STICKY may not
		 * be what it knows. */
		sticky_forget(wtid);
}

/* A blob of `kind` at `off` (bounded by the caller) whose data begins with two words, as
 * B_STACK's and B_PLACE's do: length 16, which a caller that adds more data raises. */
static __always_inline struct blob *blob_two_words(u8 *buf, u32 off, u16 kind, u64 addr, u64 w0,
						   u64 w1)
{
	struct blob *b = (struct blob *)(buf + off);
	u64 *w = (u64 *)(buf + off + sizeof(*b));
	w[0] = w0;
	w[1] = w1;
	b->addr = addr;
	b->kind = kind;
	b->flags = 0;
	b->len = 16;
	return b;
}

/* The instruction and frame pointers and the first INLINE_STACK bytes of the stack, in the
 * call's own record: when the stack copies' ring is full, the innermost frames (which
 * name the call site) still come through, unwound with the modules' tables like a full
 * copy. */
__noinline u32 blob_stack(struct scratch *sc, u32 off, u64 ip, u64 sp, u64 bp)
{
	if (!sc)
		return off;
	u8 *buf = sc->buf;
	if (off > OFF_MASK)
		return off;
	BOUND(off);
	struct blob *b = blob_two_words(buf, off, B_STACK, sp, ip, bp);
	if (bpf_probe_read_user(buf + off + sizeof(*b) + 16, INLINE_STACK, (const void *)sp) != 0) {
		b->flags = BF_FAULT;
		return off + sizeof(*b) + 16;
	}
	b->len = 16 + INLINE_STACK;
	return off + sizeof(*b) + 16 + INLINE_STACK;
}

/* Where a call an agent's STICKY named was made (the kernel's stack cache key, less the
 * process): its address space and instruction pointer, the stack pointer as the blob's
 * address. User space marks the place as the agent's once it has read the call. */
__noinline u32 blob_place(struct scratch *sc, u32 off, u64 mm, u64 ip, u64 sp)
{
	if (!sc)
		return off;
	u8 *buf = sc->buf;
	if (off > OFF_MASK)
		return off;
	BOUND(off);
	blob_two_words(buf, off, B_PLACE, sp, mm, ip);
	return off + sizeof(struct blob) + 16;
}

/* stk_check's hash of words [from, from + 8) of v->off (those below n; `range` is from << 32
 * | n: five arguments at most), from `h` on: the words the unwinder read, a stack address
 * as its distance from `base`. */
__noinline u64 stk_eight(struct scratch *sc, struct stk_val *v, u64 range, u64 base, u64 h)
{
	if (!sc || !v)
		return h;
	u8 *buf = sc->buf;
	u32 from = range >> 32, n = (u32)range;
	for (u32 k = 0; k < 8; k++) {
		u32 i = from + k;
		if (i >= n)
			break;
		u64 off = v->off[i & (STK_WORDS - 1)];
		u32 o = off & (SLICE_MAX / 8 - 1);
		/* A stack address: its distance from the stack pointer (no branch). */
		u64 minus = base & (0 - ((off >> 15) & 1));
		h = stk_mix(h, *(u64 *)(buf + o * 8) - minus);
	}
	return h;
}

/* Whether the words an entry of `stacks` names hold, at `sp`, what they held when user
 * space unwound its copy (their hash: 1; the entry's stack i of `hashes`: i + 2; none:
 * 0), and the frame pointer register too unless it did not matter. A relative entry
 * (`rel`: keyed by STK_REL, for the same code on another stack) holds the words that
 * pointed into the copied stack (STK_OFF_REL) and the frame pointer as distances from the
 * stack pointer. Reads the words into the scratch buffer. A global function: verified
 * once, for both kinds. */
__noinline int stk_check(struct scratch *sc, struct stk_val *v, u64 sp, u64 bp, u64 rel)
{
	if (!sc || !v)
		return 0;
	u8 *buf = sc->buf;
	u64 base = rel ? sp : 0;
	if (!v->bp_any && v->bp != bp - base)
		return 0;
	u64 span = v->span, n = v->n;
	/* The bound where the verifier needs it (see BOUND). */
	asm volatile("%0 &= 32767" : "+r"(span));
	if (span < 8 || n > STK_WORDS || bpf_probe_read_user(buf, span, (const void *)sp) != 0)
		return 0;
	u64 h = STK_SEED;
	/* Eight words per call of a global function (verified once, for any `from`), not a
	 * loop of STK_WORDS turns walked one by one in every program that copies stacks:
	 * ~1,400 instructions of the verifier's work each, a fifth of dejavu's start-up. */
	for (u32 j = 0; j < STK_WORDS / 8; j++) {
		if (j * 8 >= n)
			break;
		h = stk_eight(sc, v, ((u64)(j * 8) << 32) | n, base, h);
	}
	if (h == v->hash)
		return 1;
	for (u32 i = 0; i < STK_MORE; i++)
		if (i < v->ways && h == v->hashes[i])
			return i + 2;
	return 0;
}

/* The id of the stack stk_check found (`way`, not 0). */
static __always_inline u32 stk_id(struct stk_val *v, int way)
{
	/* Each index a constant: a computed one, bounded by a compare, was refused (the
	 * compiler's select leaves the verifier no bound). STK_MORE is 3. */
	if (way == 2)
		return v->ids[0];
	if (way == 3)
		return v->ids[1];
	if (way == 4)
		return v->ids[2];
	return v->id;
}

/* What native_stack needs of the call: its registers and address space, and where the
 * stack's id goes. */

/* The stack of the call being made: CF_STACK_HIT with its id in call->sid when the stack
 * cache (`stacks`) holds it, else CF_STACK_SLICE after sending a copy of the top of the
 * stack (EV_STACK), else 0 (nothing readable, or no room). A global function, verified
 * once for any arguments; a static one was verified again for each state of its caller
 * and returned to it once per constant it can return (half the verifier's work on
 * on_sys_exit, the longest part of dejavu's start). */
__noinline u32 native_stack(struct scratch *sc, struct config *c, struct stk_call *call)
{
	if (!sc || !c || !call)
		return 0;
	u64 id = call->id;
	u8 *buf = sc->buf;
	struct mm_struct *mm = (struct mm_struct *)call->mm;
	u64 sp = call->sp;
	struct stk_key k = {
		.mm = (u64)mm,
		.ip = call->ip,
		.sp = sp,
		.tgid = id >> 32,
		.pad = 0,
	};
	struct stk_val *v = stack_entry(&k);
	if (v && v->agent) {
		call->sid = v->id;
		return CF_STACK_AGENT;
	}
	int way = v ? stk_check(sc, v, sp, call->bp, 0) : 0;
	if (v && way) {
		call->sid = stk_id(v, way);
		return CF_STACK_HIT;
	}
	/* The same code on another stack (a goroutine's, another thread's): the place's
	 * entry by its stack pointer's offset in its page, checked relative to it. */
	k.sp = STK_REL | (sp & STK_REL_MASK);
	v = stack_entry(&k);
	way = v && !v->agent ? stk_check(sc, v, sp, call->bp, 1) : 0;
	if (v && way) {
		call->sid = stk_id(v, way);
		return CF_STACK_HIT;
	}
	struct stack_ev *e = (void *)buf;
	/* The main thread's stack ends where its arguments begin (start_stack); another
	 * thread's ends with its mapping, which a shorter copy finds. */
	u64 top = BPF_CORE_READ(mm, start_stack);
	u64 len = c->stacks;
	if (top > sp && top - sp < len)
		len = top - sp;
	int ok = 0;
	for (int i = 0; i < 6; i++) {
		/* At most SLICE_MAX - 8, in whole words, bounded where the verifier needs it. */
		asm volatile("%0 &= 16376" : "+r"(len));
		if (len < 64)
			break;
		if (bpf_probe_read_user(buf + sizeof(*e), len, (const void *)sp) == 0) {
			ok = 1;
			break;
		}
		len >>= 1;
	}
	if (!ok)
		return 0;
	e->h.kind = EV_STACK;
	e->h.ts = bpf_ktime_get_ns();
	e->h.pid = id >> 32;
	e->h.tid = (u32)id;
	e->mm = (u64)mm;
	e->ip = call->ip;
	e->sp = sp;
	e->bp = call->bp;
	e->len = len;
	/* On the main thread's stack (a relative entry is of no use there: user space stores
	 * none for it). */
	e->pad = top > sp && top - sp < (256ULL << 20);
	u32 zero = 0;
	u64 *n = bpf_map_lookup_elem(&stackseq, &zero);
	if (!n)
		return 0;
	u64 seq = ((u64)bpf_get_smp_processor_id() << 48) | (*n & ((1ULL << 48) - 1));
	*n += 1;
	e->seq = seq;
	e->h.size = sizeof(*e) + len;
	/* Wake the reader if it is idle (few copies waiting): the sooner it answers (fills
	 * the cache), the fewer copies. A busy one drains soon anyway, and a wakeup costs an
	 * interrupt of another CPU; but not when a quarter of the ring waits (as for the
	 * calls): until the cache has a place, a loop sends a copy per call, gigabytes a
	 * second, and fills the ring within the drainer's pause between two looks. */
	u64 flags = BPF_RB_NO_WAKEUP;
	u64 waiting = bpf_ringbuf_query(&stackbuf, BPF_RB_AVAIL_DATA);
	if (waiting < WAKE_IDLE_BYTES || waiting >= c->wake_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&stackbuf, buf, (sizeof(*e) + len) & (BUF_SIZE - 1), flags) != 0) {
		count_lost_of(LOST_STACK); /* no room: a short copy goes with the call */
		return CF_STACK_INLINE;
	}
	call->sid = seq;
	return CF_STACK_SLICE;
}

/* Where in the scratch buffer sticky_names reads a call's path (above what a stack copy
 * or a call's record uses before it: native_stack is not called when it says yes). */
#define STICKY_READ (BUF_SIZE - 2 * STICKY_PATH)

/* The words `8 * j` to `8 * j + 7` of the STICKY's path in `s` and of the path just read
 * (sticky_names: at STICKY_READ in `sc`'s buffer), up to the word holding byte `len` (the
 * NUL): XORed, ORed together (0: the same). A function of its own, verified once: the
 * loop in sticky_names walks four calls, not 32 turns of this body. */
__noinline u64 path_eight(struct sticky *s, struct scratch *sc, u64 j, u64 len)
{
	if (!s || !sc || j >= STICKY_PATH / 64)
		return 1;
	u8 *b = sc->buf + STICKY_READ;
	u64 diff = 0;
	for (u64 k = 0; k < 8; k++) {
		u64 i = j * 8 + k;
		if (i * 8 > len)
			break;
		diff |= *(u64 *)(s->path + i * 8) ^ *(u64 *)(b + i * 8);
	}
	return diff;
}

/* Whether user space will give the call `k` the site of its thread's last STICKY
 * (protocol.rs, `lookup`): a call on the STICKY's path, of the kind (system call, and
 * whether it follows a final symbolic link) of the thread's first call on a path after
 * the STICKY. Such a call needs no native stack. The path must be the STICKY's, byte for
 * byte (the agents send it resolved: an absolute path without . or empty components,
 * which user space resolves to itself); a relative one is left to the stack. The kind
 * is fixed by the thread's next call on any path after the STICKY: when that call is
 * not on the STICKY's path, the STICKY is forgotten here (user space would fix the kind
 * at a later call, which this does not try to follow). A global function: verified once. */
__noinline int sticky_names(struct scratch *sc, struct stk_call *k)
{
	if (!sc || !k)
		return 0;
	u32 tid = (u32)k->id;
	struct sticky *s = sticky_slot(tid);
	if (!s || s->tid != tid || s->state == STK_NONE)
		return 0;
	if (s->tgid != (u32)(k->id >> 32)) {
		s->state = STK_NONE;
		return 0;
	}
	u64 path = 0, nofollow = 0;
	switch (k->nr) {
	case NR_open:
	case NR_creat:
	case NR_stat:
	case NR_lstat:
	case NR_access:
	case NR_truncate:
	case NR_mkdir:
	case NR_rmdir:
	case NR_unlink:
	case NR_chdir:
	case NR_readlink:
	case NR_chmod:
	case NR_chown:
	case NR_lchown:
	case NR_rename:
	case NR_link:
		path = k->a[0];
		break;
	case NR_openat:
	case NR_openat2:
	case NR_mkdirat:
	case NR_unlinkat:
	case NR_readlinkat:
	case NR_fchmodat:
	case NR_fchmodat2:
	case NR_faccessat:
	case NR_renameat:
	case NR_renameat2:
	case NR_linkat:
	case NR_symlink:
		path = k->a[1];
		break;
	case NR_symlinkat:
		path = k->a[2];
		break;
	case NR_newfstatat:
	case NR_faccessat2:
	case NR_utimensat:
		path = k->a[1];
		nofollow = (k->a[3] & AT_SYMLINK_NOFOLLOW) != 0;
		break;
	case NR_statx:
		path = k->a[1];
		nofollow = (k->a[2] & AT_SYMLINK_NOFOLLOW) != 0;
		break;
	case NR_fchownat:
		path = k->a[1];
		nofollow = (k->a[4] & AT_SYMLINK_NOFOLLOW) != 0;
		break;
	case NR_execve:
	case NR_execveat:
		/* (On a path, but never here: their stacks are taken at their entry.) */
		s->state = STK_NONE;
		return 0;
	default:
		/* Not on a path (a descriptor's call): user space gives it no STICKY's site
		 * and fixes no kind with it. */
		return 0;
	}
	/* (utimensat without a path is a descriptor's call.) */
	if (!path) {
		if (k->nr != NR_utimensat && s->state == STK_SAID)
			s->state = STK_NONE;
		return 0;
	}
	u8 *b = sc->buf + STICKY_READ;
	long n = bpf_probe_read_user_str(b, STICKY_PATH, (const void *)path);
	u32 len = s->len;
	u64 diff = 1;
	if (n > 0 && (u64)(n - 1) == len && len < STICKY_PATH - 1) {
		/* Both zero after the path (its NUL here, then 8 zeros; the slot's zeroed when
		 * stored): whole words compare, without a mask for the last. */
		*(u64 *)(b + (len & (STICKY_PATH - 1)) + 1) = 0;
		diff = 0;
		for (u64 j = 0; j < STICKY_PATH / 64; j++) {
			if (j * 64 > len)
				break;
			diff |= path_eight(s, sc, j, len);
		}
	}
	if (diff) {
		if (s->state == STK_SAID)
			s->state = STK_NONE;
		return 0;
	}
	if (s->state == STK_SAID) {
		s->nr = k->nr;
		s->nofollow = nofollow;
		s->state = STK_KIND;
		return 1;
	}
	return s->nr == k->nr && s->nofollow == nofollow;
}

/* The stack of a call at its exit: native_stack's, or none for a call its thread's last
 * STICKY names (CF_STACK_STICKY). A thread's first call on a path after its agent's
 * STICKY fixes the kind of call the STICKY names (sticky_names), so it is looked at
 * whatever its place; later, a place already marked as the agent's is sent so at once,
 * and a call that the STICKY names from another place carries its place (blob_place):
 * user space marks it as the agent's as for a call whose stack it unwound, and the next
 * calls from there are sent without a read of their path. A global function (verified
 * once, in on_sys_exit only: a fork's and an exec's stacks are native_stack's). */
__noinline u32 call_stack(struct scratch *sc, struct config *c, struct stk_call *call)
{
	if (!sc || !c || !call)
		return 0;
	u32 tid = (u32)call->id;
	struct sticky *st = sticky_slot(tid);
	if (!st || st->tid != tid || st->state == STK_NONE)
		return native_stack(sc, c, call);
	if (st->state == STK_SAID && sticky_names(sc, call))
		return CF_STACK_STICKY;
	struct stk_key k = {
		.mm = call->mm,
		.ip = call->ip,
		.sp = call->sp,
		.tgid = call->id >> 32,
		.pad = 0,
	};
	struct stk_val *v = stack_entry(&k);
	if (v && v->agent) {
		call->sid = v->id;
		return CF_STACK_AGENT;
	}
	if (st->state == STK_KIND && sticky_names(sc, call))
		return CF_STACK_STICKY;
	return native_stack(sc, c, call);
}

/* What on_sys_exit records of a call (emit_call). */
struct exit_call {
	u64 id; /* pid_tgid */
	u64 nr;
	s64 ret;
	u64 enter_ts;
	u64 sid;
	u64 cflags;
	u64 a[6];
	u64 ip;
	u64 sp;
	u64 bp;
};

/* on_sys_exit's call as its stack is looked for (`call`, call_stack) and as it is
 * recorded (`x`), and the plan of what to copy into its record (emit_call, run_ops), per
 * CPU: in a map, not on on_sys_exit's stack. The BPF stack of a chain of calls is at most
 * 512 bytes, and Linux 6.1 counts each frame rounded up to 32 bytes, at least 32:
 * on_sys_exit -> call_stack -> native_stack -> stk_check -> stk_eight fits only so. */
struct plan {
	struct stk_call call;
	struct exit_call x;
	struct op ops[MAX_OPS];
	u64 n;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct plan);
} plans SEC(".maps");

/* Bytes of a write (returned `ret` > 0, on descriptor `fd`) to copy: the first
 * FINGERPRINT_BYTES for its fingerprint, or the payload prefix where one may be kept and it
 * is longer (the descriptor is looked up only then); at most what was written. */
static __always_inline u64 write_bytes(struct config *c, struct task_struct *t, s64 ret, u64 fd)
{
	u64 pay = c->payload_bytes;
	u64 w = FINGERPRINT_BYTES;
	if (pay > FINGERPRINT_BYTES && wants_payload(t, fd))
		w = pay;
	return (u64)ret < w ? (u64)ret : w;
}

/* Runs the plan `p` made: each copy into the record in `sc` from `off`; `a2` is the call's
 * third argument (an iovec's count). */
__noinline u32 run_ops(struct scratch *sc, struct plan *p, u32 off, u64 a2)
{
	if (!sc || !p)
		return off;
	u64 n = p->n;
	for (int i = 0; i < MAX_OPS; i++) {
		if (i >= n)
			break;
		u64 addr = p->ops[i].addr, len = p->ops[i].len;
		switch (p->ops[i].kind) {
		case B_STR:
			off = blob_str(sc, off, addr);
			break;
		case B_MEM:
			off = blob_mem(sc, off, addr, len);
			break;
		case B_FDSTAT:
			off = blob_fdstat(sc, off, bpf_get_current_task(), addr);
			break;
		case B_ARGV:
			off = blob_argv(sc, off, addr);
			break;
		case OP_IOV_PAYLOAD:
			off = blob_iov_payload(sc, off, addr, a2, len);
			break;
		}
	}
	return off;
}

/* The record of the call in `p` (`p->x`) at its exit, with the copies of its memory it
 * needs: the end of on_sys_exit, a function of its own so that the verifier walks it (a
 * `switch` on the call's number, a plan for each case) once, not once for each state
 * on_sys_exit's paths arrive in. */
__noinline int emit_call(struct scratch *sc, struct config *c, struct plan *p)
{
	if (!sc || !c || !p)
		return 0;
	struct exit_call *x = &p->x;
	struct task_struct *t = bpf_get_current_task_btf();
	u64 nr = x->nr;
	s64 ret = x->ret;
	u64 *a = x->a;
	/* What to copy: a plan of up to MAX_OPS steps, made first (each case of the switch
	 * leaves it in the per-CPU `plans`, so that all arrive after it in one state), run by
	 * run_ops once the record's head is written. */
	int n = 0;
#define OP(k, a_, l)                                                                           \
	do {                                                                                   \
		if (n < MAX_OPS) {                                                             \
			p->ops[n].kind = (k);                                                  \
			p->ops[n].addr = (a_);                                                 \
			p->ops[n].len = (l);                                                   \
			n++;                                                                   \
		}                                                                              \
	} while (0)
	switch (nr) {
	case NR_open:
	case NR_creat:
	case NR_memfd_create:
		OP(B_STR, a[0], 0);
		if (ret >= 0 && c->open_identity)
			OP(B_FDSTAT, ret, 0);
		break;
	case NR_openat:
		OP(B_STR, a[1], 0);
		if (ret >= 0 && c->open_identity)
			OP(B_FDSTAT, ret, 0);
		break;
	case NR_openat2:
		OP(B_STR, a[1], 0);
		OP(B_MEM, a[2], 24);
		if (ret >= 0 && c->open_identity)
			OP(B_FDSTAT, ret, 0);
		break;
	case NR_stat:
	case NR_lstat:
		OP(B_STR, a[0], 0);
		if (ret >= 0)
			OP(B_MEM, a[1], 144);
		break;
	case NR_fstat:
		if (ret >= 0)
			OP(B_MEM, a[1], 144);
		break;
	case NR_newfstatat:
		OP(B_STR, a[1], 0);
		if (ret >= 0)
			OP(B_MEM, a[2], 144);
		break;
	case NR_statx:
		OP(B_STR, a[1], 0);
		/* The fields dejavu decodes (arch::STATX_SIZE): not the whole 256 bytes. */
		if (ret >= 0)
			OP(B_MEM, a[4], STATX_USED);
		break;
	case NR_access:
	case NR_mkdir:
	case NR_rmdir:
	case NR_unlink:
	case NR_chdir:
	case NR_chmod:
	case NR_chown:
	case NR_lchown:
	case NR_truncate:
		OP(B_STR, a[0], 0);
		break;
	case NR_faccessat:
	case NR_faccessat2:
	case NR_mkdirat:
	case NR_unlinkat:
	case NR_fchmodat:
	case NR_fchmodat2:
	case NR_fchownat:
		OP(B_STR, a[1], 0);
		break;
	case NR_utimensat:
		if (a[1])
			OP(B_STR, a[1], 0);
		break;
	case NR_readlink:
		OP(B_STR, a[0], 0);
		if (ret > 0)
			OP(B_MEM, a[1], ret);
		break;
	case NR_readlinkat:
		OP(B_STR, a[1], 0);
		if (ret > 0)
			OP(B_MEM, a[2], ret);
		break;
	case NR_rename:
	case NR_link:
	case NR_symlink:
		OP(B_STR, a[0], 0);
		OP(B_STR, a[1], 0);
		break;
	case NR_renameat:
	case NR_renameat2:
	case NR_linkat:
		OP(B_STR, a[1], 0);
		OP(B_STR, a[3], 0);
		break;
	case NR_symlinkat:
		OP(B_STR, a[0], 0);
		OP(B_STR, a[2], 0);
		break;
	case NR_write:
	case NR_pwrite64:
		if (ret > 0)
			OP(B_MEM, a[1], write_bytes(c, t, ret, a[0]));
		break;
	case NR_readv:
	case NR_preadv:
	case NR_preadv2:
		OP(B_MEM, a[1], (a[2] < MAX_IOV ? a[2] : MAX_IOV) * 16);
		break;
	case NR_writev:
	case NR_pwritev:
	case NR_pwritev2:
		OP(B_MEM, a[1], (a[2] < MAX_IOV ? a[2] : MAX_IOV) * 16);
		if (ret > 0)
			OP(OP_IOV_PAYLOAD, a[1], write_bytes(c, t, ret, a[0]));
		break;
	case NR_pipe:
	case NR_pipe2:
		if (ret >= 0) {
			s32 fds[2] = {};
			OP(B_MEM, a[0], 8);
			if (bpf_probe_read_user(fds, sizeof(fds), (const void *)a[0]) == 0) {
				OP(B_FDSTAT, fds[0], 0);
				OP(B_FDSTAT, fds[1], 0);
			}
		}
		break;
	case NR_socket:
	case NR_accept:
	case NR_accept4:
		if (ret >= 0)
			OP(B_FDSTAT, ret, 0);
		break;
	case NR_connect:
		OP(B_MEM, a[1], a[2] < 110 ? a[2] : 110);
		break;
	case NR_sendfile:
		if (a[2])
			OP(B_MEM, a[2], 8);
		break;
	case NR_execve:
		if (ret < 0) {
			OP(B_STR, a[0], 0);
			OP(B_ARGV, a[1], 0);
		}
		break;
	case NR_execveat:
		if (ret < 0) {
			OP(B_STR, a[1], 0);
			OP(B_ARGV, a[2], 0);
		}
		break;
	}
#undef OP
	p->n = n;

	u8 *buf = sc->buf;
	struct call_ev *e = (void *)buf;
	e->h.kind = EV_CALL;
	e->h.ts = bpf_ktime_get_ns();
	e->h.pid = x->id >> 32;
	e->h.tid = (u32)x->id;
	e->enter_ts = x->enter_ts;
	e->ret = ret;
	for (int i = 0; i < 6; i++)
		e->args[i] = a[i];
	e->nr = nr;
	e->nips = 0;
	e->flags = x->cflags;
	e->stack_id = x->sid;
	if (!x->enter_ts)
		e->enter_ts = e->h.ts;
	u32 off = sizeof(*e);
	if (x->cflags & CF_STACK_INLINE)
		off = blob_stack(sc, off, x->ip, x->sp, x->bp);
	else if (x->cflags & CF_STACK_STICKY)
		off = blob_place(sc, off, (u64)BPF_CORE_READ(t, mm), x->ip, x->sp);
	off = run_ops(sc, p, off, a[2]);
	e->h.size = off;
	submit(buf, off, c);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	/* One helper call for the ids (plain loads of a trusted task). */
	struct task_struct *t = bpf_get_current_task_btf();
	u32 tid = t->pid;
	u64 id = ((u64)t->tgid << 32) | tid;
	struct inflight *v = slot(tid);
	if (!v)
		return 0;
	u64 enter_ts, nr;
	u16 cflags = 0;
	u64 entry_sid = 0;
	u32 entry_sflags = 0;
	int nostk = 0;
	if (v->tid == tid && v->ts) {
		enter_ts = v->ts;
		nr = v->nr;
		nostk = v->nostk;
		v->ts = 0;
		if (nr == NR_execve || nr == NR_execveat) {
			entry_sid = v->sid;
			entry_sflags = v->sflags;
		}
	} else {
		/* Not in this thread's slot: an untraced call, or a traced one whose slot
		 * another thread took. Only the number and the process can tell. */
		nr = regs->orig_ax;
		if (nr >= NR_MAX)
			return 0;
		u32 k = nr;
		u8 *w = bpf_map_lookup_elem(&wanted, &k);
		u32 tgid = id >> 32;
		if (!w || !(*w & W_TRACE) || untraced_mmap(nr, regs->r10, regs->r8))
			return 0;
		int tr = is_traced(tgid);
		if (!tr)
			return 0;
		nostk = tr == 2;
		if (bpf_core_field_exists(t->thread_info.status) &&
		    (t->thread_info.status & TS_COMPAT))
			return 0;
		enter_ts = 0;
		cflags = CF_NO_ENTER;
	}
	struct config *c = cfg();
	struct scratch *sc = scratch_get();
	u32 zero = 0;
	struct plan *pl = bpf_map_lookup_elem(&plans, &zero);
	if (!c || !sc || !pl)
		return 0;
	u8 *buf = sc->buf;
	u64 a[6];
	/* A trusted pointer (tp_btf): plain loads, no probe reads. */
	a[0] = regs->di;
	a[1] = regs->si;
	a[2] = regs->dx;
	a[3] = regs->r10;
	a[4] = regs->r8;
	a[5] = regs->r9;

	/* The agents' own calls on their channel: not the program's. */
	if (c->agent_fd >= 0 && (s64)(s32)a[0] == c->agent_fd) {
		if (nr == NR_write) {
			agent_write(buf, c, id, a[1], ret);
			return 0;
		}
		if (nr == NR_writev || nr == NR_fstat || nr == NR_newfstatat || nr == NR_statx)
			return 0;
	}

	/* The native stack, first (its copy goes out before the call's record). Also in a
	 * process whose language agent reports call sites: its calls outside the agent's
	 * wrappers (a C++ extension writing from a Python thread, TileDB's VFS) have only
	 * their native stack, and a call repeated from one place costs a cache lookup. */
	u64 sid = 0;
	if (nr == NR_execve || nr == NR_execveat) {
		/* Taken at its entry, in the old program (on_sys_enter); a successful exec's
		 * went with its exec event (on_exec), and its registers and memory are the new
		 * program's now. */
		if (ret != 0) {
			cflags |= entry_sflags;
			sid = entry_sid;
			/* A failed exec is a call on a path (user space may fix a STICKY's kind
			 * with it): one that would fix it here is forgotten instead. */
			struct sticky *st = sticky_slot(tid);
			if (st && st->tid == tid && st->state == STK_SAID)
				st->state = STK_NONE;
		}
	} else if (c->stacks && nr != NR_munmap && !nostk) {
		/* (munmap is traced only for the trace's Unmap records: it needs no stack.) */

		/* mm by a probe read, not a plain load: a pointer kept in `call` made the
		 * verifier's states differ where a number does not (+40% of the time it takes to
		 * load this program, for a helper call that costs ~20 ns). */
		struct stk_call *call = &pl->call;
		call->mm = (u64)BPF_CORE_READ(t, mm);
		call->ip = regs->ip;
		call->sp = regs->sp;
		call->bp = regs->bp;
		call->sid = 0;
		call->id = id;
		call->nr = nr;
		for (int i = 0; i < 5; i++)
			call->a[i] = a[i];
		cflags |= call_stack(sc, c, call);
		sid = call->sid;
	}

	struct exit_call *x = &pl->x;
	x->id = id;
	x->nr = nr;
	x->ret = ret;
	x->enter_ts = enter_ts;
	x->sid = sid;
	x->cflags = cflags;
	for (int i = 0; i < 6; i++)
		x->a[i] = a[i];
	x->ip = regs->ip;
	x->sp = regs->sp;
	x->bp = regs->bp;
	return emit_call(sc, c, pl);
}

/* `bit` if a == b, else 0, computed without a branch: the verifier then goes on in one
 * state (the result unknown to it), where tests that branch would leave one state for each
 * combination of their outcomes to walk the rest of the program in. */
static __always_inline u64 eq_bit(u64 a, u64 b, u64 bit)
{
	u64 d = a ^ b;
	barrier_var(d);
	return (((d | (0 - d)) >> 63) ^ 1) * bit;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	u8 *pv = bpf_map_lookup_elem(&traced, &ptgid);
	if (!pv)
		return 0;
	u8 value = *pv; /* a child of a process without stacks has none either */
	u32 cpid = BPF_CORE_READ(child, tgid), ctid = BPF_CORE_READ(child, pid);
	/* Without branches (eq_bit): one state for the verifier to walk on, not one for each
	 * combination of these five. */
	u64 flags = eq_bit(cpid, ptgid, 1); /* a thread */
	flags |= eq_bit((u64)BPF_CORE_READ(child, files), (u64)BPF_CORE_READ(parent, files),
			2); /* CLONE_FILES */
	flags |= eq_bit((u64)BPF_CORE_READ(child, fs), (u64)BPF_CORE_READ(parent, fs),
			4); /* CLONE_FS */
	flags |= eq_bit((u64)BPF_CORE_READ(child, mm), (u64)BPF_CORE_READ(parent, mm),
			8); /* CLONE_VM */
	struct task_struct *me = bpf_get_current_task_btf();
	struct pt_regs *my_regs = (struct pt_regs *)bpf_task_pt_regs(me);
	struct pt_regs *its_regs = (struct pt_regs *)bpf_task_pt_regs(child);
	/* No stack of its own (fork, vfork; not posix_spawn's child). */
	flags |= eq_bit(BPF_CORE_READ(its_regs, sp), BPF_CORE_READ(my_regs, sp), 16);
	if (cpid != ptgid) {
		bpf_map_update_elem(&traced, &cpid, &value, BPF_ANY);
		traced_changed();
	}
	u64 id = bpf_get_current_pid_tgid();
	u64 sid = 0;
	u32 sflags = 0;
	if (!(flags & 1) && !(value & TRACED_NO_STACKS)) {
		/* A new process: its exec's site is the parent's stack here, in the clone
		 * (sent before the event, as a call's copy is). A child of posix_spawn or vfork
		 * runs on a stack of its own, a few frames of libc's. */
		sflags = stack_here(me, my_regs, id, &sid);
	}
	struct fork_ev *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return 0;
	}
	e->h.kind = EV_FORK;
	e->h.size = sizeof(*e);
	e->h.ts = bpf_ktime_get_ns();
	e->h.pid = ptgid;
	e->h.tid = (u32)id;
	e->child_pid = cpid;
	e->child_tid = ctid;
	e->flags = flags;
	e->stack_id = sid;
	e->sflags = sflags;
	e->pad = 0;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Whether the program `p` just exec'd is an interpreter the language agents load into:
 * its file's name (the real file's, a symbolic link resolved: python3 -> python3.11)
 * begins with "python3" or is "node" or "nodejs" (as runtime_of in
 * crates/dejavu-detect/src/program.rs, less its rarer names, which keep their stacks). */
static __always_inline int agent_runtime(struct task_struct *p)
{
	/* Its first 7 bytes and a NUL, compared as one word each (little-endian): no loop. */
	u64 w = 0;
	const unsigned char *dn = BPF_CORE_READ(p, mm, exe_file, f_path.dentry, d_name.name);
	if (!dn || bpf_probe_read_kernel_str(&w, sizeof(w), dn) < 0)
		return 0;
	return (w & 0x00ffffffffffffffULL) == 0x00336e6f68747970ULL || /* "python3" */
	       (w & 0x000000ffffffffffULL) == 0x0000000065646f6eULL || /* "node\0" */
	       (w & 0x00ffffffffffffffULL) == 0x0000736a65646f6eULL;   /* "nodejs\0" */
}

/* Pair `i` (type, value) of the auxiliary vector at the end of `sc`'s buffer: its value
 * into the exec record at the buffer's start when it is AT_PHDR or AT_BASE; 1 at its end
 * (AT_NULL) or past the words read. */
__noinline int auxv_pair(struct scratch *sc, u64 i)
{
	if (!sc || i >= AUXV_WORDS / 2)
		return 1;
	struct exec_ev *e = (void *)sc->buf;
	u64 *aux = (u64 *)(sc->buf + BUF_SIZE - AUXV_WORDS * 8);
	u64 type = aux[2 * i], value = aux[2 * i + 1];
	if (type == 0) /* AT_NULL */
		return 1;
	if (type == 3) /* AT_PHDR */
		e->at_phdr = value;
	else if (type == 7) /* AT_BASE */
		e->at_base = value;
	return 0;
}

/* AT_PHDR and AT_BASE of the auxiliary vector at the end of `sc`'s buffer into the exec
 * record at its start (on_exec): a loop whose body (auxv_pair) the verifier walks once,
 * not once for each turn. */
static __always_inline void auxv_scan(struct scratch *sc)
{
	for (u32 i = 0; i < AUXV_WORDS / 2; i++)
		if (auxv_pair(sc, i))
			break;
}

/* system_path of the file name after the exec record in `sc`'s buffer (on_exec), in a
 * function of its own for the same reason. */
__noinline int exec_system_path(struct scratch *sc)
{
	if (!sc)
		return 0;
	return system_path(sc->buf + sizeof(struct exec_ev));
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	u32 tgid = BPF_CORE_READ(p, tgid);
	/* A process without stacks (a tool's, or a tool's fork) keeps going without them
	 * until user space, reading this exec, says whether the new program is a tool too. */
	u8 *tv = bpf_map_lookup_elem(&traced, &tgid);
	if (!tv)
		return 0;
	u32 pid = BPF_CORE_READ(p, pid);
	if ((u32)old_pid != pid) {
		/* A non-leader thread exec'd and took the leader's tid: its execve returns
		 * under the new tid. */
		struct inflight *from = slot(old_pid), *to = slot(pid);
		if (from && to && from->ts && from->tid == (u32)old_pid) {
			to->ts = from->ts;
			to->nr = from->nr;
			to->tid = pid;
			to->sid = from->sid;
			to->sflags = from->sflags;
			if (from != to)
				from->ts = 0;
		}
	}
	/* Its STICKY is gone with its program (user space forgets a process's at its exec;
	 * its other threads' go at their exits). */
	sticky_forget(old_pid);
	sticky_forget(pid);
	/* The stack its execve had at its entry (on_sys_enter), in the old program. */
	u64 sid = 0;
	u32 sflags = 0;
	struct inflight *at = slot(pid);
	if (at && at->ts && at->tid == pid && (at->nr == NR_execve || at->nr == NR_execveat)) {
		sid = at->sid;
		sflags = at->sflags;
	}
	struct scratch *sc = scratch_get();
	struct config *c = cfg();
	if (!sc)
		return 0;
	u8 *buf = sc->buf;
	struct exec_ev *e = (void *)buf;
	e->h.kind = EV_EXEC;
	e->h.ts = bpf_ktime_get_ns();
	e->h.pid = tgid;
	e->h.tid = pid;
	e->old_pid = old_pid;
	e->flags = 0;
	e->at_phdr = 0;
	e->at_base = 0;
	e->stack_id = sid;
	e->sflags = sflags;
	e->pad = 0;
	{
		/* The auxiliary vector, read into the end of the scratch buffer (the file name
		 * and arguments stay below OFF_LIMIT + ARGV_LIMIT). */
		struct mm_struct *mm = BPF_CORE_READ(p, mm);
		u64 *aux = (u64 *)(buf + BUF_SIZE - AUXV_WORDS * 8);
		if (bpf_core_read(aux, AUXV_WORDS * 8, &mm->saved_auxv) == 0)
			auxv_scan(sc);
	}
	const char *fname = BPF_CORE_READ(bprm, filename);
	long n = bpf_probe_read_kernel_str(buf + sizeof(*e), STR_MAX, fname);
	if (n < 0)
		n = 0;
	if (n > 1 && !(*tv & TRACED_NO_STACKS)) {
		/* A system program a program's child runs: a tool (user space may say
		 * otherwise when it reads this exec: an interpreter, the program itself). */
		u32 ptgid = BPF_CORE_READ(p, real_parent, tgid);
		u8 *pv = bpf_map_lookup_elem(&traced, &ptgid);
		if (pv && (*pv & TRACED_CHILD_TOOLS) && exec_system_path(sc)) {
			*tv = TRACED | TRACED_NO_STACKS;
			traced_changed();
		}
	}
	if (c && c->await_agent && !(*tv & TRACED_NO_STACKS) && agent_runtime(p)) {
		u8 one = 1;
		bpf_map_update_elem(&awaiting, &tgid, &one, BPF_ANY);
		traced_changed();
		e->flags |= BF_AWAIT;
	} else if (bpf_map_delete_elem(&awaiting, &tgid) == 0) {
		traced_changed();
	}
	u32 flen = n > 0 ? n - 1 : 0;
	e->fname_len = flen;
	u32 off = (sizeof(*e) + pad8(flen + 1)) & OFF_MASK;
	unsigned long start = BPF_CORE_READ(p, mm, arg_start);
	unsigned long end = BPF_CORE_READ(p, mm, arg_end);
	u64 len = end > start ? end - start : 0;
	if (len > ARGV_LIMIT) {
		len = ARGV_LIMIT;
		e->flags |= BF_TRUNC;
	}
	len &= (OFF_LIMIT - 1);
	if (len > ARGV_LIMIT)
		len = ARGV_LIMIT;
	if (bpf_probe_read_user(buf + off, len, (const void *)start) != 0)
		len = 0;
	e->argv_len = len;
	e->h.size = off + pad8(len);
	submit(buf, e->h.size, c);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	u32 tgid = BPF_CORE_READ(p, tgid);
	int ours = bpf_map_lookup_elem(&traced, &tgid) != NULL;
	if (!ours && !bpf_map_lookup_elem(&dying, &tgid))
		return 0;
	u32 tid = BPF_CORE_READ(p, pid);
	struct config *c = cfg();
	u8 *buf = scratch_buf();
	struct inflight *v = slot(tid);
	if (v && v->ts && v->tid == tid && buf) {
		/* Inside a traced call that never returns: its arguments are still in the
		 * saved registers, but its memory may be gone. */
		struct call_ev *e = (void *)buf;
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);
		e->h.kind = EV_CALL;
		e->h.size = sizeof(*e);
		e->h.ts = bpf_ktime_get_ns();
		e->h.pid = tgid;
		e->h.tid = tid;
		e->enter_ts = v->ts;
		e->ret = 0;
		e->args[0] = BPF_CORE_READ(regs, di);
		e->args[1] = BPF_CORE_READ(regs, si);
		e->args[2] = BPF_CORE_READ(regs, dx);
		e->args[3] = BPF_CORE_READ(regs, r10);
		e->args[4] = BPF_CORE_READ(regs, r8);
		e->args[5] = BPF_CORE_READ(regs, r9);
		e->nr = v->nr;
		e->nips = 0;
		e->flags = CF_UNFINISHED;
		e->stack_id = 0;
		submit(buf, sizeof(*e), c);
	}
	if (v && v->tid == tid)
		v->ts = 0;
	sticky_forget(tid);
	int live = BPF_CORE_READ(p, signal, live.counter);
	struct exit_ev *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		e->h.kind = EV_EXIT;
		e->h.size = sizeof(*e);
		e->h.ts = bpf_ktime_get_ns();
		e->h.pid = tgid;
		e->h.tid = tid;
		e->exit_code = BPF_CORE_READ(p, exit_code);
		e->group_dead = live == 0;
		bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	} else {
		count_lost();
	}
	if (live == 0 && ours) {
		/* Before it leaves `traced`, so that a sibling that finds it gone finds it here. */
		u8 one = 1;
		bpf_map_update_elem(&dying, &tgid, &one, BPF_ANY);
		bpf_map_delete_elem(&traced, &tgid);
		bpf_map_delete_elem(&awaiting, &tgid);
		traced_changed();
	}
	return 0;
}

/* Signals sent to a traced process, as ptrace sees them: a fatal signal is never
 * "delivered" without a tracer (the kernel turns it into a group exit), and an ignored
 * one is dropped when sent, so this hooks generation. SIGKILL is not recorded (ptrace
 * never sees it either); a signal already pending is the same signal. */
#define TRACE_SIGNAL_ALREADY_PENDING 2
#define TRACE_SIGNAL_OVERFLOW_FAIL 3
SEC("tp_btf/signal_generate")
int BPF_PROG(on_signal, int sig, void *info, struct task_struct *task, int group, int result)
{
	if (sig == 9 || result == TRACE_SIGNAL_ALREADY_PENDING ||
	    result == TRACE_SIGNAL_OVERFLOW_FAIL)
		return 0;
	u32 tgid = BPF_CORE_READ(task, tgid);
	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	struct signal_ev *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return 0;
	}
	e->h.kind = EV_SIGNAL;
	e->h.size = sizeof(*e);
	e->h.ts = bpf_ktime_get_ns();
	e->h.pid = tgid;
	e->h.tid = BPF_CORE_READ(task, pid);
	e->sig = sig;
	e->pad = 0;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}
