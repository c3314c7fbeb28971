// stat_site.c: stats one file from a known line of a named function called from main,
// so a native stack can be checked down to the line (crates/dejavu/tests/stacks_native.rs).
//
// usage: stat_site FILE [N [MS]]   stats FILE N times (default 1), prints the size sum,
// then waits MS milliseconds before exiting (a long-running program, for the eBPF
// backend, which names native frames after the fact: crates/dejavu/tests/ebpf.rs).
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

// Not static and not inlined: the function keeps its own frame and its own name at -O2.
__attribute__((noinline)) long probe_config(const char *path) {
    struct stat st;
    int r = stat(path, &st); /* STAT_LINE */
    // Using the result after the call keeps the stat from becoming a tail call (which
    // would leave no frame of this function on the stack).
    return r == 0 ? (long)st.st_size : -1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: stat_site FILE [N]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 1;
    long sum = 0;
    for (long i = 0; i < n; i++) {
        sum += probe_config(argv[1]); /* CALL_LINE */
    }
    printf("stat_site: %ld stats, size sum %ld\n", n, sum);
    fflush(stdout);
    long ms = argc > 3 ? atol(argv[3]) : 0;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return 0;
}
