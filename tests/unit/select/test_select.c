/* Unit tests of the user's choices: BRAID_ALGO, BRAID_PLUGINS, the tuning
 * file, and the dispatcher's precedence over mock candidates. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "comm/comm.h"
#include "loader/loader.h"
#include "select/select.h"
#include "select/spec.h"

/* A value and the number it must give: a position or a byte count. */
typedef struct {
    const char *text;
    size_t      n;
} text_n_t;

static void test_algo_ok(void)
{
    braid_algo_spec_t s;
    braid_status_t    st = braid_algo_spec_parse(
           &s, "allreduce:0-16K=oneshot,16K-=ring@ucx;allgather:ring");
    CHECK(st == BRAID_OK, "issue example parses: %s", braid_last_error());
    CHECK(s.n == 3, "3 rules, got %d", s.n);
    CHECK(s.rules[0].coll == BRAID_COLL_ALLREDUCE && s.rules[0].lo == 0 &&
              s.rules[0].hi == 16384 &&
              !strcmp(s.rules[0].cands[0].algo, "oneshot") &&
              s.rules[0].cands[0].tl[0] == '\0',
          "rule 0");
    CHECK(s.rules[1].lo == 16384 && s.rules[1].hi == SIZE_MAX &&
              !strcmp(s.rules[1].cands[0].tl, "ucx"),
          "rule 1");
    CHECK(s.rules[2].coll == BRAID_COLL_ALLGATHER && s.rules[2].lo == 0 &&
              s.rules[2].hi == SIZE_MAX,
          "rule 2");
    CHECK(braid_algo_spec_match(&s, BRAID_COLL_ALLREDUCE, 16383) ==
              &s.rules[0],
          "16383 in first range");
    CHECK(braid_algo_spec_match(&s, BRAID_COLL_ALLREDUCE, 16384) ==
              &s.rules[1],
          "16384 in second range (half-open)");
    CHECK(braid_algo_spec_match(&s, BRAID_COLL_BROADCAST, 8) == NULL,
          "no rule for broadcast");

    st = braid_algo_spec_parse(&s, " allreduce : 1m-2G = twoshot , ring ; ");
    CHECK(st == BRAID_ERR_PARSE, "trailing ';' is an empty rule");
    st = braid_algo_spec_parse(&s, " allreduce : 1m-2G = twoshot , ring ");
    CHECK(st == BRAID_OK && s.n == 1 && s.rules[0].ncands == 2 &&
              s.rules[0].lo == 1u << 20 && s.rules[0].hi == (size_t)2 << 30,
          "blanks, suffixes, fallback list: %s", braid_last_error());
    CHECK(braid_algo_spec_parse(&s, "") == BRAID_OK && s.n == 0, "empty");
    CHECK(braid_algo_spec_parse(&s, NULL) == BRAID_OK && s.n == 0, "NULL");
}

/* Each malformed value fails with BRAID_ERR_PARSE and names the position. */
static void test_algo_bad(void)
{
    static const text_n_t bad[] = {
        {"allreduce:0-16K=oneshot,,16K-=ring", 24},
        {"allreduce;", 9},
        {"allreduce:5K-1K=ring", 10},
        {"bogus:ring", 0},
        {"allreduce:ring@", 15},
        {"allreduce:0-16K oneshot", 16},
        {"allreduce:16X-=ring", 12},
        {"allreduce:99999999999999999999-=ring", 10},
        {"allreduce:ring;;allgather:ring", 15},
        {"allreduce:ring$", 14},
        {":ring", 0},
        /* Units: "allreduce:0-4" is 13 characters. */
        {"allreduce:0-4Q=ring", 13},
        {"allreduce:0-4KI=ring", 14},
        {"allreduce:0-4iB=ring", 13},
        {"allreduce:0-4KiBB=ring", 16},
        {"allreduce:0-4Bi=ring", 14},
        {"allreduce:0-4\x01=ring", 13},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        braid_algo_spec_t s;
        braid_status_t    st = braid_algo_spec_parse(&s, bad[i].text);
        char              want[32];
        snprintf(want, sizeof(want), "position %zu", bad[i].n);
        CHECK(st == BRAID_ERR_PARSE, "'%s' refused", bad[i].text);
        CHECK(strstr(braid_last_error(), want) != NULL,
              "'%s': message names %s: %s", bad[i].text, want,
              braid_last_error());
    }
}

/* Every unit form of the size grammar (braid_size_scan: digits, then
 * optionally K, M, G or T in any case, an 'i' after it, and a final 'B'),
 * as BRAID_ALGO's upper bound. */
