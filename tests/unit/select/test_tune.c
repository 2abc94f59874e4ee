/* The tuning file as braid-tune writes it (topology, measured times) and
 * every way a row can be wrong: each is refused with its file, line,
 * position and what was expected. */
#include <stdint.h>
#include <string.h>

#include <braid/plugin.h>

#include "../check.h"
#include "select/spec.h"
#include "util/log.h"

static void test_v2_rows(void)
{
    braid_tune_t t;
    const char  *text =
        "# braid tuning table\n"
        "allreduce 4 1 single 0 2896 oneshot@shm at 2048 oneshot@shm=5.1 "
        "twoshot@shm=6.90 ring@shm=12\n"
        "allreduce 4 1 single 2896 inf twoshot@shm # no measurements\n"
        "allreduce 4 2 switch 0 inf ring@ucx at 64K ring@ucx=100.5\n"
        "allgather 4 1 0 inf direct@shm\n" /* v1: any topology */
        "barrier 4 1 * 0 inf direct@shm at 0 direct@shm=2.5\n";
    CHECK(braid_tune_parse(&t, text, "t.tune") == BRAID_OK, "parse: %s",
          braid_last_error());
    CHECK(t.n == 5, "5 rows, got %d", t.n);
    if (t.n != 5)
        return;
    const braid_tune_row_t *r = &t.rows[0];
    CHECK(r->topo == BRAID_TOPO_SINGLE_HOST && r->line == 2 && r->at == 2048 &&
              r->nmeas == 3 && r->meas[0].us == 5.1 && r->meas[1].us == 6.9 &&
              !strcmp(r->meas[2].cand.algo, "ring"),
          "row 1: topo %d line %d at %zu nmeas %d", r->topo, r->line, r->at,
          r->nmeas);
    CHECK(braid_tune_measured(r, "twoshot@shm") == 6.9 &&
              braid_tune_measured(r, "ring@ucx") < 0,
          "measured times by name");
    CHECK(t.rows[1].nmeas == 0 && t.rows[1].hi == SIZE_MAX, "row 2");
    CHECK(t.rows[2].topo == BRAID_TOPO_SWITCH && t.rows[2].at == 65536,
          "row 3: switch, at 64K");
    CHECK(t.rows[3].topo == -1 && t.rows[4].topo == -1, "v1 row and '*': any");

    /* Topology is part of the match. */
    CHECK(braid_tune_match(&t, BRAID_COLL_ALLREDUCE, 4, 1,
                           BRAID_TOPO_SINGLE_HOST, 100) == &t.rows[0],
          "single host, small");
    CHECK(braid_tune_match(&t, BRAID_COLL_ALLREDUCE, 4, 1,
                           BRAID_TOPO_SINGLE_HOST, 1 << 20) == &t.rows[1],
          "single host, large");
    CHECK(braid_tune_match(&t, BRAID_COLL_ALLREDUCE, 4, 2, BRAID_TOPO_RING,
                           100) == NULL,
          "a switch row does not match a ring");
    CHECK(braid_tune_match(&t, BRAID_COLL_ALLGATHER, 4, 1, BRAID_TOPO_RING,
                           100) == &t.rows[3],
          "a row without topology matches any");
    CHECK(!strcmp(braid_tune_topo_name(BRAID_TOPO_RING), "ring") &&
              !strcmp(braid_tune_topo_name(-1), "*"),
          "topology names");
    braid_tune_free(&t);
}

/* text must be refused naming "t.tune:LINE" and containing want. */
static void refused(const char *text, int line, const char *want)
{
    braid_tune_t t;
    char         where[32];
    snprintf(where, sizeof(where), "t.tune:%d", line);
    braid_status_t st = braid_tune_parse(&t, text, "t.tune");
    CHECK(st == BRAID_ERR_PARSE && strstr(braid_last_error(), where) &&
              strstr(braid_last_error(), want),
          "'%s' refused at %s with '%s': got %d '%s'", text, where, want, st,
          braid_last_error());
    if (st == BRAID_OK)
        braid_tune_free(&t);
}

static void test_errors(void)
{
    const char *ok = "allreduce 4 1 single 0 inf ring@shm\n";
    char        text[512];
    /* The line number counts comments and blank lines too. */
    snprintf(text, sizeof(text),
             "# header\n\n%sallreduce 4 1 hub 0 inf ring\n", ok);
    refused(text, 4, "a topology (single, switch, ring or '*')");
    refused("allreduce 4 1 single 0 1K ring at 2K ring=1\n", 1,
            "a measured size inside the row's range");
    refused("allreduce 4 1 single 0 1K ring at 512\n", 1, "a candidate name");
    refused("allreduce 4 1 single 0 1K ring at 512 ring\n", 1,
            "'=' and the candidate's time");
    refused("allreduce 4 1 single 0 1K ring at 512 ring=\n", 1,
            "a time in microseconds");
    refused("allreduce 4 1 single 0 1K ring at 512 ring=1.2.3\n", 1,
            "a time in microseconds");
    refused("allreduce 4 1 single 0 1K ring at 512 ring=-1\n", 1,
            "a time in microseconds");
    refused("allreduce 4 1 single 0 1K ring at 512 ring=1 ring=2\n", 1,
            "a candidate not measured before on this row");
    refused("allreduce 4 1 single 0 1K ring extra\n", 1,
            "'at' (the measured times) or the end of the row");
    refused("allreduce 4 1 single 1K 1K ring\n", 1, "max_bytes above");
    refused("allreduce 4 1 single 0 1K\n", 1, "a candidate name");
    refused("allreduc 4 1 single 0 1K ring\n", 1, "a collective");
    refused("allreduce 0 1 single 0 1K ring\n", 1, "a rank count");
    refused("allreduce 4 1 single 0 1K ring@\n", 1, "a transport name");
    /* More measured candidates than a row holds. */
    size_t o = (size_t)snprintf(text, sizeof(text),
                                "allreduce 4 1 single 0 1K c0 at 1");
    for (int i = 0; i <= BRAID_TUNE_MEAS; i++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, " c%d=1", i);
    refused(text, 1, "at most 24 measured candidates");
}

int main(void)
{
    test_v2_rows();
    test_errors();
    return check_summary("tune");
}
