#include <stdlib.h>
#include <string.h>

#include "algo_common.h"

#define SCRATCH_ALIGN 64 /* reduction kernels vectorise; keep them aligned */

static void *alloc_aligned(size_t bytes)
{
    void *p = NULL;

    if (posix_memalign(&p, SCRATCH_ALIGN, bytes ? bytes : 1) != 0) {
        return NULL;
    }
    return p;
}

braid_status_t braid_p2p_scratch_get(braid_p2p_buf_t *buf, braid_task_t *task,
                                     size_t bytes)
{
    braid_p2p_scratch_t *s = task->comm_state ? *task->comm_state : NULL;

    buf->ptr = NULL;
    buf->own = 0;
    if (bytes == 0) {
        return BRAID_OK;
    }
    if (task->comm_state != NULL && s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL) {
            goto nomem;
        }
        *task->comm_state = s;
    }
    if (s == NULL || s->busy) {
        buf->ptr = alloc_aligned(bytes);
        buf->own = 1;
        return buf->ptr ? BRAID_OK : task->svc->error(
            BRAID_ERR_NO_MEMORY, "p2p: out of memory for %zu bytes of "
            "scratch", bytes);
    }
    if (s->cap < bytes) {
        void *grown = alloc_aligned(bytes); /* contents need not survive */
        if (grown == NULL) {
            goto nomem;
        }
        free(s->buf);
        s->buf = grown;
        s->cap = bytes;
    }
    s->busy  = 1;
    buf->ptr = s->buf;
    return BRAID_OK;

nomem:
    return task->svc->error(BRAID_ERR_NO_MEMORY,
                            "p2p: out of memory for %zu bytes of scratch",
                            bytes);
}

void braid_p2p_scratch_put(braid_p2p_buf_t *buf, braid_task_t *task)
{
    if (buf->ptr == NULL) {
        return;
    }
    if (buf->own) {
        free(buf->ptr);
    } else {
        ((braid_p2p_scratch_t *)*task->comm_state)->busy = 0;
    }
    buf->ptr = NULL;
}

void braid_p2p_comm_state_free(void *state, braid_tl_t *tl)
{
    braid_p2p_scratch_t *s = state;

    (void)tl;
    if (s != NULL) {
        free(s->buf);
        free(s);
    }
}

braid_status_t braid_p2p_priv_alloc(braid_task_t *task, size_t size)
{
    task->priv = calloc(1, size);
    if (task->priv == NULL) {
        return task->svc->error(BRAID_ERR_NO_MEMORY,
                                "p2p: out of memory for %s state",
                                task->coll == BRAID_COLL_BARRIER ? "barrier"
                                                                 : "call");
    }
    return BRAID_OK;
}

void braid_p2p_priv_free(braid_task_t *task)
{
    free(task->priv);
    task->priv = NULL;
}

braid_status_t braid_p2p_send(braid_task_t *task, int peer, long step,
                              const void *buf, size_t len, braid_treq_t *req)
{
    uint64_t tag = BRAID_TAG_CHECKED(task->seq, step, braid_task_sig32(task));
    return task->tl->ops->isend(task->tl->tcomm, peer, tag, buf, len, req);
}

braid_status_t braid_p2p_recv(braid_task_t *task, int peer, long step,
                              void *buf, size_t len, braid_treq_t *req)
{
    uint64_t tag = BRAID_TAG_CHECKED(task->seq, step, braid_task_sig32(task));
    return task->tl->ops->irecv(task->tl->tcomm, peer, tag, buf, len, req);
}

braid_status_t braid_p2p_req_test(braid_task_t *task, braid_treq_t *req)
{
    if (!req->active) {
        return BRAID_OK;
    }
    return task->tl->ops->test(task->tl->tcomm, req);
}

braid_status_t braid_p2p_reqs_test(braid_task_t *task, braid_treq_t *reqs,
                                   int n)
{
    braid_status_t all = BRAID_OK;

    for (int i = 0; i < n; i++) {
        braid_status_t st = braid_p2p_req_test(task, &reqs[i]);
        if (st < 0) {
            return st;
        }
        if (st == BRAID_INPROGRESS) {
            all = BRAID_INPROGRESS;
        }
    }
    return all;
}

void braid_p2p_reqs_cancel(braid_task_t *task, braid_treq_t *reqs, int n)
{
    for (int i = 0; i < n; i++) {
        if (reqs[i].active) {
            task->tl->ops->cancel(task->tl->tcomm, &reqs[i]);
        }
    }
}

void braid_p2p_combine(braid_task_t *task, void *dst, const void *lower,
                       const void *higher, size_t count)
{
    if (count > 0) {
        task->svc->reduce2(dst, lower, higher, count, task->dtype, task->op);
    }
}

void braid_p2p_copy(braid_task_t *task, void *dst, const void *src,
                    size_t count)
{
    if (count > 0 && dst != src) {
        memcpy(dst, src, count * task->dtsize);
    }
}

int braid_p2p_pow2_floor(int n)
{
    int p = 1;

    while (p <= n / 2) {
        p *= 2;
    }
    return p;
}

int braid_p2p_log2_ceil(int n)
{
    int k = 0;

    while ((1L << k) < n) {
        k++;
    }
    return k;
}
