/* Hugging Face safetensors: a reader that maps the files, and a writer.
 *
 * File format (https://huggingface.co/docs/safetensors): 8 bytes of
 * little-endian header length N, N bytes of JSON header
 *     {"name": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [b,
 * e]},
 *      ..., "__metadata__": {"key": "value"}}
 * then the data section; tensor bytes [b, e) of the data section, row-major.
 * A model too big for one file comes as several files plus an index
 * (model.safetensors.index.json: {"weight_map": {"name": "file", ...}}).
 *
 * Reading.  braid_eng_st_open maps every file read-only and validates all
 * of it before returning: header length and JSON, each entry's dtype, shape
 * and offsets (the byte count must equal the element count times the dtype's
 * size -- a mislabelled dtype fails here), tensors packed without gaps or
 * overlaps over the whole data section (a truncated or padded file fails),
 * no duplicate names, and for an index: every listed tensor in the file the
 * index names, every tensor of every file listed.  Nothing is read from the
 * data section until asked, so a rank that reads only its shard of each
 * weight (braid_eng_st_read) touches only those pages, and read drops the
 * pages it touched afterwards: resident memory stays what the caller copied.
 *
 * Writing.  The writer plans the header first (name, dtype, shape of each
 * tensor), then maps the output file and hands out a pointer per tensor to
 * fill in place: a checkpoint bigger than memory streams through the page
 * cache.  The file appears under its name only once complete (written as
 * path.tmp, renamed by finish).  braid_eng_st_save is the one-call form for
 * tensors already in memory. */
#ifndef BRAID_ENG_SAFETENSORS_H
#define BRAID_ENG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

#define BRAID_ENG_ST_MAX_DIMS 8

/* One tensor of an open checkpoint.  Owned by the braid_eng_st_t. */
typedef struct {
    const char   *name;
    char          dtype_name[16]; /* as in the file: "BF16", "F32", "I64"... */
    braid_dtype_t dtype;     /* BRAID_DTYPE_COUNT if braid has no such type */
    size_t        elem_size; /* bytes per element */
    int           ndim;
    int64_t       shape[BRAID_ENG_ST_MAX_DIMS];
    uint64_t      numel;
    uint64_t      nbytes;
    const unsigned char *data; /* in the read-only mapping; may be unaligned */
    int                  file; /* index into the open files */
} braid_eng_st_tensor_t;

typedef struct braid_eng_st braid_eng_st_t;

/* Opens a checkpoint.  path is a .safetensors file, an index .json file, or
 * a directory holding model.safetensors.index.json or model.safetensors
 * (the index wins when both exist).  Validates everything listed above;
 * errors name the file and the tensor. */
braid_status_t braid_eng_st_open(braid_eng_st_t **st, const char *path);
void           braid_eng_st_close(braid_eng_st_t *st);

size_t braid_eng_st_count(const braid_eng_st_t *st);
/* Tensors in file order (index order across files); NULL past the end. */
const braid_eng_st_tensor_t *braid_eng_st_at(const braid_eng_st_t *st,
                                             size_t                i);
/* By name; NULL if absent. */
const braid_eng_st_tensor_t *braid_eng_st_find(const braid_eng_st_t *st,
                                               const char           *name);
/* Path of open file i (for messages). */
const char *braid_eng_st_file_name(const braid_eng_st_t *st, int file);
/* Value of a "__metadata__" key of the first file, NULL if absent. */
const char *braid_eng_st_meta(const braid_eng_st_t *st, const char *key);

/* Looks up name and checks it has exactly this shape (ndim dims) and a
 * weight dtype (f32, bf16, f16).  Errors: "tensor 'x': missing",
 * "tensor 'x': shape [4, 8], expected [8, 4]", "tensor 'x': dtype I64,
 * expected F32, BF16 or F16". */
braid_status_t braid_eng_st_expect(const braid_eng_st_tensor_t **t,
                                   const braid_eng_st_t *st, const char *name,
                                   int ndim, const int64_t *shape);

/* Copies a block of a tensor viewed as a matrix [rows, cols] (rows = the
 * product of all but the last dimension, cols = the last; a 1-D tensor is
 * [1, n]): rows [row0, row0 + nrows) and columns [col0, col0 + ncols),
 * into dst[nrows, ncols] row-major, converted to dst_dtype (f32, bf16, f16;
 * the tensor must be one of those too).  Then releases the pages it read
 * (madvise DONTNEED: the process no longer holds them; the page cache may).
 * This is how a rank reads only its shard: a column-parallel weight is a row
 * block, a row-parallel weight a column block. */
braid_status_t braid_eng_st_read(void *dst, braid_dtype_t dst_dtype,
                                 const braid_eng_st_t        *st,
                                 const braid_eng_st_tensor_t *t, int64_t row0,
                                 int64_t nrows, int64_t col0, int64_t ncols);

/* ---------------------------------------------------------------- writer */

typedef struct braid_eng_st_writer braid_eng_st_writer_t;

/* Starts a file at path (written as path.tmp until finish). */
braid_status_t braid_eng_st_writer_new(braid_eng_st_writer_t **w,
                                       const char             *path);
/* Adds a "__metadata__" string pair (the format wants strings only). */
braid_status_t braid_eng_st_writer_meta(braid_eng_st_writer_t *w,
                                        const char *key, const char *value);
/* Plans one tensor (dtype f32/f64/f16/bf16/i32/i64/u8); tensors are laid out
 * in the order added.  Fails on a duplicate name. */
braid_status_t braid_eng_st_writer_add(braid_eng_st_writer_t *w,
                                       const char *name, braid_dtype_t dtype,
                                       int ndim, const int64_t *shape);
/* Writes the header and maps the file; after this, tensors are filled
 * through braid_eng_st_writer_data and no more can be added. */
braid_status_t braid_eng_st_writer_map(braid_eng_st_writer_t *w);
/* Where tensor `name` goes (nbytes bytes, writable, 8-byte aligned
 * relative to the data section only, so use memcpy for wider types);
 * NULL if unknown or not mapped yet. */
void *braid_eng_st_writer_data(braid_eng_st_writer_t *w, const char *name);
/* Flushes, unmaps and renames path.tmp to path; frees w in any case. */
braid_status_t braid_eng_st_writer_finish(braid_eng_st_writer_t *w);
/* Drops an unfinished writer and its temporary file. */
void braid_eng_st_writer_abort(braid_eng_st_writer_t *w);

/* One tensor already in memory, for braid_eng_st_save. */
typedef struct {
    const char   *name;
    braid_dtype_t dtype;
    int           ndim;
    int64_t       shape[BRAID_ENG_ST_MAX_DIMS];
    const void   *data; /* numel * dtype size bytes */
} braid_eng_st_entry_t;

/* Writes n tensors to path in one go (through path.tmp). */
braid_status_t braid_eng_st_save(const char                 *path,
                                 const braid_eng_st_entry_t *entries,
                                 size_t                      n);

/* Writes a sharded checkpoint's index (model.safetensors.index.json):
 * weight_map names[i] -> files[i] (file names relative to the index), and
 * metadata.total_size. */
braid_status_t braid_eng_st_write_index(const char        *path,
                                        const char *const *names,
                                        const char *const *files, size_t n,
                                        uint64_t total_size);

#endif
