/* Byte-level BPE from tokenizer.json (see tokenizer.h).
 *
 * Byte level: every byte b is first written as one printable code point
 * (GPT-2's table: printable Latin-1 bytes stand for themselves, the other
 * 68 bytes become U+0100...), so vocab strings are text while every byte
 * sequence stays encodable.  Encoding: split the text at added tokens,
 * split the rest with the pre-tokenizer's regex, turn each piece's bytes into
 * byte tokens, then merge the adjacent pair of lowest merge rank until none
 * is left.  Decoding maps the code points back to bytes. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/err.h"
#include "engine/common/json.h"
#include "engine/common/strmap.h"
#include "engine/common/tokenizer.h"
#include "engine/common/util.h"

/* GPT-2's ByteLevel pre-tokenizer pattern (use_regex: true). */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+"
    "|\\s+(?!\\S)|\\s+";

typedef struct {
    char    pair[8]; /* the two token ids, the key of merge_map */
    int32_t merged;
} tok_merge_t;

typedef struct {
    const char *s;
    size_t      len;
    int32_t     id;
} tok_added_t;

/* Strings live in fixed chunks so that map keys never move. */
typedef struct tok_chunk {
    struct tok_chunk *next;
    size_t            used, cap;
    char              buf[];
} tok_chunk_t;

struct braid_eng_tok {
    tok_chunk_t       *chunks;
    braid_eng_strmap_t vocab;   /* byte-level string -> id */
    int32_t            n_ids;   /* one past the highest id */
    const char       **dec;     /* [n_ids] bytes of each id, NULL = none */
    uint32_t          *dec_len; /* [n_ids] */
    int32_t            byte_id[256];
    uint32_t           cp_of_byte[256];
    int16_t            byte_of_cp[324]; /* -1: not a byte-level code point */
    tok_merge_t       *merges;
    size_t             n_merges;
    braid_eng_strmap_t merge_map; /* pair -> rank (index into merges) */
    tok_added_t       *added;
    size_t             n_added;
    pcre2_code        *re;
    int                add_prefix_space;
    int                ignore_merges;
    int                bytes; /* braid_eng_tok_bytes: id = byte */
};

/* ---------------------------------------------------------------- helpers */

static char *arena_put(braid_eng_tok_t *t, const void *s, size_t len)
{
    tok_chunk_t *c = t->chunks;
    if (!c || c->cap - c->used < len + 1) {
        size_t       cap = len + 1 > (1u << 20) ? len + 1 : (1u << 20);
        tok_chunk_t *nc  = malloc(sizeof(*nc) + cap);
        if (!nc)
            return NULL;
        nc->next  = c;
        nc->used  = 0;
        nc->cap   = cap;
        t->chunks = c = nc;
    }
    char *p = c->buf + c->used;
    if (len)
        memcpy(p, s, len);
    p[len] = '\0';
    c->used += len + 1;
    return p;
}

/* GPT-2's byte <-> code point table. */
static void build_byte_table(braid_eng_tok_t *t)
{
    int n = 0;
    for (int i = 0; i < 324; i++)
        t->byte_of_cp[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) ||
                        (b >= 0xae && b <= 0xff);
        t->cp_of_byte[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        t->byte_of_cp[t->cp_of_byte[b]] = (int16_t)b;
    }
}

static size_t utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    out[0] = (char)(0xe0 | (cp >> 12)); /* byte-level code points < 0x10000 */
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
}

/* Next code point of valid UTF-8 s[*i..n), or -1 (and *i advanced by one)
 * for a byte that does not start a valid sequence. */
static int32_t utf8_next(const unsigned char *s, size_t n, size_t *i)
{
    unsigned char c   = s[*i];
    int           len = c < 0x80         ? 1
                        : (c >> 5) == 6  ? 2
                        : (c >> 4) == 14 ? 3
                        : (c >> 3) == 30 ? 4
                                         : 0;
    if (len == 0 || *i + (size_t)len > n) {
        (*i)++;
        return -1;
    }
    uint32_t cp = len == 1 ? c : (uint32_t)(c & (0x7f >> len));
    for (int k = 1; k < len; k++) {
        if ((s[*i + (size_t)k] & 0xc0) != 0x80) {
            (*i)++;
            return -1;
        }
        cp = (cp << 6) | (s[*i + (size_t)k] & 0x3f);
    }
    *i += (size_t)len;
    return (int32_t)cp;
}

