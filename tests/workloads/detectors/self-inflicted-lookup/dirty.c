// self-inflicted-lookup, dirty twin (seed 004): appends records to a log and asks the
// kernel for the file's size after every append, although the size is the old size plus
// what write() returned.
//
// Usage: dirty [FILE] [RECORDS]
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
    long long last = 0;
    for (int i = 0; i < n; i++) {
        char rec[64];
        int len = snprintf(rec, sizeof rec, "record %d\n", i);
        if (write(fd, rec, (size_t)len) != len) {
            perror("write");
            return 1;
        }
        struct stat st;
        if (fstat(fd, &st) != 0) { // where does the next record start?
            perror("fstat");
            return 1;
        }
        last = (long long)st.st_size;
    }
    close(fd);
    printf("%d records, %lld bytes\n", n, last);
    return 0;
}
