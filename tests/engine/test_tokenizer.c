/* engine/common/tokenizer: a tokenizer.json written here (Qwen's
 * pre-tokenizer, a byte-level vocabulary, a few merges, special tokens)
 * encodes known strings to hand-worked ids and decodes every byte string
 * back, including tokens that are not valid UTF-8 on their own and input
 * that is not UTF-8 at all; unsupported or broken files are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine/common/err.h"
#include "engine/common/tokenizer.h"
#include "engine/common/util.h"
#include "tests/unit/check.h"

/* Qwen2/Qwen3's Split pattern, as it stands in their tokenizer.json. */
static const char qwen_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?"
    "[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The byte-level alphabet, written out independently of the tokenizer. */
static void byte_token(char *out, int b)
{
    static int cp[256];
    static int ready;
    if (!ready) {
        int n = 0;
        for (int i = 0; i < 256; i++)
            cp[i] =
                (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174)
                    ? i
                    : 256 + n++;
        ready = 1;
    }
    int c = cp[b];
    if (c < 128) {
        out[0] = (char)c, out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3f));
        out[2] = 0;
    }
}

/* ids: byte b is id b; merges 256.. as listed. */
static const char *const merges[][2] = {
    {"h", "e"},
    {"l", "l"},
    {"he", "ll"},
    {"hell", "o"},
    {"\xc4\xa0", "w"},        /* "Ġ w": space + w */
    {"\xc3\x83", "\xc2\xa9"}, /* bytes C3 A9: é */
    {"\xc3\xa2", "\xc4\xa4"}, /* bytes E2 82: the first two of € */
    {"e", "l"},               /* ranks last: "hel" must merge "h e" first */
};
enum { N_MERGES = sizeof(merges) / sizeof(merges[0]) };

static char *json_path;

static cJSON *make_json(int gpt2_style)
{
    cJSON      *root       = cJSON_CreateObject();
    cJSON      *added      = cJSON_AddArrayToObject(root, "added_tokens");
    const char *specials[] = {"<|endoftext|>", "<|im_start|>"};
    for (int i = 0; i < 2; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", 300 + i);
        cJSON_AddStringToObject(a, "content", specials[i]);
        cJSON_AddBoolToObject(a, "special", 1);
        cJSON_AddItemToArray(added, a);
    }
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "NFC");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    if (gpt2_style) {
        cJSON_AddStringToObject(pre, "type", "ByteLevel");
        cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
        cJSON_AddBoolToObject(pre, "use_regex", 1);
    } else {
        cJSON_AddStringToObject(pre, "type", "Sequence");
        cJSON *seq   = cJSON_AddArrayToObject(pre, "pretokenizers");
        cJSON *split = cJSON_CreateObject();
        cJSON_AddStringToObject(split, "type", "Split");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(split, "pattern"),
                                "Regex", qwen_pattern);
        cJSON_AddStringToObject(split, "behavior", "Isolated");
        cJSON_AddBoolToObject(split, "invert", 0);
        cJSON_AddItemToArray(seq, split);
        cJSON *bl = cJSON_CreateObject();
        cJSON_AddStringToObject(bl, "type", "ByteLevel");
        cJSON_AddBoolToObject(bl, "add_prefix_space", 0);
        cJSON_AddBoolToObject(bl, "use_regex", 0);
        cJSON_AddItemToArray(seq, bl);
    }
    cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "decoder"), "type",
                            "ByteLevel");
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int b = 0; b < 256; b++) {
        char tok[4];
        byte_token(tok, b);
        cJSON_AddNumberToObject(vocab, tok, b);
    }
    cJSON *ml = cJSON_AddArrayToObject(model, "merges");
    for (int i = 0; i < N_MERGES; i++) {
        char joined[32], line[32];
        snprintf(joined, sizeof(joined), "%s%s", merges[i][0], merges[i][1]);
        snprintf(line, sizeof(line), "%s %s", merges[i][0], merges[i][1]);
        cJSON_AddNumberToObject(vocab, joined, 256 + i);
        /* both spellings of a merge: "a b" and ["a", "b"] */
        if (i % 2)
            cJSON_AddItemToArray(ml, cJSON_CreateString(line));
        else
            cJSON_AddItemToArray(ml, cJSON_CreateStringArray(merges[i], 2));
    }
    return root;
}

