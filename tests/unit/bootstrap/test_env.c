/* Environment helpers, launcher detection and the rendezvous file. */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "bootstrap/channel.h"
#include "bootstrap/rendezvous.h"
#include "bs_test.h"

static const char *launcher_vars[] = {"BRAID_RANK",
                                      "BRAID_SIZE",
                                      "BRAID_ADDR",
                                      "BRAID_JOB_KEY",
                                      "BRAID_LISTEN_FD",
                                      "BRAID_IFADDR",
                                      "BRAID_RENDEZVOUS_DIR",
                                      "OMPI_COMM_WORLD_RANK",
                                      "OMPI_COMM_WORLD_SIZE",
                                      "OMPI_MCA_ess_base_jobid",
                                      "PMIX_NAMESPACE",
                                      "OMPI_MCA_orte_num_nodes",
                                      "SLURM_PROCID",
                                      "SLURM_NTASKS",
                                      "SLURM_NPROCS",
                                      "SLURM_JOB_ID",
                                      "SLURM_STEP_ID",
                                      "SLURM_STEPID",
                                      "SLURM_STEP_NUM_NODES",
                                      "RANK",
                                      "WORLD_SIZE",
                                      "MASTER_ADDR",
                                      "MASTER_PORT",
                                      "TORCHELASTIC_RUN_ID",
                                      "TORCHELASTIC_RESTART_COUNT",
                                      "TORCHELASTIC_USE_AGENT_STORE",
                                      NULL};

static void clear_env(void)
{
    for (int i = 0; launcher_vars[i] != NULL; i++)
        unsetenv(launcher_vars[i]);
}

/* The window braid_quote must show for printable text, worked out the
 * plain way: 30 characters before pos and the rest after it, shifted when
 * one side runs out of text, "..." where cut. */
static void expected_window(char *out, const char *text, size_t len,
                            size_t pos)
{
    size_t from = pos > 30 ? pos - 30 : 0;
    size_t to   = from + 60 < len ? from + 60 : len;
    if (to - from < 60)
        from = to > 60 ? to - 60 : 0;
    snprintf(out, 80, "%s%.*s%s", from > 0 ? "..." : "", (int)(to - from),
             text + from, to < len ? "..." : "");
}

/* Every byte of s is printable ASCII: nothing raw reaches a terminal. */
static int all_printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

