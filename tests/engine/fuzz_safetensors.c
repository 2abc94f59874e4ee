/* libFuzzer target: any bytes as a .safetensors file.  The reader must
 * accept it or refuse it with a message, never crash or read outside the
 * file; what it accepts must read back block by block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/safetensors.h"
#include "engine/common/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof(path), "/tmp/braid-fuzz-st-%d.safetensors",
                 (int)getpid());
    if (braid_eng_write_file(path, data, size) != BRAID_OK)
        abort();
    braid_eng_st_t *st;
    braid_status_t  rc = braid_eng_st_open(&st, path);
    /* Gone at once: the run ends on a time limit with no clean-up of its
     * own, and an opened file stays readable until closed. */
    unlink(path);
    if (rc != BRAID_OK) {
        if (!braid_eng_error()[0])
            abort(); /* a refusal always says why */
        return 0;
    }
    for (size_t i = 0; i < braid_eng_st_count(st); i++) {
        const braid_eng_st_tensor_t *t = braid_eng_st_at(st, i);
        if (!braid_eng_dtype_is_weight(t->dtype) || t->numel > 4096)
            continue;
        int64_t cols = t->ndim ? t->shape[t->ndim - 1] : 1;
        int64_t rows = cols ? (int64_t)(t->numel / (uint64_t)cols) : 0;
        float  *out  = malloc((size_t)(t->numel + 1) * sizeof(float));
        if (braid_eng_st_read(out, BRAID_F32, st, t, 0, rows, 0, cols) !=
            BRAID_OK)
            abort(); /* a tensor that validated reads whole */
        free(out);
    }
    braid_eng_st_close(st);
    return 0;
}
