// open-close-churn, clean twin: one handle kept for the whole job, the small writes
// buffered in memory and written in one pwrite, flushed before exit.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tiles.bin";
    int n = argc > 2 ? atoi(argv[2]) : 100;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    char *buf = malloc((size_t)n * 8 + 1);
    if (!buf) return 1;
    for (int i = 0; i < n; i++) memset(buf + (size_t)i * 8, 'a' + i % 26, 8);
    ssize_t want = (ssize_t)n * 8;
    if (pwrite(fd, buf, (size_t)want, 0) != want) {
        perror("pwrite");
        return 1;
    }
    free(buf);
    return close(fd) == 0 ? 0 : 1;
}