static void test_quote(void)
{
    /* Short text: whole, whatever the position (past the end included). */
    CHECK(strcmp(braid_quote("abc", 3, 0).s, "abc") == 0);
    CHECK(strcmp(braid_quote("abc", 3, 2).s, "abc") == 0);
    CHECK(strcmp(braid_quote("abc", 3, 99).s, "abc") == 0);
    CHECK(strcmp(braid_quote("", 0, 0).s, "") == 0);
    CHECK(strcmp(braid_quote(NULL, 5, 3).s, "") == 0);
    /* Exactly 60 characters still fit; 61 are cut. */
    char t[201];
    for (int i = 0; i < 200; i++)
        t[i] = (char)('A' + i % 26 + (i / 26 % 2) * ('a' - 'A'));
    t[200] = '\0';
    CHECK(strlen(braid_quote(t, 60, 0).s) == 60);
    CHECK(strcmp(braid_quote(t, 61, 0).s + 60, "...") == 0);

    /* Long text: from the start, cut at the end only... */
    braid_quote_t q = braid_quote(t, 100, 0);
    CHECK(strncmp(q.s, t, 60) == 0 && strcmp(q.s + 60, "...") == 0);
    /* ...near the start: still from the start. */
    q = braid_quote(t, 100, 10);
    CHECK(strncmp(q.s, t, 60) == 0 && strcmp(q.s + 60, "...") == 0);
    /* ...in the middle: cut on both sides, 30 before the fault. */
    q = braid_quote(t, 100, 50);
    CHECK(strncmp(q.s, "...", 3) == 0 && strncmp(q.s + 3, t + 20, 60) == 0 &&
          strcmp(q.s + 63, "...") == 0);
    /* ...near and at the end: the last 60, cut at the start only. */
    q = braid_quote(t, 100, 95);
    CHECK(strncmp(q.s, "...", 3) == 0 && strncmp(q.s + 3, t + 40, 60) == 0 &&
          strlen(q.s) == 63);
    q = braid_quote(t, 100, 100);
    CHECK(strncmp(q.s, "...", 3) == 0 && strncmp(q.s + 3, t + 40, 60) == 0 &&
          strlen(q.s) == 63);
    /* Every position of every length against the plain rule. */
    char want[80];
    for (size_t len = 0; len <= 200; len += 7)
        for (size_t pos = 0; pos <= len; pos++) {
            char tt[201];
            memcpy(tt, t, len);
            tt[len] = '\0';
            expected_window(want, tt, len, pos);
            q = braid_quote(tt, len, pos);
            if (strcmp(q.s, want) != 0) {
                fprintf(stderr, "quote len %zu pos %zu: '%s', want '%s'\n",
                        len, pos, q.s, want);
                test_failures++;
            }
        }

    /* Control characters and bytes >= 0x80 become \xNN. */
    CHECK(strcmp(braid_quote("a\tb\x1b[2J", 7, 1).s, "a\\x09b\\x1b[2J") == 0);
    CHECK(strcmp(braid_quote("\xff\x80\x7f", 3, 0).s, "\\xff\\x80\\x7f") == 0);
    CHECK(strcmp(braid_quote("x\n", 2, 1).s, "x\\x0a") == 0);
    /* One byte, the NUL at the end of a string included. */
    CHECK(strcmp(braid_quote("q", 1, 0).s, "q") == 0);
    CHECK(strcmp(braid_quote("", 1, 0).s, "\\x00") == 0);
    /* Escapes count 4 columns, so text of nothing but control bytes never
     * passes the buffer, at any position, and the fault stays in view. */
    char ctl[300];
    for (int i = 0; i < 300; i++)
        ctl[i] = (char)(i % 3 ? 0x01 : 0xfe);
    for (size_t pos = 0; pos <= sizeof(ctl); pos++) {
        q        = braid_quote(ctl, sizeof(ctl), pos);
        size_t n = strlen(q.s);
        CHECK(n < sizeof(q.s) && all_printable(q.s));
        /* 7 escapes (28 columns) before the fault, 8 from it on */
        if (pos >= 8 && pos + 8 < sizeof(ctl))
            CHECK(strncmp(q.s, "...", 3) == 0 &&
                  strcmp(q.s + n - 3, "...") == 0);
    }
    /* A mix where a 4-column escape does not fit the last columns left. */
    char mix[120];
    memset(mix, 'a', sizeof(mix));
    mix[56] = '\x07';
    q       = braid_quote(mix, sizeof(mix), 0);
    CHECK(strlen(q.s) == 56 + 4 + 3 && strcmp(q.s + 56, "\\x07...") == 0);
    mix[56] = 'a';
    mix[57] = '\x07';
    q       = braid_quote(mix, sizeof(mix), 0);
    CHECK(strlen(q.s) == 57 + 3 && strcmp(q.s + 57, "...") == 0);

    /* Through the parsers: a hostile value never reaches the message raw,
     * and a long one shows the window around its fault. */
    long long v;
    CHECK_STATUS(braid_parse_int("X", "1\x1b[2J", 0, 100, &v),
                 BRAID_ERR_PARSE);
    CHECK_MSG("X='1\\x1b[2J': unexpected '\\x1b' at position 1");
    CHECK(all_printable(braid_last_error()));
    char longv[301], msg[160];
    memset(longv, '0', 300); /* zeros: no overflow first */
    longv[300] = '\0';
    memcpy(longv + 150, "?!", 2);
    CHECK_STATUS(braid_parse_int("X", longv, 0, 100, &v), BRAID_ERR_PARSE);
    snprintf(msg, sizeof(msg),
             "X='...%.30s?!%.28s...': unexpected '?' at position 150", longv,
             longv);
    CHECK_MSG(msg);
    size_t sz;
    CHECK_STATUS(braid_parse_size("S", "4K\xc3\xa9", 0, SIZE_MAX, &sz),
                 BRAID_ERR_PARSE);
    CHECK_MSG("S='4K\\xc3\\xa9': unexpected '\\xc3' at position 2");
}

