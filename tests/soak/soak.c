/* Soak: thousands of collectives of random kinds, sizes, dtypes, ops and
 * candidates on one set of ranks, every result checked, memory watched.
 *
 *   braidrun -n 4 soak [--iters N] [--seed S] [--max-count C]
 *
 * Candidates vary per call by keeping several communicators, each created
 * (by braid_comm_split) under a different BRAID_ALGO.  Every rank draws the
 * same random sequence, so all make the same calls.  Inputs are small
 * integers, so every dtype and op has one exact answer to compare with.
 * Memory is sampled after a warm-up, halfway and at the end.  The second
 * half replays the first half's calls (the same seed), so every buffer that
 * grows to the largest call it has seen -- scratch, a widened integer
 * average, a transport pool -- reached its high-water mark in the first
 * half; heap growth in the second half beyond a bound is a leak, which grows
 * there as it did before. */
#include <dirent.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <braid/braid.h>

#include "reference.h"

static const char *overrides[] = {
    "",
    "allreduce:ring@shm;reduce_scatter:ring@shm;allgather:ring@shm;"
    "broadcast:ring@shm;barrier:ring@shm",
    "allreduce:recdbl@ucx;reduce_scatter:recdbl@ucx;allgather:recdbl@ucx;"
    "broadcast:recdbl@ucx;barrier:recdbl@ucx",
    "allreduce:0-4M=oneshot@shm;reduce_scatter:0-4M=direct@shm;"
    "allgather:0-4M=direct@shm;broadcast:linear@shm",
    "allreduce:twoshot@ucx;allgather:ring@ucx;broadcast:ring@ucx",
};
#define NCOMMS (int)(sizeof(overrides) / sizeof(overrides[0]))

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
    x          = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x          = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Value of element i of rank r's input in call `it`: small, so sums of 8
 * ranks stay exact in every dtype (u8 included: 0..3 each). */
static int64_t input(uint64_t it, int r, size_t i, braid_op_t op)
{
    uint64_t h =
        (it * 1000003u + (uint64_t)r * 7919u + i) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    return op == BRAID_PROD ? 1 + (int64_t)(h % 2) : (int64_t)(h % 4);
}

/* The exact result of reducing element i over the ranks, in dtype dt,
 * from the tests' reference (tests/common/reference.h). */
static double expect_reduce(braid_dtype_t dt, uint64_t it, int n, size_t i,
                            braid_op_t op)
{
    int64_t   x   = input(it, 0, i, op);
    ref_val_t acc = {(double)x, x};
    for (int r = 1; r < n; r++) {
        int64_t v = input(it, r, i, op);
        acc       = ref_fold(dt, op, acc, (ref_val_t){(double)v, v});
    }
    acc = ref_finish(dt, op, acc, n);
    return ref_is_float(dt) ? acc.f : (double)acc.i;
}

/* What a leak would grow: heap bytes in use, mappings (segments, registered
 * areas), open file descriptors; and resident memory, for the report. */
typedef struct usage {
    long heap_kib, maps, fds, rss_kib; /* maps: shared-memory segments */
} usage_t;

/* Shared-memory segments mapped: every registered area of the shm
 * transport is one.  (All mappings would count the allocator's too, which
 * come and go with the sizes of large buffers.) */
static long count_segments(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char  line[4096];
    long  n = 0;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, "/dev/shm/") != NULL;
    fclose(f);
    return n;
}

static usage_t usage_now(void)
{
    usage_t          u  = {0, 0, 0, 0};
    struct mallinfo2 mi = mallinfo2();
    u.heap_kib          = (long)((mi.uordblks + mi.hblkhd) / 1024);
    u.maps              = count_segments();
    DIR *d              = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        u.fds += e->d_name[0] != '.';
    if (d)
        closedir(d);
    long  pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &rss) == 2)
        u.rss_kib = rss * (sysconf(_SC_PAGESIZE) / 1024);
    if (f)
        fclose(f);
    return u;
}

/* Every collective at one size, in place and not, unchecked; 0 on
 * success. */
