/* signals: exit/kill behaviours for the pass-through tests.
 *   signals exit N        exit with status N
 *   signals kill SIG      kill itself with signal SIG
 *   signals ignore-int F  ignore SIGINT, print "ready", wait until file F exists, exit 0
 *   signals handler       install a SIGUSR1 handler, raise it, exit 7 if it ran
 *   signals stopcont      stop itself with SIGSTOP until a child sends SIGCONT, exit 0 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_usr1(int s) { (void)s; got = 1; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "exit")) return atoi(argv[2]);
    if (!strcmp(argv[1], "kill")) {
        signal(atoi(argv[2]), SIG_DFL);
        raise(atoi(argv[2]));
        return 100;
    }
    if (!strcmp(argv[1], "ignore-int")) {
        signal(SIGINT, SIG_IGN);
        printf("ready\n");
        fflush(stdout);
        struct stat st;
        for (int i = 0; i < 3000 && stat(argv[2], &st) != 0; i++) usleep(10000);
        return 0;
    }
    if (!strcmp(argv[1], "handler")) {
        signal(SIGUSR1, on_usr1);
        raise(SIGUSR1);
        return got ? 7 : 1;
    }
    if (!strcmp(argv[1], "stopcont")) {
        pid_t me = getpid();
        pid_t c = fork();
        if (c == 0) {
            usleep(100000);
            kill(me, SIGCONT);
            _exit(0);
        }
        raise(SIGSTOP);
        waitpid(c, NULL, 0);
        return 0;
    }
    return 2;
}
