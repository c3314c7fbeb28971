// self-inflicted-lookup, clean twin: asks for the size once after opening, then keeps it
// up to date from what write() returns.
//
// Usage: clean [FILE] [RECORDS]
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "out.log";
    int n = argc > 2 ? atoi(argv[2]) : 100;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        perror("fstat");
        return 1;
    }
    long long size = (long long)st.st_size;
    for (int i = 0; i < n; i++) {
        char rec[64];
        int len = snprintf(rec, sizeof rec, "record %d\n", i);
        ssize_t w = write(fd, rec, (size_t)len);
        if (w != len) {
            perror("write");
            return 1;
        }
        size += w;
    }
    close(fd);
    printf("%d records, %lld bytes\n", n, size);
    return 0;
}
