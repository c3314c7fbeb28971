/* reads_shadow: opens /etc/shadow 20 times (the permissions tests make a set-user-ID root
 * copy of it: a process that gains privileges its user lacks must not be recorded). */
#include <fcntl.h>
#include <unistd.h>

int main(void) {
    int opened = 0;
    for (int i = 0; i < 20; i++) {
        int fd = open("/etc/shadow", O_RDONLY);
        if (fd >= 0) {
            opened++;
            close(fd);
        }
    }
    return opened == 20 ? 0 : 1;
}
