/* Where an init failure happened, for its message: the host, the rank and
 * which launcher variables said so, and the rendezvous. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "util/log.h"

static void host_name(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0)
        snprintf(buf, len, "?");
    buf[len - 1] = '\0';
}

void braid_launch_describe(const braid_launch_t *l, char *buf, size_t len)
{
    char host[256];
    host_name(host, sizeof(host));
    int n = snprintf(buf, len, "host %s, rank %d of %d (%s)", host, l->rank,
                     l->size, l->rank_from[0] ? l->rank_from : l->launcher);
    if (n < 0 || (size_t)n >= len || l->size < 2)
        return;
    if (l->host[0] != '\0')
        snprintf(buf + n, len - (size_t)n, ", rendezvous %s%s%s:%d (%s)",
                 strchr(l->host, ':') ? "[" : "", l->host,
                 strchr(l->host, ':') ? "]" : "", l->port, l->addr_from);
    else
        snprintf(buf + n, len - (size_t)n, ", rendezvous file in %s (job %s)",
                 l->rendezvous_dir[0] ? l->rendezvous_dir : "/tmp", l->job_id);
}

braid_status_t braid_launch_failed(braid_status_t st, const braid_launch_t *l)
{
    char saved[1024], where[600];
    snprintf(saved, sizeof(saved), "%s", braid_last_error());
    if (l != NULL) {
        braid_launch_describe(l, where, sizeof(where));
    } else {
        char host[256];
        host_name(host, sizeof(host));
        snprintf(where, sizeof(where), "host %s", host);
    }
    return braid_error(st, "braid_init on %s: %s", where, saved);
}
