// fsync-per-op, clean twin: group commit — the records of the batch are written together
// and made durable by one fsync.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "journal.log";
    int n = argc > 2 ? atoi(argv[2]) : 100;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    char *batch = malloc((size_t)n * 31 + 32);
    if (!batch) return 1;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        char rec[32];
        snprintf(rec, sizeof rec, "record %022d\n", i);
        memcpy(batch + len, rec, 31);
        len += 31;
    }
    if (write(fd, batch, len) != (ssize_t)len || fsync(fd) != 0) {
        perror("write/fsync");
        return 1;
    }
    free(batch);
    return close(fd) == 0 ? 0 : 1;
}
