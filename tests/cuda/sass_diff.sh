#!/usr/bin/env bash
# sass_diff.sh — compares the SASS of every kernel in CUDA binaries built
# from two versions of the source (objects, static libraries or plugins),
# kernel by kernel, to show that a source change left device code as it was.
# Needs cuobjdump (and the nvdisasm it calls) on PATH; needs no GPU.
#
#   tests/cuda/sass_diff.sh OLD NEW
#   tests/cuda/sass_diff.sh OLD... -- NEW...
#
# Typical use: build a kernel library, copy it aside, change the source,
# rebuild, compare:
#   cmake --build build --target auxtrunk_kernels_cuda_v2
#   cp build/kernels/cuda_v2/libauxtrunk_kernels_cuda_v2.a /tmp/before.a
#   ...edit...; cmake --build build --target auxtrunk_kernels_cuda_v2
#   tests/cuda/sass_diff.sh /tmp/before.a build/kernels/cuda_v2/libauxtrunk_kernels_cuda_v2.a
#
# nvcc (13.0, its NVVM stage) does not always give the same PTX for the same
# source: from one run to the next a few of the large unrolled kernels come out
# with other register numbering. So several builds of each version may be
# given; a kernel counts as unchanged when some OLD build and some NEW build
# have the same SASS for it (the same source gives one of a few variants;
# changed source gives none of them). The summary says how many kernels came
# in more than one variant.
#
# Kernels are matched by archive member and name, with the per-file hash of
# anonymous namespaces (_GLOBAL__N__<hash>_<len>_<file>_cu_<hash>) removed.
# Prints one line per kernel that differs (changed, only-old, only-new) and a
# summary; exit status 0 when every kernel is unchanged, 1 when any differs,
# 2 on a usage or tool error. With SASS_DIFF_SHOW=1 it also prints the start
# of the diff of each changed kernel (first OLD build against first NEW).
set -euo pipefail

olds=() news=() side=old
if [ $# -eq 2 ]; then
  olds=("$1") news=("$2")
else
  for a in "$@"; do
    if [ "$a" = -- ]; then side=new
    elif [ $side = old ]; then olds+=("$a")
    else news+=("$a"); fi
  done
fi
if [ ${#olds[@]} -eq 0 ] || [ ${#news[@]} -eq 0 ]; then
  echo "usage: $0 OLD NEW, or $0 OLD... -- NEW... (objects, static libraries or shared objects)" >&2
  exit 2
fi
command -v cuobjdump >/dev/null || { echo "$0: cuobjdump not found on PATH" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# split FILE DIR: one file per kernel in DIR (named by the archive member and
# the normalized kernel name), holding its instructions with their offsets and
# encodings.
split() {
  mkdir -p "$2"
  cuobjdump --dump-sass "$1" >"$2.raw" || { echo "$0: cuobjdump failed on $1" >&2; exit 2; }
  sed -E 's/_GLOBAL__N__[0-9a-f]+_[0-9]+_([A-Za-z0-9_]+)_cu_[0-9a-f]+/_GLOBAL__N_\1/g' "$2.raw" |
    awk -v dir="$2" '
      /^member / { member = $2; sub(/:$/, "", member); sub(/.*:/, "", member); next }
      /Function : / {
        name = $3
        out = dir "/" (member == "" ? "object" : member) "." name
        n = 0
        while ((out (n ? "." n : "")) in seen) n++
        out = out (n ? "." n : ""); seen[out] = 1
        next
      }
      out != "" && /^\t\t\.\.\.\.\.\.\.\.\.\./ { close(out); out = ""; next }
      out != "" { print > out }
    '
}

for i in "${!olds[@]}"; do split "${olds[$i]}" "$work/old$i"; done
for i in "${!news[@]}"; do split "${news[$i]}" "$work/new$i"; done

# One line per kernel and side: "<side> <kernel> <md5 of its SASS>".
for d in "$work"/old* "$work"/new*; do
  [ -d "$d" ] || continue
  side=$(basename "$d" | tr -d 0-9)
  for f in "$d"/*; do
    [ -e "$f" ] || continue
    echo "$side $(basename "$f") $(md5sum <"$f" | cut -c1-32)"
  done
done | sort -u >"$work/index"

awk '
  { key = $2; seen[key] = 1; has[$1, key] = 1; v[$1, key, $3] = 1; n[key, $3]++; nv[$1, key]++ }
  END {
    same = changed = only_old = only_new = multi = 0
    for (k in seen) {
      if (!has["old", k]) { print "only-new  " k; only_new++; continue }
      if (!has["new", k]) { print "only-old  " k; only_old++; continue }
      common = 0
      for (x in v) { split(x, p, SUBSEP); if (p[1] == "old" && p[2] == k && (("new", k, p[3]) in v)) common = 1 }
      if (nv["old", k] > 1 || nv["new", k] > 1) multi++
      if (common) same++; else { print "changed   " k; changed++ }
    }
    printf "sass_diff: %d unchanged, %d changed, %d only in OLD, %d only in NEW (%d kernels in more than one variant)\n", same, changed, only_old, only_new, multi
    exit (changed + only_old + only_new) > 0
  }
' "$work/index" >"$work/report" && rc=0 || rc=1
sort "$work/report" | grep -v '^sass_diff:' || true
grep '^sass_diff:' "$work/report"

if [ "${SASS_DIFF_SHOW:-0}" = 1 ]; then
  grep '^changed' "$work/report" | while read -r _ k; do
    echo "--- $k"
    diff "$work/old0/$k" "$work/new0/$k" | head -40 || true
  done
fi
exit $rc
