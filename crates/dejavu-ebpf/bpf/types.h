/* The few kernel types dejavu's BPF program reads, declared by hand instead of a
 * generated vmlinux.h (megabytes, and tied to one kernel). Every struct carries
 * preserve_access_index: field offsets are CO-RE relocations that the loader (aya)
 * resolves against the running kernel's BTF, so the layout below only has to name the
 * fields, not match any kernel's order. Names with a ___suffix are "flavors": alternative
 * layouts of one kernel struct, tried with bpf_core_field_exists. */
#ifndef DEJAVU_TYPES_H
#define DEJAVU_TYPES_H

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef int pid_t;

#define PRESERVE __attribute__((preserve_access_index))

/* x86_64 user registers saved at syscall entry. */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax,
		ip, cs, flags, sp, ss;
} PRESERVE;

struct timespec64 {
	s64 tv_sec;
	long tv_nsec;
} PRESERVE;

typedef struct {
	u32 val;
} kuid_t;
typedef struct {
	u32 val;
} kgid_t;

struct super_block {
	u32 s_dev;
} PRESERVE;

/* Linux 6.11 and later: seconds and nanoseconds in separate fields. */
struct inode {
	unsigned short i_mode;
	kuid_t i_uid;
	kgid_t i_gid;
	unsigned long i_ino;
	u32 i_rdev;
	s64 i_size;
	unsigned int __i_nlink;
	struct super_block *i_sb;
	s64 i_mtime_sec;
	u32 i_mtime_nsec;
	s64 i_ctime_sec;
	u32 i_ctime_nsec;
} PRESERVE;

/* Linux 6.7 to 6.10. */
struct inode___v67 {
	struct timespec64 __i_mtime;
	struct timespec64 __i_ctime;
} PRESERVE;

/* Linux 6.6. */
struct inode___v66 {
	struct timespec64 i_mtime;
	struct timespec64 __i_ctime;
} PRESERVE;

/* Before 6.6. */
struct inode___old {
	struct timespec64 i_mtime;
	struct timespec64 i_ctime;
} PRESERVE;

/* A file's name as its directory entry holds it (the last component of its path). */
struct qstr {
	const unsigned char *name;
} PRESERVE;
struct dentry {
	struct qstr d_name;
} PRESERVE;
struct path {
	struct dentry *dentry;
} PRESERVE;
struct file {
	struct inode *f_inode;
	unsigned int f_flags;
	struct path f_path;
} PRESERVE;

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} PRESERVE;

struct files_struct {
	struct fdtable *fdt;
} PRESERVE;

struct fs_struct {
	int users;
} PRESERVE;

struct mm_struct {
	unsigned long saved_auxv[48];
	unsigned long start_stack;
	unsigned long arg_start;
	unsigned long arg_end;
	struct file *exe_file;
} PRESERVE;

typedef struct {
	int counter;
} atomic_t;

struct signal_struct {
	atomic_t live;
} PRESERVE;

/* x86's thread_info, first in task_struct: `status` has TS_COMPAT during a 32-bit call. */
struct thread_info {
	u32 status;
} PRESERVE;

struct task_struct {
	struct thread_info thread_info;
	pid_t pid;
	pid_t tgid;
	int exit_code;
	struct files_struct *files;
	struct fs_struct *fs;
	struct mm_struct *mm;
	struct signal_struct *signal;
	struct task_struct *real_parent;
} PRESERVE;

struct linux_binprm {
	const char *filename;
} PRESERVE;

#endif
