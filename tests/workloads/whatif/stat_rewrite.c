// whatif twins (seed 001's stat cache): stats DIR/config.json three times, has it rewritten
// (by itself: `self`, or by a second process, this program re-executed with --rewrite:
// `other`), stats it three more times, and with a pause (ms) waits and stats it three times
// again. Usage: stat_rewrite DIR self|other [PAUSE_MS]  |  stat_rewrite --rewrite FILE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) static void rewrite(const char *path) {
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    const char *text = "{\"port\": 9090, \"rewritten\": true}\n";
    if (write(fd, text, strlen(text)) < 0) exit(1); // the write a cache must see
    close(fd);
}

__attribute__((noinline)) static long stats(const char *path, int n) {
    long total = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(path, &st) != 0) exit(1);
        total += st.st_size;
    }
    return total;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--rewrite") == 0) {
        rewrite(argv[2]);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR self|other [PAUSE_MS]\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", argv[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "{}\n", 3) != 3) return 1;
    close(fd);
    long total = stats(path, 3);
    if (strcmp(argv[2], "self") == 0) {
        rewrite(path);
    } else {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], "--rewrite", path, (char *)NULL);
            _exit(127);
        }
        int status = 0;
        if (waitpid(pid, &status, 0) != pid || status != 0) return 1;
    }
    total += stats(path, 3);
    if (argc > 3) {
        long ms = atol(argv[3]);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        total += stats(path, 3);
    }
    printf("%ld\n", total);
    return 0;
}