static int warm_up(braid_comm_t *comm, char *send, char *recv, size_t count,
                   braid_dtype_t dt, int rank)
{
    size_t         blk = count * braid_dtype_size(dt) * (size_t)rank;
    braid_status_t st =
        braid_allreduce(send, recv, count, dt, BRAID_SUM, comm);
    if (st == BRAID_OK)
        st = braid_allreduce(recv, recv, count, dt, BRAID_SUM, comm);
    if (st == BRAID_OK)
        st = braid_reduce_scatter(send, recv, count, dt, BRAID_SUM, comm);
    if (st == BRAID_OK)
        st =
            braid_reduce_scatter(send, send + blk, count, dt, BRAID_SUM, comm);
    if (st == BRAID_OK)
        st = braid_allgather(send, recv, count, dt, comm);
    if (st == BRAID_OK)
        st = braid_allgather(recv + blk, recv, count, dt, comm);
    if (st == BRAID_OK)
        st = braid_broadcast(recv, count, dt, 0, comm);
    if (st == BRAID_OK) /* its candidate may keep an area too */
        st = braid_barrier(comm);
    if (st != BRAID_OK) {
        fprintf(stderr, "soak rank %d: warm-up at %zu elements: %s\n", rank,
                count, braid_last_error());
        return 1;
    }
    return 0;
}

