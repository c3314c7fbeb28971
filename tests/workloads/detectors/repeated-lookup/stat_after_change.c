/* repeated-lookup trap: each stat follows a write to the same file, so each answer is
 * new information; nothing here is a repeated lookup. Usage: stat_after_change DIR */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/grows.log", argv[1]);
    struct stat st;
    for (int i = 0; i < 50; i++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        write(fd, "line\n", 5);
        close(fd);
        stat(path, &st);
    }
    printf("%lld\n", (long long)st.st_size);
    return 0;
}
