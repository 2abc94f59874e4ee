/* Rank, size and rendezvous from the launcher's environment. */
#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/channel.h"
#include "bootstrap/proto.h"
#include "util/env.h"
#include "util/log.h"
#include "util/siphash.h"

#define LOG_COMP "bootstrap"
#define MAX_SIZE (1 << 20)

braid_status_t braid_parse_job_key(const char *name, const char *value,
                                   uint8_t key[16])
{
    if (value == NULL || *value == '\0')
        return braid_error(BRAID_ERR_PARSE,
                           "%s='': empty value, expected 32 "
                           "hex digits",
                           name);
    size_t i, n = strlen(value);
    for (i = 0; value[i] != '\0' && i < 32; i++) {
        char c = value[i];
        int  d = (c >= '0' && c <= '9')   ? c - '0'
                 : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                 : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                          : -1;
        if (d < 0)
            return braid_error(BRAID_ERR_PARSE,
                               "%s='%s': unexpected '%s' at position %zu "
                               "(expected a hex digit)",
                               name, braid_quote(value, n, i).s,
                               braid_quote(value + i, 1, 0).s, i);
        if (i % 2 == 0)
            key[i / 2] = (uint8_t)(d << 4);
        else
            key[i / 2] |= (uint8_t)d;
    }
    if (i < 32)
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': ends at position %zu, "
                           "expected 32 hex digits",
                           name, braid_quote(value, n, i).s, i);
    if (value[32] != '\0')
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': unexpected '%s' at "
                           "position 32 (expected exactly 32 hex digits)",
                           name, braid_quote(value, n, 32).s,
                           braid_quote(value + 32, 1, 0).s);
    return BRAID_OK;
}

void braid_format_job_key(const uint8_t key[16], char hex[33])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        hex[2 * i]     = digits[key[i] >> 4];
        hex[2 * i + 1] = digits[key[i] & 15];
    }
    hex[32] = '\0';
}

/* A key derived from the launcher's job id is identity, not secrecy: anyone
 * who can read the job's environment, or guess its job id, can compute it.
 * It keeps two jobs (and stray connections) from joining each other's
 * rendezvous.  Jobs that span hosts on a shared network should set
 * BRAID_JOB_KEY to a random secret (braidrun always does). */