/* Whether any collective of this many bytes per rank is still on trial. */
static int on_trial(braid_comm_t *comm, size_t bytes)
{
    for (int k = 0; k < BRAID_COLL_COUNT; k++) {
        char cand[80], why[512];
        if (braid_comm_choice(comm, (braid_coll_t)k, bytes, cand, sizeof(cand),
                              why, sizeof(why)) == BRAID_OK &&
            strncmp(why, "on trial", 8) == 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long     iters = 3000, max_count = 1 << 16;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--iters"))
            iters = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], 0, 10);
        else if (!strcmp(argv[i], "--max-count"))
            max_count = atol(argv[i + 1]);
    }
    braid_comm_t *world, *comms[NCOMMS];
    int           ncomms = 0;
    if (braid_init(&world) != BRAID_OK) {
        fprintf(stderr, "soak: braid_init: %s\n", braid_last_error());
        return 1;
    }
    int rank = braid_comm_rank(world), n = braid_comm_size(world);
    /* One communicator per override whose candidates exist here. */
    for (int c = 0; c < NCOMMS; c++) {
        setenv("BRAID_ALGO", overrides[c], 1);
        braid_comm_t *sub;
        if (braid_comm_split(world, 0, rank, &sub) != BRAID_OK) {
            fprintf(stderr, "soak: split: %s\n", braid_last_error());
            return 1;
        }
        char cand[80], why[80];
        int  ok = 1;
        for (int k = 0; k < BRAID_COLL_COUNT && ok; k++)
            ok = braid_comm_choice(sub, (braid_coll_t)k, 64, cand,
                                   sizeof(cand), why, sizeof(why)) == BRAID_OK;
        if (ok)
            comms[ncomms++] = sub;
        else
            braid_finalize(sub);
    }
    unsetenv("BRAID_ALGO");

    static const braid_dtype_t dts[] = {BRAID_F32, BRAID_F64, BRAID_I32,
                                        BRAID_I64, BRAID_U8};
    size_t                     cap   = (size_t)max_count * 8 * (size_t)n;
    char                      *send = malloc(cap), *recv = malloc(cap);
    long                       wrong = 0, checked = 0;
    /* Bring every communicator's buffers and receive areas to their
     * high-water mark first: each collective, in place and not, at every
     * power-of-two size (so every candidate the dispatcher picks by size
     * has allocated what it keeps), and again at each size while the
     * dispatcher has candidates of it on trial (online tuning runs them in
     * turns over a size's first calls, so a candidate could otherwise
     * first run -- and make its area -- at any point of the main loop).
     * What grows after this is what a leak would grow. */
    memset(send, 0, cap);
    memset(recv, 0, cap);
    for (int c = 0; c < ncomms; c++) {
        for (size_t count = (size_t)max_count; count > 0; count /= 2) {
            int reps = 0;
            do {
                if (warm_up(comms[c], send, recv, count, BRAID_F64, rank) != 0)
                    return 1;
            } while (on_trial(comms[c], count * 8) && ++reps < 200);
        }
        for (size_t count = 4; count > 0; count /= 2) {
            int reps = 0;
            do {
                if (warm_up(comms[c], send, recv, count, BRAID_U8, rank) != 0)
                    return 1;
            } while (on_trial(comms[c], count) && ++reps < 200);
        }
    }
    /* The loop's end asks every rank on world (one int32): world's
     * candidate makes its area now, not then. */
    int32_t one = 1, all1 = 0;
    if (braid_allreduce(&one, &all1, 1, BRAID_I32, BRAID_MAX, world) !=
        BRAID_OK) {
        fprintf(stderr, "soak rank %d: warm-up on world: %s\n", rank,
                braid_last_error());
        return 1;
    }
    usage_t warm = usage_now(), mid = warm;

    rng_state    = seed;
    long stop    = iters; /* the call the loop ends before, unless ... */
    int  replays = 0;     /* ... a step in the replayed half asks for more */
    for (long it = 0;; it++) {
        if (it == stop) {
            /* A step over the bound in the replayed half is a leak, or a
             * one-time step that timing put there: online tuning's watch
             * may reopen a trial there at a count the first half's trials
             * did not reach (a scratch buffer's new high-water mark), or
             * malloc's free lists split another way.  The first half's
             * calls once more tell them apart: a leak grows again, a
             * high-water mark does not.  Every rank decides alike. */
            usage_t now  = usage_now();
            int32_t step = iters >= 4000 && now.heap_kib - mid.heap_kib > 1024,
                    any  = 0;
            if (replays > 0 ||
                braid_allreduce(&step, &any, 1, BRAID_I32, BRAID_MAX, world) !=
                    BRAID_OK ||
                !any)
                break;
            if (step)
                printf("soak rank %d: heap %ld -> %ld KiB in the replayed "
                       "half; its calls once more\n",
                       rank, mid.heap_kib, now.heap_kib);
            replays++;
            mid       = now;
            rng_state = seed;
            stop      = it + iters / 2;
        }
        braid_comm_t *comm  = comms[rnd() % (uint64_t)ncomms];
        braid_coll_t  coll  = (braid_coll_t)(rnd() % BRAID_COLL_COUNT);
        braid_dtype_t dt    = dts[rnd() % 5];
        braid_op_t    op    = (braid_op_t)(rnd() % BRAID_OP_COUNT);
        size_t        count = (size_t)(rnd() % (uint64_t)(max_count + 1)) >>
                       (rnd() % 16); /* log-uniform-ish, 0 included */
        int            root = (int)(rnd() % (uint64_t)n);
        int            inpl = (int)(rnd() % 2);
        size_t         dsz  = braid_dtype_size(dt);
        braid_status_t st   = BRAID_OK;
        size_t         nout = 0;
        switch (coll) {
        case BRAID_COLL_ALLREDUCE:
            for (size_t i = 0; i < count; i++)
                ref_store_i(dt, send, i, input((uint64_t)it, rank, i, op));
            if (inpl)
                memcpy(recv, send, count * dsz);
            st =
                braid_allreduce(inpl ? recv : send, recv, count, dt, op, comm);
            for (size_t i = 0; i < count; i++, nout++)
                wrong += ref_load_f(dt, recv, i) !=
                         expect_reduce(dt, (uint64_t)it, n, i, op);
            break;
        case BRAID_COLL_REDUCE_SCATTER:
            for (size_t i = 0; i < count * (size_t)n; i++)
                ref_store_i(dt, send, i, input((uint64_t)it, rank, i, op));
            st = braid_reduce_scatter(
                send, inpl ? send + (size_t)rank * count * dsz : recv, count,
                dt, op, comm);
            for (size_t i = 0; i < count; i++, nout++) {
                const char *out =
                    inpl ? send + (size_t)rank * count * dsz : recv;
                size_t gi = (size_t)rank * count + i;
                wrong += ref_load_f(dt, out, i) !=
                         expect_reduce(dt, (uint64_t)it, n, gi, op);
            }
            break;
        case BRAID_COLL_ALLGATHER:
            for (size_t i = 0; i < count; i++)
                ref_store_i(dt,
                            inpl ? recv + (size_t)rank * count * dsz : send, i,
                            input((uint64_t)it, rank, i, BRAID_SUM));
            st = braid_allgather(inpl ? recv + (size_t)rank * count * dsz
                                      : send,
                                 recv, count, dt, comm);
            for (int r = 0; r < n; r++)
                for (size_t i = 0; i < count; i++, nout++)
                    wrong += ref_load_f(dt, recv, (size_t)r * count + i) !=
                             (double)input((uint64_t)it, r, i, BRAID_SUM);
            break;
        case BRAID_COLL_BROADCAST:
            for (size_t i = 0; i < count; i++)
                ref_store_i(dt, recv, i,
                            rank == root
                                ? input((uint64_t)it, root, i, BRAID_SUM)
                                : 99);
            st = braid_broadcast(recv, count, dt, root, comm);
            for (size_t i = 0; i < count; i++, nout++)
                wrong += ref_load_f(dt, recv, i) !=
                         (double)input((uint64_t)it, root, i, BRAID_SUM);
            break;
        default: st = braid_barrier(comm); break;
        }
        if (st != BRAID_OK) {
            fprintf(stderr,
                    "soak rank %d: call %ld (%s, %zu x %s, %s) failed: "
                    "%s\n",
                    rank, it, braid_coll_name(coll), count,
                    braid_dtype_name(dt), braid_op_name(op),
                    braid_last_error());
            return 1;
        }
        checked += (long)nout;
        if (it + 1 == iters / 2) {
            mid       = usage_now();
            rng_state = seed; /* replay: see the top of the file */
        }
        if (getenv("SOAK_TRACE") && (it + 1) % (iters / 8) == 0 && rank == 0) {
            usage_t u = usage_now();
            printf("soak: after %ld calls heap %ld KiB segments %ld\n", it + 1,
                   u.heap_kib, u.maps);
        }
    }
    usage_t end = usage_now();
    /* After the warm-up a flat process keeps no new descriptor.  Its heap
     * and its shared-memory segments can still take one-time steps: a
     * scratch buffer reaching its high-water mark at a size the warm-up did
     * not make (an integer average widened to twice the elements), a
     * candidate's receive area made or grown by the first call that needs
     * it.  So both are judged on the second half, which repeats the first
     * half's calls (or on a third pass of them, where the second half took
     * a step: see the loop): a leak grows there as it did before, a
     * high-water mark does not.  Short runs only report the heap;
     * LeakSanitizer covers them in the ASan run. */
    int leak = end.maps > mid.maps || end.fds > warm.fds ||
               (iters >= 4000 && end.heap_kib - mid.heap_kib > 1024);
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's allocator keeps freed blocks in quarantine, so its heap figure
     * grows by design; LeakSanitizer checks for leaks at exit instead. */
    leak = end.maps > mid.maps || end.fds > warm.fds;
#endif
    printf(
        "soak rank %d: %ld calls on %d communicators, %ld elements checked, "
        "%ld wrong; from warm-up to end%s: heap %ld -> %ld -> %ld KiB, "
        "segments %ld -> %ld -> %ld, fds %ld -> %ld, rss %ld -> %ld KiB%s\n",
        rank, stop, ncomms, checked, wrong,
        replays ? " (the first half replayed twice)" : "", warm.heap_kib,
        mid.heap_kib, end.heap_kib, warm.maps, mid.maps, end.maps, warm.fds,
        end.fds, warm.rss_kib, end.rss_kib, leak ? " GROWING" : "");
    for (int c = 0; c < ncomms; c++)
        braid_finalize(comms[c]);
    braid_finalize(world);
    free(send);
    free(recv);
    return wrong != 0 || leak;
}
