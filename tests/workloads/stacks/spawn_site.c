// spawn_site.c: runs a tool once per event from a known line of a named function, in the
// three ways C programs start processes, so that the exec's call site can be checked
// (crates/dejavu/tests/callsites.rs). The child of posix_spawn (and of vfork) runs on a
// stack of its own, a few frames of libc's: its exec's site is where the parent started it.
//
// usage: spawn_site MODE [N]
//   spawn   posix_spawnp("true --version") N times (what system(), popen, Rust's Command
//           and GNU make use)
//   fork    fork() then execlp("true") in the child, N times
//   vfork   vfork() then execlp("true") in the child, which runs on its parent's stack
//   system  system("true") N times (a shell per call)
//   once    the clean twin: runs the tool once and keeps its answer for the N events
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

__attribute__((noinline)) int tool_version_spawn(void) {
    pid_t pid;
    char *argv[] = {"true", "--version", NULL};
    if (posix_spawnp(&pid, "true", NULL, NULL, argv, environ) != 0) /* SPAWN_LINE */
        return -1;
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

__attribute__((noinline)) int tool_version_fork(void) {
    pid_t pid = fork(); /* FORK_LINE */
    if (pid == 0) {
        execlp("true", "true", "--version", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

__attribute__((noinline)) int tool_version_vfork(void) {
    pid_t pid = vfork();
    if (pid == 0) {
        execlp("true", "true", "--version", (char *)NULL); /* VFORK_EXEC_LINE */
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

__attribute__((noinline)) int tool_version_system(void) {
    int st = system("true --version"); /* SYSTEM_LINE */
    // Using the result after the call keeps it from becoming a tail call (which would
    // leave no frame of this function on the stack).
    return st == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: spawn_site spawn|fork|vfork|system|once [N]\n");
        return 2;
    }
    const char *mode = argv[1];
    int n = argc > 2 ? atoi(argv[2]) : 10;
    int sum = 0, kept = -1;
    for (int i = 0; i < n; i++) {
        if (strcmp(mode, "spawn") == 0)
            sum += tool_version_spawn();
        else if (strcmp(mode, "fork") == 0)
            sum += tool_version_fork();
        else if (strcmp(mode, "vfork") == 0)
            sum += tool_version_vfork();
        else if (strcmp(mode, "system") == 0)
            sum += tool_version_system();
        else {
            if (kept < 0)
                kept = tool_version_spawn();
            sum += kept;
        }
    }
    printf("spawn_site: %d runs, status sum %d\n", n, sum);
    return 0;
}