static void test_parse_int(void)
{
    long long v = 0;
    CHECK_STATUS(braid_parse_int("X", "42", 0, 100, &v), BRAID_OK);
    CHECK(v == 42);
    CHECK_STATUS(braid_parse_int("X", "-7", -10, 10, &v), BRAID_OK);
    CHECK(v == -7);
    CHECK_STATUS(braid_parse_int("BRAID_RANK", "1x", 0, 100, &v),
                 BRAID_ERR_PARSE);
    CHECK_MSG("BRAID_RANK='1x': unexpected 'x' at position 1");
    CHECK_STATUS(braid_parse_int("X", "-1", 0, 100, &v), BRAID_ERR_PARSE);
    CHECK_MSG("unexpected '-' at position 0");
    CHECK_STATUS(braid_parse_int("X", " 1", 0, 100, &v), BRAID_ERR_PARSE);
    CHECK_MSG("at position 0");
    CHECK_STATUS(braid_parse_int("X", "", 0, 100, &v), BRAID_ERR_PARSE);
    CHECK_MSG("empty");
    CHECK_STATUS(braid_parse_int("X", "101", 0, 100, &v), BRAID_ERR_PARSE);
    CHECK_MSG("out of range [0, 100]");
    CHECK_STATUS(braid_parse_int("X", "99999999999999999999", 0, 100, &v),
                 BRAID_ERR_PARSE);
    CHECK_MSG("too large at position 18");
    CHECK_STATUS(
        braid_parse_int("X", "-9223372036854775808", LLONG_MIN, 0, &v),
        BRAID_OK);
    CHECK(v == LLONG_MIN);
    CHECK_STATUS(
        braid_parse_int("X", "-9223372036854775809", LLONG_MIN, 0, &v),
        BRAID_ERR_PARSE);
    CHECK_MSG("too large at position 19");
    /* A long value is quoted as the window around its fault, which stays
     * in view, and the position must survive. */
    char longv[601];
    memset(longv, '0', 600); /* zeros: no overflow first */
    longv[600] = '\0';
    longv[590] = 'z';
    CHECK_STATUS(braid_parse_int("BRAID_LONG", longv, 0, 100, &v),
                 BRAID_ERR_PARSE);
    CHECK_MSG(
        "BRAID_LONG='...00000000000000000000000000000000000000000000000000"
        "z000000000': unexpected 'z' at position 590");
    CHECK(strlen(braid_last_error()) < 200);
    v = 5;
    CHECK_STATUS(braid_parse_int("X", "7", 0, 3, &v), BRAID_ERR_PARSE);
    CHECK(v == 5); /* untouched on error */
}

static void test_parse_size(void)
{
    size_t v = 0;
    CHECK_STATUS(braid_parse_size("S", "64K", 0, SIZE_MAX, &v), BRAID_OK);
    CHECK(v == 65536);
    CHECK_STATUS(braid_parse_size("S", "1MiB", 0, SIZE_MAX, &v), BRAID_OK);
    CHECK(v == 1048576);
    CHECK_STATUS(braid_parse_size("S", "2g", 0, SIZE_MAX, &v), BRAID_OK);
    CHECK(v == 2ull << 30);
    CHECK_STATUS(braid_parse_size("S", "100", 0, SIZE_MAX, &v), BRAID_OK);
    CHECK(v == 100);
    CHECK_STATUS(braid_parse_size("S", "12Q", 0, SIZE_MAX, &v),
                 BRAID_ERR_PARSE);
    CHECK_MSG("S='12Q': unexpected 'Q' at position 2");
    CHECK_STATUS(braid_parse_size("S", "K", 0, SIZE_MAX, &v), BRAID_ERR_PARSE);
    CHECK_MSG("at position 0");
    CHECK_STATUS(braid_parse_size("S", "4KBx", 0, SIZE_MAX, &v),
                 BRAID_ERR_PARSE);
    CHECK_MSG("unexpected 'x' at position 3");
    CHECK_STATUS(braid_parse_size("S", "99999999999T", 0, SIZE_MAX, &v),
                 BRAID_ERR_PARSE);
    CHECK_MSG("too large");
    CHECK_STATUS(braid_parse_size("S", "2K", 0, 1024, &v), BRAID_ERR_PARSE);
    CHECK_MSG("out of range");
}

