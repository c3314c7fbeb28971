// open-close-churn (read side), dirty twin: rsync's temp-file suffix — for every item,
// open /dev/urandom, read 6 bytes, close it again. The names go to one file at the end.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int suffix(unsigned char out[6]) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, out, 6);
    close(fd);
    return n == 6 ? 0 : -1;
}

int main(int argc, char **argv) {
    int items = argc > 1 ? atoi(argv[1]) : 100;
    FILE *names = fopen("names.txt", "w");
    if (!names) return 1;
    for (int i = 0; i < items; i++) {
        unsigned char r[6];
        if (suffix(r) != 0) return 1;
        fprintf(names, ".item%d.%02x%02x%02x%02x%02x%02x\n", i, r[0], r[1], r[2], r[3], r[4], r[5]);
    }
    return fclose(names) == 0 ? 0 : 1;
}
