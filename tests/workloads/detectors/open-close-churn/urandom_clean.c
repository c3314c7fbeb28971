// open-close-churn (read side), clean twin: /dev/urandom opened once, 6 bytes read per
// item from the kept descriptor, closed at the end.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int items = argc > 1 ? atoi(argv[1]) : 100;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    FILE *names = fopen("names.txt", "w");
    if (fd < 0 || !names) return 1;
    for (int i = 0; i < items; i++) {
        unsigned char r[6];
        if (read(fd, r, 6) != 6) return 1;
        fprintf(names, ".item%d.%02x%02x%02x%02x%02x%02x\n", i, r[0], r[1], r[2], r[3], r[4], r[5]);
    }
    close(fd);
    return fclose(names) == 0 ? 0 : 1;
}