static void derive_key(const char *launcher, const char *job_id,
                       uint8_t key[16])
{
    static const uint8_t k_lo[16] = "braid-job-key/lo";
    static const uint8_t k_hi[16] = "braid-job-key/hi";
    char                 msg[200];
    int    n = snprintf(msg, sizeof(msg), "braid-v1|%s|%s", launcher, job_id);
    size_t len =
        n < 0 ? 0 : ((size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    braid_put_u64(key, braid_siphash24(k_lo, msg, len));
    braid_put_u64(key + 8, braid_siphash24(k_hi, msg, len));
}

static _Atomic int listen_fd_taken;

void braid_launch_listen_fd_taken(void) { listen_fd_taken = 1; }
int  braid_launch_listen_fd_was_taken(void) { return listen_fd_taken; }

/* Job ids name a file: anything but [A-Za-z0-9._-] becomes '_'. */
static void set_job_id(braid_launch_t *l, const char *id)
{
    size_t i;
    for (i = 0; id[i] != '\0' && i < sizeof(l->job_id) - 1; i++) {
        char c  = id[i];
        int  ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        l->job_id[i] = ok ? c : '_';
    }
    l->job_id[i] = '\0';
}

static braid_status_t required(const char *name, const char *why,
                               const char **value)
{
    *value = braid_env_get(name);
    if (*value == NULL)
        return braid_error(BRAID_ERR_PARSE, "%s is not set (%s)", name, why);
    return BRAID_OK;
}

/* Rank and size from a launcher's pair of variables (size_var2: an older
 * name for the size). */
static braid_status_t rank_size(braid_launch_t *l, const char *rank_var,
                                const char *size_var, const char *size_var2)
{
    const char    *rs = braid_env_get(rank_var);
    const char    *ss = braid_env_get(size_var);
    long long      rank, size;
    braid_status_t st;
    if (ss == NULL && size_var2 != NULL && braid_env_get(size_var2)) {
        size_var = size_var2;
        ss       = braid_env_get(size_var);
    }
    if (rs == NULL || ss == NULL)
        return braid_error(BRAID_ERR_PARSE,
                           "%s is not set, but %s is "
                           "(launcher: %s)",
                           rs ? size_var : rank_var, rs ? rank_var : size_var,
                           l->launcher);
    if ((st = braid_parse_int(rank_var, rs, 0, INT_MAX, &rank)) != BRAID_OK ||
        (st = braid_parse_int(size_var, ss, 1, MAX_SIZE, &size)) != BRAID_OK)
        return st;
    if (rank >= size)
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': rank %lld (at position "
                           "0) is not below %s=%lld",
                           rank_var, braid_quote(rs, strlen(rs), 0).s, rank,
                           size_var, size);
    l->rank = (int)rank;
    l->size = (int)size;
    return BRAID_OK;
}

/* "host:port" or "[v6-address]:port". */
static braid_status_t parse_addr(const char *name, const char *value,
                                 braid_launch_t *l)
{
    const char *colon, *host = value;
    size_t      hlen, n      = strlen(value);
    if (value[0] == '[') {
        const char *close = strchr(value, ']');
        if (close == NULL)
            return braid_error(BRAID_ERR_PARSE,
                               "%s='%s': '[' at position 0 "
                               "is never closed by ']'",
                               name, braid_quote(value, n, 0).s);
        size_t at = (size_t)(close + 1 - value);
        if (close[1] != ':')
            return braid_error(BRAID_ERR_PARSE,
                               "%s='%s': expected ':' at position %zu", name,
                               braid_quote(value, n, at).s, at);
        host  = value + 1;
        hlen  = (size_t)(close - host);
        colon = close + 1;
    } else {
        colon = strrchr(value, ':');
        if (colon == NULL)
            return braid_error(BRAID_ERR_PARSE,
                               "%s='%s': expected 'host:port', no ':' up to "
                               "position %zu",
                               name, braid_quote(value, n, n).s, n);
        hlen = (size_t)(colon - value);
    }
    size_t hpos = (size_t)(host - value);
    if (hlen == 0)
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': empty host at position %zu", name,
                           braid_quote(value, n, hpos).s, hpos);
    if (hlen >= sizeof(l->host))
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': host longer than %zu characters", name,
                           braid_quote(value, n, hpos).s, sizeof(l->host) - 1);
    size_t ppos = (size_t)(colon + 1 - value);
    if (colon[1] == '\0')
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': expected a port at "
                           "position %zu",
                           name, braid_quote(value, n, ppos).s, ppos);
    for (size_t i = ppos; value[i] != '\0'; i++) {
        if (value[i] < '0' || value[i] > '9')
            return braid_error(BRAID_ERR_PARSE,
                               "%s='%s': unexpected '%s' at "
                               "position %zu (expected a port number)",
                               name, braid_quote(value, n, i).s,
                               braid_quote(value + i, 1, 0).s, i);
    }
    long long port = atoll(colon + 1);
    if (strlen(colon + 1) > 5 || port < 1 || port > 65535)
        return braid_error(BRAID_ERR_PARSE,
                           "%s='%s': port at position %zu is "
                           "out of range [1, 65535]",
                           name, braid_quote(value, n, ppos).s, ppos);
    memcpy(l->host, host, hlen);
    l->host[hlen] = '\0';
    l->port       = (int)port;
    return BRAID_OK;
}

static int env_count(const char *name)
{
    const char *v = braid_env_get(name);
    long long   n = 0;
    /* Informational only: a malformed count is not our business. */
    if (v == NULL || braid_parse_int(name, v, 0, INT_MAX, &n) != BRAID_OK) {
        braid_error_clear();
        return 0;
    }
    return (int)n;
}

