// dlopen_site.c: stats a file from a library it loads with dlopen.
//
// usage: dlopen_site LIBRARY FILE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: dlopen_site LIBRARY FILE\n");
        return 2;
    }
    // A call libc makes before the dlopen: the unwinder has read the mappings (libc
    // included) by then, so the library's code is new to it when it makes its call.
    if (access(argv[1], R_OK) != 0) {
        perror("access");
        return 1;
    }
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    long (*probe)(const char *) = (long (*)(const char *))dlsym(h, "plugin_probe");
    if (!probe) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    printf("dlopen_site: %ld\n", probe(argv[2]));
    return 0;
}