static void test_algo_units(void)
{
    static const text_n_t ok[] = {
        {"4", 4},
        {"4B", 4},
        {"4b", 4},
        {"4K", 4ull << 10},
        {"4k", 4ull << 10},
        {"4Ki", 4ull << 10},
        {"4KiB", 4ull << 10},
        {"4kib", 4ull << 10},
        {"4KB", 4ull << 10},
        {"4kB", 4ull << 10},
        {"4M", 4ull << 20},
        {"4MiB", 4ull << 20},
        {"4mb", 4ull << 20},
        {"4G", 4ull << 30},
        {"4gi", 4ull << 30},
        {"4GiB", 4ull << 30},
        {"4T", 4ull << 40},
        {"4TiB", 4ull << 40},
        {"4tB", 4ull << 40},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char text[64];
        snprintf(text, sizeof(text), "allreduce:0-%s=oneshot@shm", ok[i].text);
        braid_algo_spec_t s;
        braid_status_t    st = braid_algo_spec_parse(&s, text);
        CHECK(st == BRAID_OK && s.n == 1 && s.rules[0].lo == 0 &&
                  s.rules[0].hi == ok[i].n &&
                  !strcmp(s.rules[0].cands[0].algo, "oneshot") &&
                  !strcmp(s.rules[0].cands[0].tl, "shm"),
              "'%s': bound %zu, want %zu (%s)", text,
              st == BRAID_OK ? s.rules[0].hi : 0, ok[i].n, braid_last_error());
    }
    braid_algo_spec_t s;
    CHECK(braid_algo_spec_parse(&s, "allreduce:1kiB-2Mb=ring") == BRAID_OK &&
              s.rules[0].lo == 1024 && s.rules[0].hi == 2u << 20,
          "units on both bounds: %s", braid_last_error());
    /* A wrong unit is refused at its position (test_algo_bad), with the
     * whole message quoting the value, a control byte visibly. */
    CHECK(braid_algo_spec_parse(&s, "allreduce:0-4Q=ring") ==
                  BRAID_ERR_PARSE &&
              !strcmp(braid_last_error(),
                      "BRAID_ALGO: expected '=' after the size range, found "
                      "'Q' at position 13: 'allreduce:0-4Q=ring'"),
          "whole message: %s", braid_last_error());
    CHECK(braid_algo_spec_parse(&s, "allreduce:0-4\x01=ring") ==
                  BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "'allreduce:0-4\\x01=ring'"),
          "control byte quoted visibly: %s", braid_last_error());
}

/* Found by fuzzing: a long value pushed the position out of the message. */
static void test_long_input(void)
{
    char text[3000];
    memset(text, 'x', sizeof(text));
    memcpy(text, "allreduce:ring", 14);
    text[2000] = '$';
    memset(text + 14, ',', 1);
    text[sizeof(text) - 1] = '\0';
    braid_algo_spec_t s;
    CHECK(braid_algo_spec_parse(&s, text) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "position "),
          "long BRAID_ALGO keeps the position: %s", braid_last_error());
    braid_plugin_filter_t f;
    /* 20 short names, then a blank inside the 21st, then a long tail. */
    memset(text, 'a', sizeof(text));
    for (int i = 0; i < 20; i++)
        text[2 * i + 1] = ',';
    text[41]               = ' ';
    text[sizeof(text) - 1] = '\0';
    CHECK(braid_plugin_filter_parse(&f, text) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "position 41") &&
              strstr(braid_last_error(), "'...,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a"
                                         " aaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'"),
          "long BRAID_PLUGINS keeps the position, quoted around it: %s",
          braid_last_error());
}

static void test_filter(void)
{
    braid_plugin_filter_t f;
    CHECK(braid_plugin_filter_parse(&f, "ucx,lowhop") == BRAID_OK,
          "keep list");
    CHECK(braid_plugin_filter_keeps(&f, "ucx") &&
              braid_plugin_filter_keeps(&f, "lowhop") &&
              !braid_plugin_filter_keeps(&f, "nccl"),
          "keep semantics");
    CHECK(braid_plugin_filter_parse(&f, "^nccl") == BRAID_OK, "exclude list");
    CHECK(!braid_plugin_filter_keeps(&f, "nccl") &&
              braid_plugin_filter_keeps(&f, "ucx"),
          "exclude semantics");
    CHECK(braid_plugin_filter_parse(&f, NULL) == BRAID_OK &&
              braid_plugin_filter_keeps(&f, "anything"),
          "unset keeps all");
    CHECK(braid_plugin_filter_parse(&f, "ucx,,nccl") == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "position 4"),
          "empty name: %s", braid_last_error());
    CHECK(braid_plugin_filter_parse(&f, "ucx,^nccl") == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "position 4"),
          "'^' in the middle: %s", braid_last_error());
    CHECK(braid_plugin_filter_parse(&f, "ucx nccl") == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "position 3"),
          "blank: %s", braid_last_error());
}