braid_status_t braid_launch_from_env(braid_launch_t *l)
{
    braid_status_t st;
    const char    *v;
    const char    *addr    = braid_env_get("BRAID_ADDR");
    int            hosts   = 1;    /* > 1: the launcher spans hosts */
    const char    *master  = NULL; /* torchrun's MASTER_ADDR */
    char           id[128] = "";

    memset(l, 0, sizeof(*l));
    l->rank      = 0;
    l->size      = 1;
    l->listen_fd = -1;

    if (braid_env_get("BRAID_RANK") || braid_env_get("BRAID_SIZE")) {
        snprintf(l->launcher, sizeof(l->launcher), "braidrun");
        if ((st = rank_size(l, "BRAID_RANK", "BRAID_SIZE", NULL)) != BRAID_OK)
            return st;
        if (addr != NULL)
            snprintf(id, sizeof(id), "%s", addr);
    } else if (braid_env_get("OMPI_COMM_WORLD_RANK") ||
               braid_env_get("OMPI_COMM_WORLD_SIZE")) {
        snprintf(l->launcher, sizeof(l->launcher), "mpirun");
        st =
            rank_size(l, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL);
        if (st != BRAID_OK)
            return st;
        /* Open MPI 4.1 (checked with Debian's 4.1.4) gives every rank
         * OMPI_MCA_ess_base_jobid and PMIX_NAMESPACE; 5.x only the latter.
         * Failing both, the ranks on one host share mpirun or orted as
         * their parent. */
        if ((v = braid_env_get("OMPI_MCA_ess_base_jobid")) != NULL ||
            (v = braid_env_get("PMIX_NAMESPACE")) != NULL)
            snprintf(id, sizeof(id), "%s", v);
        else
            snprintf(id, sizeof(id), "ppid%ld", (long)getppid());
        hosts = env_count("OMPI_MCA_orte_num_nodes");
    } else if (braid_env_get("SLURM_PROCID")) {
        snprintf(l->launcher, sizeof(l->launcher), "srun");
        st = rank_size(l, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS");
        if (st != BRAID_OK)
            return st;
        const char *job  = braid_env_get("SLURM_JOB_ID");
        const char *step = braid_env_get("SLURM_STEP_ID");
        if (step == NULL)
            step = braid_env_get("SLURM_STEPID");
        if (job != NULL)
            snprintf(id, sizeof(id), "%s.%s", job, step ? step : "0");
        else
            snprintf(id, sizeof(id), "ppid%ld", (long)getppid());
        hosts = env_count("SLURM_STEP_NUM_NODES");
    } else if (braid_env_get("RANK") && braid_env_get("WORLD_SIZE")) {
        /* MASTER_PORT is torch's (torchrun.c): under torchrun's static
         * rendezvous (TORCHELASTIC_USE_AGENT_STORE=True) the agent's
         * TCPStore holds it; otherwise it is free, or init_process_group
         * put a store there. */
        snprintf(l->launcher, sizeof(l->launcher), "torchrun");
        if ((st = rank_size(l, "RANK", "WORLD_SIZE", NULL)) != BRAID_OK)
            return st;
        master = braid_env_get("MASTER_ADDR");
        v      = braid_env_get("TORCHELASTIC_USE_AGENT_STORE");
        l->rdv = v != NULL && strcmp(v, "True") == 0 ? BRAID_RDV_STORE
                                                     : BRAID_RDV_PROBE;
        /* A restarted worker group must not read the old group's
         * address. */
        if ((v = braid_env_get("TORCHELASTIC_RUN_ID")) != NULL)
            snprintf(id, sizeof(id), "%s.%s", v,
                     braid_env_get("TORCHELASTIC_RESTART_COUNT")
                         ? getenv("TORCHELASTIC_RESTART_COUNT")
                         : "0");
        else if (master != NULL)
            snprintf(id, sizeof(id), "%s:%s", master,
                     braid_env_get("MASTER_PORT") ? getenv("MASTER_PORT")
                                                  : "");
    } else {
        snprintf(l->launcher, sizeof(l->launcher), "single");
    }
    set_job_id(l, id);

    snprintf(l->rank_from, sizeof(l->rank_from), "%s",
             !strcmp(l->launcher, "braidrun")   ? "BRAID_RANK/BRAID_SIZE"
             : !strcmp(l->launcher, "mpirun")   ? "OMPI_COMM_WORLD_RANK/SIZE"
             : !strcmp(l->launcher, "srun")     ? "SLURM_PROCID/SLURM_NTASKS"
             : !strcmp(l->launcher, "torchrun") ? "RANK/WORLD_SIZE"
                                                : "no launcher variables");

    /* Where rank 0 is. */
    if (addr != NULL) {
        if ((st = parse_addr("BRAID_ADDR", addr, l)) != BRAID_OK)
            return st;
        l->rdv = BRAID_RDV_BY_HOST; /* rank 0 listens there, whoever ran us */
        snprintf(l->addr_from, sizeof(l->addr_from), "BRAID_ADDR");
    } else if (l->size > 1 && strcmp(l->launcher, "torchrun") == 0) {
        const char *port;
        long long   p;
        if ((st = required("MASTER_ADDR",
                           "torchrun-style RANK/WORLD_SIZE "
                           "need it, or BRAID_ADDR",
                           &master)) != BRAID_OK ||
            (st = required("MASTER_PORT",
                           "torchrun-style RANK/WORLD_SIZE "
                           "need it, or BRAID_ADDR",
                           &port)) != BRAID_OK ||
            (st = braid_parse_int("MASTER_PORT", port, 1, 65535, &p)) !=
                BRAID_OK)
            return st;
        if (strlen(master) >= sizeof(l->host))
            return braid_error(BRAID_ERR_PARSE,
                               "MASTER_ADDR='%s': "
                               "longer than %zu characters",
                               braid_quote(master, strlen(master), 0).s,
                               sizeof(l->host) - 1);
        snprintf(l->host, sizeof(l->host), "%s", master);
        l->port = (int)p;
        snprintf(l->addr_from, sizeof(l->addr_from),
                 "MASTER_ADDR/"
                 "MASTER_PORT%s",
                 l->rdv == BRAID_RDV_STORE ? ", torchrun's store" : "");
    } else if (l->size > 1 && strcmp(l->launcher, "braidrun") == 0) {
        return braid_error(BRAID_ERR_PARSE,
                           "BRAID_ADDR is not set (BRAID_RANK"
                           " and BRAID_SIZE=%d are: rank 0's host:port is "
                           "needed)",
                           l->size);
    } else if (l->size > 1 && hosts > 1) {
        return braid_error(BRAID_ERR_NOT_SUPPORTED,
                           "%s spans %d hosts but "
                           "gives no rendezvous address: set BRAID_ADDR=host:"
                           "port (where rank 0 will listen) and BRAID_JOB_KEY "
                           "(32 hex digits) for every rank",
                           l->launcher, hosts);
    }

    if ((v = braid_env_get("BRAID_IFADDR")) != NULL) {
        unsigned char buf[sizeof(struct in6_addr)];
        if (inet_pton(AF_INET, v, buf) != 1 &&
            inet_pton(AF_INET6, v, buf) != 1)
            return braid_error(BRAID_ERR_PARSE,
                               "BRAID_IFADDR='%s': not a "
                               "numeric IPv4 or IPv6 address (from position "
                               "0)",
                               braid_quote(v, strlen(v), 0).s);
        if (strlen(v) >= sizeof(l->ifaddr))
            return braid_error(BRAID_ERR_PARSE, "BRAID_IFADDR='%s': too long",
                               braid_quote(v, strlen(v), 0).s);
        snprintf(l->ifaddr, sizeof(l->ifaddr), "%s", v);
    }
    if ((v = braid_env_get("BRAID_RENDEZVOUS_DIR")) != NULL) {
        if (strlen(v) >= sizeof(l->rendezvous_dir))
            return braid_error(BRAID_ERR_PARSE,
                               "BRAID_RENDEZVOUS_DIR='%s': longer "
                               "than %zu characters",
                               braid_quote(v, strlen(v), 0).s,
                               sizeof(l->rendezvous_dir) - 1);
        snprintf(l->rendezvous_dir, sizeof(l->rendezvous_dir), "%s", v);
    }

    /* The job key. */
    if ((v = braid_env_get("BRAID_JOB_KEY")) != NULL) {
        if ((st = braid_parse_job_key("BRAID_JOB_KEY", v, l->key)) != BRAID_OK)
            return st;
        l->key_set = 1;
    } else if (l->host[0] == '\0') {
        l->key_set = 0; /* rank 0 draws one for the rendezvous file */
    } else if (l->size > 1 && !braid_host_is_loopback(l->host)) {
        return braid_key_required_error(l->host, l->port, l->addr_from);
    } else {
        derive_key(l->launcher, l->job_id, l->key);
        l->key_set = 1;
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
                  "BRAID_JOB_KEY not set: key "
                  "derived from the %s job id '%s' (identity, not secrecy: "
                  "fine on loopback)",
                  l->launcher, l->job_id);
    }

    /* braidrun's pre-bound listening socket, for rank 0 only. */
    if ((v = braid_env_get("BRAID_LISTEN_FD")) != NULL) {
        long long fd;
        if ((st = braid_parse_int("BRAID_LISTEN_FD", v, 0, INT_MAX, &fd)) !=
            BRAID_OK)
            return st;
        if (l->rank == 0 && l->size > 1 &&
            !braid_launch_listen_fd_was_taken()) {
            l->has_listen_fd = 1;
            l->listen_fd     = (int)fd;
        }
    }
    return BRAID_OK;
}
