/* The calibration cache file: BRAID_CALIBRATE's values, the file's text
 * read back exactly, another shape's key missing, and every damage named
 * by its line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "comm/calib.h"
#include "util/log.h"
#include "util/textfile.h"

static void test_mode(void)
{
    braid_calib_mode_t m;
    CHECK(braid_calib_mode_parse(&m, NULL) == BRAID_OK && m == BRAID_CALIB_ON,
          "unset: on");
    CHECK(braid_calib_mode_parse(&m, "0") == BRAID_OK && m == BRAID_CALIB_OFF,
          "0: off");
    CHECK(braid_calib_mode_parse(&m, "force") == BRAID_OK &&
              m == BRAID_CALIB_FORCE,
          "force");
    CHECK(braid_calib_mode_parse(&m, "forse") == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "BRAID_CALIBRATE='forse'") &&
              strstr(braid_last_error(), "position 3"),
          "typo points at it: %s", braid_last_error());
    CHECK(braid_calib_mode_parse(&m, "yes") == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "expected 0, 1 or force"),
          "unknown word: %s", braid_last_error());
}

static braid_calib_t sample(void)
{
    braid_calib_t c;
    memset(&c, 0, sizeof(c));
    c.reduce_gbps = 21.5;
    c.when        = 1796300000;
    c.took_s      = 0.125;
    c.ntl         = 2;
    snprintf(c.tl[0].name, sizeof(c.tl[0].name), "shm");
    snprintf(c.tl[0].version, sizeof(c.tl[0].version), "0.1");
    c.tl[0].has_sr = c.tl[0].has_put = 1;
    c.tl[0].sr =
        (braid_calib_path_t){0.5, 2.25, 4.125, 524288, 1.25, 16777216};
    c.tl[0].put = (braid_calib_path_t){0.0625, 1.5, 27, 524288, 2.5, 16777216};
    c.tl[0].has_get = 1;
    c.tl[0].get = (braid_calib_path_t){0.75, 1.25, 6.5, 524288, 3.75, 8388608};
    c.tl[0].has_mget = 1;
    c.tl[0].mget =
        (braid_calib_path_t){0.375, 0.5, 11.25, 524288, 7.5, 8388608};
    snprintf(c.tl[1].name, sizeof(c.tl[1].name), "roce");
    snprintf(c.tl[1].version, sizeof(c.tl[1].version), "1.2");
    c.tl[1].has_put = 1;
    c.tl[1].put     = (braid_calib_path_t){3, 4, 12.5, 524288, 11, 33554432};
    return c;
}

static void test_round_trip(void)
{
    const char   *key = "v2 hosts=h/boot ranks=4 nodes=1 ppn=4";
    braid_calib_t c   = sample(), back;
    char          text[4096];
    int           match = -1;
    CHECK(braid_calib_format(text, sizeof(text), key, &c) == BRAID_OK,
          "format: %s", braid_last_error());
    CHECK(braid_calib_parse(&back, &match, text, key, "c.txt") == BRAID_OK &&
              match == 1,
          "parse back: %s", braid_last_error());
    CHECK(back.ntl == 2 && back.reduce_gbps == 21.5 && back.took_s == 0.125 &&
              back.when == 1796300000,
          "scalars back");
    const braid_calib_tl_t *s = braid_calib_find(&back, "shm", "0.1");
    CHECK(s != NULL && s->has_sr && s->has_put && s->sr.pair_us == 0.5 &&
              s->sr.all_us == 2.25 && s->sr.beta_gbps == 4.125 &&
              s->put.beta_gbps == 27,
          "shm back");
    CHECK(s != NULL && s->has_get && s->get.pair_us == 0.75 &&
              s->get.all_us == 1.25 && s->get.beta_gbps == 6.5,
          "shm's get path back");
    CHECK(s != NULL && s->sr.bytes == 524288 && s->sr.big_beta_gbps == 1.25 &&
              s->sr.big_bytes == 16777216 && s->put.big_beta_gbps == 2.5 &&
              s->get.big_beta_gbps == 3.75 && s->get.big_bytes == 8388608,
          "the out-of-cache figures and both sizes back");
    CHECK(s != NULL && s->has_mget && s->mget.pair_us == 0.375 &&
              s->mget.all_us == 0.5 && s->mget.beta_gbps == 11.25 &&
              s->mget.big_beta_gbps == 7.5 && s->mget.big_bytes == 8388608,
          "shm's reads of braid_mem_alloc's memory back");
    const braid_calib_tl_t *r = braid_calib_find(&back, "roce", "1.2");
    CHECK(r != NULL && !r->has_sr && r->has_put && !r->has_get &&
              !r->has_mget && r->put.beta_gbps == 12.5,
          "a transport without send/recv back");
    CHECK(braid_calib_find(&back, "shm", "0.2") == NULL,
          "another version is another entry");
    CHECK(braid_calib_parse(&back, &match, text, "v2 hosts=h/boot ranks=8",
                            "c.txt") == BRAID_OK &&
              match == 0,
          "another shape's key does not match");
}

/* text (with a valid key line first) must be refused at c.txt:LINE. */
static void damaged(const char *body, int line, const char *want)
{
    char          text[1024], where[32];
    braid_calib_t c;
    int           match = 1;
    snprintf(text, sizeof(text), "key k\n%s", body);
    snprintf(where, sizeof(where), "c.txt:%d", line);
    braid_status_t st = braid_calib_parse(&c, &match, text, "k", "c.txt");
    CHECK(st == BRAID_ERR_PARSE && match == 0 &&
              strstr(braid_last_error(), where) &&
              strstr(braid_last_error(), want),
          "'%s' refused at %s with '%s': got %d '%s'", body, where, want, st,
          braid_last_error());
}

