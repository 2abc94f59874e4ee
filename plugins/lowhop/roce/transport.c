/* Placeholder until the verbs transport lands: always unavailable. */
#include <stdio.h>

#include "roce.h"

static braid_status_t roce_probe(const braid_services_v1_t *svc, char *why,
                                 size_t why_len)
{
    (void)svc;
    snprintf(why, why_len, "verbs transport not built yet");
    return BRAID_ERR_UNAVAILABLE;
}

const braid_transport_v1_t braid_lowhop_roce_transport = {
    .name  = "roce",
    .caps  = BRAID_CAP_PUT_SIGNAL,
    .probe = roce_probe,
};
