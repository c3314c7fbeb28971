// probe_loop.c: a WASI-like shim answering "filestat" for NAMES files, ROUNDS times (seed
// 001's shape): per call of path_filestat_get, stat(guest/NAME) fails with ENOENT, then
// stat(host/NAME) and lstat(host/NAME) answer. Every round after the first repeats the
// same three questions: one fix (a stat cache in path_filestat_get), one finding per
// detector at that function, and one per-call sequence (crates/dejavu/tests/findings.rs).
//
// usage: probe_loop DIR ROUNDS [MS]   DIR holds host/f00.txt .. host/f39.txt (made by the
// test, not here: stat'ing a file this process just wrote is another finding) and no
// guest/; MS: wait before exiting (the eBPF backend names native frames after the fact).
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#define NAMES 40

__attribute__((noinline)) long path_filestat_get(const char *dir, int i) {
    char guest[512], host[512];
    struct stat st;
    snprintf(guest, sizeof guest, "%s/guest/f%02d.txt", dir, i);
    snprintf(host, sizeof host, "%s/host/f%02d.txt", dir, i);
    if (stat(guest, &st) == 0) /* GUEST_LINE */
        return (long)st.st_size;
    if (stat(host, &st) != 0) /* HOST_LINE */
        return -1;
    long size = (long)st.st_size;
    if (lstat(host, &st) != 0) /* LSTAT_LINE */
        return -1;
    return size + (S_ISLNK(st.st_mode) ? 1 : 0);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: probe_loop DIR ROUNDS [MS]\n");
        return 2;
    }
    const char *dir = argv[1];
    int rounds = atoi(argv[2]);
    long sum = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < NAMES; i++)
            sum += path_filestat_get(dir, i);
    printf("probe_loop: %d rounds, size sum %ld\n", rounds, sum);
    fflush(stdout);
    long ms = argc > 3 ? atol(argv[3]) : 0;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return 0;
}