static void test_damage(void)
{
    const char *head = "measured 1 took 0.1\nreduce_gbps 8\n";
    char        body[512];
    damaged("measured 1 took 0.1\nreduce_gbps x\n", 3, "field 2");
    damaged("measured 1 took 0.1\nreduce_gbps 0\n", 3, "above 0");
    damaged("measured one took 0.1\n", 2, "field 2");
    damaged("measured 1\n", 2, "expected 'measured SECONDS took SECONDS'");
    /* Damaged tl lines after a valid head: what each is refused for. */
    static const struct {
        const char *tl, *want;
        int         line;
    } bad[] = {
        {"tl shm 0.1 sr 1 2\n", "before field 7", 4},
        {"tl shm 0.1 sr 1 2 0 9 1 99 put -\n",
         "field 7: a bandwidth must be above 0", 4},
        /* The format before the out-of-cache figures: three numbers a
         * path. */
        {"tl shm 0.1 sr 1 2 3 put 1 2 3\n", "field 8", 4},
        {"tl shm 0.1 sr 1 2 3 9 0 99 put -\n",
         "field 9: a bandwidth must be above 0", 4},
        {"tl shm 0.1 sr 1 2 3 99 1 99 put -\n", "fields 8 and 10", 4},
        {"tl shm 0.1 sr 1 2 3 0 1 99 put -\n", "fields 8 and 10", 4},
        {"tl shm 0.1 put -\n", "expected 'sr'", 4},
        {"tl shm 0.1 sr - put - extra\n", "unexpected fields", 4},
        {"tl shm 0.1 sr - put - get 1 2 0 1 1 2\n",
         "a bandwidth must be above 0", 4},
        {"tl shm 0.1 sr - put - get 1 2 3 1 1 2 x\n", "unexpected fields", 4},
        /* mget only after a get path, with six numbers of its own */
        {"tl shm 0.1 sr - put - mget 1 2 3 1 1 2\n", "unexpected fields", 4},
        {"tl shm 0.1 sr - put - get 1 2 3 1 1 2 mget 1 2 3 1\n",
         "before field 20", 4},
        {"tl shm 0.1 sr - put - get 1 2 3 1 1 2 mget 1 2 3 1 0 2\n",
         "field 20: a bandwidth must be above 0", 4},
        {"tl shm 0.1 sr - put -\ntl shm 0.1 sr - put -\n",
         "the same transport twice", 5},
        {"bogus 1\n", "expected key, measured, reduce_gbps or tl", 4},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        snprintf(body, sizeof(body), "%s%s", head, bad[k].tl);
        damaged(body, bad[k].line, bad[k].want);
    }
    damaged("key again\n", 2, "a second key line");

    braid_calib_t c;
    int           match = 1;
    CHECK(braid_calib_parse(&c, &match, "key k\nmeasured 1 took 1\n", "k",
                            "c.txt") == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "lacks the reduce_gbps line"),
          "a missing line is named: %s", braid_last_error());
}

