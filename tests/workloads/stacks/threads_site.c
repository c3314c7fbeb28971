// threads_site.c: two threads stat one file, each from its own named function, so each
// thread's stack must name its own function (crates/dejavu/tests/stacks_native.rs).
//
// usage: threads_site FILE
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>

// noipa: identical bodies would otherwise be folded into one function (-fipa-icf at -O2),
// and both threads would rightly be reported in the same one.
__attribute__((noinline, noipa)) long worker_alpha_stat(const char *path) {
    struct stat st;
    int r = stat(path, &st); /* ALPHA_LINE */
    return r == 0 ? (long)st.st_size : -1;
}

__attribute__((noinline, noipa)) long worker_beta_stat(const char *path) {
    struct stat st;
    int r = stat(path, &st); /* BETA_LINE */
    return r == 0 ? (long)st.st_size : -2;
}

static void *alpha(void *path) { return (void *)worker_alpha_stat(path); }
static void *beta(void *path) { return (void *)worker_beta_stat(path); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: threads_site FILE\n");
        return 2;
    }
    pthread_t a, b;
    void *ra, *rb;
    // One after the other: each thread's stat is its own, whatever the scheduling.
    pthread_create(&a, NULL, alpha, argv[1]);
    pthread_join(a, &ra);
    pthread_create(&b, NULL, beta, argv[1]);
    pthread_join(b, &rb);
    printf("threads_site: %ld %ld\n", (long)ra, (long)rb);
    return 0;
}
