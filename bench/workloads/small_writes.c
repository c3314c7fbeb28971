/*
 * small_writes.c: the write-heavy workload of bench/overhead.py.
 *
 * Opens DIR/records.dat once (a regular file: no log name, no O_APPEND, not a standard
 * stream, so a recorder keeps no payload of it) and writes N (default 200000) short
 * lines to it, one write(2) each, then closes it. One traced call per iteration with
 * almost no work in between: the per-write cost of a tracer, which is what write
 * fingerprints add to (every write's first bytes are read back and hashed).
 *
 * The last line on stdout gives the final size, which the benchmark compares across
 * tracers.
 *
 * build: cc -O2 -o small_writes small_writes.c
 * usage: small_writes DIR [N]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s DIR [N]\n", argv[0]);
        return 2;
    }
    long n = argc > 2 ? strtol(argv[2], NULL, 10) : 200000;
    if (n < 0) {
        fprintf(stderr, "%s: N must be >= 0\n", argv[0]);
        return 2;
    }
    char path[4096];
    if (snprintf(path, sizeof path, "%s/records.dat", argv[1]) >= (int)sizeof path) {
        fprintf(stderr, "%s: DIR too long\n", argv[0]);
        return 2;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    char line[64];
    for (long i = 0; i < n; i++) {
        int len = snprintf(line, sizeof line, "record %08ld value %ld\n", i, i % 97);
        if (write(fd, line, (size_t)len) != len) {
            perror("write");
            return 1;
        }
    }
    if (close(fd) != 0) {
        perror("close");
        return 1;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 1;
    }
    printf("small_writes: %ld writes, %lld bytes\n", n, (long long)st.st_size);
    return 0;
}
