/* A deterministic program for the strace import tests: it makes a known mix of the file,
 * descriptor and process calls dejavu traces (and some it does not), so that the counts
 * `strace -c` reports can be compared with the counts in an imported trace.
 * Usage: prog WORKDIR [signals]  ("signals" adds a timing-dependent interrupted read). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int pipefd[2];

static void *reader_thread(void *arg) {
    char buf[64];
    (void)arg;
    /* Blocks until the main thread writes: strace prints it unfinished/resumed. */
    ssize_t n = read(pipefd[0], buf, sizeof buf);
    struct stat st;
    stat("/", &st);
    return (void *)n;
}

static void on_usr1(int sig) { (void)sig; }

static void interrupted_read(void) {
    int p[2];
    if (pipe(p) != 0) return;
    pid_t c = fork();
    if (c == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGUSR1, &sa, NULL);
        char b[8];
        ssize_t n = read(p[0], b, sizeof b); /* interrupted by SIGUSR1, restarted */
        _exit(n == 3 ? 0 : 1);
    }
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    kill(c, SIGUSR1);
    nanosleep(&ts, NULL);
    if (write(p[1], "abc", 3) != 3) return;
    waitpid(c, NULL, 0);
    close(p[0]);
    close(p[1]);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *dir = argv[1];
    struct stat st;
    char buf[256];
    if (chdir(dir) != 0) return 3;

    /* Lookups: hits, misses, relative paths, repeated. */
    for (int i = 0; i < 3; i++) stat("/etc/passwd", &st);
    stat("does-not-exist", &st);
    lstat("./sub/../sub//x", &st);
    access("/etc/hostname", R_OK);
    access("missing", F_OK);
    faccessat(AT_FDCWD, "/etc", X_OK, AT_EACCESS);
    statx(AT_FDCWD, "/etc/passwd", AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &(struct statx){0});
    syscall(SYS_stat, "/etc/hostname", &st);
    syscall(SYS_lstat, "/tmp", &st);
    syscall(SYS_access, "/etc/hosts", F_OK);

    /* Namespace changes. */
    mkdir("sub", 0755);
    mkdir("sub", 0755); /* EEXIST */
    int fd = open("sub/file.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (write(fd, "hello\n", 6) != 6) return 4;
    const char *longline = "a line that is longer than strace's default string limit of 32\n";
    if (write(fd, longline, strlen(longline)) < 0) return 4;
    struct iovec iov[2] = {{"ab", 2}, {"cde\n", 4}};
    writev(fd, iov, 2);
    pwrite(fd, "Z", 1, 0);
    fsync(fd);
    fdatasync(fd);
    ftruncate(fd, 4);
    fchmod(fd, 0600);
    fchown(fd, getuid(), getgid());
    close(fd);
    truncate("sub/file.txt", 2);
    chmod("sub/file.txt", 0640);
    chown("sub/file.txt", getuid(), -1);
    lchown("sub/file.txt", -1, getgid());
    symlink("file.txt", "sub/link");
    readlink("sub/link", buf, sizeof buf);
    readlink("sub/file.txt", buf, sizeof buf); /* EINVAL */
    link("sub/file.txt", "sub/hard");
    rename("sub/hard", "sub/hard2");
    renameat2(AT_FDCWD, "sub/hard2", AT_FDCWD, "sub/hard3", RENAME_NOREPLACE);
    unlink("sub/hard3");
    utimensat(AT_FDCWD, "sub/file.txt", NULL, 0);
    int cfd = creat("sub/created", 0600);
    close(cfd);

    /* Append-mode file: payloads are recorded for it. */
    int afd = open("sub/log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    for (int i = 0; i < 3; i++) {
        if (write(afd, "log line \"quoted\"\t\\\001\n", 21) < 0) return 5;
    }
    close(afd);

    /* Reads, seeks, vectored and positioned I/O. */
    int rfd = openat(AT_FDCWD, "sub/log", O_RDONLY);
    read(rfd, buf, 10);
    pread(rfd, buf, 5, 3);
    char a[4], b[4];
    struct iovec riov[2] = {{a, 4}, {b, 4}};
    readv(rfd, riov, 2);
    preadv(rfd, riov, 2, 1);
    lseek(rfd, 0, SEEK_SET);
    lseek(rfd, 0, SEEK_END);
    fstat(rfd, &st);
    read(99, buf, 1); /* EBADF */
    int d1 = dup(rfd);
    dup2(rfd, 20);
    dup3(rfd, 21, O_CLOEXEC);
    fcntl(rfd, F_GETFL);
    fcntl(rfd, F_DUPFD_CLOEXEC, 30);
    close(d1);
    close(20);
    close(21);
    syscall(SYS_close_range, 30, 40, 0);

    /* Copies between descriptors. */
    int wfd = open("sub/copy", O_RDWR | O_CREAT | O_TRUNC, 0644);
    off_t off = 0;
    sendfile(wfd, rfd, &off, 8);
    copy_file_range(rfd, NULL, wfd, NULL, 4, 0);
    close(wfd);
    close(rfd);

    /* Directory listing and cwd changes. */
    DIR *dp = opendir(".");
    if (dp) {
        while (readdir(dp)) {
        }
        closedir(dp);
    }
    int dfd = open("sub", O_RDONLY | O_DIRECTORY);
    fchdir(dfd);
    stat("file.txt", &st); /* relative to the new cwd */
    chdir("..");

    fstatat(dfd, "file.txt", &st, 0);
    fstatat(dfd, "", &st, AT_EMPTY_PATH);
    unlinkat(dfd, "link", 0);
    mkdirat(dfd, "d2", 0700);
    unlinkat(dfd, "d2", AT_REMOVEDIR);
    rmdir("sub/nothere");
    close(dfd);

    /* Pipes, sockets, memfd, /dev/null. */
    int p2[2];
    pipe2(p2, O_CLOEXEC);
    if (write(p2[1], "x", 1) != 1) return 6;
    read(p2[0], buf, 1);
    splice(p2[0], NULL, p2[1], NULL, 1, SPLICE_F_NONBLOCK);
    close(p2[0]);
    close(p2[1]);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, "/nonexistent/socket");
    connect(s, (struct sockaddr *)&sun, sizeof sun);
    close(s);
    int m = memfd_create("dejavu-test", MFD_CLOEXEC);
    close(m);
    int nfd = open("/dev/null", O_WRONLY);
    for (int i = 0; i < 4; i++) {
        if (write(nfd, "discarded\n", 10) != 10) return 7;
    }
    close(nfd);

    /* A thread that blocks in read until the main thread writes. */
    if (pipe(pipefd) != 0) return 8;
    pthread_t t;
    pthread_create(&t, NULL, reader_thread, NULL);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (write(pipefd[1], "wake", 4) != 4) return 9;
    pthread_join(t, NULL);
    close(pipefd[0]);
    close(pipefd[1]);

    /* Children: fork + failed and successful execve, vfork, exit codes, a killed child. */
    pid_t c = fork();
    if (c == 0) {
        char *args[] = {"true", "--dejavu-arg", NULL};
        char *env[] = {NULL};
        execve("/nonexistent/true", args, env);
        execve("/bin/true", args, env);
        _exit(127);
    }
    waitpid(c, NULL, 0);
    c = vfork();
    if (c == 0) _exit(3);
    waitpid(c, NULL, 0);
    c = fork();
    if (c == 0) {
        stat("/", &st);
        kill(getpid(), SIGKILL);
        _exit(0);
    }
    waitpid(c, NULL, 0);

    if (argc > 2 && strcmp(argv[2], "signals") == 0) interrupted_read();

    unlink("sub/log");
    unlink("sub/copy");
    unlink("sub/created");
    unlink("sub/file.txt");
    rmdir("sub");
    printf("done\n");
    return 0;
}