/* Bytes a vocab string stands for: byte-level code points map back to their
 * byte; anything else (not produced by byte-level training) is kept as its
 * own UTF-8, as the reference decoder does. */
static size_t bytes_of_token(const braid_eng_tok_t *t, char *out,
                             const char *s, size_t n)
{
    size_t k = 0, i = 0;
    while (i < n) {
        size_t  start = i;
        int32_t cp    = utf8_next((const unsigned char *)s, n, &i);
        if (cp >= 0 && cp < 324 && t->byte_of_cp[cp] >= 0) {
            out[k++] = (char)t->byte_of_cp[cp];
        } else {
            memcpy(out + k, s + start, i - start);
            k += i - start;
        }
    }
    return k;
}

/* ---------------------------------------------------------------- loading */

static braid_status_t set_decode(braid_eng_tok_t *t, int32_t id,
                                 const char *bytes, size_t len)
{
    const char *p = arena_put(t, bytes, len);
    if (!p)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    t->dec[id]     = p;
    t->dec_len[id] = (uint32_t)len;
    return BRAID_OK;
}

/* Token ids index the decode table, allocated up to the largest id: an id
 * far above any real vocabulary (a few hundred thousand) is a malformed
 * file, not a reason to allocate gigabytes. */
#define TOK_MAX_ID ((1 << 24) - 1)

static int is_token_id(const cJSON *n)
{
    return cJSON_IsNumber(n) && n->valuedouble >= 0 &&
           n->valuedouble <= TOK_MAX_ID &&
           n->valuedouble == (int32_t)n->valuedouble;
}

static braid_status_t load_vocab(braid_eng_tok_t *t, const cJSON *vocab,
                                 const cJSON *added, const char *path)
{
    const cJSON *e;
    int32_t      max_id = -1;
    cJSON_ArrayForEach(e, vocab)
    {
        if (!is_token_id(e))
            return braid_eng_fail(BRAID_ERR_PARSE,
                                  "%s: model.vocab['%s'] is not a token id "
                                  "(an integer from 0 to %d)",
                                  path, e->string, TOK_MAX_ID);
        if (e->valueint > max_id)
            max_id = e->valueint;
    }
    cJSON_ArrayForEach(e, added)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *c  = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!is_token_id(id) || !cJSON_IsString(c) || !c->valuestring[0])
            return braid_eng_fail(BRAID_ERR_PARSE,
                                  "%s: added_tokens entries need an id (an "
                                  "integer from 0 to %d) and a non-empty "
                                  "content",
                                  path, TOK_MAX_ID);
        if (id->valueint > max_id)
            max_id = id->valueint;
    }
    t->n_ids   = max_id + 1;
    t->dec     = calloc((size_t)t->n_ids + 1, sizeof(*t->dec));
    t->dec_len = calloc((size_t)t->n_ids + 1, sizeof(*t->dec_len));
    if (!t->dec || !t->dec_len ||
        braid_eng_strmap_init(&t->vocab, (size_t)cJSON_GetArraySize(vocab)) !=
            BRAID_OK)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");

    char          *buf     = NULL;
    size_t         buf_cap = 0;
    braid_status_t s       = BRAID_OK;
    cJSON_ArrayForEach(e, vocab)
    {
        size_t      len = strlen(e->string);
        const char *key = arena_put(t, e->string, len);
        int32_t     old;
        if (!key) {
            s = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
            break;
        }
        if (braid_eng_strmap_put(&t->vocab, key, len, e->valueint, &old) !=
            BRAID_OK) {
            s = braid_eng_fail(BRAID_ERR_PARSE,
                               "%s: token '%s' is in the vocab twice", path,
                               key);
            break;
        }
        if (t->dec[e->valueint]) {
            s = braid_eng_fail(BRAID_ERR_PARSE,
                               "%s: id %d belongs to two vocab tokens", path,
                               e->valueint);
            break;
        }
        if (len > buf_cap) {
            buf_cap  = 2 * len;
            char *nb = realloc(buf, buf_cap);
            if (!nb) {
                s = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
                break;
            }
            buf = nb;
        }
        if ((s = set_decode(t, e->valueint, buf,
                            bytes_of_token(t, buf, key, len))) != BRAID_OK)
            break;
    }
    free(buf);
    if (s != BRAID_OK)
        return s;

    /* Added tokens decode to their content; they are matched in the text
     * by content, and looked up by braid_eng_tok_id too. */
    size_t n = (size_t)cJSON_GetArraySize(added);
    t->added = calloc(n + 1, sizeof(*t->added));
    if (!t->added)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    cJSON_ArrayForEach(e, added)
    {
        const char *c =
            cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        int32_t      id = cJSON_GetObjectItemCaseSensitive(e, "id")->valueint;
        tok_added_t *a  = &t->added[t->n_added++];
        a->len          = strlen(c);
        if (!(a->s = arena_put(t, c, a->len)))
            return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
        a->id = id;
        if ((s = set_decode(t, id, a->s, a->len)) != BRAID_OK)
            return s;
    }

    /* Every byte needs a token, or some text could not be encoded. */
    for (int b = 0; b < 256; b++) {
        char   cp[4];
        size_t len    = utf8_put(cp, t->cp_of_byte[b]);
        t->byte_id[b] = braid_eng_strmap_get(&t->vocab, cp, len);
        if (t->byte_id[b] < 0)
            return braid_eng_fail(BRAID_ERR_PARSE,
                                  "%s: byte 0x%02x has no token ('%.*s'): "
                                  "not a byte-level BPE vocabulary",
                                  path, b, (int)len, cp);
    }
    return BRAID_OK;
}

