#!/usr/bin/python3
"""Tables from braid-tune, mpi-allreduce-bench and torch_allreduce.py CSVs.

    tune_report.py model FILE...     the cost model against the measurements
    tune_report.py gap FILE...       the automatic choice against the best
                                     forced candidate (the oracle gap: on
                                     the medians, and paired round by
                                     round)
    tune_report.py compare FILE...   model, gap, and braid's automatic choice
                                     against Open MPI and Gloo (bus bandwidth)
    tune_report.py merge FILE...     one plot CSV (medians) on stdout, for
                                     bench/plot.sh

Inputs (recognised by their header; several rounds of one configuration
are several files, and every figure is the median over them, a braid-tune
row counting each of its rounds_us):
  braid-tune --csv:  coll,nranks,nnodes,topo,size,bytes,series,cand,time_us,
                     estimate_us,...   (series: a candidate, auto or tuned)
  plot CSV:          coll,nranks,size,series,time_us  (mpi-allreduce-bench
                     --csv, torch_allreduce.py --csv: series ompi, gloo)
  braid-bench --csv: coll,nranks,size,...,algo,placement,time_us,...
                     (series: LABEL of a LABEL=FILE argument, else the
                     candidate that ran; out-of-place rows only)
compare.sh passes its braid-bench runs of the automatic choice, each in a
job of its own, as alone=FILE: the bus-bandwidth table sets them against
the peers (measured the same way) where they exist.
Sizes are nccl-tests sizes (the larger buffer); bus bandwidth is
size/time times 2(n-1)/n (allreduce) or (n-1)/n (reduce_scatter,
allgather).  Thresholds: DIFF (the ranking check, default 0.2), GAP
(auto, default 0.10), TUNED_GAP (default 0.05), BUS (default 1.5), taken
from the environment.
"""
import csv
import math
import os
import statistics
import sys
from collections import defaultdict

DIFF = float(os.environ.get("DIFF", "0.2"))
GAP = float(os.environ.get("GAP", "0.10"))
TUNED_GAP = float(os.environ.get("TUNED_GAP", "0.05"))
BUS = float(os.environ.get("BUS", "1.5"))
OTHERS = ("ompi", "gloo")


