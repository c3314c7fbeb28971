// fsync-per-op, dirty twin: a journal that fsync()s after every 32-byte record.
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
    for (int i = 0; i < n; i++) {
        char rec[32];
        snprintf(rec, sizeof rec, "record %022d\n", i);
        if (write(fd, rec, 31) != 31 || fsync(fd) != 0) {
            perror("write/fsync");
            return 1;
        }
    }
    return close(fd) == 0 ? 0 : 1;
}
