/* Helpers shared by the bw engines: CPU mates, per-call state. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bw.h"

int braid_bw_pipe_streams(braid_coll_t coll, int n, int ppn, double m)
{
    if (coll == BRAID_COLL_ALLGATHER)
        return 1;
    double own = coll == BRAID_COLL_ALLREDUCE ? 2.0 * m : (n + 1.0) * m;
    return (ppn >= 1 ? ppn : n) * own > (double)BRAID_BW_CACHE_BYTES;
}

int braid_bw_mates(unsigned char *mate, const braid_task_t *task)
{
    memset(mate, 0, (size_t)task->size);
    if (task->topo == NULL || task->svc == NULL ||
        !BRAID_HAS(task->svc, braid_services_t, cpu_mates) ||
        task->svc->cpu_mates == NULL)
        return -1;
    return task->svc->cpu_mates(task->topo, task->rank, mate);
}

int braid_bw_only_remote(const unsigned char *mate, int nmates,
                         const unsigned char *want, int n)
{
    if (nmates < 0)
        return 0;
    for (int r = 0; r < n && nmates > 0; r++)
        if (want[r] && mate[r])
            return 0;
    return 1;
}

braid_status_t braid_bw_priv_alloc(braid_task_t *task, size_t size)
{
    return task->svc->state_get(task, size, NULL); /* zeroed */
}

void braid_bw_priv_free(braid_task_t *task) { task->svc->state_put(task); }

void braid_bw_local_result(braid_task_t *task)
{
    size_t bytes = task->count * task->dtsize;
    char  *dst   = task->recvbuf;

    if (task->coll == BRAID_COLL_ALLGATHER)
        dst += (size_t)task->rank * bytes;
    if (bytes != 0 && dst != (const char *)task->sendbuf)
        memcpy(dst, task->sendbuf, bytes);
    if (task->coll != BRAID_COLL_ALLGATHER && task->count != 0)
        task->svc->finish_avg(dst, task->count, task->dtype, task->op, 1);
}

void *braid_bw_alloc(size_t bytes)
{
    size_t len = (bytes + BRAID_BW_LINE - 1) / BRAID_BW_LINE * BRAID_BW_LINE;
    void  *p   = aligned_alloc(BRAID_BW_LINE, len ? len : BRAID_BW_LINE);
    if (p != NULL)
        memset(p, 0, len ? len : BRAID_BW_LINE);
    return p;
}
