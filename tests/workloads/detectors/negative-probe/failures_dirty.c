// negative-probe (errors other than ENOENT), dirty twin: for every item the program asks
// again whether "settings" is a directory of overrides (it is a file: ENOTDIR) and opens
// "current" without following symbolic links (it is one: ELOOP). Nothing changes between
// items, so every answer after the first is known.
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
    int overrides = 0, followed = 0;
    for (int i = 0; i < items; i++) {
        int d = open("settings", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d >= 0) {
            overrides++;
            close(d);
        } else if (errno != ENOTDIR) {
            return 1;
        }
        int c = open("current", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (c >= 0) {
            followed++;
            close(c);
        } else if (errno != ELOOP) {
            return 1;
        }
    }
    printf("%d %d\n", overrides, followed);
    return 0;
}
