/* repeated-output, dirty twin: a C daemon that opens its log with fopen(path, "w") (no
 * O_APPEND) and flushes every line, logging the same retry notice for every job.
 *
 * Usage: log_dirty LOGFILE [JOBS] */
#include <stdio.h>
#include <stdlib.h>

static FILE *logf;

static void log_line(const char *msg) {
    fprintf(logf, "worker: %s\n", msg);
    fflush(logf);
}

static int run_job(int id) {
    log_line("spool directory not set, falling back to /tmp");
    return id * 2;
}

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
    int jobs = argc > 2 ? atoi(argv[2]) : 200;
    long sum = 0;
    for (int i = 0; i < jobs; i++)
        sum += run_job(i);
    fprintf(logf, "worker: %d jobs done\n", jobs);
    fclose(logf);
    printf("%ld\n", sum);
    return 0;
}
