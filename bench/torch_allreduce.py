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
rank r to CPU r mod ncpu, as braidrun does; default core), --csv FILE.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import braid.distributed  # noqa: F401  (registers "braid")


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
    return p.parse_args()


def iters_for(nbytes, n):
    # About the same time per size: fewer calls for large messages.
    return max(5, min(n, int(n * (256 << 10) / max(nbytes, 1))))


def time_calls(t, group, iters):
    out = []
    for i in range(iters + 2):  # 2 warm-up calls
        t.fill_(1.0)
        dist.barrier(group=group)
        t0 = time.perf_counter()
        dist.all_reduce(t, group=group)
        dt = time.perf_counter() - t0
        if i >= 2:
            out.append(dt)
    return out


def main():
    a = parse()
    if a.bind == "core":
        cpus = sorted(os.sched_getaffinity(0))
        local = int(os.environ.get("LOCAL_RANK", "0"))
        os.sched_setaffinity(0, {cpus[local % len(cpus)]})
    dist.init_process_group("braid")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"braid": dist.group.WORLD,
              "gloo": dist.new_group(backend="gloo")}
    sizes, s = [], a.b
    while s < a.e:  # multiply, and land on -e exactly
        sizes.append(s)
        s *= a.f
    sizes.append(a.e)
    # First calls of a size set up buffers and connections: once over every
    # size and backend before anything is timed.
    for nbytes in sizes:
        for g in groups.values():
            time_calls(torch.ones(max(1, nbytes // 4)), g, 1)
    rows = []
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        iters = iters_for(nbytes, a.n)
        per_round = {k: [] for k in groups}
        for r in range(a.r):
            order = list(groups) if r % 2 == 0 else list(groups)[::-1]
            for name in order:
                t = torch.ones(n, dtype=torch.float32)
                times = torch.tensor(time_calls(t, groups[name], iters),
                                     dtype=torch.float64)
                dist.all_reduce(times, op=dist.ReduceOp.MAX,
                                group=groups["gloo"])
                per_round[name].append(statistics.median(times.tolist()))
                # The result is checked too: a fast wrong answer is no win.
                if not torch.all(t == size).item():
                    print(f"rank {rank}: {name} gave wrong sums at "
                          f"{nbytes} B", file=sys.stderr)
                    sys.exit(1)
        med = {k: statistics.median(v) * 1e6 for k, v in per_round.items()}
        rows.append((nbytes, med["braid"], med["gloo"]))
        if rank == 0:
            if len(rows) == 1:
                print(f"# torch.distributed all_reduce, float32 sum, {size} "
                      f"ranks, bind {a.bind}, {a.r} rounds, median of "
                      "per-round medians of the slowest rank")
                print(f"# {'size(B)':>10} {'braid(us)':>12} {'gloo(us)':>12}"
                      f" {'gloo/braid':>11}")
            print(f"  {nbytes:>10} {med['braid']:>12.1f} {med['gloo']:>12.1f}"
                  f" {med['gloo'] / med['braid']:>11.2f}", flush=True)
    if rank == 0 and a.csv:
        with open(a.csv, "w") as f:
            f.write("nranks,size,braid_us,gloo_us\n")
            for nbytes, b, g in rows:
                f.write(f"{size},{nbytes},{b:.2f},{g:.2f}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
