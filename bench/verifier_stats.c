/* verifier_stats.c: the kernel verifier's statistics for each program of dejavu's BPF
 * object (`processed N insns ...`), as `veristat` prints them. The verifier's work is most
 * of `dejavu record`'s start-up (docs/ebpf-backend.md, "Start-up").
 *
 * Build and run (root; libbpf-dev, which scripts/setup installs):
 *   cc -O1 -o /tmp/verifier_stats bench/verifier_stats.c -lbpf
 *   /tmp/verifier_stats $(ls -t target/release/build/dejavu-ebpf-*'/out/dejavu.bpf.o' | head -1)
 * With a program's name as a second argument it prints that program's whole verifier log
 * (log level 2: every instruction walked, with the source line before it) instead. */
#include <bpf/libbpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROGS 16
#define LOG_BYTES (64u << 20)

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s OBJECT.bpf.o [PROGRAM]\n", argv[0]);
		return 2;
	}
	struct bpf_object *obj = bpf_object__open(argv[1]);
	if (!obj) {
		perror(argv[1]);
		return 1;
	}
	static char *logs[MAX_PROGS];
	struct bpf_program *p;
	int i = 0;
	bpf_object__for_each_program(p, obj) {
		if (i == MAX_PROGS)
			break;
		logs[i] = calloc(1, LOG_BYTES);
		if (!logs[i])
			return 1;
		bpf_program__set_log_level(p, argc > 2 ? 2 | 4 : 4);
		bpf_program__set_log_buf(p, logs[i], LOG_BYTES);
		i++;
	}
	/* The rings as small as the kernel takes: their size does not change the verifier's
	 * work. */
	struct bpf_map *m;
	bpf_object__for_each_map(m, obj) {
		if (bpf_map__type(m) == BPF_MAP_TYPE_RINGBUF)
			bpf_map__set_max_entries(m, 4096);
	}
	int err = bpf_object__load(obj);
	i = 0;
	bpf_object__for_each_program(p, obj) {
		if (i == MAX_PROGS)
			break;
		if (argc > 2) {
			if (!strcmp(bpf_program__name(p), argv[2]))
				fputs(logs[i], stdout);
		} else {
			char *s = strstr(logs[i], "processed");
			printf("%s: %s", bpf_program__name(p), s ? s : "(no statistics)\n");
		}
		i++;
	}
	if (err)
		fprintf(stderr, "loading failed: %d\n", err);
	bpf_object__close(obj);
	return err ? 1 : 0;
}
