/* repeated-lookup through unnamed files: 30 times, a file is made with O_TMPFILE in
 * DIR/scratch (no name, so the directory does not change), written a byte at a time and
 * fstat'ed, and the directory is stat'ed again: 29 of those 30 stats are redundant. The
 * files' calls are theirs, not the directory's (each is named DIR/scratch/#INODE
 * (deleted), as /proc names it), so they do not hide the directory's repeats.
 * Usage: tmpfiles_dirty DIR */
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
    for (int i = 0; i < 30; i++) {
        int fd = open(dir, O_TMPFILE | O_RDWR, 0600);
        if (fd < 0) {
            perror("open O_TMPFILE");
            return 1;
        }
        for (int j = 0; j < 20; j++) write(fd, "u", 1);
        fstat(fd, &st);
        close(fd);
        stat(dir, &st);
    }
    return 0;
}