static braid_status_t load_merges(braid_eng_tok_t *t, const cJSON *merges,
                                  const char *path)
{
    size_t n  = (size_t)cJSON_GetArraySize(merges);
    t->merges = calloc(n + 1, sizeof(*t->merges));
    if (!t->merges || braid_eng_strmap_init(&t->merge_map, n) != BRAID_OK)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    const cJSON   *e;
    char          *joined     = NULL;
    size_t         joined_cap = 0;
    braid_status_t s          = BRAID_OK;
    cJSON_ArrayForEach(e, merges)
    {
        size_t      rank = t->n_merges;
        const char *a, *b;
        size_t      alen, blen;
        if (cJSON_IsString(e)) { /* "a b" */
            const char *sp = strchr(e->valuestring, ' ');
            if (!sp || sp == e->valuestring || !sp[1] || strchr(sp + 1, ' ')) {
                s = braid_eng_fail(BRAID_ERR_PARSE,
                                   "%s: merge %zu '%s' is not two tokens "
                                   "separated by one space",
                                   path, rank, e->valuestring);
                break;
            }
            a    = e->valuestring;
            alen = (size_t)(sp - a);
            b    = sp + 1;
            blen = strlen(b);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 &&
                   cJSON_IsString(e->child) &&
                   cJSON_IsString(e->child->next)) {
            a    = e->child->valuestring;
            alen = strlen(a);
            b    = e->child->next->valuestring;
            blen = strlen(b);
        } else {
            s = braid_eng_fail(BRAID_ERR_PARSE,
                               "%s: merge %zu is neither \"a b\" nor [a, b]",
                               path, rank);
            break;
        }
        if (alen + blen > joined_cap) {
            joined_cap = 2 * (alen + blen);
            char *nj   = realloc(joined, joined_cap);
            if (!nj) {
                s = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
                break;
            }
            joined = nj;
        }
        memcpy(joined, a, alen);
        memcpy(joined + alen, b, blen);
        int32_t ia = braid_eng_strmap_get(&t->vocab, a, alen);
        int32_t ib = braid_eng_strmap_get(&t->vocab, b, blen);
        int32_t im = braid_eng_strmap_get(&t->vocab, joined, alen + blen);
        if (ia < 0 || ib < 0 || im < 0) {
            s = braid_eng_fail(BRAID_ERR_PARSE,
                               "%s: merge %zu ('%.*s' '%.*s'): '%.*s' is not "
                               "in the vocab",
                               path, rank, (int)alen, a, (int)blen, b,
                               ia < 0   ? (int)alen
                               : ib < 0 ? (int)blen
                                        : (int)(alen + blen),
                               ia < 0   ? a
                               : ib < 0 ? b
                                        : joined);
            break;
        }
        tok_merge_t *m = &t->merges[t->n_merges++];
        memcpy(m->pair, &ia, 4);
        memcpy(m->pair + 4, &ib, 4);
        m->merged = im;
        /* A repeated pair keeps its first (lowest) rank, as the reference. */
        braid_eng_strmap_put(&t->merge_map, m->pair, 8, (int32_t)rank, NULL);
    }
    free(joined);
    return s;
}

