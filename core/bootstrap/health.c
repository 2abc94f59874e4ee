/* Failure detector of the bootstrap channel (placeholder: reports nothing). */
#include "bootstrap/bootstrap.h"

braid_status_t braid_bootstrap_health(braid_bootstrap_t *bs)
{
    (void)bs;
    return BRAID_OK;
}
