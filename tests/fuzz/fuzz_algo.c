/* libFuzzer target: BRAID_ALGO parser.  Any input either parses into rules
 * whose ranges are non-empty, or fails with BRAID_ERR_PARSE and a message
 * naming a position inside the input. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "select/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char             *text = fuzz_cstring(data, size);
    braid_algo_spec_t spec;
    braid_status_t    st = braid_algo_spec_parse(&spec, text);
    if (st == BRAID_OK) {
        for (int i = 0; i < spec.n; i++)
            if (spec.rules[i].lo >= spec.rules[i].hi ||
                spec.rules[i].ncands < 1)
                abort();
    } else {
        fuzz_check_position(st, strlen(text));
    }
    free(text);
    return 0;
}
