// no-reader, clean twin: the debug output is not produced when it would go to /dev/null,
// and the producer stops at the first EPIPE.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int is_dev_null(int fd) {
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat("/dev/null", &b) == 0 && S_ISCHR(a.st_mode) &&
           a.st_rdev == b.st_rdev;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    char line[100];
    memset(line, '.', sizeof line);
    line[sizeof line - 1] = '\n';

    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) return 1;
    int debug = !is_dev_null(null); // nobody would read it: don't format or write it
    for (int i = 0; debug && i < n; i++)
        if (write(null, line, sizeof line) != (ssize_t)sizeof line) return 1;
    close(null);

    signal(SIGPIPE, SIG_IGN);
    int p[2];
    if (pipe(p) != 0) return 1;
    pid_t child = fork();
    if (child == 0) _exit(0);
    close(p[0]);
    waitpid(child, NULL, 0);
    for (int i = 0; i < n; i++)
        if (write(p[1], line, 64) < 0 && errno == EPIPE) break; // the reader is gone: stop
    close(p[1]);
    return 0;
}