static void test_tune(void)
{
    braid_tune_t t;
    const char  *text = "# coll nranks nnodes min max cand\n"
                        "allreduce 4 1 0 16K oneshot@shm   # small\n"
                        "\n"
                        "allreduce * * 16K inf ring\n";
    CHECK(braid_tune_parse(&t, text, "t.tune") == BRAID_OK, "parse: %s",
          braid_last_error());
    CHECK(t.n == 2, "2 rows, got %d", t.n);
    const braid_tune_row_t *r = braid_tune_match(&t, BRAID_COLL_ALLREDUCE, 4,
                                                 1, BRAID_TOPO_SINGLE_HOST, 8);
    CHECK(r == &t.rows[0] && !strcmp(r->cand.tl, "shm"), "row 0 matches");
    r = braid_tune_match(&t, BRAID_COLL_ALLREDUCE, 8, 1,
                         BRAID_TOPO_SINGLE_HOST, 8);
    CHECK(r == NULL, "nranks 8 matches no row for 8 bytes");
    r = braid_tune_match(&t, BRAID_COLL_ALLREDUCE, 8, 2, BRAID_TOPO_SWITCH,
                         1 << 20);
    CHECK(r == &t.rows[1], "wildcards match");
    braid_tune_free(&t);

    CHECK(braid_tune_parse(&t,
                           "allreduce 4 1 0 16K ring\nallreduce x 1 0 1K "
                           "ring\n",
                           "t.tune") == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "t.tune:2") &&
              strstr(braid_last_error(), "position 10"),
          "line and column: %s", braid_last_error());
    CHECK(braid_tune_parse(&t, "allreduce 4 1 16K 1K ring\n", "t") ==
              BRAID_ERR_PARSE,
          "empty range refused");
    CHECK(braid_tune_parse(&t, "allreduce 4 1 0 1K ring extra\n", "t") ==
              BRAID_ERR_PARSE,
          "trailing field refused");
    CHECK(braid_tune_load(&t, "/nonexistent/braid.tune") == BRAID_ERR_IO,
          "missing file is an I/O error");
}

/* ---- dispatcher over mock candidates (estimates are linear in bytes) ---- */

static double est_flat(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return 10.0 + in->bytes * 0.001;
}

static double est_steep(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return 1.0 + in->bytes * 0.01;
}

static double est_never(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self, (void)in;
    return -1.0;
}

#define HOST_MEM BRAID_MEM_BIT(BRAID_MEM_HOST)
#define CUDA_MEM BRAID_MEM_BIT(BRAID_MEM_CUDA)

/* A selector of 4 ranks on one host over mock candidates, initialised. */
static braid_selector_t mock_selector(braid_candidate_t *cands, int n,
                                      const braid_algo_spec_t *over,
                                      const braid_tune_t      *tune)
{
    braid_selector_t sel = {.ncands   = n,
                            .cands    = cands,
                            .override = over,
                            .tune     = tune,
                            .nranks   = 4,
                            .nnodes   = 1,
                            .ppn      = 4,
                            .rank     = 1};
    braid_selector_init(&sel);
    return sel;
}

