"""The braid Python package on numpy arrays, run under braidrun (no torch):
every collective, dtype and op checked against numpy, in place and out of
place, without copies (results land in the caller's buffer); non-blocking
all-reduce, split, and errors raised as braid.Error with braid's message.

    braidrun -n 3 /usr/bin/python3 test_binding.py
"""
import sys

import numpy as np

import braid
from checks import Checks

comm = braid.init()
rank, size = comm.rank, comm.size
check = Checks(f"rank {rank}")


def data(r, n, dtype):
    """Rank r's input: small integers, exact in every dtype and op."""
    return ((np.arange(n) * 7 + r * 3) % 5 + 1).astype(dtype)


def expected(op, n, dtype):
    xs = [data(r, n, np.float64) for r in range(size)]
    f = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max,
         "avg": np.sum}[op]
    out = f(np.stack(xs), axis=0)
    if op == "avg":
        out = out / size
        if np.issubdtype(dtype, np.integer):
            out = np.trunc(out)  # integer avg rounds toward zero
    return out.astype(dtype)


for dtype in (np.float32, np.float64, np.float16, np.int32, np.int64,
              np.uint8):
    for op in ("sum", "prod", "min", "max", "avg"):
        if dtype == np.uint8 and op in ("sum", "prod", "avg"):
            continue  # wraps
        for n in (1, 7, 1000):
            x = data(rank, n, dtype)
            buf = x.ctypes.data
            r = comm.allreduce(x, op=op)  # in place
            check(r is x and x.ctypes.data == buf, "allreduce returns x")
            check(np.array_equal(x, expected(op, n, dtype)),
                  f"allreduce {op} {np.dtype(dtype).name} n={n}: {x[:4]}")
            y = np.empty_like(x)
            comm.allreduce(data(rank, n, dtype), op=op, out=y)
            check(np.array_equal(y, expected(op, n, dtype)),
                  f"allreduce out= {op} {np.dtype(dtype).name} n={n}")

n = 6
x = np.concatenate([data(rank, n, np.float32) for _ in range(size)])
z = comm.reduce_scatter(x)
check(np.array_equal(z, expected("sum", n, np.float32)), f"reduce_scatter {z}")
g = comm.allgather(np.full(3, rank, dtype=np.int64))
check(np.array_equal(g, np.repeat(np.arange(size), 3)), f"allgather {g}")
b = np.full(4, rank, dtype=np.float64)
comm.broadcast(b, root=size - 1)
check(np.array_equal(b, np.full(4, size - 1)), f"broadcast {b}")
comm.barrier()

req = comm.iallreduce(np.ones(1000, dtype=np.float32) * (rank + 1))
keep = req._keep[1]
req.wait()
check(np.all(keep == size * (size + 1) / 2), "iallreduce")
req = comm.iallreduce(np.ones(8, dtype=np.int32))
while not req.test():
    pass
check(req.done, "iallreduce test()")

sub = comm.split(color=rank % 2, key=-rank)
check(sub.size == (size + 1 - rank % 2) // 2, f"split size {sub.size}")
s = sub.allreduce(np.array([rank], dtype=np.int32))
check(s[0] == sum(r for r in range(size) if r % 2 == rank % 2), "split sum")
check(sub.rank == sub.size - 1 - rank // 2, f"split ordered by key: "
      f"{sub.rank}")
sub.finalize()
check(comm.split(None) is None, "split(None)")

cand, why = comm.choice("allreduce", 8)
check(cand != "" and why != "", f"choice {cand} {why}")


def raises(fn, text):
    try:
        fn()
    except braid.Error as e:
        check(text in str(e), f"message {str(e)!r} lacks {text!r}")
        return
    check(False, f"no braid.Error for {text!r}")


raises(lambda: comm.allreduce(np.zeros(3, dtype=np.int16)),
       "allreduce: invalid argument: dtype int16")
raises(lambda: comm.allreduce(np.zeros((4, 4), dtype=np.float32)[:, 1]),
       "not C-contiguous")
raises(lambda: comm.allreduce(np.zeros(3, dtype=np.float32), op="xor"),
       "op 'xor'")
ro = np.zeros(3, dtype=np.float32)
ro.flags.writeable = False
raises(lambda: comm.allreduce(ro), "read-only")
raises(lambda: comm.allreduce([1.0, 2.0]), "expected a numpy array")
# An error of the C library itself, with its message.
raises(lambda: comm.broadcast(np.zeros(2, dtype=np.float32), root=size),
       "braid_broadcast: invalid argument:")
comm.barrier()  # still usable after argument errors

comm.finalize()
print(f"rank {rank}: " + ("ok" if check.failures == 0
                           else f"{check.failures} failures"))
sys.exit(1 if check.failures else 0)
