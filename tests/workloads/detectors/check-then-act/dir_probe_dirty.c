// check-then-act (directory probe), dirty twin: rsync's way of opening each file it
// sends — first as a directory (O_DIRECTORY|O_NOFOLLOW: ENOTDIR for a file), then as a
// file, then fstat of the descriptor, then the read. The files are made first, in ./tree.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int open_entry(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != ENOTDIR) return -1;
    return open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

int main(int argc, char **argv) {
    int files = argc > 1 ? atoi(argv[1]) : 50;
    char name[32], buf[64];
    if (mkdir("tree", 0755) != 0) return 1;
    for (int i = 0; i < files; i++) {
        snprintf(name, sizeof name, "tree/f%03d", i);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, name, 9) != 9 || close(fd) != 0) return 1;
    }
    long total = 0;
    for (int i = 0; i < files; i++) {
        snprintf(name, sizeof name, "tree/f%03d", i);
        int fd = open_entry(name);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) return 1;
        if (S_ISREG(st.st_mode)) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n < 0) return 1;
            total += n;
        }
        close(fd);
    }
    printf("%ld bytes\n", total);
    return 0;
}
