"""braid under torch.distributed, run by torchrun (braid-torchrun): the
"braid" backend is the default process group and torch's own Gloo a second
group over the same ranks; every collective is run on both and compared.

Integer results and min/max must equal Gloo's exactly; float sums may differ
from Gloo's in the last bits (another summation order), so they are compared
with a tolerance, and must be bitwise identical on every rank.  The braid
Python package (braid.init, from torchrun's environment through torch's
store on MASTER_PORT) is checked in the same job, on tensors and numpy
arrays, and an unsupported call must raise with braid's message.
"""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import braid
import braid.distributed  # registers the backend

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from checks import Checks  # noqa: E402

dist.init_process_group("braid")
rank, size = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
check = Checks(f"rank {rank}")


def data(n, dtype, r=None):
    g = torch.Generator().manual_seed(1000 + (rank if r is None else r))
    if dtype.is_floating_point:
        return torch.randn(n, generator=g).to(dtype)
    return torch.randint(-50, 50, (n,), generator=g).to(dtype)


def same_everywhere(t):
    """Bitwise identical on every rank (gathered over Gloo)."""
    parts = [torch.empty_like(t) for _ in range(size)]
    dist.all_gather(parts, t, group=gloo)
    return all(torch.equal(p.view(torch.uint8) if p.is_floating_point()
                           else p, t.view(torch.uint8)
                           if t.is_floating_point() else t) for p in parts)


def close(a, b, dtype):
    if not dtype.is_floating_point:
        return torch.equal(a, b)
    tol = {torch.float32: 1e-5, torch.float64: 1e-12}[dtype]
    return torch.allclose(a, b, rtol=tol, atol=tol)


ops = {"SUM": dist.ReduceOp.SUM, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "PRODUCT": dist.ReduceOp.PRODUCT}
for dtype in (torch.float32, torch.float64, torch.int32, torch.int64):
    for name, op in ops.items():
        for n in (1, 7, 1000, 65536 + 3):
            if name == "PRODUCT" and (n > 1000 or not dtype.is_floating_point):
                continue  # overflows
            x = data(n, dtype)
            a, b = x.clone(), x.clone()
            dist.all_reduce(a, op=op, group=gloo)
            work = dist.all_reduce(b, op=op, async_op=True)
            work.wait()
            exact = name in ("MIN", "MAX") or not dtype.is_floating_point
            check(torch.equal(a, b) if exact else close(a, b, dtype),
                  f"all_reduce {name} {dtype} n={n}: braid {b[:3]} gloo "
                  f"{a[:3]}")
            check(same_everywhere(b), f"all_reduce {name} {dtype} n={n} "
                  "differs between ranks")

# AVG: Gloo has none in torch 1.13; braid's is the sum over the size.
x = data(100, torch.float64)
a, b = x.clone(), x.clone()
dist.all_reduce(a, group=gloo)
dist.all_reduce(b, op=dist.ReduceOp.AVG)
check(close(a / size, b, torch.float64), "all_reduce AVG")

# all_gather, both forms.
x = data(33, torch.float32)
ga = [torch.empty_like(x) for _ in range(size)]
gb = [torch.empty_like(x) for _ in range(size)]
dist.all_gather(ga, x, group=gloo)
dist.all_gather(gb, x)
check(all(torch.equal(p, q) for p, q in zip(ga, gb)), "all_gather")
flat = torch.empty(33 * size)
dist.all_gather_into_tensor(flat, x)
check(torch.equal(flat, torch.cat(ga)), "all_gather_into_tensor")

# reduce_scatter (Gloo has none in 1.13: against its all_reduce).
for dtype in (torch.float32, torch.int64):
    blocks = [data(17, dtype, r=rank * 10 + i) for i in range(size)]
    ref = torch.cat(blocks).clone()
    dist.all_reduce(ref, group=gloo)
    out = torch.empty(17, dtype=dtype)
    dist.reduce_scatter(out, blocks)
    check(close(ref[rank * 17:(rank + 1) * 17], out, dtype),
          f"reduce_scatter {dtype}")
    out2 = torch.empty(17, dtype=dtype)
    dist.reduce_scatter_tensor(out2, torch.cat(blocks))
    check(torch.equal(out, out2), f"reduce_scatter_tensor {dtype}")

for root in range(size):
    a = data(10, torch.int64) if rank == root else torch.zeros(10,
                                                               dtype=torch.int64)
    b = a.clone()
    dist.broadcast(a, root, group=gloo)
    dist.broadcast(b, root)
    check(torch.equal(a, b), f"broadcast root {root}")
dist.barrier()

# A subgroup of the even ranks, meeting through its own store prefix.
evens = list(range(0, size, 2))
sub = dist.new_group(ranks=evens, backend="braid")
if rank in evens:
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=sub)
    check(t.item() == sum(evens), f"subgroup all_reduce {t.item()}")

try:
    dist.all_reduce(torch.zeros(3, dtype=torch.int16))
    check(False, "int16 all_reduce did not raise")
except RuntimeError as e:
    check("braid: tensors of dtype Short are not supported" in str(e),
          f"error message: {e}")

# The Python package in the same job: braid.init() from torchrun's
# variables; MASTER_PORT holds torch's store.
comm = braid.init()
check(comm.rank == rank and comm.size == size, "braid.init rank/size")
t = torch.full((5,), float(rank + 1))
comm.allreduce(t)
check(torch.all(t == size * (size + 1) / 2).item(), f"braid tensor {t}")
arr = np.full(5, rank + 1, dtype=np.int64)
comm.allreduce(arr, op=braid.MAX)
check((arr == size).all(), f"braid numpy {arr}")
comm.finalize()

dist.destroy_process_group()
print(f"rank {rank}/{size} ({os.environ.get('TORCHELASTIC_USE_AGENT_STORE')}"
      " agent store): " + ("ok" if check.failures == 0
                           else f"{check.failures} FAILED"),
      flush=True)
sys.exit(1 if check.failures else 0)
