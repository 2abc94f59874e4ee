/* One rank of the emulated-cluster tests (test_netns.sh): what this rank
 * learned about its hosts, what it would choose, and whether its data
 * really crossed the network.
 *
 *   netns_rank [-c BYTES]... [-t BYTES]
 *     prints "topology: <braid_comm_topology>",
 *     for each -c: "choice BYTES: <candidate>" (all-reduce of f32),
 *     with -t: runs an all-reduce of BYTES and prints "network: OK" when
 *     this rank sent at least what the algorithm must send to other hosts
 *     through its non-loopback interfaces (/proc/net/dev shows the
 *     counters of the rank's own network namespace), else "network: FAIL".
 * Exit status 0 unless braid fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>

/* Bytes sent by every interface of this namespace but lo. */
static unsigned long long tx_bytes(void)
{
    FILE              *f = fopen("/proc/net/dev", "r");
    char               line[512];
    unsigned long long sum = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *colon = strchr(line, ':');
        if (colon == NULL)
            continue;
        *colon                  = '\0';
        char              *name = line + strspn(line, " ");
        unsigned long long v[9];
        if (strcmp(name, "lo") == 0 ||
            sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
                   &v[8]) != 9)
            continue;
        sum += v[8];
    }
    fclose(f);
    return sum;
}

static int fail(const char *what)
{
    fprintf(stderr, "netns_rank: %s: %s\n", what, braid_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    braid_comm_t *comm;
    char          buf[1024], cand[96];
    size_t        traffic = 0;
    if (braid_init(&comm) != BRAID_OK)
        return fail("braid_init");
    if (braid_comm_topology(comm, buf, sizeof(buf)) != BRAID_OK)
        return fail("braid_comm_topology");
    printf("topology: %s\n", buf);
    for (int i = 1; i + 1 < argc; i += 2) {
        size_t bytes = strtoull(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "-t") == 0) {
            traffic = bytes;
            continue;
        }
        if (braid_comm_choice(comm, BRAID_COLL_ALLREDUCE, bytes, cand,
                              sizeof(cand), NULL, 0) != BRAID_OK)
            return fail("braid_comm_choice");
        printf("choice %zu: %s\n", bytes, cand);
    }
    if (traffic > 0) {
        size_t count = traffic / sizeof(float);
        float *x     = calloc(count, sizeof(float));
        if (x == NULL)
            return 1;
        unsigned long long before = tx_bytes();
        if (braid_allreduce(x, x, count, BRAID_F32, BRAID_SUM, comm) !=
            BRAID_OK)
            return fail("braid_allreduce");
        unsigned long long sent = tx_bytes() - before;
        /* Any all-reduce algorithm sends every other host at least its
         * share of this rank's data: half of it with two ranks, and at
         * least (n-1)/n of it on n hosts of one rank each. */
        printf("network: %s (%llu bytes sent for %zu)\n",
               sent >= traffic / 2 ? "OK" : "FAIL", sent, traffic);
        free(x);
    }
    fflush(stdout);
    return braid_finalize(comm) == BRAID_OK ? 0 : fail("braid_finalize");
}
