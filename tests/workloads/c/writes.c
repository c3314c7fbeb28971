/* writes: what the capture tests (crates/dejavu/tests/capture_writes.rs) record, one
 * scenario per run, every write a direct system call (no stdio buffering in between).
 *
 *   writes same N            "warning: disk almost full\n" N times to stderr
 *   writes lines FILE        to FILE (created): "request I ok\n" for I in 1..20, then
 *                            "request 7 failed\n", a writev of "request 8 " + "ok\n", a
 *                            pwrite64 and a pwritev of "request 9 ok\n", then two
 *                            1000-byte writes that differ only after byte 300
 *   writes data FILE         one write of "row 1,2,3\n" to FILE (created)
 *   writes mmap FILE         maps FILE (which must exist) read-only, reads its first byte;
 *                            maps anonymous memory of 123 pages (MAP_ANONYMOUS with fd -1,
 *                            and MAP_ANONYMOUS with FILE's descriptor, which the kernel
 *                            ignores) and fails to map descriptor -1 without
 *                            MAP_ANONYMOUS (EBADF)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int put(int fd, const char *s) {
    size_t n = strlen(s);
    return write(fd, s, n) == (ssize_t)n ? 0 : 1;
}

static int lines(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 2;
    char buf[64];
    int bad = 0;
    for (int i = 1; i <= 20; i++) {
        snprintf(buf, sizeof buf, "request %d ok\n", i);
        bad |= put(fd, buf);
    }
    bad |= put(fd, "request 7 failed\n");
    struct iovec v[2] = {{"request 8 ", 10}, {"ok\n", 3}};
    bad |= writev(fd, v, 2) != 13;
    off_t end = lseek(fd, 0, SEEK_END);
    bad |= pwrite(fd, "request 9 ok\n", 13, end) != 13;
    struct iovec p[1] = {{"request 9 ok\n", 13}};
    bad |= pwritev(fd, p, 1, end + 13) != 13;
    lseek(fd, 0, SEEK_END);
    char big[1000];
    for (int k = 0; k < 2; k++) {
        memset(big, 'x', sizeof big);
        memcpy(big, "block of text ", 14);
        big[500] = (char)('a' + k); /* differs after the first 256 bytes */
        bad |= write(fd, big, sizeof big) != (ssize_t)sizeof big;
    }
    close(fd);
    return bad;
}

static int mapping(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 2;
    char *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) return 3;
    volatile char c = m[0];
    (void)c;
    size_t anon = 123 * 4096;
    void *a = mmap(NULL, anon, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *b = mmap(NULL, anon, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, fd, 0);
    if (a == MAP_FAILED || b == MAP_FAILED) return 4;
    if (mmap(NULL, anon, PROT_READ, MAP_PRIVATE, -1, 0) != MAP_FAILED) return 5;
    munmap(a, anon);
    munmap(b, anon);
    munmap(m, 4096);
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return 64;
    const char *what = argv[1];
    if (!strcmp(what, "same")) {
        int n = atoi(argv[2]), bad = 0;
        for (int i = 0; i < n; i++) bad |= put(2, "warning: disk almost full\n");
        return bad;
    }
    if (!strcmp(what, "lines")) return lines(argv[2]);
    if (!strcmp(what, "data")) {
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) return 2;
        int bad = put(fd, "row 1,2,3\n");
        close(fd);
        return bad;
    }
    if (!strcmp(what, "mmap")) return mapping(argv[2]);
    return 64;
}