static void save(cJSON *root)
{
    char *text = cJSON_Print(root);
    braid_eng_write_file(json_path, text, strlen(text));
    free(text);
    cJSON_Delete(root);
}

static void expect_ids(const braid_eng_tok_t *tok, const char *text,
                       size_t len, const int32_t *want, size_t nwant)
{
    int32_t *ids = NULL;
    size_t   n   = 0;
    CHECK(braid_eng_tok_encode(tok, text, len, &ids, &n) == BRAID_OK,
          "encode: %s", braid_eng_error());
    int same = n == nwant;
    for (size_t i = 0; same && i < n; i++)
        same = ids[i] == want[i];
    if (!same) {
        fprintf(stderr, "  got:");
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    CHECK(same, "encoding of '%.*s'", (int)len, text);
    free(ids);
}

static void expect_roundtrip(const braid_eng_tok_t *tok, const char *text,
                             size_t len)
{
    int32_t *ids  = NULL;
    size_t   n    = 0;
    char    *back = NULL;
    size_t   blen = 0;
    CHECK(braid_eng_tok_encode(tok, text, len, &ids, &n) == BRAID_OK &&
              braid_eng_tok_decode(tok, ids, n, &back, &blen) == BRAID_OK &&
              blen == len && memcmp(back, text, len) == 0,
          "round trip of %zu bytes", len);
    free(ids);
    free(back);
}

static void test_qwen_style(int gpt2)
{
    save(make_json(gpt2));
    braid_eng_tok_t *tok = NULL;
    CHECK(braid_eng_tok_load(&tok, json_path) == BRAID_OK, "load: %s",
          braid_eng_error());
    if (!tok)
        return;
    CHECK(braid_eng_tok_size(tok) == 302, "size %d", braid_eng_tok_size(tok));
    CHECK(braid_eng_tok_id(tok, "<|im_start|>") == 301, "special id");

    expect_ids(tok, "hello world", 11,
               (const int32_t[]){259, 260, 'o', 'r', 'l', 'd'}, 6);
    /* the lowest rank merges first: "h e" (0) before "e l" (7) */
    expect_ids(tok, "hel", 3, (const int32_t[]){256, 'l'}, 2);
    expect_ids(tok, "el", 2, (const int32_t[]){263}, 1);
    expect_ids(tok, "<|im_start|>hello<|endoftext|>", 30,
               (const int32_t[]){301, 259, 300}, 3);
    /* é is one token; € is a token for its first two bytes and one for the
     * third: neither 262 nor 0xAC is UTF-8 alone. */
    expect_ids(tok, "\xc3\xa9\xe2\x82\xac", 5,
               (const int32_t[]){261, 262, 0xac}, 3);
    /* not UTF-8: 0xff stands alone, the letters around it merge as usual */
    expect_ids(tok, "he\xffll", 5, (const int32_t[]){256, 0xff, 257}, 3);
    if (!gpt2) /* Qwen splits digits one by one */
        expect_ids(tok, "42", 2, (const int32_t[]){'4', '2'}, 2);

    char  *bytes = NULL;
    size_t len   = 0;
    CHECK(braid_eng_tok_decode(tok, (const int32_t[]){262}, 1, &bytes, &len) ==
                  BRAID_OK &&
              len == 2 && memcmp(bytes, "\xe2\x82", 2) == 0,
          "half a character decodes to its bytes");
    free(bytes);
    CHECK(braid_eng_tok_decode(tok, (const int32_t[]){262, 0xac, 300}, 3,
                               &bytes, &len) == BRAID_OK &&
              strcmp(bytes, "\xe2\x82\xac<|endoftext|>") == 0,
          "the next token completes it");
    free(bytes);
    CHECK(braid_eng_tok_decode(tok, (const int32_t[]){5, 299}, 2, &bytes,
                               &len) == BRAID_ERR_INVALID_ARG &&
              strstr(braid_eng_error(), "id 299 at position 1"),
          "unknown id: %s", braid_eng_error());

    const char *texts[] = {
        "",
        " ",
        "  \n\n x",
        "Hello, World! It's 2024.",
        "caf\xc3\xa9 \xe2\x82\xac\xe2\x82\xac 5\xe2\x82\xac",
        "\xf0\x9f\x98\x80 emoji",
        "tab\there\r\n",
        "\x80\x80\xc3",
        "<|endoftext|><|endoftext|>",
        "<|im_start"};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        expect_roundtrip(tok, texts[i], strlen(texts[i]));
    /* every byte value, and random byte strings */
    char all[256];
    for (int b = 0; b < 256; b++)
        all[b] = (char)b;
    expect_roundtrip(tok, all, 256);
    for (uint64_t r = 0; r < 200; r++) {
        char   buf[64];
        size_t n = braid_eng_mix64(r) % sizeof(buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = braid_eng_mix64(r * 100 + i) % 8 == 0
                         ? (char)braid_eng_mix64(r + i)
                         : "hel o\xc3\xa9w"[braid_eng_mix64(r ^ i) % 8];
        expect_roundtrip(tok, buf, n);
    }
    braid_eng_tok_free(tok);
}

/* Edits the good file and expects load to fail naming `want`. */
static void expect_refused(const char *what, void (*edit)(cJSON *),
                           const char *want)
{
    cJSON *root = make_json(0);
    edit(root);
    save(root);
    braid_eng_tok_t *tok = NULL;
    braid_status_t   s   = braid_eng_tok_load(&tok, json_path);
    CHECK(s != BRAID_OK && strstr(braid_eng_error(), want), "%s: '%s'", what,
          braid_eng_error());
    braid_eng_tok_free(tok);
}

static cJSON *model_of(cJSON *r) { return cJSON_GetObjectItem(r, "model"); }
static void   wordpiece(cJSON *r)
{
    cJSON_ReplaceItemInObject(model_of(r), "type",
                              cJSON_CreateString("WordPiece"));
}
static void bad_merge(cJSON *r)
{
    cJSON_AddItemToArray(cJSON_GetObjectItem(model_of(r), "merges"),
                         cJSON_CreateString("h q"));
}
static void no_byte(cJSON *r)
{
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(model_of(r), "vocab"), "A");
}
static void metaspace(cJSON *r)
{
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(r, "decoder"), "type",
                              cJSON_CreateString("Metaspace"));
}
static void bad_regex(cJSON *r)
{
    cJSON *split = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(r, "pre_tokenizer"),
                            "pretokenizers"),
        0);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(split, "pattern"), "Regex",
                              cJSON_CreateString("(unclosed"));
}
static void fallback(cJSON *r)
{
    cJSON_AddBoolToObject(model_of(r), "byte_fallback", 1);
}