/* A cache written before the out-of-cache figures (key v1, three numbers a
 * path) is another shape's to this version: not used, so measured again;
 * under the current key its lines are refused with their place. */
static void test_old_format(void)
{
    const char   *old = "key v1 hosts=h/boot ranks=2\nmeasured 1 took 0.1\n"
                        "reduce_gbps 8\ntl shm 0.1 sr 1 2 3 put 1 2 30\n";
    braid_calib_t c;
    int           match = 1;
    CHECK(braid_calib_parse(&c, &match, old, "v2 hosts=h/boot ranks=2",
                            "old.txt") != BRAID_OK ||
              match == 0,
          "a v1 cache is not taken for a v2 one");
    char text[512];
    snprintf(text, sizeof(text), "key v2 k\n%s", strchr(old, '\n') + 1);
    CHECK(braid_calib_parse(&c, &match, text, "v2 k", "old.txt") ==
                  BRAID_ERR_PARSE &&
              match == 0 && strstr(braid_last_error(), "old.txt:4"),
          "v1 path fields under a v2 key refused at the line: %s",
          braid_last_error());
}

/* The out-of-cache exchange's size: twice the cache over the host's ranks
 * per buffer pair, within its bounds. */
static void test_big_bytes(void)
{
    const size_t mib = (size_t)1 << 20;
    CHECK(braid_calib_big_bytes(32 * mib, 4) == 8 * mib, "32 MiB, 4 ranks");
    CHECK(braid_calib_big_bytes(32 * mib, 2) == 16 * mib, "32 MiB, 2 ranks");
    CHECK(braid_calib_big_bytes(32 * mib, 1) == 16 * mib,
          "capped at 16 MiB: %zu", braid_calib_big_bytes(32 * mib, 1));
    CHECK(braid_calib_big_bytes(1 * mib, 8) == 4 * mib,
          "at least 8 in-cache messages: %zu",
          braid_calib_big_bytes(1 * mib, 8));
    CHECK(braid_calib_big_bytes(0, 4) == braid_calib_big_bytes(32 * mib, 4),
          "an unknown cache counts as 32 MiB");
    CHECK(braid_calib_big_bytes(24 * mib + 1000, 3) % 4096 == 0,
          "whole pages");
    printf("this machine's last-level cache: %zu bytes\n",
           braid_calib_llc_bytes());
}

/* The ranks' out-of-cache figures agree on the rank a quarter of the way
 * up: one descheduled rank of 8 does not set the link, two of 8 or one of
 * 2 or 3 do; ranks without a figure are left out. */
static void test_agree_out(void)
{
    double eight[8] = {19.8, 21.8, 0.74, 20.9, 24.6, 18.8, 20.5, 19.4};
    CHECK(braid_calib_agree_out_gbps(eight, 8) == 19.4,
          "one slow rank of 8 set the link");
    double two_slow[8] = {19.8, 1.5, 0.74, 20.9, 24.6, 18.8, 20.5, 19.4};
    CHECK(braid_calib_agree_out_gbps(two_slow, 8) == 18.8,
          "two slow ranks of 8");
    double four[4] = {9.0, 2.0, 8.0, 7.0};
    CHECK(braid_calib_agree_out_gbps(four, 4) == 7.0, "4 ranks: the second");
    double three[3] = {9.0, 2.0, 8.0};
    CHECK(braid_calib_agree_out_gbps(three, 3) == 2.0, "3 ranks: the slowest");
    double two[2] = {9.0, 2.0};
    CHECK(braid_calib_agree_out_gbps(two, 2) == 2.0, "2 ranks: the slowest");
    double gaps[4] = {0.0, 6.0, 0.0, 5.0};
    CHECK(braid_calib_agree_out_gbps(gaps, 4) == 5.0, "ranks without one");
    double none[2] = {0.0, 0.0};
    CHECK(braid_calib_agree_out_gbps(none, 2) == 0.0, "none measured");
}

