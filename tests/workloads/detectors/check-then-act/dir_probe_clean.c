// check-then-act (directory probe), clean twin: each file is opened once (O_NOFOLLOW
// still refuses symbolic links) and fstat of the descriptor says whether it is a
// directory.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
        int fd = open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
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
