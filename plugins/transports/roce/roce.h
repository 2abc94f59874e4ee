/* The RoCE transport of the lowhop plugin (rdma-core libibverbs). */
#ifndef BRAID_LOWHOP_ROCE_H
#define BRAID_LOWHOP_ROCE_H

#include <braid/plugin.h>

extern const braid_transport_v3_t braid_lowhop_roce_transport;

#endif
