/* libFuzzer target: BRAID_TOPO parser. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char             *text = fuzz_cstring(data, size);
    braid_topo_kind_t kind;
    braid_status_t    st = braid_topo_kind_parse(&kind, text, 2);
    if (st == BRAID_OK) {
        if (kind != BRAID_TOPO_SWITCH && kind != BRAID_TOPO_RING)
            abort();
    } else {
        fuzz_check_position(st, strlen(text));
    }
    free(text);
    return 0;
}