def fmt_size(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def fmt_us(us):
    if us is None:
        return "-"
    return f"{us:.2f}" if us < 1e4 else f"{us:.0f}"


def bus_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll in ("reduce_scatter", "allgather"):
        return (n - 1) / n
    return 1.0


def busbw(coll, n, size, us):
    if not us:
        return None
    return size / us / 1e3 * bus_factor(coll, n)


class Data:
    """Every (coll, nranks, size, series) with its times over rounds."""

    def __init__(self):
        # key -> {file number: its rounds}: pairs the series round by
        # round (paired()); times() is every round of every file.
        self.by_file = defaultdict(dict)
        self.files = 0
        self.ran = defaultdict(dict)  # key -> {file number: what it ran}
        self.est = {}                    # estimate of what ran (us)
        self.bytes = {}

    def load(self, path, label=None):
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        self.files += 1
        for r in rows:
            if not r.get("time_us"):
                continue
            if "placement" in r and "algo" in r:  # braid-bench
                if r["placement"] != "out-of-place":
                    continue
                r["series"], r["cand"] = label or r["algo"], r["algo"]
            elif label:
                r["series"] = label
            key = (r["coll"], int(r["nranks"]), int(r["size"]), r["series"])
            # braid-tune's rounds each count, so that a file of five rounds
            # weighs five times one of one.
            rounds = [float(x) for x in (r.get("rounds_us") or "").split(";")
                      if x]
            self.by_file[key].setdefault(self.files, []).extend(
                rounds or [float(r["time_us"])])
            if r.get("cand"):
                self.ran[key][self.files] = r["cand"]
            if r.get("estimate_us"):
                self.est[key] = float(r["estimate_us"])
            if r.get("bytes"):
                self.bytes[key[:3]] = int(r["bytes"])

    def median(self, key):
        v = self.times(key)
        return statistics.median(v) if v else None

    def times(self, key):
        """Every round of key, file by file."""
        return [x for rounds in self.by_file.get(key, {}).values()
                for x in rounds]

    def over_rounds(self, a, ref):
        """The median over rounds of a's time / ref's in the same round
        (the same file, the same round of it), or None without a pair;
        a: {file number: its rounds}."""
        b = self.by_file.get(ref, {})
        r = [x / y for f in a if f in b and len(a[f]) == len(b[f])
             for x, y in zip(a[f], b[f]) if y > 0]
        return statistics.median(r) if r else None

    def paired(self, key, ref):
        """key's series over ref's, round by round (over_rounds)."""
        return self.over_rounds(self.by_file.get(key, {}), ref)

    def pick(self, key, ref):
        """The forced series of the candidate key's series ran in each
        round's file over ref's, round by round (over_rounds): the choice
        alone, whichever it made in each round."""
        coll, n, size, _ = key
        a = {f: self.by_file.get((coll, n, size, cand), {}).get(f)
             for f, cand in self.ran.get(key, {}).items()}
        return self.over_rounds({f: v for f, v in a.items() if v}, ref)

    def ran_name(self, key):
        """The candidate a series ran most often; of a tie, the one it ran
        first (the same on every run of the report)."""
        v = list(self.ran.get(key, {}).values())
        return max(v, key=v.count) if v else key[3]

    def points(self):
        """(coll, nranks, size) -> {series: median us}"""
        out = defaultdict(dict)
        for key in self.by_file:
            out[key[:3]][key[3]] = self.median(key)
        return out

    def rounds(self):
        return max((len(self.times(k)) for k in self.by_file), default=0)


def is_cand(series):
    return "@" in series or series not in ("auto", "tuned", "alone",
                                           "model") + OTHERS


def best_cand(row):
    c = [(t, s) for s, t in row.items() if is_cand(s) and t]
    return min(c) if c else (None, None)


def model(d):
    pts = d.points()
    print("\n## The cost model against the measurements")
    print("error = estimate / measured - 1; the ranking check compares every "
          f"pair of candidates whose measured times differ by more than "
          f"{DIFF:.0%}")
    errs = defaultdict(list)
    bad = []
    for (coll, n, size), row in sorted(pts.items()):
        cands = sorted(s for s in row if is_cand(s) and row[s])
        print(f"\n{coll}, {n} ranks, {fmt_size(size)} B:")
        print(f"  {'candidate':16} {'measured':>12} {'estimate':>12} "
              f"{'error':>8}")
        for s in cands:
            est = d.est.get((coll, n, size, s))
            e = est / row[s] - 1 if est is not None and row[s] else None
            if e is not None:
                errs[(coll, n, s)].append(e)
            print(f"  {s:16} {fmt_us(row[s]):>12} {fmt_us(est):>12} "
                  f"{'-' if e is None else f'{e:+.0%}':>8}")
        for i, a in enumerate(cands):
            for b in cands[i + 1:]:
                ta, tb = row[a], row[b]
                ea = d.est.get((coll, n, size, a))
                eb = d.est.get((coll, n, size, b))
                if ea is None or eb is None:
                    continue
                if max(ta, tb) / min(ta, tb) <= 1 + DIFF:
                    continue
                if (ta < tb) != (ea < eb):
                    bad.append((coll, n, size, a, ta, ea, b, tb, eb))
    print("\n### Error per candidate (median and largest |error| over sizes)")
    print(f"  {'coll':15} {'ranks':>5} {'candidate':16} {'median':>8} "
          f"{'worst':>8} sizes")
    for (coll, n, s), e in sorted(errs.items()):
        med = statistics.median(abs(x) for x in e)
        worst = max(e, key=abs)
        print(f"  {coll:15} {n:>5} {s:16} {med:>8.0%} {worst:>+8.0%} "
              f"{len(e)}")
    print(f"\n### Ranking: pairs measured more than {DIFF:.0%} apart that the "
          f"model orders the other way: {len(bad)}")
    for coll, n, size, a, ta, ea, b, tb, eb in bad:
        print(f"  {coll} {n} ranks {fmt_size(size)} B: {a} {fmt_us(ta)} us "
              f"(estimate {fmt_us(ea)}) vs {b} {fmt_us(tb)} us (estimate "
              f"{fmt_us(eb)})")
    return len(bad)


def gap(d):
    pts = d.points()
    print("\n## The oracle gap: the automatic choice against the best forced "
          "candidate")
    print("gap = auto / best - 1 (medians over rounds); tuned = the automatic "
          "choice with braid-tune's file;\nmodel = the automatic choice "
          "without online tuning (BRAID_ONLINE=off: the cost model's picks);"
          "\npick = the candidate it ran in each round, timed "
          "forced in that round, / best - 1, the median over rounds:\nthe "
          "choice alone, without the noise between the auto series and the "
          "forced ones (on a busy\nmachine the two differ by more than the "
          "gap)")
    print(f"  {'coll':15} {'ranks':>5} {'size':>6} {'best':>16} "
          f"{'best us':>10} {'auto ran':>16} {'auto us':>10} {'gap':>7} "
          f"{'tuned ran':>16} {'tuned us':>10} {'gap':>7} "
          f"{'model ran':>16} {'model us':>10} {'gap':>7} {'pick':>6} "
          f"{'tpick':>6} {'mpick':>6}")
    series = (("auto", GAP), ("tuned", TUNED_GAP), ("model", GAP))
    over = {s: 0 for s, _ in series}
    worst = {s: 0.0 for s, _ in series}
    picks = {s: [] for s, _ in series}
    paired = {s: [] for s, _ in series}  # (size's label, paired - 1)
    for (coll, n, size), row in sorted(pts.items()):
        tb, b = best_cand(row)
        if tb is None:
            continue
        line = (f"  {coll:15} {n:>5} {fmt_size(size):>6} {b:>16} "
                f"{fmt_us(tb):>10}")
        for s, limit in series:
            t = row.get(s)
            if t is None:
                line += f" {'-':>16} {'-':>10} {'-':>7}"
                continue
            p = d.paired((coll, n, size, s), (coll, n, size, b))
            if p is not None:
                paired[s].append((f"{coll} {n} {fmt_size(size)}", p - 1))
            g = t / tb - 1
            worst[s] = max(worst[s], g)
            flag = "!" if g > limit else " "
            over[s] += g > limit
            line += (f" {d.ran_name((coll, n, size, s)):>16} {fmt_us(t):>10} "
                     f"{g:>+6.0%}{flag}")
        for s, _ in series:
            p = (d.pick((coll, n, size, s), (coll, n, size, b))
                 if row.get(s) else None)
            if p is not None:
                picks[s].append(p - 1)
            line += f" {'-' if p is None else f'{p - 1:+.0%}':>6}"
        print(line)
    for s, limit in series:
        if any(k[3] == s for k in d.by_file):
            print(f"  {s}: largest gap {worst[s]:+.0%}; sizes over "
                  f"{limit:.0%}: {over[s]} (marked !)")
            largest = (f"largest {max(g for _, g in paired[s]):+.0%}; "
                       if paired[s] else "")
            over_p = [f"{at} {g:+.0%}" for at, g in paired[s] if g > limit]
            print(f"  {s} paired (the median over rounds of its time over "
                  f"the best's in the same round): {largest}sizes over "
                  f"{limit:.0%}: {len(over_p)}"
                  f"{': ' if over_p else ''}{', '.join(over_p)}")
        if picks[s]:
            print(f"  {s} pick: largest {max(picks[s]):+.0%}, median "
                  f"{statistics.median(picks[s]):+.0%}; sizes over "
                  f"{limit:.0%}: {sum(p > limit for p in picks[s])} of "
                  f"{len(picks[s])}")
    return over["auto"] + over["tuned"]


def compare(d):
    pts = d.points()
    print("\n## braid against Open MPI (ompi) and Gloo: bus bandwidth (GB/s)")
    print("auto, tuned, best: braid-tune's series (every candidate's "
          "communicator alive side by side);\nalone: the automatic choice "
          "in a job of its own (braid-bench), as ompi and gloo run;\n"
          "auto/peer = alone's bus bandwidth (auto's where alone was not "
          "measured) over the better of\nompi and gloo;"
          f" wanted >= {BUS} from 16 MiB, >= 1 from 64 KiB")
    print(f"  {'coll':15} {'ranks':>5} {'size':>6} {'auto':>8} {'alone':>8} "
          f"{'tuned':>8} {'best':>8} {'ompi':>8} {'gloo':>8} {'auto/peer':>10}")
    fails = 0
    for (coll, n, size), row in sorted(pts.items()):
        bw = {s: busbw(coll, n, size, row.get(s))
              for s in ("auto", "alone", "tuned", "ompi", "gloo")}
        tb, _ = best_cand(row)
        bw["best"] = busbw(coll, n, size, tb)
        peers = [bw[s] for s in OTHERS if bw[s]]
        mine = bw["alone"] or bw["auto"]
        ratio = mine / max(peers) if mine and peers else None
        want = BUS if size >= 16 << 20 else 1.0 if size >= 64 << 10 else None
        flag = ""
        if ratio is not None and want is not None and ratio < want:
            flag = " !"
            fails += 1

        def f(x):
            return "-" if x is None else f"{x:.3f}"
        print(f"  {coll:15} {n:>5} {fmt_size(size):>6} {f(bw['auto']):>8} "
              f"{f(bw['alone']):>8} {f(bw['tuned']):>8} {f(bw['best']):>8} {f(bw['ompi']):>8} "
              f"{f(bw['gloo']):>8} "
              f"{'-' if ratio is None else f'{ratio:.2f}x':>10}{flag}")
    print(f"  sizes below the target: {fails} (marked !)")
    return fails


def merge(d):
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["coll", "nranks", "size", "series", "time_us"])
    for key in sorted(d.by_file):
        w.writerow(list(key) + [f"{d.median(key):.3f}"])


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("model", "gap", "compare",
                                                "merge"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    d = Data()
    for arg in sys.argv[2:]:
        label, path = None, arg
        if "=" in arg and not os.path.exists(arg):
            label, path = arg.split("=", 1)
        d.load(path, label)
    if not d.by_file:
        print("tune_report.py: no measurements in the files given",
              file=sys.stderr)
        sys.exit(1)
    what = sys.argv[1]
    if what == "merge":
        merge(d)
        return
    print(f"# {len(sys.argv) - 2} files, up to {d.rounds()} rounds per "
          "figure (medians)")
    if what in ("compare",):
        compare(d)
    if what in ("gap", "compare"):
        gap(d)
    if what in ("model", "compare"):
        bad = model(d)
        if what == "model" and bad:
            sys.exit(1)


if __name__ == "__main__":
    main()
