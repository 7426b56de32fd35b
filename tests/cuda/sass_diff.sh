#!/usr/bin/env bash
# sass_diff.sh — compares the SASS of every kernel in two CUDA binaries
# (objects, static libraries or plugins), kernel by kernel, to show that a
# source change left device code as it was. Needs cuobjdump (and the nvdisasm
# it calls) on PATH; needs no GPU.
#
#   tests/cuda/sass_diff.sh OLD NEW
#
# Typical use: build a kernel library, copy it aside, change the source,
# rebuild, compare:
#   cmake --build build --target auxtrunk_kernels_cuda_v2
#   cp build/kernels/cuda_v2/libauxtrunk_kernels_cuda_v2.a /tmp/before.a
#   ...edit...; cmake --build build --target auxtrunk_kernels_cuda_v2
#   tests/cuda/sass_diff.sh /tmp/before.a build/kernels/cuda_v2/libauxtrunk_kernels_cuda_v2.a
#
# Kernels are matched by name with the per-file hash of anonymous namespaces
# (_GLOBAL__N__<hash>_<len>_<file>_cu_<hash>) removed, since it may change with
# the file. Prints one line per kernel that differs (changed, only-old,
# only-new) and a summary; exit status 0 when every kernel's SASS is
# identical, 1 when any differs, 2 on a usage or tool error. With
# SASS_DIFF_SHOW=1 it also prints the diff of each changed kernel.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 OLD NEW (objects, static libraries or shared objects with device code)" >&2
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
        out = dir "/" member "." name
        n = 0
        while ((out (n ? "." n : "")) in seen) n++
        out = out (n ? "." n : ""); seen[out] = 1
        next
      }
      out != "" && /^\t\t\.\.\.\.\.\.\.\.\.\./ { close(out); out = ""; next }
      out != "" { print > out }
    '
}

split "$1" "$work/old"
split "$2" "$work/new"

changed=0 same=0 only_old=0 only_new=0
for f in "$work"/old/*; do
  [ -e "$f" ] || continue
  k=$(basename "$f")
  if [ ! -e "$work/new/$k" ]; then
    echo "only-old  $k"; only_old=$((only_old + 1))
  elif cmp -s "$f" "$work/new/$k"; then
    same=$((same + 1))
  else
    echo "changed   $k"; changed=$((changed + 1))
    if [ "${SASS_DIFF_SHOW:-0}" = 1 ]; then diff "$f" "$work/new/$k" | head -40 || true; fi
  fi
done
for f in "$work"/new/*; do
  [ -e "$f" ] || continue
  k=$(basename "$f")
  [ -e "$work/old/$k" ] || { echo "only-new  $k"; only_new=$((only_new + 1)); }
done

echo "sass_diff: $same identical, $changed changed, $only_old only in OLD, $only_new only in NEW"
[ $((changed + only_old + only_new)) -eq 0 ]
