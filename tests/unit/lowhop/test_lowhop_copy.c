/* The copy lowhop's blocks leave the receive area with, and shm's puts
 * and cells move with (svc->copy, the kernel braid_kernel_copy), streamed
 * and not: every size from 0 to a few hundred bytes and larger ones (the
 * vector and streaming loops' edges), at every destination and source
 * alignment within a line, must copy exactly the bytes asked for -- the
 * guard bytes on both sides untouched -- and braid_lowhop_stream_ok must
 * stream only large blocks of large messages on a shared CPU. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/reduce.h"
#include "lowhop.h"
#include "recv_area.h"

#define GUARD 64
static int failures;

static void check_copy(size_t n, size_t dalign, size_t salign, int stream)
{
    unsigned char *src = malloc(n + 128), *dst = malloc(n + 128 + 2 * GUARD);
    if (src == NULL || dst == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < n + 128; i++)
        src[i] = (unsigned char)(i * 131u + n);
    memset(dst, 0xA5, n + 128 + 2 * GUARD);
    unsigned char *d = dst + GUARD + dalign;
    braid_kernel_copy(d, src + salign, n, stream);
    if (memcmp(d, src + salign, n) != 0) {
        fprintf(stderr,
                "FAIL: %zu bytes, dst+%zu src+%zu stream %d: "
                "wrong bytes\n",
                n, dalign, salign, stream);
        failures++;
    }
    for (unsigned char *p = dst; p < d; p++)
        if (*p != 0xA5) {
            fprintf(stderr, "FAIL: %zu bytes, dst+%zu: wrote before dst\n", n,
                    dalign);
            failures++;
            break;
        }
    for (unsigned char *p = d + n; p < dst + n + 128 + 2 * GUARD; p++)
        if (*p != 0xA5) {
            fprintf(stderr, "FAIL: %zu bytes, dst+%zu: wrote past the end\n",
                    n, dalign);
            failures++;
            break;
        }
    free(src);
    free(dst);
}

static void check_rule(void)
{
    braid_lowhop_area_t a;
    braid_task_t        t;
    memset(&a, 0, sizeof(a));
    memset(&t, 0, sizeof(t));
    t.dtsize = 4;

    t.count  = (size_t)4 << 20; /* 16 MiB */
    a.nmates = 1;               /* two ranks on this CPU: 32 MiB */
    if (!braid_lowhop_stream_ok(&t, &a, (size_t)4 << 20)) {
        fprintf(stderr, "FAIL: 16 MiB, 2 ranks a CPU, 4 MiB blocks: want "
                        "streaming\n");
        failures++;
    }
    if (braid_lowhop_stream_ok(&t, &a, 4096)) {
        fprintf(stderr, "FAIL: 4 KiB blocks must not stream\n");
        failures++;
    }
    a.nmates = 0; /* a CPU of its own: 16 MiB stays cached enough */
    if (braid_lowhop_stream_ok(&t, &a, (size_t)4 << 20)) {
        fprintf(stderr, "FAIL: 16 MiB, 1 rank a CPU: want no streaming\n");
        failures++;
    }
    t.count  = (size_t)1 << 20; /* 4 MiB, 4 ranks a CPU: 16 MiB */
    a.nmates = 3;
    if (braid_lowhop_stream_ok(&t, &a, (size_t)1 << 20)) {
        fprintf(stderr, "FAIL: 4 MiB, 4 ranks a CPU: want no streaming\n");
        failures++;
    }
    t.count = SIZE_MAX / 2; /* the product overflows: stream */
    if (!braid_lowhop_stream_ok(&t, &a, (size_t)1 << 20)) {
        fprintf(stderr, "FAIL: an overflowing size must stream\n");
        failures++;
    }
}

int main(void)
{
    int cases = 0;
    for (int stream = 0; stream <= 1; stream++)
        for (size_t n = 0; n <= 300; n++)
            for (size_t da = 0; da < 64; da += 7)
                for (size_t sa = 0; sa < 64; sa += 13, cases++)
                    check_copy(n, da, sa, stream);
    /* Both sides of the vector loop's start (2 KiB) and of streaming's
     * (4 KiB), tails of every length class past a 64-byte step, a cell's
     * payload, and sizes past the caches. */
    const size_t big[] = {2047,          2048,      2049,           2048 + 63,
                          2048 + 64 + 5, 4095,      4096,           16384 - 32,
                          32768 + 17,    65536 + 3, (size_t)1 << 20};
    for (int stream = 0; stream <= 1; stream++)
        for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
            for (size_t da = 0; da < 64; da += 9, cases++)
                check_copy(big[i], da, (da * 5) % 64, stream);
    check_rule();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("lowhop copy_out: %d copies exact\n", cases);
    return 0;
}
