/* libFuzzer target: BRAID_PLUGINS parser. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "loader/loader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char                 *text = fuzz_cstring(data, size);
    braid_plugin_filter_t f;
    braid_status_t        st = braid_plugin_filter_parse(&f, text);
    if (st == BRAID_OK) {
        /* A listed name is kept exactly when the list is a keep-list. */
        for (int i = 0; i < f.n; i++) {
            int kept = braid_plugin_filter_keeps(&f, f.names[i]);
            if (f.names[i][0] == '\0' || kept != !f.exclude)
                abort();
        }
    } else {
        fuzz_check_position(st, strlen(text));
    }
    free(text);
    return 0;
}
