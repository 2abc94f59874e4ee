/* Who each rank is.  Right after READY every rank sends the root one IDENT
 * message with its pid and host name, so that when the root loses a rank it
 * can say which process on which machine went away ("rank 3 (host n7, pid
 * 4242) was lost") instead of only a number.  Only the root keeps the table:
 * it is the one that detects losses and tells the others in the ABORT
 * frame's text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/channel.h"
#include "util/log.h"

braid_status_t braid_bs_ident_send(int fd, double deadline, const char *root)
{
    uint8_t msg[BRAID_BS_IDENT_LEN];
    char    host[256];
    memset(msg, 0, sizeof(msg));
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "?");
    host[sizeof(host) - 1] = '\0';
    braid_put_u32(msg, (uint32_t)getpid());
    /* Truncated, not NUL-terminated on the wire: the reader adds the NUL. */
    memcpy(msg + 4, host, strnlen(host, BRAID_BS_HOST_LEN));
    return braid_bs_send(fd, BRAID_BS_IDENT, msg, sizeof(msg), deadline, root);
}

braid_status_t braid_bs_ident_gather(braid_bootstrap_t *bs, double deadline)
{
    bs->idents = calloc((size_t)bs->size, sizeof(*bs->idents));
    if (bs->idents == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY,
                           "bootstrap identities of %d "
                           "ranks",
                           bs->size);
    bs->idents[0].pid = (long)getpid();
    if (gethostname(bs->idents[0].host, sizeof(bs->idents[0].host)) != 0)
        snprintf(bs->idents[0].host, sizeof(bs->idents[0].host), "?");
    bs->idents[0].host[sizeof(bs->idents[0].host) - 1] = '\0';
    for (int r = 1; r < bs->size; r++) {
        uint8_t           msg[BRAID_BS_IDENT_LEN];
        char              peer[32];
        braid_bs_ident_t *id = &bs->idents[r];
        snprintf(peer, sizeof(peer), "rank %d", r);
        braid_status_t st = braid_bs_recv(bs->fds[r], BRAID_BS_IDENT, msg,
                                          sizeof(msg), deadline, peer);
        if (st != BRAID_OK)
            return st;
        id->pid = (long)braid_get_u32(msg);
        /* An authenticated peer, but its text still ends up in messages and
         * logs: keep printable characters only. */
        size_t n = 0;
        for (size_t i = 0; i < BRAID_BS_HOST_LEN && msg[4 + i] != 0; i++) {
            uint8_t c     = msg[4 + i];
            id->host[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
        }
        id->host[n] = '\0';
    }
    return BRAID_OK;
}

const char *braid_bs_rank_desc(const braid_bootstrap_t *bs, int r, char *buf,
                               size_t len)
{
    const braid_bs_ident_t *id =
        bs->idents != NULL && r >= 0 && r < bs->size ? &bs->idents[r] : NULL;
    if (id == NULL || id->pid == 0)
        snprintf(buf, len, "rank %d", r);
    else
        snprintf(buf, len, "rank %d (host %s, pid %ld)", r,
                 id->host[0] ? id->host : "?", id->pid);
    return buf;
}