static braid_status_t compile_regex(braid_eng_tok_t *t, const char *pattern,
                                    const char *path)
{
    int        err;
    PCRE2_SIZE off;
    t->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                          &err, &off, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof(msg));
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: pre_tokenizer regex, offset %zu: %s", path,
                              (size_t)off, (const char *)msg);
    }
    pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* faster if available */
    return BRAID_OK;
}

/* One pre-tokenizer step: ByteLevel or Split; sets *byte_level when a
 * ByteLevel step is present. */
static braid_status_t load_pretok_step(braid_eng_tok_t *t, const cJSON *p,
                                       int *byte_level, const char *path)
{
    const char    *type;
    braid_status_t s = braid_eng_json_str(&type, p, "type", 1, path);
    if (s != BRAID_OK)
        return s;
    if (strcmp(type, "ByteLevel") == 0) {
        int use_regex;
        *byte_level = 1;
        if ((s = braid_eng_json_bool(&t->add_prefix_space, p,
                                     "add_prefix_space", 0, 0, path)) !=
                BRAID_OK ||
            (s = braid_eng_json_bool(&use_regex, p, "use_regex", 0, 1,
                                     path)) != BRAID_OK)
            return s;
        if (use_regex && t->re)
            return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                                  "%s: two pre-tokenizer regexes", path);
        return use_regex ? compile_regex(t, gpt2_pattern, path) : BRAID_OK;
    }
    if (strcmp(type, "Split") == 0) {
        const char  *behavior, *regex;
        int          invert;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        if ((s = braid_eng_json_str(&behavior, p, "behavior", 1, path)) !=
                BRAID_OK ||
            (s = braid_eng_json_bool(&invert, p, "invert", 0, 0, path)) !=
                BRAID_OK ||
            (s = braid_eng_json_str(&regex, pat, "Regex", 1,
                                    "pre_tokenizer Split pattern")) !=
                BRAID_OK)
            return s;
        if (strcmp(behavior, "Isolated") != 0 || invert || t->re)
            return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                                  "%s: pre_tokenizer Split with behavior %s%s "
                                  "is not supported (Isolated only, once)",
                                  path, behavior, invert ? ", invert" : "");
        return compile_regex(t, regex, path);
    }
    return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                          "%s: pre_tokenizer type %s is not supported "
                          "(ByteLevel, Split, Sequence of them)",
                          path, type);
}

