/* libFuzzer target for the tokenizer.  An input starting with '{' is a
 * tokenizer.json: loading it must succeed or fail with a message.  Any
 * other input is text for a fixed Qwen-style tokenizer: decode(encode(x))
 * must give x back byte for byte, whatever x is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/common/err.h"
#include "engine/common/tokenizer.h"
#include "engine/common/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Byte-level vocabulary (id = byte) plus a few merges, Qwen's pattern. */
static braid_eng_tok_t *fixed_tokenizer(void)
{
    static const char head[] =
        "{\"added_tokens\":[{\"id\":300,\"content\":\"<|endoftext|>\"}],"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
        "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'"
        "ll|'d)"
        "|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
        "?[^\\\\s\\\\p{L}\\\\p{N}]+"
        "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
        "\"behavior\":"
        "\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":"
        "false}]},"
        "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\","
        "\"vocab\":{";
    char  *json = malloc(16384);
    size_t k    = (size_t)snprintf(json, 16384, "%s", head);
    int    n    = 0;
    for (int b = 0; b < 256; b++) {
        int printable =
            (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        int  cp = printable ? b : 256 + n++;
        char u[8];
        if (cp < 128 && cp != '"' && cp != '\\')
            snprintf(u, sizeof(u), "%c", cp);
        else
            snprintf(u, sizeof(u), "\\u%04x", cp);
        k += (size_t)snprintf(json + k, 16384 - k, "\"%s\":%d,", u, b);
    }
    k += (size_t)snprintf(
        json + k, 16384 - k,
        "\"he\":256,\"ll\":257,\"hell\":258,\"\\u0120t\":259},"
        "\"merges\":[\"h e\",\"l l\",\"he ll\",\"\\u0120 t\"]}}");
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/braid-fuzz-tok-%d.json", (int)getpid());
    braid_eng_tok_t *tok = NULL;
    if (braid_eng_write_file(path, json, k) != BRAID_OK ||
        braid_eng_tok_load(&tok, path) != BRAID_OK) {
        fprintf(stderr, "fixed tokenizer: %s\n", braid_eng_error());
        abort();
    }
    unlink(path);
    free(json);
    return tok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static braid_eng_tok_t *tok;
    if (!tok)
        tok = fixed_tokenizer();
    if (size > 0 && data[0] == '{') {
        static char path[64];
        if (!path[0])
            snprintf(path, sizeof(path), "/tmp/braid-fuzz-tokj-%d.json",
                     (int)getpid());
        braid_eng_tok_t *t = NULL;
        if (braid_eng_write_file(path, data, size) != BRAID_OK)
            abort();
        braid_status_t rc = braid_eng_tok_load(&t, path);
        unlink(path); /* the run ends on a time limit, with no clean-up */
        if (rc != BRAID_OK && !braid_eng_error()[0])
            abort();
        braid_eng_tok_free(t);
        return 0;
    }
    int32_t *ids = NULL;
    size_t   n = 0, len = 0;
    char    *back = NULL;
    if (braid_eng_tok_encode(tok, (const char *)data, size, &ids, &n) !=
            BRAID_OK ||
        braid_eng_tok_decode(tok, ids, n, &back, &len) != BRAID_OK ||
        len != size || memcmp(back, data, size) != 0)
        abort();
    free(ids);
    free(back);
    return 0;
}