static void test_parse_double(void)
{
    double v = 0;
    CHECK_STATUS(braid_parse_double("D", "2.5", 0, 10, &v), BRAID_OK);
    CHECK(v == 2.5);
    CHECK_STATUS(braid_parse_double("D", "1e3", 0, 1e4, &v), BRAID_OK);
    CHECK(v == 1000.0);
    CHECK_STATUS(braid_parse_double("D", ".5", 0, 1, &v), BRAID_OK);
    CHECK(v == 0.5);
    CHECK_STATUS(braid_parse_double("D", "1.5s", 0, 10, &v), BRAID_ERR_PARSE);
    CHECK_MSG("D='1.5s': unexpected 's' at position 3");
    CHECK_STATUS(braid_parse_double("D", "nan", 0, 10, &v), BRAID_ERR_PARSE);
    CHECK_MSG("at position 0");
    CHECK_STATUS(braid_parse_double("D", "0x10", 0, 100, &v), BRAID_ERR_PARSE);
    CHECK_MSG("unexpected 'x' at position 1");
    CHECK_STATUS(braid_parse_double("D", "1e", 0, 100, &v), BRAID_ERR_PARSE);
    CHECK_MSG("position 2");
    CHECK_STATUS(braid_parse_double("D", "11", 0, 10, &v), BRAID_ERR_PARSE);
    CHECK_MSG("out of range");
}

static void test_timeout(void)
{
    double s = 0;
    unsetenv("BRAID_TIMEOUT");
    braid_env_timeout_reset();
    CHECK_STATUS(braid_env_timeout(&s), BRAID_OK);
    CHECK(s == 60.0);

    test_set_timeout("2.5");
    CHECK_STATUS(braid_env_timeout(&s), BRAID_OK);
    CHECK(s == 2.5);
    setenv("BRAID_TIMEOUT", "7", 1); /* cached: not read again */
    CHECK(braid_timeout_s() == 2.5);
    braid_env_timeout_reset();
    CHECK(braid_timeout_s() == 7.0);

    test_set_timeout("0");
    CHECK_STATUS(braid_env_timeout(&s), BRAID_ERR_PARSE);
    CHECK_MSG("BRAID_TIMEOUT='0'");
    test_set_timeout("3x");
    CHECK_STATUS(braid_env_timeout(&s), BRAID_ERR_PARSE);
    CHECK_MSG("BRAID_TIMEOUT='3x': unexpected 'x' at position 1");
    CHECK_STATUS(braid_env_timeout(&s), BRAID_ERR_PARSE); /* error cached */
    CHECK(braid_timeout_s() == 60.0); /* falls back to the default */
    unsetenv("BRAID_TIMEOUT");
    braid_env_timeout_reset();
}

/* Launch parse that must fail with PARSE and a message containing msg. */
static void launch_fails(braid_status_t want, const char *msg)
{
    braid_launch_t l;
    CHECK_STATUS(braid_launch_from_env(&l), want);
    CHECK_MSG(msg);
}

static void test_launch_single(void)
{
    braid_launch_t l;
    clear_env();
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(l.rank == 0 && l.size == 1);
    CHECK(strcmp(l.launcher, "single") == 0);
    CHECK(!l.has_listen_fd);
}

