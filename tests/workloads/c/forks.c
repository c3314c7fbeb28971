/* forks: N children (default 100), each stats a path and exits with its index mod 256.
 * The parent waits for all and checks every exit status. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    struct stat st;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) return 3;
        if (pid == 0) {
            stat("/", &st);
            _exit(i % 256);
        }
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status)) bad++;
    }
    printf("%d children, %d bad\n", n, bad);
    return bad ? 1 : 0;
}
