/* engine/common/safetensors: what the writer writes the reader reads back
 * (single file and sharded with an index), blocks come out converted, and
 * every kind of damaged file is refused with a message naming the file,
 * the tensor and the fault. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/safetensors.h"
#include "engine/common/util.h"
#include "tests/unit/check.h"

static char dir[256];

static const char *path_of(const char *name)
{
    static char buf[4][512];
    static int  k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
    return buf[k];
}

/* a: f32 [3, 5] = i, b: bf16 [4] = i/2, c: f16 [2, 2, 2] = -i */
static float    a_vals[15];
static uint16_t b_vals[4], c_vals[8];

static void write_abc(const char *file)
{
    for (int i = 0; i < 15; i++)
        a_vals[i] = (float)i;
    for (int i = 0; i < 4; i++)
        b_vals[i] = braid_eng_f32_to_bf16((float)i / 2);
    for (int i = 0; i < 8; i++)
        c_vals[i] = braid_eng_f32_to_f16((float)-i);
    braid_eng_st_entry_t e[3] = {
        {"a", BRAID_F32, 2, {3, 5}, a_vals},
        {"b", BRAID_BF16, 1, {4}, b_vals},
        {"c", BRAID_F16, 3, {2, 2, 2}, c_vals},
    };
    CHECK(braid_eng_st_save(path_of(file), e, 3) == BRAID_OK, "save: %s",
          braid_eng_error());
}

static void test_roundtrip(void)
{
    write_abc("abc.safetensors");
    braid_eng_st_t *st;
    CHECK(braid_eng_st_open(&st, path_of("abc.safetensors")) == BRAID_OK,
          "open: %s", braid_eng_error());
    if (!st)
        return;
    CHECK(braid_eng_st_count(st) == 3, "3 tensors");
    const braid_eng_st_tensor_t *t = braid_eng_st_find(st, "a");
    CHECK(t && t->dtype == BRAID_F32 && t->ndim == 2 && t->shape[0] == 3 &&
              t->shape[1] == 5 && t->nbytes == 60,
          "a's entry");
    /* rows 1..2, cols 2..4 of a, as bf16 then as f32 */
    float blk[6];
    CHECK(braid_eng_st_read(blk, BRAID_F32, st, t, 1, 2, 2, 3) == BRAID_OK,
          "read block");
    CHECK(blk[0] == 7 && blk[2] == 9 && blk[3] == 12 && blk[5] == 14,
          "block values %g %g %g %g", blk[0], blk[2], blk[3], blk[5]);
    uint16_t hb[6];
    braid_eng_st_read(hb, BRAID_BF16, st, t, 1, 2, 2, 3);
    CHECK(braid_eng_bf16_to_f32(hb[4]) == 13, "f32 -> bf16 block");
    t = braid_eng_st_find(st, "c"); /* [2,2,2] viewed as [4, 2] */
    CHECK(braid_eng_st_read(blk, BRAID_F32, st, t, 3, 1, 0, 2) == BRAID_OK &&
              blk[0] == -6 && blk[1] == -7,
          "3-D tensor as rows");
    CHECK(braid_eng_st_read(blk, BRAID_F32, st, t, 3, 2, 0, 2) ==
              BRAID_ERR_INVALID_ARG,
          "block past the end refused");
    int64_t shape[2] = {5, 3};
    CHECK(braid_eng_st_expect(&t, st, "a", 2, shape) != BRAID_OK &&
              strstr(braid_eng_error(), "shape [3, 5], expected [5, 3]"),
          "wrong shape named: %s", braid_eng_error());
    CHECK(braid_eng_st_expect(&t, st, "zz", 2, shape) == BRAID_ERR_NOT_FOUND &&
              strstr(braid_eng_error(), "'zz': missing"),
          "missing: %s", braid_eng_error());
    braid_eng_st_close(st);
}