static void test_dispatch(void)
{
    braid_transport_t ucx = {.name = "ucx"}, shm = {.name = "shm"};
    braid_tl_t        tl_ucx = {.ops = &ucx}, tl_shm = {.ops = &shm};
    braid_algo_t      ring = {
             .name = "ring", .coll = BRAID_COLL_ALLREDUCE, .estimate = est_flat};
    braid_algo_t oneshot = {.name     = "oneshot",
                            .coll     = BRAID_COLL_ALLREDUCE,
                            .estimate = est_steep};
    braid_algo_t broken  = {
         .name = "broken", .coll = BRAID_COLL_ALLREDUCE, .estimate = est_never};
    braid_candidate_t cands[] = {
        {"broken@ucx", &broken, &tl_ucx, "ucx", HOST_MEM, NULL, NULL},
        {"oneshot@shm", &oneshot, &tl_shm, "shm", HOST_MEM, NULL, NULL},
        {"ring@ucx", &ring, &tl_ucx, "ucx", HOST_MEM, NULL, NULL},
    };
    const uint32_t    host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    braid_algo_spec_t none, over;
    braid_tune_t      tune = {0};
    braid_algo_spec_parse(&none, NULL);
    braid_selector_t   sel = mock_selector(cands, 3, &none, &tune);
    braid_candidate_t *c;
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 8, host) == BRAID_OK &&
              c == &cands[1],
          "cost model: oneshot cheaper at 8 B");
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 1 << 20, host) ==
                  BRAID_OK &&
              c == &cands[2],
          "cost model: ring cheaper at 1 MiB");
    CHECK(braid_select(&c, &sel, BRAID_COLL_BROADCAST, 8, host) ==
              BRAID_ERR_NOT_SUPPORTED,
          "no broadcast candidate is an error");

    /* The tuning file beats the cost model... */
    CHECK(braid_tune_parse(&tune, "allreduce * * 0 inf ring@ucx\n", "t") ==
              BRAID_OK,
          "tune parse");
    braid_selector_init(&sel);
    char name[80], why[200];
    CHECK(braid_select_explain(&sel, BRAID_COLL_ALLREDUCE, 8, host, name,
                               sizeof(name), why, sizeof(why)) == BRAID_OK &&
              !strcmp(name, "ring@ucx") &&
              !strcmp(why, "tuning file line 1 (cost model: oneshot@shm)"),
          "tuning file wins, naming its line and the cost model's choice: "
          "%s by %s",
          name, why);
    /* ...and the override beats the tuning file. */
    CHECK(braid_algo_spec_parse(&over, "allreduce:oneshot") == BRAID_OK, "ov");
    sel.override = &over;
    braid_selector_init(&sel);
    CHECK(braid_select_explain(&sel, BRAID_COLL_ALLREDUCE, 1 << 20, host, name,
                               sizeof(name), why, sizeof(why)) == BRAID_OK &&
              !strcmp(name, "oneshot@shm") && strstr(why, "BRAID_ALGO"),
          "override wins: %s by %s", name, why);
    /* A forced candidate that cannot run is an error, not a fallback. */
    CHECK(braid_algo_spec_parse(&over, "allreduce:broken") == BRAID_OK, "ov2");
    braid_selector_init(&sel);
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 8, host) ==
                  BRAID_ERR_NOT_SUPPORTED &&
              strstr(braid_last_error(), "broken") &&
              strstr(braid_last_error(), "ring@ucx"),
          "forced impossible candidate: %s", braid_last_error());
    CHECK(braid_algo_spec_parse(&over, "allreduce:nosuch,ring") == BRAID_OK,
          "ov3");
    braid_selector_init(&sel);
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 8, host) == BRAID_OK &&
              c == &cands[2],
          "second listed candidate is used when the first is absent");
    CHECK(braid_algo_spec_parse(&over, "allreduce:ring@shm") == BRAID_OK,
          "ov4");
    braid_selector_init(&sel);
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 8, host) ==
              BRAID_ERR_NOT_SUPPORTED,
          "transport part must match");
    braid_selector_fini(&sel);
    braid_tune_free(&tune);
}

/* Device memory: a host-only candidate is never offered, whether the cost
 * model or BRAID_ALGO asks; a backend (no braid transport) that takes CUDA
 * memory is. */
