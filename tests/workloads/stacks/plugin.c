// plugin.c: a shared library loaded with dlopen by dlopen_site.c after the program has
// started, so its code is in no mapping the unwinder saw at the first stop.
#include <sys/stat.h>

__attribute__((noinline)) long plugin_probe(const char *path) {
    struct stat st;
    int r = stat(path, &st); /* PLUGIN_LINE */
    return r == 0 ? (long)st.st_size : -1;
}
