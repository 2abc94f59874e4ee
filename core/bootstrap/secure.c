/* Secure by default: a rendezvous that other hosts can reach needs a job key.
 *
 * The job key is what keeps a stranger who can reach rank 0's port from
 * joining the job (and from reading what the bootstrap exchanges).  A key
 * derived from the launcher's job id keeps jobs apart but is no secret, so
 * it is only good enough where nobody else can connect: on loopback.  Any
 * other rendezvous address without BRAID_JOB_KEY is refused at init, on
 * every rank, with the recipe for a key. */
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "bootstrap/bootstrap.h"
#include "util/log.h"

static int addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a =
            &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

int braid_host_is_loopback(const char *host)
{
    struct addrinfo  hints = {.ai_family   = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM};
    struct addrinfo *res   = NULL;
    if (host == NULL || *host == '\0')
        return 0; /* the wildcard address: every interface */
    /* A name that does not resolve counts as reachable: the safe answer,
     * and the connect would fail on it anyway. */
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    int all = res != NULL;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next)
        all = all && addr_is_loopback(ai->ai_addr);
    freeaddrinfo(res);
    return all;
}

braid_status_t braid_key_required_error(const char *host, int port,
                                        const char *from)
{
    return braid_error(
        BRAID_ERR_AUTH,
        "BRAID_JOB_KEY is not set, and the rendezvous %s%s%s:%d (%s) is "
        "reachable from other hosts: anyone who reaches it could join the "
        "job. Make one key per job (openssl rand -hex 16, or head -c16 "
        "/dev/urandom | xxd -p) and export the same BRAID_JOB_KEY on every "
        "host: torchrun, srun and braidrun pass it to the ranks, mpirun "
        "needs -x BRAID_JOB_KEY",
        strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", port,
        from);
}
