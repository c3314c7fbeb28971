// open-close-churn, dirty twin (seed 004 before its fix): every small write opens the
// file, pwrite()s 8 bytes and closes it again.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_tile(const char *path, int i) {
    char buf[8];
    memset(buf, 'a' + i % 26, sizeof buf);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    ssize_t n = pwrite(fd, buf, sizeof buf, (off_t)i * (off_t)sizeof buf);
    close(fd);
    return n == (ssize_t)sizeof buf ? 0 : -1;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tiles.bin";
    int n = argc > 2 ? atoi(argv[2]) : 100;
    for (int i = 0; i < n; i++) {
        if (write_tile(path, i) != 0) {
            perror(path);
            return 1;
        }
    }
    return 0;
}
