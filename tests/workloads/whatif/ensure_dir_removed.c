// whatif twin (seed 000's ensure-dir): per record, stat(DIR/chats) then mkdir(DIR/chats),
// ten records; after the fifth, a second process (this program re-executed with --rmdir)
// removes the directory, so the sixth record's mkdir creates it again.
// Usage: ensure_dir_removed DIR  |  ensure_dir_removed --rmdir DIR/chats
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static int ensure(const char *dir) {
    struct stat st;
    (void)stat(dir, &st); // existsSync(dir)
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--rmdir") == 0) return rmdir(argv[2]) == 0 ? 0 : 1;
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/chats", argv[1]);
    for (int i = 0; i < 10; i++) {
        if (i == 5) {
            pid_t pid = fork();
            if (pid == 0) {
                execl("/proc/self/exe", argv[0], "--rmdir", dir, (char *)NULL);
                _exit(127);
            }
            int status = 0;
            if (waitpid(pid, &status, 0) != pid || status != 0) return 1;
        }
        if (ensure(dir) != 0) {
            perror(dir);
            return 1;
        }
    }
    return 0;
}
