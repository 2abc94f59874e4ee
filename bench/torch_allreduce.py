"""torch.distributed all_reduce, braid backend next to Gloo, in one job.

    braid-torchrun --nproc_per_node 4 bench/torch_allreduce.py [options]
    (bench/torch_allreduce.sh runs it for 2 and 4 ranks)

The default process group is "braid", a second group over the same ranks
is Gloo; both run in the same processes, size by size, in alternating order
over several rounds, so that a shared, noisy machine hits both alike.  A
call is timed on its own after a barrier of its group; the time of an
iteration is the slowest rank's; a round's figure is the median over its
iterations, and the table shows the median over rounds (float32, SUM).

Options: -b/-e/-f sizes (bytes, K/M suffixes), -n iterations (small sizes;
large sizes use fewer, at least 5), -r rounds, --bind core|none (pin local
rank r to CPU r mod ncpu, as braidrun does; default core), --csv FILE
("coll,nranks,size,series,time_us", series braid-torch and gloo: what
bench/plot.sh and bench/tune_report.py read), --backends braid,gloo (or
one of them: gloo alone needs no braid package), --coll allreduce,
allgather or reduce_scatter (size is then the larger buffer, as in
braid-bench; Gloo has no reduce_scatter and gets "-").
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist



def size_arg(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(s[:-1] if mult > 1 else s) * mult


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-b", type=size_arg, default=8)
    p.add_argument("-e", type=size_arg, default=64 << 20)
    p.add_argument("-f", type=int, default=4)
    p.add_argument("-n", type=int, default=100)
    p.add_argument("-r", type=int, default=5)
    p.add_argument("--bind", choices=("core", "none"), default="core")
    p.add_argument("--csv", default=None)
    p.add_argument("--backends", default="braid,gloo")
    p.add_argument("--coll", default="allreduce",
                   choices=("allreduce", "allgather", "reduce_scatter"))
    a = p.parse_args()
    a.backends = [b for b in a.backends.split(",") if b]
    if not a.backends or any(b not in ("braid", "gloo") for b in a.backends):
        p.error("--backends: braid, gloo or both")
    return a


def iters_for(nbytes, n):
    # About the same time per size: fewer calls for large messages.
    return max(5, min(n, int(n * (256 << 10) / max(nbytes, 1))))


class Call:
    """One collective on a group with its buffers; check() after a call."""

    def __init__(self, coll, nbytes, size, group):
        self.coll, self.size, self.group = coll, size, group
        per = max(1, nbytes // 4 // (1 if coll == "allreduce" else size))
        self.t = torch.ones(per if coll == "allgather" else
                            per * (size if coll == "reduce_scatter" else 1),
                            dtype=torch.float32)
        self.out = ([torch.empty(per) for _ in range(size)]
                    if coll == "allgather" else torch.empty(per))
        self.nbytes = per * 4 * (1 if coll == "allreduce" else size)

    def __call__(self):
        if self.coll == "allreduce":
            self.t.fill_(1.0)
            dist.all_reduce(self.t, group=self.group)
        elif self.coll == "allgather":
            dist.all_gather(self.out, self.t, group=self.group)
        else:
            dist.reduce_scatter(self.out, list(self.t.chunk(self.size)),
                                group=self.group)

    def check(self):
        if self.coll == "allreduce":
            return bool(torch.all(self.t == self.size).item())
        if self.coll == "allgather":
            return all(bool(torch.all(o == 1).item()) for o in self.out)
        return bool(torch.all(self.out == self.size).item())


def time_calls(c, iters):
    out = []
    for i in range(iters + 2):  # 2 warm-up calls
        dist.barrier(group=c.group)
        t0 = time.perf_counter()
        c()
        dt = time.perf_counter() - t0
        if i >= 2:
            out.append(dt)
    return out


def supported(c):
    """Gloo has no reduce_scatter: try once, on every rank alike."""
    try:
        c()
        return True
    except RuntimeError:
        return False


def main():
    a = parse()
    if a.bind == "core":
        cpus = sorted(os.sched_getaffinity(0))
        local = int(os.environ.get("LOCAL_RANK", "0"))
        os.sched_setaffinity(0, {cpus[local % len(cpus)]})
    if "braid" in a.backends:
        import braid.distributed  # noqa: F401  (registers "braid")
    dist.init_process_group(a.backends[0])
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {}
    for b in a.backends:
        groups[b] = (dist.group.WORLD if b == a.backends[0]
                     else dist.new_group(backend=b))
    # The times are reduced over a Gloo group (host tensors, any backend).
    tgroup = groups.get("gloo") or dist.new_group(backend="gloo")
    sizes, s = [], a.b
    while s < a.e:  # multiply, and land on -e exactly
        sizes.append(s)
        s *= a.f
    sizes.append(a.e)
    # First calls of a size set up buffers and connections: once over every
    # size and backend before anything is timed.
    ok = {}
    for nbytes in sizes:
        for name, g in groups.items():
            ok[name, nbytes] = supported(Call(a.coll, nbytes, size, g))
    rows = []
    for nbytes in sizes:
        iters = iters_for(nbytes, a.n)
        per_round = {k: [] for k in groups if ok[k, nbytes]}
        shown = nbytes
        for r in range(a.r):
            order = list(per_round) if r % 2 == 0 else list(per_round)[::-1]
            for name in order:
                c = Call(a.coll, nbytes, size, groups[name])
                shown = c.nbytes
                times = torch.tensor(time_calls(c, iters),
                                     dtype=torch.float64)
                dist.all_reduce(times, op=dist.ReduceOp.MAX, group=tgroup)
                per_round[name].append(statistics.median(times.tolist()))
                # The result is checked too: a fast wrong answer is no win.
                if not c.check():
                    print(f"rank {rank}: {name} gave wrong results at "
                          f"{nbytes} B", file=sys.stderr)
                    sys.exit(1)
        med = {k: statistics.median(v) * 1e6 for k, v in per_round.items()}
        rows.append((shown, med))
        if rank == 0:
            if len(rows) == 1:
                print(f"# torch.distributed {a.coll}, float32, {size} "
                      f"ranks, bind {a.bind}, {a.r} rounds, median of "
                      "per-round medians of the slowest rank")
                head = "".join(f" {b + '(us)':>12}" for b in a.backends)
                ratio = (f" {'gloo/braid':>11}" if len(a.backends) == 2
                         else "")
                print(f"# {'size(B)':>10}{head}{ratio}")
            cells = "".join(f" {med[b]:>12.1f}" if b in med else f" {'-':>12}"
                            for b in a.backends)
            ratio = ""
            if len(a.backends) == 2:
                ratio = (f" {med['gloo'] / med['braid']:>11.2f}"
                         if "gloo" in med and "braid" in med
                         else f" {'-':>11}")
            print(f"  {shown:>10}{cells}{ratio}", flush=True)
    if rank == 0 and a.csv:
        with open(a.csv, "w") as f:
            f.write("coll,nranks,size,series,time_us\n")
            for nbytes, med in rows:
                for b, us in med.items():
                    series = "braid-torch" if b == "braid" else b
                    f.write(f"{a.coll},{size},{nbytes},{series},{us:.2f}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
