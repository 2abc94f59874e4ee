/* The RoCE transport (rdma-core libibverbs). */
#ifndef BRAID_ROCE_ROCE_H
#define BRAID_ROCE_ROCE_H

#include <braid/plugin.h>

extern const braid_transport_t braid_roce_transport;

#endif
