// reread-unchanged (mmap), clean twin: each item's file is mapped whole once, and the
// header and the body are read from the same mapping. The files are made first, in
// ./objects.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// Maps the whole file; its size in *len.
static unsigned char *map_whole(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0) {
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    *len = st.st_size;
    return p;
}

// "blob 12\0<12 bytes>": the sum of the body's bytes, as many as the header says.
static long object_sum(const char *path) {
    size_t len;
    unsigned char *p = map_whole(path, &len);
    if (!p) return -1;
    unsigned char *nul = memchr(p, 0, len);
    long size = nul && memchr(p, ' ', nul - p) ? atol(memchr(p, ' ', nul - p) + 1) : -1;
    long sum = 0;
    for (long i = 0; nul && i < size && nul + 1 + i < p + len; i++) sum += nul[1 + i];
    munmap(p, len);
    return size < 0 ? -1 : sum;
}

int main(int argc, char **argv) {
    int items = argc > 1 ? atoi(argv[1]) : 50;
    char name[32], obj[128];
    if (mkdir("objects", 0755) != 0) return 1;
    for (int i = 0; i < items; i++) {
        snprintf(name, sizeof name, "objects/o%03d", i);
        int body = 10 + i;
        int n = snprintf(obj, sizeof obj, "blob %d", body) + 1;
        memset(obj + n, 'a' + i % 26, body);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (fd < 0 || write(fd, obj, n + body) != n + body || close(fd) != 0) return 1;
    }
    long total = 0;
    for (int i = 0; i < items; i++) {
        snprintf(name, sizeof name, "objects/o%03d", i);
        long sum = object_sum(name);
        if (sum < 0) return 1;
        total += sum;
    }
    printf("%ld\n", total);
    return 0;
}
