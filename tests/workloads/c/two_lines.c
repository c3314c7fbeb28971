/* two_lines: a helper called from two lines of a loop, N times each (default 20000), the
 * lines taking turns. At the helper's stat the instruction and stack pointers are the same
 * for both lines; the callers' return addresses differ. For the test of the eBPF backend's
 * stack cache (crates/dejavu/tests/ebpf.rs): both stacks are kept for the one place, and
 * each call names its own line.
 *
 * usage: two_lines PATH [N] */
#include <stdlib.h>
#include <sys/stat.h>

__attribute__((noinline)) static int probe(const char *p) {
    struct stat st;
    return stat(p, &st);
}

int main(int argc, char **argv) {
    int n = argc > 2 ? atoi(argv[2]) : 20000, r = 0;
    for (int i = 0; i < n; i++) {
        r += probe(argv[1]); /* @line A */
        r += probe(argv[1]); /* @line B */
    }
    return r == 12345;
}
