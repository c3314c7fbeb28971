/* attach_target: prints its pid, then stats PATH every 10 ms until file STOP exists;
 * used to attach to with dejavu record -p and detach again. Exits 0. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    printf("%d\n", (int)getpid());
    fflush(stdout);
    struct stat st;
    long n = 0;
    while (stat(argv[2], &st) != 0) {
        stat(argv[1], &st);
        n++;
        usleep(10000);
    }
    printf("%ld\n", n);
    return 0;
}