static void test_launch_braidrun(void)
{
    braid_launch_t l;
    clear_env();
    setenv("BRAID_RANK", "1", 1);
    setenv("BRAID_SIZE", "4", 1);
    setenv("BRAID_ADDR", "127.0.0.1:5000", 1);
    setenv("BRAID_JOB_KEY", "000102030405060708090a0b0c0d0eFF", 1);
    setenv("BRAID_LISTEN_FD", "9", 1);
    /* Lower-priority launchers are ignored when braidrun's are there. */
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.launcher, "braidrun") == 0);
    CHECK(l.rank == 1 && l.size == 4);
    CHECK(strcmp(l.host, "127.0.0.1") == 0 && l.port == 5000);
    CHECK(l.key_set && l.key[0] == 0 && l.key[10] == 10 && l.key[15] == 0xff);
    CHECK(!l.has_listen_fd); /* rank 1: the listening socket is rank 0's */
    setenv("BRAID_RANK", "0", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(l.has_listen_fd && l.listen_fd == 9);
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");

    setenv("BRAID_ADDR", "[::1]:6000", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.host, "::1") == 0 && l.port == 6000);
    setenv("BRAID_ADDR", "127.0.0.1:5000", 1);

    setenv("BRAID_RANK", "1x", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "BRAID_RANK='1x': unexpected 'x' at position 1");
    setenv("BRAID_RANK", "4", 1);
    launch_fails(BRAID_ERR_PARSE, "BRAID_RANK='4': rank 4 (at position 0) is "
                                  "not below BRAID_SIZE=4");
    setenv("BRAID_RANK", "-1", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "BRAID_RANK='-1': unexpected '-' at position 0");
    setenv("BRAID_RANK", "0", 1);
    setenv("BRAID_SIZE", "0", 1);
    launch_fails(BRAID_ERR_PARSE, "BRAID_SIZE='0'");
    setenv("BRAID_SIZE", "4", 1);

    setenv("BRAID_ADDR", "127.0.0.1:50x0", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "BRAID_ADDR='127.0.0.1:50x0': unexpected 'x' "
                 "at position 12");
    setenv("BRAID_ADDR", "127.0.0.1:70000", 1);
    launch_fails(BRAID_ERR_PARSE, "port at position 10 is out of range");
    setenv("BRAID_ADDR", "127.0.0.1:0", 1);
    launch_fails(BRAID_ERR_PARSE, "out of range");
    setenv("BRAID_ADDR", "localhost", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "BRAID_ADDR='localhost': expected 'host:port'");
    setenv("BRAID_ADDR", ":5000", 1);
    launch_fails(BRAID_ERR_PARSE, "empty host at position 0");
    setenv("BRAID_ADDR", "host:", 1);
    launch_fails(BRAID_ERR_PARSE, "expected a port at position 5");
    setenv("BRAID_ADDR", "[::1:5000", 1);
    launch_fails(BRAID_ERR_PARSE, "never closed");
    setenv("BRAID_ADDR", "127.0.0.1:50\r0", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "BRAID_ADDR='127.0.0.1:50\\x0d0': unexpected '\\x0d' "
                 "at position 12");
    setenv("BRAID_ADDR", "127.0.0.1:5000", 1);

    setenv("BRAID_JOB_KEY", "000102030405060708090a0b0c0d0e", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "ends at position 30, expected 32 hex digits");
    setenv("BRAID_JOB_KEY", "00010g030405060708090a0b0c0d0e0f", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "BRAID_JOB_KEY='00010g030405060708090a0b0c0d0e0f"
                 "': unexpected 'g' at position 5");
    setenv("BRAID_JOB_KEY", "000102030405060708090a0b0c0d0e0f0", 1);
    launch_fails(BRAID_ERR_PARSE, "unexpected '0' at position 32");
    setenv("BRAID_JOB_KEY", "000102030405060708090a0b0c0d0e0f\x7f", 1);
    launch_fails(BRAID_ERR_PARSE, "0e0f\\x7f': unexpected '\\x7f' at "
                                  "position 32");
    setenv("BRAID_JOB_KEY", "000102030405060708090a0b0c0d0e0f", 1);

    /* Once a bootstrap took the inherited socket, the number is stale. */
    braid_launch_listen_fd_taken();
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(!l.has_listen_fd && l.rank == 0);

    setenv("BRAID_LISTEN_FD", "x", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "BRAID_LISTEN_FD='x': unexpected 'x' at position 0");
    unsetenv("BRAID_LISTEN_FD");

    unsetenv("BRAID_ADDR");
    launch_fails(BRAID_ERR_PARSE, "BRAID_ADDR is not set");
    setenv("BRAID_ADDR", "127.0.0.1:5000", 1);
    unsetenv("BRAID_SIZE");
    launch_fails(BRAID_ERR_PARSE, "BRAID_SIZE is not set");
}

