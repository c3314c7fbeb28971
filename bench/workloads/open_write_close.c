/*
 * open_write_close.c: the open/write/close churn workload of bench/overhead.py.
 *
 * N times (default 20000): open(DIR/owc.log, O_WRONLY|O_APPEND|O_CREAT), write
 * one short line, close. The pattern dejavu's open-close-churn detector is about,
 * and three traced syscalls per iteration with almost no work in between, so it
 * shows a tracer's per-syscall cost.
 *
 * The log is truncated at start, so every run does the same work; the last line
 * on stdout gives the final size, which the benchmark compares across tracers.
 *
 * build: cc -O2 -o owc open_write_close.c
 * usage: owc DIR [N]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s DIR [N]\n", argv[0]);
        return 2;
    }
    long n = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
    if (n < 0) {
        fprintf(stderr, "%s: N must be >= 0\n", argv[0]);
        return 2;
    }

    char path[4096];
    if (snprintf(path, sizeof path, "%s/owc.log", argv[1]) >= (int)sizeof path) {
        fprintf(stderr, "%s: DIR too long\n", argv[0]);
        return 2;
    }
    /* Start from an empty file so the final size depends only on N. */
    if (truncate(path, 0) != 0 && errno != ENOENT) {
        perror(path);
        return 1;
    }

    char line[64];
    for (long i = 0; i < n; i++) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            perror(path);
            return 1;
        }
        int len = snprintf(line, sizeof line, "line %08ld\n", i);
        if (write(fd, line, (size_t)len) != len) {
            perror("write");
            return 1;
        }
        if (close(fd) != 0) {
            perror("close");
            return 1;
        }
    }

    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 1;
    }
    printf("open_write_close: %ld iterations, %lld bytes\n", n, (long long)st.st_size);
    return 0;
}
