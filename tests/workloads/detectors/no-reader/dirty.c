// no-reader, dirty twin: debug output formatted and written to /dev/null, and a producer
// that keeps writing into a pipe whose reader has exited (SIGPIPE ignored: every write
// fails with EPIPE).
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    char line[100];
    memset(line, '.', sizeof line);
    line[sizeof line - 1] = '\n';

    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) return 1;
    for (int i = 0; i < n; i++)
        if (write(null, line, sizeof line) != (ssize_t)sizeof line) return 1;
    close(null);

    signal(SIGPIPE, SIG_IGN);
    int p[2];
    if (pipe(p) != 0) return 1;
    pid_t child = fork();
    if (child == 0) _exit(0); // the reader goes away at once
    close(p[0]);
    waitpid(child, NULL, 0);
    int lost = 0;
    for (int i = 0; i < n; i++)
        if (write(p[1], line, 64) < 0) lost++; // EPIPE, and on it goes
    close(p[1]);
    return lost == n ? 0 : 1;
}