static void test_launch_mpirun(void)
{
    braid_launch_t l, l2;
    clear_env();
    /* What Debian's Open MPI 4.1.4 mpirun sets (checked with `mpirun -np 2
     * env`): OMPI_COMM_WORLD_*, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE. */
    setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    setenv("OMPI_MCA_ess_base_jobid", "2095906817", 1);
    setenv("PMIX_NAMESPACE", "2095906817", 1);
    setenv("OMPI_MCA_orte_num_nodes", "1", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.launcher, "mpirun") == 0);
    CHECK(l.rank == 2 && l.size == 3);
    CHECK(l.host[0] == '\0'); /* file rendezvous */
    CHECK(!l.key_set);        /* rank 0 draws the key */
    CHECK(strcmp(l.job_id, "2095906817") == 0);

    /* Open MPI 5: only PMIX_NAMESPACE, with characters unfit for a file. */
    unsetenv("OMPI_MCA_ess_base_jobid");
    setenv("PMIX_NAMESPACE", "prterun-host-42@1/x", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.job_id, "prterun-host-42_1_x") == 0);

    /* BRAID_ADDR overrides; on loopback the key is derived from the job
     * id. */
    setenv("BRAID_ADDR", "127.0.0.2:7000", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.host, "127.0.0.2") == 0 && l.port == 7000 && l.key_set);
    CHECK(l.rdv == BRAID_RDV_BY_HOST);
    CHECK_STATUS(braid_launch_from_env(&l2), BRAID_OK);
    CHECK(memcmp(l.key, l2.key, 16) == 0); /* same job, same key */
    setenv("PMIX_NAMESPACE", "other-job", 1);
    CHECK_STATUS(braid_launch_from_env(&l2), BRAID_OK);
    CHECK(memcmp(l.key, l2.key, 16) != 0); /* other job, other key */
    setenv("BRAID_JOB_KEY", "ffffffffffffffffffffffffffffffff", 1);
    CHECK_STATUS(braid_launch_from_env(&l2), BRAID_OK);
    CHECK(l2.key_set && l2.key[0] == 0xff && l2.key[15] == 0xff);
    /* Reachable from other hosts: a key is required, and said how. */
    setenv("BRAID_ADDR", "10.0.0.1:7000", 1);
    CHECK_STATUS(braid_launch_from_env(&l2), BRAID_OK);
    unsetenv("BRAID_JOB_KEY");
    launch_fails(BRAID_ERR_AUTH,
                 "BRAID_JOB_KEY is not set, and the "
                 "rendezvous 10.0.0.1:7000 (BRAID_ADDR) is reachable from "
                 "other hosts");
    CHECK_MSG("openssl rand -hex 16");
    CHECK_MSG("mpirun needs -x BRAID_JOB_KEY");
    unsetenv("BRAID_ADDR");

    /* Across hosts there is no shared file system to rely on. */
    setenv("OMPI_MCA_orte_num_nodes", "2", 1);
    launch_fails(BRAID_ERR_NOT_SUPPORTED, "set BRAID_ADDR");
    setenv("OMPI_MCA_orte_num_nodes", "1", 1);

    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "OMPI_COMM_WORLD_RANK='3': rank 3 (at "
                 "position 0) is not below OMPI_COMM_WORLD_SIZE=3");
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "3.", 1);
    launch_fails(BRAID_ERR_PARSE, "OMPI_COMM_WORLD_SIZE='3.': unexpected '.' "
                                  "at position 1");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    launch_fails(BRAID_ERR_PARSE, "OMPI_COMM_WORLD_SIZE is not set");

    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    setenv("BRAID_IFADDR", "10.0.0.300", 1);
    launch_fails(BRAID_ERR_PARSE, "BRAID_IFADDR='10.0.0.300'");
    setenv("BRAID_IFADDR", "127.0.0.2", 1);
    setenv("BRAID_RENDEZVOUS_DIR", "/var/tmp", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.ifaddr, "127.0.0.2") == 0);
    CHECK(strcmp(l.rendezvous_dir, "/var/tmp") == 0);
}

