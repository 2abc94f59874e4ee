/* Splitting a bootstrap channel: every rank learns every (color, key) by a
 * parent allgather, each new group's first member by (key, parent rank)
 * becomes its root and listens on a new port of the interface the parent
 * channel uses, a second allgather tells the group where, and the members
 * join it with the parent's job key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/channel.h"
#include "bootstrap/proto.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "bootstrap"

#define COLOR_REC 8                       /* color i32, key i32 */
#define ADDR_REC  (4 + BRAID_ADDRSTR_LEN) /* port i32 (0: none), host */

typedef struct {
    int color, key, rank;
} member_t;

static int member_cmp(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : (x->rank > y->rank);
}

braid_status_t braid_bootstrap_split(braid_bootstrap_t *parent, int color,
                                     int key, braid_bootstrap_t **child)
{
    braid_status_t     st;
    uint8_t           *colors = NULL, *addrs = NULL;
    member_t          *group = NULL;
    braid_bootstrap_t *bs    = NULL;
    int                lfd = -1, n = 0, me = -1;
    uint8_t            rec[ADDR_REC];

    if (child == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "bootstrap split: NULL "
                                                  "output");
    *child = NULL;
    if (parent == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "bootstrap split: NULL "
                                                  "channel");
    int size = parent->size;
    colors   = malloc((size_t)size * COLOR_REC);
    addrs    = malloc((size_t)size * ADDR_REC);
    group    = malloc((size_t)size * sizeof(*group));
    if (colors == NULL || addrs == NULL || group == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "bootstrap split of %d ranks",
                         size);
        goto cleanup;
    }

    braid_put_u32(rec, (uint32_t)color);
    braid_put_u32(rec + 4, (uint32_t)key);
    st = braid_bootstrap_allgather(parent, rec, colors, COLOR_REC);
    if (st != BRAID_OK)
        goto cleanup;

    if (color != BRAID_UNDEFINED) {
        for (int r = 0; r < size; r++) {
            const uint8_t *rec_r = colors + (size_t)r * COLOR_REC;
            int            c     = (int)(int32_t)braid_get_u32(rec_r);
            if (c != color)
                continue;
            group[n++] =
                (member_t){.color = c,
                           .key   = (int)(int32_t)braid_get_u32(rec_r + 4),
                           .rank  = r};
        }
        qsort(group, (size_t)n, sizeof(*group), member_cmp);
        for (int i = 0; i < n; i++) {
            if (group[i].rank == parent->rank)
                me = i;
        }
    }

    /* Roots of groups of two or more listen; a root that cannot still takes
     * part in the allgather (port 0), so that its members fail at once
     * instead of timing out. */
    memset(rec, 0, sizeof(rec));
    braid_status_t listen_st = BRAID_OK;
    if (me == 0 && n > 1) {
        char host[BRAID_ADDRSTR_LEN];
        int  port = 0;
        listen_st = braid_sock_listen_like(braid_bs_any_fd(parent), &lfd, host,
                                           sizeof(host), &port);
        if (listen_st == BRAID_OK) {
            braid_put_u32(rec, (uint32_t)port);
            snprintf((char *)rec + 4, BRAID_ADDRSTR_LEN, "%s", host);
        }
    }
    st = braid_bootstrap_allgather(parent, rec, addrs, ADDR_REC);
    if (st == BRAID_OK)
        st = listen_st;
    if (st != BRAID_OK || me < 0)
        goto cleanup; /* BRAID_UNDEFINED: no child, *child stays NULL */

    if ((st = braid_bs_create(me, n, parent->key, &bs)) != BRAID_OK)
        goto cleanup;
    if (n > 1) {
        double deadline = braid_deadline_from_now();
        if (me == 0) {
            st = braid_bs_serve(bs, &lfd, NULL, deadline);
        } else {
            const uint8_t *a    = addrs + (size_t)group[0].rank * ADDR_REC;
            int            port = (int)braid_get_u32(a);
            char           host[BRAID_ADDRSTR_LEN];
            memcpy(host, a + 4, sizeof(host));
            host[sizeof(host) - 1] = '\0';
            if (port <= 0 || port > 65535)
                st = braid_error(BRAID_ERR_PEER,
                                 "bootstrap split: the new "
                                 "group's root (parent rank %d) could not "
                                 "open a listening socket",
                                 group[0].rank);
            else
                st = braid_bs_join(bs, host, port, deadline, deadline);
        }
    }

cleanup:
    braid_sock_close(&lfd);
    if (st != BRAID_OK) {
        braid_bootstrap_destroy(bs);
        bs = NULL;
    }
    *child = bs;
    free(colors);
    free(addrs);
    free(group);
    return st;
}