static void test_files(void)
{
    char dir[] = "/tmp/braid-calib-test-XXXXXX", path[1024], sub[600];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(sub, sizeof(sub), "%s/a/b", dir);
    braid_calib_cache_path(path, sizeof(path), sub, "key one");
    CHECK(strstr(path, "/a/b/calib-") != NULL, "path: %s", path);
    braid_calib_t c     = sample(), back;
    int           match = 0;
    CHECK(braid_calib_load(&back, &match, path, "key one") == BRAID_ERR_IO &&
              errno == ENOENT,
          "no file yet: %s", braid_last_error());
    CHECK(braid_calib_store(path, "key one", &c) == BRAID_OK,
          "store (creating the folders): %s", braid_last_error());
    CHECK(braid_calib_load(&back, &match, path, "key one") == BRAID_OK &&
              match && back.ntl == 2,
          "load: %s", braid_last_error());
    char other[1024];
    braid_calib_cache_path(other, sizeof(other), sub, "key two");
    CHECK(strcmp(other, path) != 0, "another key, another file");

    setenv("BRAID_CALIB_DIR", sub, 1);
    char d[600];
    braid_calib_cache_dir(d, sizeof(d));
    CHECK(strcmp(d, sub) == 0, "BRAID_CALIB_DIR: %s", d);
    unsetenv("BRAID_CALIB_DIR");
    setenv("XDG_CACHE_HOME", "/x", 1);
    braid_calib_cache_dir(d, sizeof(d));
    CHECK(strcmp(d, "/x/braid") == 0, "XDG_CACHE_HOME: %s", d);
    unsetenv("XDG_CACHE_HOME");

    unlink(path);
    rmdir(sub);
    snprintf(sub, sizeof(sub), "%s/a", dir);
    rmdir(sub);
    rmdir(dir);
}

/* The whole-file reader the cache and the tuning file share: a file read
 * whole, one too large or holding a NUL refused with its label. */
static void test_text_read(void)
{
    char dir[] = "/tmp/braid-text-test-XXXXXX", path[1024], *text;
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof(path), "%s/f.txt", dir);
    CHECK(braid_text_read(&text, path, "LABEL", 16) == BRAID_ERR_IO &&
              errno == ENOENT && text == NULL &&
              strstr(braid_last_error(), "LABEL: cannot open"),
          "missing: %s", braid_last_error());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL && fwrite("abc\0def", 1, 7, f) == 7, "write");
    fclose(f);
    CHECK(braid_text_read(&text, path, "LABEL", 16) == BRAID_ERR_PARSE &&
              text == NULL &&
              strstr(braid_last_error(), "NUL byte at offset 3"),
          "a NUL: %s", braid_last_error());
    CHECK(braid_text_read(&text, path, "LABEL", 6) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "LABEL: larger than 6 bytes"),
          "too large: %s", braid_last_error());
    f = fopen(path, "w");
    CHECK(f != NULL && fputs("line\n", f) >= 0, "write");
    fclose(f);
    CHECK(braid_text_read(&text, path, "LABEL", 5) == BRAID_OK && text &&
              strcmp(text, "line\n") == 0 && errno == 0,
          "exactly the bound: %s", braid_last_error());
    free(text);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    test_text_read();
    test_agree_out();
    test_mode();
    test_round_trip();
    test_damage();
    test_old_format();
    test_big_bytes();
    test_files();
    return check_summary("calib-cache");
}