static braid_status_t load_config(braid_eng_tok_t *t, const cJSON *root,
                                  const char *path)
{
    const cJSON   *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char    *type  = NULL;
    braid_status_t s     = braid_eng_json_str(&type, model, "type", 0, path);
    int            byte_fallback, byte_level = 0;
    if (s != BRAID_OK)
        return s;
    if (!cJSON_IsObject(model) || (type && strcmp(type, "BPE") != 0))
        return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                              "%s: model type %s is not supported (BPE only)",
                              path, type ? type : "missing");
    if ((s = braid_eng_json_bool(&t->ignore_merges, model, "ignore_merges", 0,
                                 0, path)) != BRAID_OK ||
        (s = braid_eng_json_bool(&byte_fallback, model, "byte_fallback", 0, 0,
                                 path)) != BRAID_OK)
        return s;
    if (byte_fallback)
        return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                              "%s: byte_fallback BPE (SentencePiece style) is "
                              "not supported (byte-level BPE only)",
                              path);

    const cJSON *norm  = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const char  *ntype = NULL;
    if (norm && !cJSON_IsNull(norm) &&
        ((s = braid_eng_json_str(&ntype, norm, "type", 1, path)) != BRAID_OK ||
         strcmp(ntype, "NFC") != 0))
        return s != BRAID_OK
                   ? s
                   : braid_eng_fail(
                         BRAID_ERR_NOT_SUPPORTED,
                         "%s: normalizer %s is not supported (NFC or "
                         "none)",
                         path, ntype);

    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const char  *ptype = NULL;
    if ((s = braid_eng_json_str(&ptype, pre, "type", 1, "pre_tokenizer")) !=
        BRAID_OK)
        return braid_eng_wrap(s, "%s", path);
    if (strcmp(ptype, "Sequence") == 0) {
        const cJSON *p;
        cJSON_ArrayForEach(
            p,
            cJSON_GetObjectItemCaseSensitive(
                pre,
                "pretokenizers")) if ((s = load_pretok_step(t, p, &byte_level,
                                                            path)) !=
                                      BRAID_OK) return s;
    } else if ((s = load_pretok_step(t, pre, &byte_level, path)) != BRAID_OK) {
        return s;
    }
    if (!byte_level)
        return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                              "%s: no ByteLevel pre-tokenizer: not a "
                              "byte-level BPE tokenizer",
                              path);
    if (!t->re)
        return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                              "%s: no pre-tokenizer regex", path);

    const cJSON *dec   = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    const char  *dtype = NULL;
    if (dec && !cJSON_IsNull(dec) &&
        ((s = braid_eng_json_str(&dtype, dec, "type", 1, path)) != BRAID_OK ||
         strcmp(dtype, "ByteLevel") != 0))
        return s != BRAID_OK
                   ? s
                   : braid_eng_fail(
                         BRAID_ERR_NOT_SUPPORTED,
                         "%s: decoder %s is not supported (ByteLevel)", path,
                         dtype);

    const cJSON *vocab  = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added =
        cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges) ||
        (added && !cJSON_IsNull(added) && !cJSON_IsArray(added)))
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: needs model.vocab (object), model.merges "
                              "(array) and added_tokens (array, optional)",
                              path);
    if (!cJSON_IsArray(added))
        added = NULL;
    if ((s = load_vocab(t, vocab, added, path)) != BRAID_OK)
        return s;
    return load_merges(t, merges, path);
}

braid_status_t braid_eng_tok_load(braid_eng_tok_t **out, const char *path)
{
    braid_eng_tok_t *t = calloc(1, sizeof(*t));
    if (!t)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    build_byte_table(t);
    cJSON         *root;
    braid_status_t s = braid_eng_json_load(&root, path);
    if (s == BRAID_OK) {
        s = load_config(t, root, path);
        cJSON_Delete(root);
    }
    if (s != BRAID_OK) {
        braid_eng_tok_free(t);
        return s;
    }
    *out = t;
    return BRAID_OK;
}

braid_status_t braid_eng_tok_bytes(braid_eng_tok_t **out)
{
    braid_eng_tok_t *t = calloc(1, sizeof(*t));
    braid_status_t   s = BRAID_OK;
    if (t) {
        t->bytes   = 1;
        t->n_ids   = 256;
        t->dec     = calloc(256, sizeof(*t->dec));
        t->dec_len = calloc(256, sizeof(*t->dec_len));
    }
    if (!t || !t->dec || !t->dec_len)
        s = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    for (int b = 0; b < 256 && s == BRAID_OK; b++) {
        char c = (char)b;
        s      = set_decode(t, b, &c, 1);
    }
    if (s != BRAID_OK) {
        braid_eng_tok_free(t);
        return s;
    }
    *out = t;
    return BRAID_OK;
}