static void test_launch_srun(void)
{
    braid_launch_t l;
    clear_env();
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_NTASKS", "2", 1);
    setenv("SLURM_JOB_ID", "77", 1);
    setenv("SLURM_STEP_ID", "3", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.launcher, "srun") == 0);
    CHECK(l.rank == 1 && l.size == 2 && l.host[0] == '\0');
    CHECK(strcmp(l.job_id, "77.3") == 0);

    unsetenv("SLURM_NTASKS");
    setenv("SLURM_NPROCS", "5", 1); /* older name */
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(l.size == 5);
    unsetenv("SLURM_NPROCS");
    launch_fails(BRAID_ERR_PARSE, "SLURM_NTASKS is not set");
    setenv("SLURM_NTASKS", "2", 1);
    setenv("SLURM_PROCID", "x1", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "SLURM_PROCID='x1': unexpected 'x' at position 0");
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_STEP_NUM_NODES", "4", 1);
    launch_fails(BRAID_ERR_NOT_SUPPORTED, "srun spans 4 hosts");
    setenv("BRAID_ADDR", "node1:29500", 1);
    launch_fails(BRAID_ERR_AUTH, "rendezvous node1:29500 (BRAID_ADDR) is "
                                 "reachable from other hosts");
    setenv("BRAID_JOB_KEY", "0123456789abcdef0123456789abcdef", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.host, "node1") == 0 && l.port == 29500 && l.key_set);
    unsetenv("BRAID_JOB_KEY");
}

/* Which rendezvous addresses other hosts can reach. */
static void test_loopback(void)
{
    CHECK(braid_host_is_loopback("127.0.0.1"));
    CHECK(braid_host_is_loopback("127.3.2.1"));
    CHECK(braid_host_is_loopback("::1"));
    CHECK(braid_host_is_loopback("::ffff:127.0.0.1"));
    CHECK(braid_host_is_loopback("localhost"));
    CHECK(!braid_host_is_loopback("10.0.0.1"));
    CHECK(!braid_host_is_loopback("192.0.2.7"));
    CHECK(!braid_host_is_loopback("fd00::2"));
    CHECK(!braid_host_is_loopback("0.0.0.0"));
    CHECK(!braid_host_is_loopback("")); /* every interface */
    CHECK(!braid_host_is_loopback("no-such-host.invalid")); /* unknown */
}

static void test_launch_torchrun(void)
{
    braid_launch_t l;
    clear_env();
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("MASTER_ADDR", "master.example", 1);
    setenv("MASTER_PORT", "29500", 1);
    launch_fails(BRAID_ERR_AUTH,
                 "rendezvous master.example:29500 "
                 "(MASTER_ADDR/MASTER_PORT) is reachable from other hosts");
    setenv("BRAID_JOB_KEY", "0123456789abcdef0123456789abcdef", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.launcher, "torchrun") == 0);
    CHECK(l.rank == 3 && l.size == 4);
    CHECK(strcmp(l.host, "master.example") == 0 && l.port == 29500);
    CHECK(l.key_set && l.key[0] == 0x01);
    /* No agent store: the port may be free or a TCPStore's. */
    CHECK(l.rdv == BRAID_RDV_PROBE);
    char desc[512];
    braid_launch_describe(&l, desc, sizeof(desc));
    CHECK(strstr(desc,
                 "rank 3 of 4 (RANK/WORLD_SIZE), rendezvous "
                 "master.example:29500 (MASTER_ADDR/MASTER_PORT)") != NULL);
    unsetenv("BRAID_JOB_KEY");

    /* Under torchrun's static rendezvous the agent's store holds the port;
     * on loopback the key is derived from the run id and restart count. */
    braid_launch_t l2;
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    setenv("TORCHELASTIC_RESTART_COUNT", "0", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(l.rdv == BRAID_RDV_STORE && l.key_set);
    CHECK(strcmp(l.job_id, "none.0") == 0);
    setenv("TORCHELASTIC_RESTART_COUNT", "1", 1);
    CHECK_STATUS(braid_launch_from_env(&l2), BRAID_OK);
    CHECK(memcmp(l.key, l2.key, 16) != 0); /* a restart is another job */
    setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(l.rdv == BRAID_RDV_PROBE);
    setenv("MASTER_ADDR", "master.example", 1);
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    unsetenv("TORCHELASTIC_RUN_ID");
    unsetenv("TORCHELASTIC_RESTART_COUNT");
    setenv("BRAID_JOB_KEY", "0123456789abcdef0123456789abcdef", 1);

    setenv("MASTER_PORT", "29x", 1);
    launch_fails(BRAID_ERR_PARSE,
                 "MASTER_PORT='29x': unexpected 'x' at position 2");
    setenv("MASTER_PORT", "0", 1);
    launch_fails(BRAID_ERR_PARSE, "MASTER_PORT='0'");
    setenv("BRAID_ADDR", "127.0.0.1:1234", 1); /* overrides MASTER_* */
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.host, "127.0.0.1") == 0 && l.port == 1234);
    unsetenv("BRAID_ADDR");
    setenv("MASTER_PORT", "29500", 1);
    unsetenv("MASTER_ADDR");
    launch_fails(BRAID_ERR_PARSE, "MASTER_ADDR is not set");

    /* RANK alone (some other tool's variable) is not torchrun. */
    unsetenv("WORLD_SIZE");
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK(strcmp(l.launcher, "single") == 0 && l.size == 1);
    clear_env();
}

