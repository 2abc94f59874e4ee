/* libFuzzer target: tuning-file parser (whole files, many lines). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "select/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char          *text = fuzz_cstring(data, size);
    braid_tune_t   tune;
    braid_status_t st = braid_tune_parse(&tune, text, "fuzz.tune");
    if (st == BRAID_OK) {
        for (int i = 0; i < tune.n; i++)
            if (tune.rows[i].lo >= tune.rows[i].hi)
                abort();
        braid_tune_free(&tune);
    } else if (st != BRAID_ERR_PARSE ||
               strstr(braid_last_error(), "fuzz.tune:") == NULL) {
        abort();
    }
    free(text);
    return 0;
}
