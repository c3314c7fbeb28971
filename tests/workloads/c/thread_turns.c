/* thread_turns: T threads (default 8), all alive at once (each on a stack of its own), take
 * turns: thread i waits for its turn, calls probe(PATH) M times (default 50), passes the
 * turn on (the first thread after a pause of P ms, default 0), then waits until every
 * thread has had its turn before it ends. For the test of
 * the eBPF backend's stack cache across stacks (crates/dejavu/tests/ebpf.rs): the same code
 * on another thread's stack is the same stack; the calls name probe and run.
 *
 * usage: thread_turns PATH [T [M [P]]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

static const char *path;
static int t, m, pause_ms, turn;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

__attribute__((noinline)) static int probe(const char *p) {
    struct stat st;
    return stat(p, &st);
}

static void *run(void *arg) {
    int me = (int)(long)arg;
    pthread_mutex_lock(&mu);
    while (turn != me) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < m; i++) probe(path);
    if (me == 0 && pause_ms > 0) {
        struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&mu);
    turn++;
    pthread_cond_broadcast(&cv);
    while (turn < t) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: thread_turns PATH [T [M [P]]]\n");
        return 2;
    }
    path = argv[1];
    t = argc > 2 ? atoi(argv[2]) : 8;
    m = argc > 3 ? atoi(argv[3]) : 50;
    pause_ms = argc > 4 ? atoi(argv[4]) : 0;
    if (t < 1 || t > 256) t = 8;
    pthread_t th[256];
    for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, run, (void *)(long)i);
    for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
    printf("%d threads x %d stats\n", t, m);
    return 0;
}