void braid_eng_tok_free(braid_eng_tok_t *t)
{
    if (!t)
        return;
    while (t->chunks) {
        tok_chunk_t *next = t->chunks->next;
        free(t->chunks);
        t->chunks = next;
    }
    braid_eng_strmap_free(&t->vocab);
    braid_eng_strmap_free(&t->merge_map);
    pcre2_code_free(t->re);
    free(t->dec);
    free(t->dec_len);
    free(t->merges);
    free(t->added);
    free(t);
}

int32_t braid_eng_tok_size(const braid_eng_tok_t *t) { return t->n_ids; }

int32_t braid_eng_tok_id(const braid_eng_tok_t *t, const char *token)
{
    size_t len = strlen(token);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && memcmp(t->added[i].s, token, len) == 0)
            return t->added[i].id;
    return braid_eng_strmap_get(&t->vocab, token, len);
}

/* ---------------------------------------------------------------- encoding */

typedef struct {
    int32_t *ids;
    size_t   n, cap;
} id_buf_t;

static int push_id(id_buf_t *b, int32_t id)
{
    if (braid_eng_grow((void **)&b->ids, &b->cap, b->n + 1, sizeof(*b->ids)))
        return -1;
    b->ids[b->n++] = id;
    return 0;
}

static int32_t merge_rank(const braid_eng_tok_t *t, int32_t a, int32_t b)
{
    char key[8];
    memcpy(key, &a, 4);
    memcpy(key + 4, &b, 4);
    return braid_eng_strmap_get(&t->merge_map, key, 8);
}

/* One pre-tokenized piece -> ids appended to out.  sym is scratch of at
 * least len entries. */
static braid_status_t bpe_piece(const braid_eng_tok_t *t, id_buf_t *out,
                                const unsigned char *p, size_t len,
                                int32_t *sym, char *scratch)
{
    if (t->ignore_merges) { /* a piece that is a token is taken whole */
        size_t k = 0;
        for (size_t i = 0; i < len; i++)
            k += utf8_put(scratch + k, t->cp_of_byte[p[i]]);
        int32_t id = braid_eng_strmap_get(&t->vocab, scratch, k);
        if (id >= 0)
            return push_id(out, id) ? BRAID_ERR_NO_MEMORY : BRAID_OK;
    }
    size_t n = len;
    for (size_t i = 0; i < len; i++)
        sym[i] = t->byte_id[p[i]];
    /* Merge the pair of lowest rank everywhere it occurs, left to right,
     * until no adjacent pair has a merge. */
    while (n > 1) {
        int32_t best = -1;
        for (size_t i = 0; i + 1 < n; i++) {
            int32_t r = merge_rank(t, sym[i], sym[i + 1]);
            if (r >= 0 && (best < 0 || r < best))
                best = r;
        }
        if (best < 0)
            break;
        const tok_merge_t *m = &t->merges[best];
        int32_t            a, b;
        memcpy(&a, m->pair, 4);
        memcpy(&b, m->pair + 4, 4);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (i + 1 < n && sym[i] == a && sym[i + 1] == b) {
                sym[k++] = m->merged;
                i++;
            } else {
                sym[k++] = sym[i];
            }
        }
        n = k;
    }
    for (size_t i = 0; i < n; i++)
        if (push_id(out, sym[i]))
            return BRAID_ERR_NO_MEMORY;
    return BRAID_OK;
}

/* Text without added tokens: regex pieces and, between them, the bytes
 * the regex cannot match (invalid UTF-8), each a piece of its own. */
static braid_status_t encode_segment(const braid_eng_tok_t *t, id_buf_t *out,
                                     const unsigned char *s, size_t len,
                                     int32_t *sym, char *scratch,
                                     pcre2_match_data *md)
{
    braid_status_t st  = BRAID_OK;
    size_t         pos = 0;
    while (pos < len && st == BRAID_OK) {
        int    rc = pcre2_match(t->re, s, len, pos, 0, md, NULL);
        size_t ms = len, me = len;
        if (rc >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            ms             = ov[0];
            me             = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            return braid_eng_fail(BRAID_ERR_INTERNAL,
                                  "tokenizer: regex match failed (%d)", rc);
        }
        if (ms > pos)
            st = bpe_piece(t, out, s + pos, ms - pos, sym, scratch);
        if (st == BRAID_OK && me > ms)
            st = bpe_piece(t, out, s + ms, me - ms, sym, scratch);
        if (me == ms && ms < len) { /* an empty match: take one byte alone */
            if (st == BRAID_OK)
                st = bpe_piece(t, out, s + ms, 1, sym, scratch);
            me = ms + 1;
        }
        pos = me;
    }
    return st;
}

