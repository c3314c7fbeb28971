/* stat_loop: stats one file again and again (what a config loader that never caches
 * does), prints one line on stdout, and exits with the status it is told to.
 *
 *   stat_loop PATH [TIMES [STATUS]]     TIMES defaults to 100, STATUS to 0;
 *                                       STATUS "term" makes it kill itself with SIGTERM
 *
 * Used by crates/dejavu/tests/report_cli.rs: 100 stats of an unchanged file are one
 * repeated-lookup finding with 99 redundant calls. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: stat_loop PATH [TIMES [STATUS]]\n");
        return 2;
    }
    int times = argc > 2 ? atoi(argv[2]) : 100;
    struct stat st;
    long size = -1;
    for (int i = 0; i < times; i++) {
        if (stat(argv[1], &st) == 0) {
            size = (long)st.st_size;
        }
    }
    printf("stat_loop: %d stats, size %ld\n", times, size);
    fflush(stdout);
    if (argc > 3 && strcmp(argv[3], "term") == 0) {
        raise(SIGTERM);
    }
    return argc > 3 ? atoi(argv[3]) : 0;
}