static void test_memory(void)
{
    braid_transport_t shm     = {.name = "shm"};
    braid_tl_t        tl_shm  = {.ops = &shm};
    braid_algo_t      oneshot = {.name     = "oneshot",
                                 .coll     = BRAID_COLL_ALLREDUCE,
                                 .estimate = est_steep};
    braid_algo_t      gpu     = {.name      = "gpu",
                                 .coll      = BRAID_COLL_ALLREDUCE,
                                 .flags     = BRAID_ALGO_BACKEND,
                                 .estimate  = est_flat,
                                 .mem_types = HOST_MEM | CUDA_MEM};
    braid_candidate_t cands[] = {
        {"gpu", &gpu, NULL, "gpu", HOST_MEM | CUDA_MEM, NULL, NULL},
        {"oneshot@shm", &oneshot, &tl_shm, "shm", HOST_MEM, NULL, NULL},
    };
    const uint32_t    host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    const uint32_t    dev  = braid_mem_need(BRAID_MEM_CUDA, BRAID_MEM_CUDA);
    const uint32_t    mix  = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_CUDA);
    braid_algo_spec_t none, over;
    braid_tune_t      tune = {0};
    braid_algo_spec_parse(&none, NULL);
    braid_selector_t   sel = mock_selector(cands, 2, &none, &tune);
    braid_candidate_t *c;
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 8, host) == BRAID_OK &&
              c == &cands[1],
          "host memory: the cheaper host candidate");
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 8, dev) == BRAID_OK &&
              c == &cands[0],
          "device memory: only the candidate that takes it");
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 8, mix) == BRAID_OK &&
              c == &cands[0],
          "host send buffer, device receive buffer: both needed");
    CHECK(braid_candidate_estimate(&sel, &cands[1], BRAID_COLL_ALLREDUCE, 8,
                                   dev) < 0,
          "a host-only candidate cannot run device memory");
    CHECK(braid_candidate_estimate(&sel, &cands[0], BRAID_COLL_ALLREDUCE, 8,
                                   dev) > 0,
          "a backend estimates without a braid transport");
    CHECK(braid_algo_spec_parse(&over, "allreduce:oneshot") == BRAID_OK, "ov");
    sel.override = &over;
    braid_selector_init(&sel);
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 8, dev) ==
                  BRAID_ERR_NOT_SUPPORTED &&
              strstr(braid_last_error(), "device memory") &&
              strstr(braid_last_error(), "available: gpu"),
          "forcing a host-only candidate on device memory: %s",
          braid_last_error());
    cands[0].mem_types = HOST_MEM;
    sel.override       = &none;
    braid_selector_init(&sel);
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 8, dev) ==
                  BRAID_ERR_NOT_SUPPORTED &&
              strstr(braid_last_error(), "device memory"),
          "no candidate for device memory: %s", braid_last_error());
    braid_selector_fini(&sel);
}

/* An estimate that returns the transport capabilities it was handed. */
static double est_caps(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return BRAID_HAS(in, braid_cost_in_t, caps) ? 1.0 + (double)in->caps
                                                : -1.0;
}

static const void *mock_mem_peer(void *tcomm, const braid_rmem_t *mem,
                                 int peer)
{
    (void)tcomm, (void)peer;
    return mem->local;
}

/* BRAID_CAP_LOAD: the core keeps it only for a transport with mem_peer
 * (an older transport struct, or a NULL function, loses it), and hands
 * the transport's capabilities on this communicator to estimates. */
static void test_load_caps(void)
{
    braid_transport_t with = {.struct_size = sizeof(braid_transport_t),
                              .name        = "shm",
                              .caps = BRAID_CAP_PUT_SIGNAL | BRAID_CAP_LOAD,
                              .mem_peer = mock_mem_peer};
    CHECK(braid_tl_declared_caps(&with) ==
              (BRAID_CAP_PUT_SIGNAL | BRAID_CAP_LOAD),
          "a transport with mem_peer keeps loads");
    braid_transport_t none = with;
    none.mem_peer          = NULL;
    CHECK(braid_tl_declared_caps(&none) == BRAID_CAP_PUT_SIGNAL,
          "a NULL mem_peer drops loads");
    braid_transport_t old = with;
    old.struct_size       = offsetof(braid_transport_t, mem_peer);
    CHECK(braid_tl_declared_caps(&old) == BRAID_CAP_PUT_SIGNAL,
          "a struct without mem_peer drops loads");

    braid_tl_t   tl   = {.struct_size = sizeof(braid_tl_t),
                         .ops         = &with,
                         .caps        = braid_tl_declared_caps(&with)};
    braid_algo_t algo = {
        .name = "pipe", .coll = BRAID_COLL_ALLGATHER, .estimate = est_caps};
    braid_candidate_t cand[] = {
        {"pipe@shm", &algo, &tl, "shm", HOST_MEM, NULL, NULL}};
    braid_algo_spec_t none_spec;
    braid_tune_t      tune = {0};
    braid_algo_spec_parse(&none_spec, NULL);
    braid_selector_t sel  = mock_selector(cand, 1, &none_spec, &tune);
    uint32_t         host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    double est = braid_candidate_estimate(&sel, &cand[0], BRAID_COLL_ALLGATHER,
                                          1 << 20, host);
    CHECK(est == 1.0 + (double)tl.caps, "estimate saw caps %g, want %u",
          est - 1.0, tl.caps);
    braid_selector_fini(&sel);
}

/* An estimate that encodes the get path it was handed: latency in the
 * integer part's thousands, bandwidth (GB/s, to a thousandth) below. */
static double est_get(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return in->get_alpha_us * 1000.0 + in->get_beta_gbps;
}

