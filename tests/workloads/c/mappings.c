/* mappings: the code a process maps, for the trace's Mapping records.
 *
 *   mappings                 exits at once (its program, ld.so and libc are mapped)
 *   mappings LIBRARY FILE    dlopens LIBRARY, calls its plugin_probe(FILE) (a stat),
 *                            dlcloses it (its code is unmapped), then stats FILE again
 *   mappings fork            forks a child that exits at once, and waits for it */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 0;
    if (strcmp(argv[1], "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        int st;
        return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? 0 : 1;
    }
    if (argc < 3)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    long (*probe)(const char *) = (long (*)(const char *))dlsym(h, "plugin_probe");
    if (!probe)
        return 1;
    long size = probe(argv[2]);
    if (dlclose(h) != 0)
        return 1;
    struct stat st;
    return size >= 0 && stat(argv[2], &st) == 0 ? 0 : 1;
}
