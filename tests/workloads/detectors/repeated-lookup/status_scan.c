/* repeated-lookup trap, git-status style: create N files, then lstat each one exactly
 * once, as a status scan does. Nothing is asked twice: nothing to report.
 * Usage: status_scan DIR [N] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int n = argc > 2 ? atoi(argv[2]) : 200;
    char path[4096];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/file%03d.txt", argv[1], i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) return 1;
        close(fd);
    }
    struct stat st;
    long total = 0;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/file%03d.txt", argv[1], i);
        if (lstat(path, &st) == 0) total += st.st_size + 1;
    }
    printf("%ld files\n", total);
    return 0;
}
