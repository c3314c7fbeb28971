// negative-probe (errors other than ENOENT), clean twin: the two answers are asked once,
// before the items, and remembered.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int items = argc > 1 ? atoi(argv[1]) : 100;
    int fd = open("settings", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "{}\n", 3) != 3 || close(fd) != 0) return 1;
    if (symlink("settings", "current") != 0) return 1;
    int d = open("settings", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int has_overrides = d >= 0;
    if (d >= 0) close(d);
    int c = open("current", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int plain = c >= 0;
    if (c >= 0) close(c);
    int overrides = 0, followed = 0;
    for (int i = 0; i < items; i++) {
        overrides += has_overrides;
        followed += plain;
    }
    printf("%d %d\n", overrides, followed);
    return 0;
}