static void test_sharded(void)
{
    /* a in shard 1, b and c in shard 2, plus the index */
    for (int i = 0; i < 15; i++)
        a_vals[i] = (float)i;
    braid_eng_st_entry_t e1    = {"a", BRAID_F32, 2, {3, 5}, a_vals};
    braid_eng_st_entry_t e2[2] = {{"b", BRAID_BF16, 1, {4}, b_vals},
                                  {"c", BRAID_F16, 3, {2, 2, 2}, c_vals}};
    mkdir(path_of("sharded"), 0755);
    CHECK(braid_eng_st_save(path_of("sharded/m-1.safetensors"), &e1, 1) ==
              BRAID_OK,
          "s1");
    CHECK(braid_eng_st_save(path_of("sharded/m-2.safetensors"), e2, 2) ==
              BRAID_OK,
          "s2");
    const char *names[] = {"a", "b", "c"};
    const char *files[] = {"m-1.safetensors", "m-2.safetensors",
                           "m-2.safetensors"};
    char        index[512];
    snprintf(index, sizeof(index), "%s",
             path_of("sharded/model.safetensors.index.json"));
    CHECK(braid_eng_st_write_index(index, names, files, 3, 60 + 8 + 16) ==
              BRAID_OK,
          "index");
    braid_eng_st_t *st = NULL;
    CHECK(braid_eng_st_open(&st, path_of("sharded")) == BRAID_OK,
          "open sharded dir: %s", braid_eng_error());
    if (st) {
        const braid_eng_st_tensor_t *t = braid_eng_st_find(st, "c");
        CHECK(braid_eng_st_count(st) == 3 && t && t->file == 1,
              "3 tensors over 2 files");
        braid_eng_st_close(st);
    }
    /* The index names a file for 'c' that does not hold it. */
    files[2] = "m-1.safetensors";
    braid_eng_st_write_index(index, names, files, 3, 0);
    CHECK(braid_eng_st_open(&st, path_of("sharded")) == BRAID_ERR_PARSE &&
              strstr(braid_eng_error(), "'c'"),
          "misplaced tensor: %s", braid_eng_error());
    /* A tensor in a file but not in the index. */
    braid_eng_st_write_index(index, names,
                             (const char *[]){"m-1.safetensors",
                                              "m-2.safetensors",
                                              "m-2.safetensors"},
                             2, 0);
    CHECK(braid_eng_st_open(&st, path_of("sharded")) == BRAID_ERR_PARSE &&
              strstr(braid_eng_error(), "'c' is not in the index"),
          "unlisted tensor: %s", braid_eng_error());
    /* An index pointing outside its directory. */
    braid_eng_st_write_index(index, names,
                             (const char *[]){"../abc.safetensors",
                                              "m-2.safetensors",
                                              "m-2.safetensors"},
                             3, 0);
    CHECK(braid_eng_st_open(&st, index) == BRAID_ERR_PARSE &&
              strstr(braid_eng_error(), "directory"),
          "escaping index: %s", braid_eng_error());
    /* The same tensor in two shards. */
    braid_eng_st_entry_t dup[2] = {{"a", BRAID_F32, 2, {3, 5}, a_vals},
                                   {"b", BRAID_BF16, 1, {4}, b_vals}};
    braid_eng_st_save(path_of("sharded/m-2.safetensors"), dup, 2);
    braid_eng_st_write_index(
        index, names, (const char *[]){"m-1.safetensors", "m-2.safetensors"},
        2, 0);
    CHECK(braid_eng_st_open(&st, index) == BRAID_ERR_PARSE &&
              strstr(braid_eng_error(), "'a' appears twice"),
          "duplicate: %s", braid_eng_error());
}

/* Reads abc.safetensors, lets `edit` damage the bytes, writes bad.safetensors
 * and expects open to fail with a message containing `want`. */
static void expect_refused(const char *what, void (*edit)(char *, size_t *),
                           const char *want)
{
    char  *buf;
    size_t len;
    if (braid_eng_read_file(&buf, &len, path_of("abc.safetensors")) !=
        BRAID_OK)
        return;
    buf = realloc(buf, len + 64);
    edit(buf, &len);
    braid_eng_write_file(path_of("bad.safetensors"), buf, len);
    free(buf);
    braid_eng_st_t *st = NULL;
    braid_status_t  s  = braid_eng_st_open(&st, path_of("bad.safetensors"));
    CHECK(s != BRAID_OK && strstr(braid_eng_error(), want) &&
              strstr(braid_eng_error(), "bad.safetensors"),
          "%s: status %d, message '%s', expected '%s'", what, s,
          braid_eng_error(), want);
    braid_eng_st_close(st);
}

static void replace_in_header(char *buf, const char *from, const char *to)
{
    char *p = memmem(buf + 8, 200, from, strlen(from));
    if (p)
        memcpy(p, to, strlen(to)); /* same length keeps offsets */
}

