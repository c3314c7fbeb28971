// open-close-churn (read side), dirty twin: rsync's sender — for every entry of a
// directory, open the directory (O_PATH), open the entry relative to it, close the
// directory, read the entry. The entries are made first, in ./tree.
#define _GNU_SOURCE  // O_PATH
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int entries = argc > 1 ? atoi(argv[1]) : 50;
    char name[32], buf[64];
    if (mkdir("tree", 0755) != 0) return 1;
    for (int i = 0; i < entries; i++) {
        snprintf(name, sizeof name, "tree/f%03d", i);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, name, 9) != 9 || close(fd) != 0) return 1;
    }
    long total = 0;
    for (int i = 0; i < entries; i++) {
        int dir = open("tree", O_RDONLY | O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0) return 1;
        snprintf(name, sizeof name, "f%03d", i);
        int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        close(dir);
        if (fd < 0) return 1;
        ssize_t n = read(fd, buf, sizeof buf);
        close(fd);
        if (n < 0) return 1;
        total += n;
    }
    printf("%ld bytes\n", total);
    return 0;
}