/* braid_candidate_estimate_mapped prices the get path by the calibration's
 * reads of braid_mem_alloc's memory (mget), at the call's working set;
 * braid_candidate_estimate by the get path's own figures.  Without an
 * mget figure, or without a get path, both are the same. */
static void test_mapped_get(void)
{
    braid_transport_t ops  = {.struct_size = sizeof(braid_transport_t),
                              .name        = "shm",
                              .caps = BRAID_CAP_PUT_SIGNAL | BRAID_CAP_GET};
    braid_tl_t        tl   = {.struct_size   = sizeof(braid_tl_t),
                              .ops           = &ops,
                              .caps          = ops.caps,
                              .get_alpha_us  = 3.0,
                              .get_beta_gbps = 4.0};
    braid_algo_t      algo = {
             .name = "pull", .coll = BRAID_COLL_ALLGATHER, .estimate = est_get};
    braid_candidate_t cand[] = {
        {"pull@shm", &algo, &tl, "shm", HOST_MEM, NULL, NULL}};
    braid_algo_spec_t none_spec;
    braid_tune_t      tune = {0};
    braid_algo_spec_parse(&none_spec, NULL);
    braid_selector_t sel  = mock_selector(cand, 1, &none_spec, &tune);
    uint32_t         host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    /* Flat curves (in == out) so the figure read at any size is known. */
    sel.nbw = 1;
    memset(&sel.bw[0], 0, sizeof(sel.bw[0]));
    sel.bw[0].tl   = &tl;
    sel.bw[0].get  = (braid_bw_curve_t){2.0, 1e6, 2.0, 1e8};
    sel.bw[0].mget = (braid_bw_curve_t){8.0, 1e6, 8.0, 1e8};
    sel.bw[0].mget_alpha_us  = 1.0;
    sel.bw[0].mget_beta_gbps = 9.0;
    double plain = braid_candidate_estimate(&sel, &cand[0],
                                            BRAID_COLL_ALLGATHER, 1 << 20, host);
    double mapped = braid_candidate_estimate_mapped(
        &sel, &cand[0], BRAID_COLL_ALLGATHER, 1 << 20, host);
    CHECK(fabs(plain - 3002.0) < 1e-9, "plain: get 3 us + 2 GB/s, got %g",
          plain);
    CHECK(fabs(mapped - 1008.0) < 1e-9, "mapped: mget 1 us + 8 GB/s, got %g",
          mapped);
    /* mget measured in the caches only: its in-cache figure */
    sel.bw[0].mget = (braid_bw_curve_t){0};
    mapped = braid_candidate_estimate_mapped(&sel, &cand[0],
                                             BRAID_COLL_ALLGATHER, 1 << 20, host);
    CHECK(fabs(mapped - 1009.0) < 1e-9, "mapped, in-cache figure: got %g",
          mapped);
    /* not measured: the get path's own */
    sel.bw[0].mget_beta_gbps = 0.0;
    mapped = braid_candidate_estimate_mapped(&sel, &cand[0],
                                             BRAID_COLL_ALLGATHER, 1 << 20, host);
    CHECK(mapped == plain, "no mget figure: %g, want %g", mapped, plain);
    /* no get path on this communicator: nothing to price either way */
    sel.bw[0].mget_beta_gbps = 9.0;
    tl.get_beta_gbps         = 0.0;
    plain  = braid_candidate_estimate(&sel, &cand[0], BRAID_COLL_ALLGATHER,
                                      1 << 20, host);
    mapped = braid_candidate_estimate_mapped(&sel, &cand[0],
                                             BRAID_COLL_ALLGATHER, 1 << 20, host);
    CHECK(plain == 3000.0 && mapped == plain,
          "no get path: %g and %g, want 3000", plain, mapped);
    braid_selector_fini(&sel);
}