/* Longest added token starting at s[0..len), or NULL. */
static const tok_added_t *added_at(const braid_eng_tok_t *t, const char *s,
                                   size_t len)
{
    const tok_added_t *best = NULL;
    for (size_t i = 0; i < t->n_added; i++) {
        const tok_added_t *a = &t->added[i];
        if (a->len <= len && (!best || a->len > best->len) &&
            memcmp(a->s, s, a->len) == 0)
            best = a;
    }
    return best;
}

braid_status_t braid_eng_tok_encode(const braid_eng_tok_t *t, const char *text,
                                    size_t len, int32_t **ids, size_t *n)
{
    if (t->bytes) {
        if (!(*ids = malloc((len ? len : 1) * sizeof(int32_t))))
            return braid_eng_fail(BRAID_ERR_NO_MEMORY,
                                  "tokenizer: out of memory");
        for (size_t i = 0; i < len; i++)
            (*ids)[i] = (unsigned char)text[i];
        *n = len;
        return BRAID_OK;
    }
    id_buf_t out = {0};
    /* +1: the prefix space; scratch holds up to 2 UTF-8 bytes a byte. */
    int32_t          *sym     = malloc((len + 2) * sizeof(*sym));
    char             *scratch = malloc(2 * len + 8);
    char             *seg     = malloc(len + 2);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    braid_status_t    s  = BRAID_OK;
    if (!sym || !scratch || !seg || !md) {
        s = braid_eng_fail(BRAID_ERR_NO_MEMORY, "tokenizer: out of memory");
        goto out;
    }
    size_t start = 0, i = 0;
    while (start < len && s == BRAID_OK) {
        const tok_added_t *a = NULL;
        for (i = start; i < len && !(a = added_at(t, text + i, len - i)); i++)
            ;
        if (i > start) { /* the plain text before it */
            size_t k = 0;
            if (t->add_prefix_space && text[start] != ' ')
                seg[k++] = ' ';
            memcpy(seg + k, text + start, i - start);
            s = encode_segment(t, &out, (const unsigned char *)seg,
                               k + i - start, sym, scratch, md);
        }
        if (a && s == BRAID_OK) {
            if (push_id(&out, a->id))
                s = BRAID_ERR_NO_MEMORY;
            i += a->len;
        }
        start = i;
    }
    if (s == BRAID_ERR_NO_MEMORY)
        s = braid_eng_fail(s, "tokenizer: out of memory");
out:
    pcre2_match_data_free(md);
    free(sym);
    free(scratch);
    free(seg);
    if (s != BRAID_OK) {
        free(out.ids);
        return s;
    }
    *ids = out.ids ? out.ids : malloc(sizeof(int32_t));
    *n   = out.n;
    return *ids ? BRAID_OK
                : braid_eng_fail(BRAID_ERR_NO_MEMORY,
                                 "tokenizer: out of memory");
}

braid_status_t braid_eng_tok_decode(const braid_eng_tok_t *t,
                                    const int32_t *ids, size_t n, char **bytes,
                                    size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids || !t->dec[ids[i]])
            return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                  "tokenizer: id %d at position %zu has no "
                                  "token",
                                  ids[i], i);
        total += t->dec_len[ids[i]];
    }
    char *buf = malloc(total + 1);
    if (!buf)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "tokenizer: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(buf + k, t->dec[ids[i]], t->dec_len[ids[i]]);
        k += t->dec_len[ids[i]];
    }
    buf[k] = '\0';
    *bytes = buf;
    *len   = k;
    return BRAID_OK;
}
