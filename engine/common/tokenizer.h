/* Byte-level BPE tokenizer from a Hugging Face tokenizer.json (Qwen, GPT-2).
 *
 * Supported: model.type "BPE" over the byte-level alphabet (every byte is a
 * token), merges as "a b" strings or ["a", "b"] pairs, ignore_merges,
 * added_tokens (matched in the text before anything else, longest first),
 * and the pre-tokenizers those models use: ByteLevel with use_regex (the
 * GPT-2 pattern) or a Sequence of Split (a Regex, behavior "Isolated") and
 * ByteLevel; the regex runs through PCRE2 with Unicode properties.  Other
 * models, pre-tokenizers or decoders are refused at load with a message
 * naming what was found.  A "NFC" normalizer is accepted and not applied:
 * text is taken as already NFC (what terminals and editors produce).
 *
 * Encoding takes any bytes, valid UTF-8 or not: bytes that are not valid
 * UTF-8 cannot match the pre-tokenizer's pattern, so they form pieces of
 * their own, and every byte has a token.  Decoding returns bytes; a token
 * may end in the middle of a UTF-8 character (the next one completes it),
 * so decode whole sequences, and decode(encode(x)) == x for every x. */
#ifndef BRAID_ENG_TOKENIZER_H
#define BRAID_ENG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

typedef struct braid_eng_tok braid_eng_tok_t;

/* Loads tokenizer.json; errors name the file and what is unsupported. */
braid_status_t braid_eng_tok_load(braid_eng_tok_t **tok, const char *path);
/* The byte tokenizer of braid-train's models: token i is byte i (256 ids),
 * so any byte string encodes and decodes back exactly. */
braid_status_t braid_eng_tok_bytes(braid_eng_tok_t **tok);
void           braid_eng_tok_free(braid_eng_tok_t *tok);

/* One past the highest token id (vocab and added tokens). */
int32_t braid_eng_tok_size(const braid_eng_tok_t *tok);
/* Id of an exact token string (vocab or added token), or -1. */
int32_t braid_eng_tok_id(const braid_eng_tok_t *tok, const char *token);

/* text[len] -> *ids[*n] (malloc'ed; the caller frees it). */
braid_status_t braid_eng_tok_encode(const braid_eng_tok_t *tok,
                                    const char *text, size_t len,
                                    int32_t **ids, size_t *n);
/* ids[n] -> *bytes[*len] (malloc'ed, NUL after the last byte, which *len
 * does not count).  An id with no token fails, naming its position. */
braid_status_t braid_eng_tok_decode(const braid_eng_tok_t *tok,
                                    const int32_t *ids, size_t n, char **bytes,
                                    size_t *len);

#endif