/* Equal estimates: the first in name order wins, and the reason says so. */
static void test_ties(void)
{
    braid_transport_t ucx = {.name = "ucx"}, shm = {.name = "shm"};
    braid_tl_t        tl_ucx = {.ops = &ucx}, tl_shm = {.ops = &shm};
    braid_algo_t      ring = {
             .name = "ring", .coll = BRAID_COLL_ALLREDUCE, .estimate = est_flat};
    braid_candidate_t cands[] = {
        /* sorted by name, as the core keeps them */
        {"ring@shm", &ring, &tl_shm, "shm", HOST_MEM, NULL, NULL},
        {"ring@ucx", &ring, &tl_ucx, "ucx", HOST_MEM, NULL, NULL},
    };
    const uint32_t    host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    braid_algo_spec_t none;
    braid_tune_t      tune = {0};
    braid_algo_spec_parse(&none, NULL);
    braid_selector_t   sel = mock_selector(cands, 2, &none, &tune);
    braid_candidate_t *c;
    char               name[80], why[200];
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 64, host) == BRAID_OK &&
              c == &cands[0],
          "tie: the first name wins");
    CHECK(braid_select_explain(&sel, BRAID_COLL_ALLREDUCE, 64, host, name,
                               sizeof(name), why, sizeof(why)) == BRAID_OK &&
              !strcmp(name, "ring@shm") && strstr(why, "tie with ring@ucx") &&
              strstr(why, "name order"),
          "tie reported: %s by %s", name, why);
    /* Forced "ring" leaves the transport to the cost model: the same tie. */
    braid_algo_spec_t over;
    CHECK(braid_algo_spec_parse(&over, "allreduce:ring") == BRAID_OK, "ov");
    sel.override = &over;
    braid_selector_init(&sel);
    CHECK(braid_select_explain(&sel, BRAID_COLL_ALLREDUCE, 64, host, name,
                               sizeof(name), why, sizeof(why)) == BRAID_OK &&
              !strcmp(name, "ring@shm") && strstr(why, "BRAID_ALGO") &&
              strstr(why, "tie with ring@ucx"),
          "tie under an override: %s by %s", name, why);
    /* Forced "ring@ucx": nothing left to tie with. */
    CHECK(braid_algo_spec_parse(&over, "allreduce:ring@ucx") == BRAID_OK,
          "ov2");
    braid_selector_init(&sel);
    CHECK(braid_select_explain(&sel, BRAID_COLL_ALLREDUCE, 64, host, name,
                               sizeof(name), why, sizeof(why)) == BRAID_OK &&
              !strcmp(name, "ring@ucx") && !strstr(why, "tie"),
          "a forced candidate ties with nothing: %s by %s", name, why);
    sel.override  = &none;
    cands[1].algo = &(braid_algo_t){
        .name = "ring", .coll = BRAID_COLL_ALLREDUCE, .estimate = est_steep};
    braid_selector_init(&sel); /* new choices: a new table */
    CHECK(braid_select_explain(&sel, BRAID_COLL_ALLREDUCE, 64, host, name,
                               sizeof(name), why, sizeof(why)) == BRAID_OK &&
              !strcmp(name, "ring@ucx") && !strstr(why, "tie"),
          "no tie, no tie in the reason: %s", why);
    braid_selector_fini(&sel);
}

static double est_mid(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return 5.0 + in->bytes * 0.004;
}

/* The selection table: built once, it gives every size what the direct
 * decision gives -- crossovers found to the byte, rows cut at the bounds of
 * BRAID_ALGO rules and tuning rows that are no powers of two -- and
 * braid_select_row_format prints it as BRAID_ALGO ranges. */