/* An id far beyond any vocabulary: refused, not gigabytes of table (the
 * fuzzer found 6.8 GB asked for by a one-digit change). */
static void huge_id(cJSON *r)
{
    cJSON_AddNumberToObject(cJSON_GetObjectItem(model_of(r), "vocab"), "zz",
                            853000000.0);
}
static void huge_added_id(cJSON *r)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "id", 16777216.0);
    cJSON_AddStringToObject(e, "content", "<big>");
    cJSON_AddItemToArray(cJSON_GetObjectItem(r, "added_tokens"), e);
}

static void test_refusals(void)
{
    expect_refused("huge vocab id", huge_id,
                   "model.vocab['zz'] is not a token id (an integer from 0 "
                   "to 16777215)");
    expect_refused("huge added id", huge_added_id,
                   "added_tokens entries need an id (an integer from 0 to "
                   "16777215)");
    expect_refused("WordPiece", wordpiece, "model type WordPiece");
    expect_refused("merge of unknown token", bad_merge,
                   "'hq' is not in the vocab");
    expect_refused("byte without token", no_byte, "byte 0x41 has no token");
    expect_refused("other decoder", metaspace, "decoder Metaspace");
    expect_refused("bad regex", bad_regex, "regex, offset");
    expect_refused("byte fallback", fallback, "byte_fallback");
    braid_eng_write_file(json_path, "{\"model\": [1,", 13);
    braid_eng_tok_t *tok = NULL;
    CHECK(braid_eng_tok_load(&tok, json_path) == BRAID_ERR_PARSE &&
              strstr(braid_eng_error(), "invalid JSON at line 1"),
          "truncated JSON: %s", braid_eng_error());
}

int main(void)
{
    char tmpl[] = "/tmp/braid-tok-XXXXXX.json";
    int  fd     = mkstemps(tmpl, 5);
    if (fd < 0) {
        perror("mkstemps");
        return 1;
    }
    close(fd);
    json_path = tmpl;
    test_qwen_style(0);
    test_qwen_style(1);
    test_refusals();
    unlink(tmpl);
    return check_summary("engine-tokenizer");
}