static void test_rendezvous_file(void)
{
    char dir[] = "/tmp/braid-test-rdv-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    braid_launch_t l;
    memset(&l, 0, sizeof(l));
    snprintf(l.rendezvous_dir, sizeof(l.rendezvous_dir), "%s", dir);
    snprintf(l.job_id, sizeof(l.job_id), "job1");
    char path[4200];
    CHECK_STATUS(braid_rdv_path(&l, path, sizeof(path)), BRAID_OK);
    char want[4200];
    snprintf(want, sizeof(want), "%s/braid-%u-job1", dir, (unsigned)getuid());
    CHECK(strcmp(path, want) == 0);

    uint8_t key[16], key2[16] = {0};
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)(0xa0 + i);
    CHECK_STATUS(braid_rdv_publish(path, "127.0.0.1", 4321, key), BRAID_OK);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    char host[96];
    int  port = 0;
    CHECK_STATUS(
        braid_rdv_read(path, test_now() + 1, host, sizeof(host), &port, key2),
        BRAID_OK);
    CHECK(strcmp(host, "127.0.0.1") == 0 && port == 4321);
    CHECK(memcmp(key, key2, 16) == 0);

    /* A file others can read is not believed. */
    CHECK(chmod(path, 0644) == 0);
    CHECK_STATUS(
        braid_rdv_read(path, test_now() + 1, host, sizeof(host), &port, key2),
        BRAID_ERR_AUTH);
    CHECK_MSG("mode 0644");
    /* Publishing again replaces the file atomically and privately. */
    CHECK_STATUS(braid_rdv_publish(path, "127.0.0.1", 4322, key), BRAID_OK);
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);

    /* Garbage in the file. */
    braid_rdv_remove(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "127.0.0.1 43x1 00\n", 18) == 18);
    close(fd);
    CHECK_STATUS(
        braid_rdv_read(path, test_now() + 1, host, sizeof(host), &port, key2),
        BRAID_ERR_PARSE);
    CHECK_MSG("unexpected 'x' at position 2");
    braid_rdv_remove(path);
    CHECK(access(path, F_OK) != 0);

    /* No file: a timeout, quickly. */
    double t0 = test_now();
    CHECK_STATUS(braid_rdv_read(path, test_now() + 0.2, host, sizeof(host),
                                &port, key2),
                 BRAID_ERR_TIMEOUT);
    CHECK(test_now() - t0 < 1.5);
    CHECK_MSG("no rendezvous file");
    rmdir(dir);
}

int main(void)
{
    test_quote();
    test_parse_int();
    test_parse_size();
    test_parse_double();
    test_timeout();
    test_launch_single();
    test_launch_braidrun();
    test_launch_mpirun();
    test_launch_srun();
    test_loopback();
    test_launch_torchrun();
    test_rendezvous_file();
    if (test_failures == 0)
        printf("env: all checks passed\n");
    return test_failures != 0;
}
