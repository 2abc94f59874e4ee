/* The progress board: one shared page per host and communicator, where each
 * rank records the calls it enters and completes (sig.h, braid_progress_t).
 *
 * A rank that is stopped or stuck cannot say how far it got, but its host
 * mates can read it here: the failure inquiry (comm/inquiry.c) reports
 * "rank 3 (host h, pid p) does not answer (process stopped; in call #17)"
 * from it, and ranks that lost their rank 0 (and with it the out-of-band
 * channel) still agree on the failed call from it.  Recording costs a few
 * stores per call to this rank's own cache lines, which nobody reads while
 * all is well.
 *
 * The host's lowest rank creates the segment under a fresh name (uid, pid
 * and random bits, O_EXCL), the names travel in an out-of-band allgather,
 * the others map it, and after a barrier the creator unlinks the name: from
 * then on it lives only in the mappings, and a rank that dies leaves
 * nothing in /dev/shm.  Without a board (one rank per host, or a segment
 * that cannot be made) each rank records into private memory, and only
 * what ranks say for themselves is known. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm.h"
#include "util/log.h"

#define LOG_COMP "comm"
#define NAME_LEN 64

typedef struct board_name {
    char name[NAME_LEN]; /* "" when this rank created nothing */
} board_name_t;

/* Position of rank r among the ranks of its host, in rank order. */
static int local_index(const braid_comm_t *comm, int r)
{
    int i = 0;
    for (int q = 0; q < r; q++)
        i += comm->node_of_rank[q] == comm->node_of_rank[r];
    return i;
}

static int local_count(const braid_comm_t *comm)
{
    int n = 0;
    for (int q = 0; q < comm->size; q++)
        n += comm->node_of_rank[q] == comm->node_of_rank[comm->rank];
    return n;
}

/* The creator's side: a fresh segment of len bytes, mapped. */
static void *create(char name[NAME_LEN], size_t len)
{
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
        rnd = (uint64_t)(uintptr_t)&rnd ^ (uint64_t)getpid() << 32;
    snprintf(name, NAME_LEN, "/braid-board-%u-%ld-%016llx", (unsigned)getuid(),
             (long)getpid(), (unsigned long long)rnd);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        goto fail;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)len) == 0)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);
    if (p != MAP_FAILED)
        return p;
    shm_unlink(name);
    errno = err;
fail:
    BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
              "no progress board (%s: %s): a "
              "stuck rank's last call is then unknown to its peers",
              name, strerror(errno));
    name[0] = '\0';
    return NULL;
}

static void *attach(const char *name, size_t len)
{
    struct stat sb;
    void       *p  = MAP_FAILED;
    int         fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size == len)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

braid_status_t braid_board_open(braid_comm_t *comm)
{
    braid_status_t st     = BRAID_OK;
    board_name_t  *names  = NULL;
    board_name_t   mine   = {{0}};
    int            leader = local_index(comm, comm->rank) == 0;

    if (comm->topo.ppn > 1) {
        size_t len = (size_t)local_count(comm) * sizeof(braid_progress_t);
        if (leader)
            comm->board = create(mine.name, len);
        names = calloc((size_t)comm->size, sizeof(*names));
        if (names == NULL)
            return braid_error(BRAID_ERR_NO_MEMORY, "progress board: out of "
                                                    "memory");
        st = braid_bootstrap_allgather(comm->bs, &mine, names, sizeof(mine));
        for (int r = 0; st == BRAID_OK && r < comm->size && !leader; r++) {
            names[r].name[NAME_LEN - 1] = '\0';
            if (comm->node_of_rank[r] == comm->node_of_rank[comm->rank] &&
                local_index(comm, r) == 0 && names[r].name[0] != '\0')
                comm->board = attach(names[r].name, len);
        }
        if (st == BRAID_OK)
            st = braid_bootstrap_barrier(comm->bs);
        if (leader && mine.name[0] != '\0')
            shm_unlink(mine.name);
        free(names);
        comm->board_len = comm->board != NULL ? len : 0;
    }
    if (comm->board != NULL) {
        comm->progress = &comm->board[local_index(comm, comm->rank)];
    } else {
        comm->progress = aligned_alloc(_Alignof(braid_progress_t),
                                       sizeof(braid_progress_t));
        if (comm->progress == NULL)
            return braid_error(BRAID_ERR_NO_MEMORY, "progress record: out of "
                                                    "memory");
        memset(comm->progress, 0, sizeof(braid_progress_t));
    }
    atomic_store_explicit(&comm->progress->pid, (int64_t)getpid(),
                          memory_order_relaxed);
    return st;
}

braid_progress_t *braid_board_slot(braid_comm_t *comm, int r)
{
    if (comm->board == NULL || r < 0 || r >= comm->size ||
        comm->node_of_rank[r] != comm->node_of_rank[comm->rank])
        return NULL;
    return &comm->board[local_index(comm, r)];
}

void braid_board_close(braid_comm_t *comm)
{
    if (comm->board != NULL)
        munmap(comm->board, comm->board_len);
    else
        free(comm->progress);
    comm->board    = NULL;
    comm->progress = NULL;
}
