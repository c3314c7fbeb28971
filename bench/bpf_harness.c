// bpf_harness.c: dejavu's kernel half (or a variant of it) without dejavu, to measure what
// its parts cost (docs/ebpf-backend.md, "The kernel half, per call").
//
// Loads a BPF object built from bpf/dejavu.bpf.c (or a copy with parts cut out), fills its
// `config` (STACKS bytes of stack copies, 0 for none), its `wanted` syscalls and `traced`
// (the command's pid), attaches every program, runs the command, drains the ring buffers
// without decoding them, and prints each program's run count and ns per run when
// kernel.bpf_stats_enabled is 1. Nothing answers the stack cache: with STACKS > 0 every
// call sends a copy (not the default's cost).
//
//   clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I/usr/include
//       -I/usr/include/x86_64-linux-gnu -c crates/dejavu-ebpf/bpf/dejavu.bpf.c -o /tmp/d.o
//   (one command)
//   gcc -O2 -o /tmp/bpf_harness bench/bpf_harness.c -lbpf -lpthread
//   /tmp/bpf_harness /tmp/d.o 0 -- node bench/workloads/stat_loop.js 400000
//
// usage: bpf_harness OBJECT STACKS -- COMMAND [ARGS...]   (as root)
#define _GNU_SOURCE
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>
#include <pthread.h>
#include <time.h>
struct config { unsigned payload_bytes; int agent_fd; unsigned stacks, wake_bytes, open_identity, pad; };
static volatile int stop; static long nrec;
static int cb(void *ctx, void *d, size_t n) { nrec++; return 0; }
static void *drain(void *rb) { while (!stop) ring_buffer__poll(rb, 1); ring_buffer__poll(rb, 0); return 0; }
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
  if (argc < 5 || strcmp(argv[3], "--") != 0) {
    fprintf(stderr, "usage: %s OBJECT STACKS -- COMMAND [ARGS...]\n", argv[0]);
    return 2;
  }
  int stacks = atoi(argv[2]);
  struct bpf_object *o = bpf_object__open_file(argv[1], NULL);
  if (!o || bpf_object__load(o)) { fprintf(stderr, "load failed\n"); return 1; }
  int pfd[2];
  if (pipe(pfd)) { perror("pipe"); return 1; }
  pid_t c = fork();
  if (!c) { char b; close(pfd[1]); if (read(pfd[0], &b, 1) != 1) _exit(126); execvp(argv[4], argv + 4); _exit(127); }
  struct bpf_map *m;
  int zero = 0;
  if ((m = bpf_object__find_map_by_name(o, "config"))) { struct config cf = {256, -1, stacks, 1 << 20, 1, 0}; bpf_map_update_elem(bpf_map__fd(m), &zero, &cf, 0); }
  if ((m = bpf_object__find_map_by_name(o, "wanted"))) { unsigned char one = 1; int nrs[] = {0,1,2,4,5,6,9,11,17,18,19,20,21,22,32,33,40,41,42,43,59,72,76,80,82,83,84,85,86,87,88,89,90,92,94,257,258,260,262,263,264,265,266,267,268,269,280,288,292,293,295,296,316,319,322,327,328,332,437,439,452}; for (unsigned i = 0; i < sizeof nrs / sizeof *nrs; i++) bpf_map_update_elem(bpf_map__fd(m), &nrs[i], &one, 0); }
  if ((m = bpf_object__find_map_by_name(o, "traced"))) { unsigned char one = 1; unsigned p = c; bpf_map_update_elem(bpf_map__fd(m), &p, &one, 0); }
  struct bpf_program *p; bpf_object__for_each_program(p, o) if (!bpf_program__attach(p)) { fprintf(stderr, "attach %s failed\n", bpf_program__name(p)); return 1; }
  struct ring_buffer *rb = NULL;
  if ((m = bpf_object__find_map_by_name(o, "events"))) rb = ring_buffer__new(bpf_map__fd(m), cb, 0, 0);
  if (rb && (m = bpf_object__find_map_by_name(o, "stackbuf"))) ring_buffer__add(rb, bpf_map__fd(m), cb, 0);
  pthread_t th; if (rb) pthread_create(&th, 0, drain, rb);
  double t0 = now();
  if (write(pfd[1], "x", 1) != 1) { perror("write"); return 1; } int st; waitpid(c, &st, 0); double t1 = now();
  stop = 1; if (rb) pthread_join(th, 0);
  bpf_object__for_each_program(p, o) { struct bpf_prog_info info = {}; unsigned len = sizeof info; bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len); if (info.run_cnt) fprintf(stderr, "%-14s %6.0f ns/run %9llu runs\n", bpf_program__name(p), (double)info.run_time_ns / info.run_cnt, info.run_cnt); }
  fprintf(stderr, "wall %.3f s, %ld records\n", t1 - t0, nrec);
  return 0;
}
