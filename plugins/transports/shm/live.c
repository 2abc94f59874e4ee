/* Whether peer processes still exist.
 *
 * Shared memory outlives a dead writer without a sound, so a rank whose peer
 * died would wait for the whole BRAID_TIMEOUT.  Each rank leaves its pid in
 * its fifo segment; a waiting rank looks at its peers about once a second.
 * Pids mean something only inside one pid namespace, so peers in another one
 * (a container sharing /dev/shm) are left to the timeout. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

#define LIVE_CHECK_S 1.0

void braid_shm_live_init(braid_shm_hdr_t *hdr)
{
    struct stat sb;

    hdr->pid   = (int64_t)getpid();
    hdr->pidns = stat("/proc/self/ns/pid", &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

/* A zombie still answers kill(pid, 0); its state in /proc says it is gone. */
static int is_zombie(int64_t pid)
{
    char   path[64], buf[512];
    FILE  *f;
    char  *paren;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
    f = fopen(path, "re");
    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    paren  = strrchr(buf, ')'); /* the command name may hold anything */
    return paren != NULL && paren[1] == ' ' &&
           (paren[2] == 'Z' || paren[2] == 'X');
}

static int is_alive(int64_t pid)
{
    if (pid <= 0) {
        return 1; /* unknown: leave it to the timeout */
    }
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
        return 0;
    }
    return !is_zombie(pid);
}

braid_status_t braid_shm_live_check(braid_shm_comm_t *comm)
{
    double now;

    if (comm->lost_peer < 0) {
        now = comm->svc->now();
        if (now - comm->last_live_check < LIVE_CHECK_S) {
            return BRAID_OK;
        }
        comm->last_live_check = now;
        for (int p = 0; p < comm->size && comm->lost_peer < 0; p++) {
            const braid_shm_hdr_t *h = comm->fifo.base[p];
            if (p == comm->rank || h->pidns == 0 ||
                h->pidns != comm->hdr->pidns) {
                continue;
            }
            if (!is_alive(h->pid)) {
                comm->lost_peer = p;
            }
        }
        if (comm->lost_peer < 0) {
            return BRAID_OK;
        }
    }
    return comm->svc->error(
        BRAID_ERR_PEER,
        "shm: rank %d: rank %d (pid %lld) "
        "has exited",
        comm->rank, comm->lost_peer,
        (long long)((const braid_shm_hdr_t *)comm->fifo.base[comm->lost_peer])
            ->pid);
}
