/* syscall_tour: a deterministic tour of the traced system calls, across threads, a
 * fork and an exec, with known ENOENT/EEXIST/EBADF cases. The record tests compare
 * dejavu's per-syscall call and error counts for it with strace's. Usage: syscall_tour DIR */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[4096];

static char *p(const char *name) {
    static char buf[8][4200];
    static int i;
    i = (i + 1) % 8;
    snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
    return buf[i];
}

static void *thread_main(void *arg) {
    struct stat st;
    /* Paths built here, not with p(): its rotating static buffers are shared, and two
     * threads using them at once could stat each other's half-written path (an extra
     * ENOENT under load, which made the strace/live comparisons differ by one). */
    char a[4200], missing[4200];
    (void)arg;
    snprintf(a, sizeof a, "%s/a.txt", dir);
    snprintf(missing, sizeof missing, "%s/missing", dir);
    for (int i = 0; i < 10; i++) stat(a, &st);  /* 10 stat, all succeed */
    stat(missing, &st);                         /* 1 ENOENT */
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    struct stat st;

    int fd = open(p("a.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write(fd, "hello\n", 6);
    pwrite(fd, "HELLO", 5, 0);
    struct iovec iov[2] = {{"ab", 2}, {"cd\n", 3}};
    writev(fd, iov, 2);
    fsync(fd);
    fdatasync(fd);
    ftruncate(fd, 11);
    fchmod(fd, 0600);
    close(fd);
    close(fd);                                 /* EBADF */

    fd = open(p("a.txt"), O_RDONLY);
    char buf[64];
    read(fd, buf, sizeof buf);
    lseek(fd, 0, SEEK_SET);
    pread(fd, buf, 4, 2);
    struct iovec riov[2] = {{buf, 3}, {buf + 3, 3}};
    readv(fd, riov, 2);
    fstat(fd, &st);
    int d1 = dup(fd);
    int d2 = dup2(fd, 20);
    int d3 = dup3(fd, 21, O_CLOEXEC);
    int d4 = fcntl(fd, F_DUPFD_CLOEXEC, 30);
    fcntl(d4, F_SETFD, 0);
    close(d1); close(d2); close(d3); close(d4);

    int out = open(p("copy.txt"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    off_t off = 0;
    sendfile(out, fd, &off, 5);
    loff_t in_off = 0;
    copy_file_range(fd, &in_off, out, NULL, 3, 0);
    close(out);
    close(fd);

    open(p("missing/x"), O_RDONLY);           /* ENOENT */
    stat(p("missing"), &st);                   /* ENOENT */
    lstat(p("a.txt"), &st);
    access(p("a.txt"), R_OK);
    access(p("missing"), F_OK);                /* ENOENT */
    faccessat(AT_FDCWD, p("a.txt"), W_OK, 0);

    mkdir(p("sub"), 0755);
    mkdir(p("sub"), 0755);                     /* EEXIST */
    int dfd = open(p("sub"), O_RDONLY | O_DIRECTORY);
    int rel = openat(dfd, "rel.txt", O_WRONLY | O_CREAT, 0600);
    close(rel);
    fstatat(dfd, "rel.txt", &st, 0);
    renameat(dfd, "rel.txt", dfd, "moved.txt");
    unlinkat(dfd, "moved.txt", 0);
    close(dfd);

    DIR *dp = opendir(dir);
    while (readdir(dp)) {}
    closedir(dp);

    symlink("a.txt", p("link"));
    char lbuf[256];
    readlink(p("link"), lbuf, sizeof lbuf);
    readlink(p("a.txt"), lbuf, sizeof lbuf);   /* EINVAL: not a link */
    link(p("a.txt"), p("hard"));
    rename(p("hard"), p("hard2"));
    unlink(p("hard2"));
    unlink(p("link"));
    unlink(p("never"));                        /* ENOENT */
    chmod(p("a.txt"), 0644);
    truncate(p("copy.txt"), 2);
    utimensat(AT_FDCWD, p("a.txt"), NULL, 0);

    chdir(p("sub"));
    stat("../a.txt", &st);                     /* relative to the new cwd */
    int here = open(".", O_RDONLY);
    chdir("/");
    fchdir(here);
    close(here);
    chdir(dir);
    rmdir(p("sub"));

    int pfd[2];
    pipe(pfd);
    write(pfd[1], "through a pipe\n", 15);
    read(pfd[0], buf, sizeof buf);
    close(pfd[0]);
    close(pfd[1]);

    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p("nosock"));
    connect(s, (struct sockaddr *)&sa, sizeof sa);   /* ENOENT */
    close(s);

    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thread_main, NULL);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);

    pid_t pid = fork();
    if (pid == 0) {
        stat(p("a.txt"), &st);
        stat(p("missing"), &st);               /* ENOENT in the child */
        execl("/bin/true", "true", "from-child", (char *)NULL);
        _exit(99);
    }
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;

    unlink(p("a.txt"));
    unlink(p("copy.txt"));
    return 0;
}
