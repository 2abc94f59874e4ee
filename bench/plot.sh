#!/usr/bin/env bash
# PNG charts of time and bus bandwidth against message size, one line per
# series: every braid candidate, the automatic choice (auto; tuned: with
# braid-tune's file; model: without online tuning, the cost model's picks;
# alone: in a job of its own, bench/compare.sh), Open
# MPI (ompi) and torch's Gloo (gloo).  One chart per collective and rank
# count: DIR/<coll>-n<ranks>.png.
#
#   bench/plot.sh [-o DIR] [-t TITLE] [LABEL=]FILE...
#
# FILE is any of (told apart by the header line):
#   braid-bench --csv FILE        series: the algo column (the candidate);
#                                 LABEL=FILE names every row LABEL instead
#                                 (a run without --algo: LABEL=auto)
#   braid-tune --csv FILE         series: its series column (candidates,
#                                 auto, model, tuned)
#   coll,nranks,size,series,time_us
#                                 mpi-allreduce-bench -o, torch_allreduce.py
#                                 --csv, tune_report.py merge
# Several files with the same series and size (rounds) are reduced to their
# median.  Out-of-place rows only where a file has both.  Needs gnuplot
# (Debian: gnuplot-nox).
set -euo pipefail
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
out=. title=""
while getopts "o:t:h" opt; do
  case $opt in
    o) out=$OPTARG ;;
    t) title=$OPTARG ;;
    h) usage 0 ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || usage
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every input as "coll,nranks,size,series,time_us" rows.
for arg in "$@"; do
  label="" file=$arg
  if [[ $arg == *=* && ! -e $arg ]]; then label=${arg%%=*} file=${arg#*=}; fi
  [ -r "$file" ] || { echo "plot.sh: cannot read '$file'" >&2; exit 1; }
  awk -F, -v label="$label" -v file="$file" '
    NR == 1 {
      for (i = 1; i <= NF; i++) col[$i] = i
      if ("placement" in col && "algo" in col) kind = "bench"
      else if ("series" in col && "estimate_us" in col) kind = "tune"
      else if ("series" in col && "time_us" in col) kind = "plot"
      else { print "plot.sh: " file ": unknown header: " $0 > "/dev/stderr"; exit 1 }
      next
    }
    kind == "bench" && $col["placement"] == "in-place" { inplace[NR] = $0; next }
    {
      t = $col["time_us"]
      if (t == "" || t + 0 <= 0 || $col["size"] + 0 <= 0) next  # barrier: no size to plot
      s = label != "" ? label : (kind == "bench" ? $col["algo"] : $col["series"])
      if (kind == "bench") seen_oop = 1
      print $col["coll"] "," $col["nranks"] "," $col["size"] "," s "," t
    }
    END {
      # A braid-bench file of in-place rows only: use them.
      if (kind == "bench" && !seen_oop)
        for (r in inplace) {
          split(inplace[r], f, ",")
          s = label != "" ? label : f[col["algo"]]
          print f[col["coll"]] "," f[col["nranks"]] "," f[col["size"]] "," s "," f[col["time_us"]]
        }
    }' "$file" >>"$tmp/rows"
done
[ -s "$tmp/rows" ] || { echo "plot.sh: no measurements in the files given" >&2; exit 1; }

# Medians over repeated rows: "coll nranks size series time".
sort -t, -k1,1 -k2,2n -k4,4 -k3,3n -k5,5g "$tmp/rows" | awk -F, '
  function flush() { if (n) { m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
                              print key, m }; n = 0 }
  { k = $1 " " $2 " " $3 " " $4; if (k != key) { flush(); key = k }; v[++n] = $5 }
  END { flush() }' >"$tmp/med"

# Series in a fixed order: candidates by name, then auto, alone, tuned,
# model, ompi, gloo.
rank_of() { case $1 in auto) echo 1 ;; alone) echo 2 ;; tuned) echo 3 ;; model) echo 4 ;; ompi) echo 5 ;; gloo) echo 6 ;; braid-torch) echo 7 ;; *) echo 0 ;; esac; }
style_of() {
  case $1 in
    auto)  echo 'lw 3 lc rgb "#d62728" pt 7 ps 0.6' ;;
    alone) echo 'lw 3 dt 5 lc rgb "#2ca02c" pt 7 ps 0.6' ;;
    tuned) echo 'lw 3 dt 2 lc rgb "#ff7f0e" pt 5 ps 0.6' ;;
    model) echo 'lw 2 dt 4 lc rgb "#8c564b" pt 4 ps 0.6' ;;
    ompi)  echo 'lw 3 lc rgb "black" pt 9 ps 0.7' ;;
    gloo)  echo 'lw 3 dt 3 lc rgb "#1f77b4" pt 11 ps 0.7' ;;
    braid-torch) echo 'lw 2 dt 4 lc rgb "#9467bd" pt 13 ps 0.6' ;;
    *)     echo 'lw 1 pt 6 ps 0.4' ;;
  esac
}

made=0
for group in $(awk '{ print $1 "-n" $2 }' "$tmp/med" | sort -u); do
  coll=${group%-n*} n=${group##*-n}
  awk -v c="$coll" -v n="$n" '$1 == c && $2 == n' "$tmp/med" >"$tmp/g"
  series=$(awk '{ print $4 }' "$tmp/g" | sort -u | while read -r s; do echo "$(rank_of "$s") $s"; done | sort -k1,1n -k2,2 | awk '{ print $2 }')
  plots_t="" plots_b="" i=0
  for s in $series; do
    i=$((i + 1))
    # size, time (us), bus bandwidth (GB/s)
    awk -v s="$s" -v c="$coll" -v n="$n" '$4 == s {
        f = c == "allreduce" ? 2 * (n - 1) / n : (c == "reduce_scatter" || c == "allgather") ? (n - 1) / n : 1
        print $3, $5, $3 / $5 / 1e3 * f }' "$tmp/g" | sort -n >"$tmp/s$i"
    st=$(style_of "$s")
    plots_t+="${plots_t:+, }\"$tmp/s$i\" using 1:2 with linespoints $st title \"$s\""
    plots_b+="${plots_b:+, }\"$tmp/s$i\" using 1:3 with linespoints $st title \"$s\""
  done
  png="$out/$coll-n$n.png"
  head="$coll, $n ranks${title:+ -- $title}"
  gnuplot <<EOF
set terminal pngcairo noenhanced size 1200,460 font "sans,9"
set output "$png"
set multiplot layout 1,2 title "$head"
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (bytes)"
set grid
set key off
set logscale y 10
set ylabel "time per call (us)"
set title "time (lower is better)"
plot $plots_t
unset logscale y
set ylabel "bus bandwidth (GB/s)"
set title "bus bandwidth (higher is better)"
set key outside right top
plot $plots_b
unset multiplot
EOF
  echo "$png"
  made=$((made + 1))
done
[ "$made" -gt 0 ]