static void test_table(void)
{
    braid_transport_t shm  = {.name = "shm"};
    braid_tl_t        tl   = {.ops = &shm};
    braid_algo_t      flat = {
             .name = "flat", .coll = BRAID_COLL_ALLREDUCE, .estimate = est_flat};
    braid_algo_t mid = {
        .name = "mid", .coll = BRAID_COLL_ALLREDUCE, .estimate = est_mid};
    braid_algo_t steep = {
        .name = "steep", .coll = BRAID_COLL_ALLREDUCE, .estimate = est_steep};
    braid_candidate_t cands[] = {
        {"flat@shm", &flat, &tl, "shm", HOST_MEM, NULL, NULL},
        {"mid@shm", &mid, &tl, "shm", HOST_MEM, NULL, NULL},
        {"steep@shm", &steep, &tl, "shm", HOST_MEM, NULL, NULL},
    };
    const uint32_t    host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    braid_algo_spec_t none, over;
    braid_tune_t      tune = {0};
    braid_algo_spec_parse(&none, NULL);
    braid_selector_t sel = mock_selector(cands, 3, &none, &tune);
    CHECK(braid_selector_build(&sel, host) == BRAID_OK, "build: %s",
          braid_last_error());

    /* steep up to 666 B, mid to 1666 B, flat from 1667 B on. */
    int                    n;
    const braid_sel_row_t *r =
        braid_select_rows(&n, &sel, BRAID_COLL_ALLREDUCE, host);
    CHECK(n == 3 && r[0].lo == 1 && r[0].pick.idx == 2 && r[1].lo == 667 &&
              r[1].pick.idx == 1 && r[2].lo == 1667 && r[2].pick.idx == 0,
          "crossovers to the byte: %d rows, from %zu, %zu, %zu", n,
          n > 0 ? r[0].lo : 0, n > 1 ? r[1].lo : 0, n > 2 ? r[2].lo : 0);
    char line[512];
    braid_select_row_format(line, sizeof(line), &sel, BRAID_COLL_ALLREDUCE,
                            host, 1);
    CHECK(strstr(line, "667-1667") && strstr(line, "mid@shm") &&
              strstr(line, "(cost model)"),
          "row printed as a BRAID_ALGO range: '%s'", line);
    braid_select_row_format(line, sizeof(line), &sel, BRAID_COLL_ALLREDUCE,
                            host, 2);
    CHECK(strstr(line, "1667- ") && strstr(line, "flat@shm"),
          "the last row is open: '%s'", line);

    /* Odd bounds of an override and a tuning row; then every size agrees
     * with the direct decision. */
    CHECK(braid_algo_spec_parse(&over, "allreduce:100-300=flat") == BRAID_OK,
          "ov");
    CHECK(braid_tune_parse(&tune, "allreduce * * 3000 3500 steep@shm\n",
                           "t") == BRAID_OK,
          "tune");
    sel.override = &over;
    braid_selector_init(&sel);
    unsigned long long x    = 88172645463325252ull;
    int                bad  = 0;
    size_t             when = 0;
    for (size_t i = 0; i < 30000; i++) {
        /* 1..10000 B in order, then random sizes up to 2^40. */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t                  b = i < 10000 ? i + 1 : (size_t)(x >> 24);
        braid_candidate_t      *c;
        const braid_tune_row_t *sk;
        braid_pick_t            want =
            braid_select_decide(&sel, BRAID_COLL_ALLREDUCE, b, host, &sk);
        if (braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, b, host) !=
                BRAID_OK ||
            c != &cands[want.idx]) {
            if (bad++ == 0)
                when = b;
        }
    }
    CHECK(bad == 0,
          "table and direct decision differ at %d sizes (first "
          "%zu B)",
          bad, when);
    r          = braid_select_rows(&n, &sel, BRAID_COLL_ALLREDUCE, host);
    int cut100 = 0, cut300 = 0, cut3000 = 0, cut3500 = 0;
    for (int i = 0; i < n; i++) {
        cut100 |= r[i].lo == 100 && r[i].pick.why == BRAID_WHY_OVERRIDE;
        cut300 |= r[i].lo == 300;
        cut3000 |= r[i].lo == 3000 && r[i].pick.why == BRAID_WHY_TUNE;
        cut3500 |= r[i].lo == 3500;
    }
    CHECK(cut100 && cut300 && cut3000 && cut3500,
          "rows cut at the rule's "
          "and the tuning row's bounds (%d %d %d %d)",
          cut100, cut300, cut3000, cut3500);
    braid_selector_fini(&sel);
    braid_tune_free(&tune);
}

static void test_topo(void)
{
    braid_topo_kind_t k;
    CHECK(braid_topo_kind_parse(&k, NULL, 1) == BRAID_OK &&
              k == BRAID_TOPO_SINGLE_HOST,
          "unset, one host");
    CHECK(braid_topo_kind_parse(&k, "auto", 4) == BRAID_OK &&
              k == BRAID_TOPO_SWITCH,
          "auto, several hosts: switch");
    CHECK(braid_topo_kind_parse(&k, "ring", 8) == BRAID_OK &&
              k == BRAID_TOPO_RING,
          "ring");
    CHECK(braid_topo_kind_parse(&k, "ring", 1) == BRAID_OK &&
              k == BRAID_TOPO_SINGLE_HOST,
          "one host has no cabling");
    CHECK(braid_topo_kind_parse(&k, "switchy", 4) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "position 6"),
          "switchy: %s", braid_last_error());
    CHECK(braid_topo_kind_parse(&k, "ri", 4) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "position 2"),
          "ri: %s", braid_last_error());
    CHECK(braid_topo_kind_parse(&k, "mesh", 4) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "position 0"),
          "mesh: %s", braid_last_error());
}

int main(void)
{
    test_topo();
    test_algo_ok();
    test_algo_bad();
    test_algo_units();
    test_long_input();
    test_filter();
    test_tune();
    test_dispatch();
    test_memory();
    test_load_caps();
    test_mapped_get();
    test_ties();
    test_table();
    return check_summary("test_select");
}
