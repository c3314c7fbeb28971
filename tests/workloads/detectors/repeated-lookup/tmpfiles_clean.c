/* The clean twin of tmpfiles_dirty.c: the same 30 unnamed files (O_TMPFILE) in
 * DIR/scratch, each written once and fstat'ed, and the directory stat'ed once: nothing
 * here is a repeated lookup (each file is a new one). Usage: tmpfiles_clean DIR */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/scratch", argv[1]);
    if (mkdir(dir, 0755) != 0) return 1;
    struct stat st;
    stat(dir, &st);
    for (int i = 0; i < 30; i++) {
        int fd = open(dir, O_TMPFILE | O_RDWR, 0600);
        if (fd < 0) {
            perror("open O_TMPFILE");
            return 1;
        }
        write(fd, "uuuuuuuuuuuuuuuuuuuu", 20);
        fstat(fd, &st);
        close(fd);
    }
    return 0;
}