static void cut_end(char *buf, size_t *len)
{
    (void)buf;
    *len -= 3;
}
static void cut_header(char *buf, size_t *len)
{
    (void)buf;
    *len = 20;
}
static void tiny(char *buf, size_t *len)
{
    (void)buf;
    *len = 5;
}
static void add_tail(char *buf, size_t *len)
{
    memset(buf + *len, 0, 8);
    *len += 8;
}
static void f32_as_f16(char *buf, size_t *len)
{
    (void)len;
    replace_in_header(buf, "\"F32\"", "\"F16\"");
}
static void bf16_as_i64(char *buf, size_t *len)
{
    (void)len;
    replace_in_header(buf, "\"BF16\"", "\"I64\" ");
}
static void bad_dtype(char *buf, size_t *len)
{
    (void)len;
    replace_in_header(buf, "\"F32\"", "\"Q32\"");
}
static void bad_json(char *buf, size_t *len)
{
    (void)len;
    replace_in_header(buf, "\"shape\":", "\"shape\"x");
}
static void wrong_shape(char *buf, size_t *len)
{
    (void)len;
    replace_in_header(buf, "[3,5]", "[5,5]");
}
static void overlap(char *buf, size_t *len)
{
    (void)len;
    replace_in_header(buf, "[60,68]", "[52,60]");
}
static void huge_header(char *buf, size_t *len)
{
    (void)len;
    buf[5] = 1;
}
static void not_object(char *buf, size_t *len)
{
    (void)len;
    buf[8] = '[';
}

static void test_refusals(void)
{
    expect_refused("truncated data", cut_end, "truncated");
    expect_refused("truncated header", cut_header, "does not fit");
    expect_refused("shorter than the length field", tiny, "too short");
    expect_refused("trailing bytes", add_tail, "after the last tensor");
    expect_refused("f32 labelled f16", f32_as_f16, "tensor 'a'");
    expect_refused("bf16 labelled i64", bf16_as_i64, "wrong dtype or shape");
    expect_refused("unknown dtype", bad_dtype, "unknown dtype 'Q32'");
    expect_refused("bad JSON", bad_json, "invalid JSON at line 1");
    expect_refused("wrong shape", wrong_shape, "tensor 'a'");
    expect_refused("overlapping tensors", overlap, "overlap");
    expect_refused("huge header length", huge_header, "header length");
    expect_refused("header not an object", not_object, "'{'");

    braid_eng_st_t *st = NULL;
    CHECK(braid_eng_st_open(&st, path_of("nope.safetensors")) ==
                  BRAID_ERR_IO &&
              strstr(braid_eng_error(), "nope.safetensors"),
          "missing file: %s", braid_eng_error());
    CHECK(braid_eng_st_open(&st, dir) == BRAID_ERR_NOT_FOUND,
          "directory without a checkpoint: %s", braid_eng_error());
}

static void test_writer(void)
{
    braid_eng_st_writer_t *w;
    int64_t                shape[2] = {2, 3};
    CHECK(braid_eng_st_writer_new(&w, path_of("w.safetensors")) == BRAID_OK,
          "new");
    braid_eng_st_writer_meta(w, "format", "pt");
    CHECK(braid_eng_st_writer_add(w, "x", BRAID_F32, 2, shape) == BRAID_OK,
          "add");
    CHECK(braid_eng_st_writer_add(w, "x", BRAID_F32, 2, shape) != BRAID_OK,
          "duplicate add refused");
    CHECK(braid_eng_st_writer_add(w, "y", BRAID_I64, 1, shape) == BRAID_OK,
          "add i64");
    CHECK(braid_eng_st_writer_data(w, "x") == NULL, "no data before map");
    CHECK(braid_eng_st_writer_map(w) == BRAID_OK, "map");
    CHECK(braid_eng_st_writer_add(w, "z", BRAID_F32, 2, shape) ==
              BRAID_ERR_STATE,
          "add after map refused");
    CHECK(access(path_of("w.safetensors"), F_OK) != 0,
          "not visible before finish");
    float   x[6] = {1, 2, 3, 4, 5, 6};
    int64_t y[2] = {-1, 1ll << 40};
    memcpy(braid_eng_st_writer_data(w, "x"), x, sizeof(x));
    memcpy(braid_eng_st_writer_data(w, "y"), y, sizeof(y));
    CHECK(braid_eng_st_writer_finish(w) == BRAID_OK, "finish");
    braid_eng_st_t *st;
    CHECK(braid_eng_st_open(&st, path_of("w.safetensors")) == BRAID_OK,
          "reopen");
    const braid_eng_st_tensor_t *t = braid_eng_st_find(st, "y");
    int64_t                      yy[2];
    memcpy(yy, t->data, sizeof(yy));
    CHECK(t->dtype == BRAID_I64 && yy[1] == (1ll << 40), "i64 kept");
    CHECK(braid_eng_st_meta(st, "format") &&
              !strcmp(braid_eng_st_meta(st, "format"), "pt"),
          "metadata kept");
    CHECK(((uintptr_t)braid_eng_st_find(st, "x")->data & 7) == 0,
          "data section 8-byte aligned");
    braid_eng_st_close(st);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/braid-st-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip();
    test_sharded();
    test_refusals();
    test_writer();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("engine-safetensors");
}
