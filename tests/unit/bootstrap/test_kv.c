/* Rendezvous through a key-value store (braid_bootstrap_init_kv): a store
 * made of files in a temporary folder stands in for the caller's (torch's
 * Store in the torch backend).  On loopback rank 0 publishes a fresh key; on
 * an address other hosts can reach it refuses to start without
 * BRAID_JOB_KEY, and the others learn why from the store at once. */
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/stat.h>

#include "bs_test.h"

static char dir[64];

static void path_of(char *out, size_t n, const char *key)
{
    int k = snprintf(out, n, "%s/", dir);
    for (const char *p = key; *p && (size_t)k + 1 < n; p++)
        out[k++] = *p == '/' ? '_' : *p;
    out[k] = '\0';
}

static int fkv_set(void *ctx, const char *key, const void *value, size_t len,
                   char *err, size_t errlen)
{
    (void)ctx;
    char path[256], tmp[300];
    path_of(path, sizeof(path), key);
    snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fwrite(value, 1, len, f) != len || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s", path);
        return -1;
    }
    return 0;
}

static long fkv_get(void *ctx, const char *key, void *value, size_t cap,
                    char *err, size_t errlen)
{
    (void)ctx;
    char path[256];
    path_of(path, sizeof(path), key);
    for (double end = test_now() + 10; test_now() < end; test_sleep(0.01)) {
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        char   buf[1024];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        memcpy(value, buf, n < cap ? n : cap);
        return (long)n;
    }
    snprintf(err, errlen, "no key %s after 10 s", key);
    return -1;
}

static const braid_kv_t fkv = {NULL, fkv_set, fkv_get, NULL};

/* A numeric address of this host that is not loopback, or "". */
static void non_loopback(char *out, size_t n)
{
    struct ifaddrs *ifs, *i;
    out[0] = '\0';
    if (getifaddrs(&ifs) != 0)
        return;
    for (i = ifs; i != NULL && out[0] == '\0'; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
            continue;
        char host[64];
        if (getnameinfo(i->ifa_addr, sizeof(struct sockaddr_in), host,
                        sizeof(host), NULL, 0, NI_NUMERICHOST) == 0 &&
            !braid_host_is_loopback(host))
            snprintf(out, n, "%s", host);
    }
    freeifaddrs(ifs);
}

enum { OK_LOOPBACK, REFUSED, OK_WITH_KEY };
static int scenario;

static int rank_main(int rank, int size, void *arg)
{
    (void)arg;
    braid_bootstrap_t *bs = NULL;
    double             t0 = test_now();
    braid_status_t     st = braid_bootstrap_init_kv(rank, size, &fkv, &bs);
    double             dt = test_now() - t0;
    if (scenario == REFUSED) {
        const char *e = braid_last_error();
        RCHECK(bs == NULL && dt < 5.0); /* BRAID_TIMEOUT is 30 s */
        RCHECK(st == (rank == 0 ? BRAID_ERR_AUTH : BRAID_ERR_PEER));
        RCHECK(strstr(e, "BRAID_JOB_KEY is not set, and the rendezvous ") !=
               NULL);
        RCHECK(strstr(e, "(BRAID_IFADDR) is reachable from other hosts") !=
               NULL);
        RCHECK(rank == 0 ||
               strstr(e, "rank 0 failed before the rendezvous") != NULL);
        return 0;
    }
    RCHECK(st == BRAID_OK);
    int v = rank * 7, all[3];
    RCHECK(braid_bootstrap_allgather(bs, &v, all, sizeof(v)) == BRAID_OK);
    RCHECK(all[0] == 0 && all[1] == 7 && all[2] == 14);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* What rank 0 published: "braid1 host port key-or-dash". */
static void published(char *out, size_t n)
{
    char path[256];
    path_of(path, sizeof(path), "braid/rdv");
    FILE *f = fopen(path, "r");
    out[0]  = '\0';
    if (f != NULL) {
        size_t k = fread(out, 1, n - 1, f);
        out[k]   = '\0';
        fclose(f);
    }
}

static void run(const char *name)
{
    char cmd[128], value[256];
    snprintf(dir, sizeof(dir), "/tmp/braid-test-kv-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    double t0  = test_now();
    int    bad = test_fork_ranks(3, rank_main, NULL, 15.0, NULL);
    published(value, sizeof(value));
    if (scenario == OK_LOOPBACK) /* a fresh key travels with the address */
        CHECK(strncmp(value, "braid1 127.0.0.1 ", 17) == 0 &&
              strlen(value) > 17 + 32 && value[strlen(value) - 1] != '-');
    if (scenario == OK_WITH_KEY) /* the job key never does */
        CHECK(value[strlen(value) - 1] == '-');
    if (scenario == REFUSED)
        CHECK(strncmp(value, "error ", 6) == 0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    if (bad != 0) {
        fprintf(stderr, "%s: %d rank(s) failed\n", name, bad);
        test_failures++;
    } else {
        printf("%s: ok (%.2f s)\n", name, test_now() - t0);
    }
}

int main(void)
{
    char ip[64];
    test_set_timeout("30");
    unsetenv("BRAID_JOB_KEY");
    unsetenv("BRAID_IFADDR");
    scenario = OK_LOOPBACK;
    run("kv rendezvous on loopback, key drawn by rank 0");

    non_loopback(ip, sizeof(ip));
    if (ip[0] == '\0') {
        /* The refusal itself is also checked without binding anything, in
         * test_env (BRAID_ADDR, MASTER_ADDR). */
        printf("SKIP kv rendezvous on a non-loopback address: this host has "
               "none (tests/launcher/test_keyless.sh makes one)\n");
    } else {
        setenv("BRAID_IFADDR", ip, 1);
        scenario = REFUSED;
        run("kv rendezvous on a non-loopback address without a key: refused");
        setenv("BRAID_JOB_KEY", "00112233445566778899aabbccddeeff", 1);
        scenario = OK_WITH_KEY;
        run("kv rendezvous on a non-loopback address with BRAID_JOB_KEY");
    }
    if (test_failures == 0)
        printf("kv: all checks passed\n");
    return test_failures != 0;
}
