// socketpair_dup2.c: rsync's shape. fd 1 starts as a file (out.log, opened here); the
// program then makes a socketpair (a call dejavu does not trace) and dup2s one end onto
// fd 1, and writes 50 small lines to it. The writes go to the socket: nothing may say
// they went to out.log (crates/dejavu/tests/detect_io.rs).
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
    int f = open("out.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f < 0 || dup2(f, 1) < 0)
        return 1;
    close(f);
    write(1, "start\n", 6);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    if (dup2(sv[0], 1) < 0)
        return 1;
    char buf[32];
    for (int i = 0; i < 50; i++) {
        int n = snprintf(buf, sizeof buf, "line %d\n", i);
        write(1, buf, (size_t)n);
        read(sv[1], buf, sizeof buf); // drain, so the socket never fills
    }
    return 0;
}
