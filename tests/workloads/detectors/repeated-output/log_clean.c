/* repeated-output, clean twin of log_dirty.c: the fallback is decided, and logged, once at
 * start-up.
 *
 * Usage: log_clean LOGFILE [JOBS] */
#include <stdio.h>
#include <stdlib.h>

static FILE *logf;

static void log_line(const char *msg) {
    fprintf(logf, "worker: %s\n", msg);
    fflush(logf);
}

static int run_job(int id) { return id * 2; }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s LOGFILE [JOBS]\n", argv[0]);
        return 2;
    }
    logf = fopen(argv[1], "w");
    if (!logf) {
        perror(argv[1]);
        return 1;
    }
    log_line("spool directory not set, falling back to /tmp");
    int jobs = argc > 2 ? atoi(argv[2]) : 200;
    long sum = 0;
    for (int i = 0; i < jobs; i++)
        sum += run_job(i);
    fprintf(logf, "worker: %d jobs done\n", jobs);
    fclose(logf);
    printf("%ld\n", sum);
    return 0;
}
