/* threads: T threads (default 8) each stat a path M times (default 1000): the counts
 * dejavu records must be exactly T*M, whatever the interleaving. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static int m;

static void *run(void *arg) {
    struct stat st;
    (void)arg;
    for (int i = 0; i < m; i++) stat("/tmp", &st);
    return NULL;
}

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 8;
    m = argc > 2 ? atoi(argv[2]) : 1000;
    pthread_t th[256];
    if (t > 256) t = 256;
    for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, run, NULL);
    for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
    printf("%d threads x %d stats\n", t, m);
    return 0;
}
