#!/usr/bin/env python3
"""bench_numpy.py — the trunk's training step (forward + backward) in numpy on
OpenBLAS, the speed yardstick of docs/cpu-perf.md, optionally side by side
with the C kernels in the same run. Not exact and not a test: float32 GEMMs in
OpenBLAS's own order, timed with time.perf_counter (median of --reps).

One BLAS thread and no forced core type, as the figures in docs/cpu-perf.md:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \
        python3 tests/unit/bench_numpy.py [--reps N] [B ...]

With --kernels build/tests/unit/bench_cpu_kernels it runs --rounds rounds of
numpy, of that program's cpu-ref, and of its cpu-blocked at every --threads
count in one run of the program (the counts interleaved in blocks of steps,
so that a machine whose speed drifts slows them alike), and prints the median
over rounds of each median (the machine may be shared: rounds spread the
interference over every column alike). With several counts the speedup
column is the median over rounds of the program's own speedup (the median
of its per-block ratios); --ceiling adds the program's ceiling row: as many
one-thread trunks at once as the largest count, the speedup the machine
itself gives threads that share nothing.

Same shapes as the plugins: production topology ENC=256, H1=256, H2=256,
AUX=128; x and dout uniform in [-1, 1], weights in [-0.1, 0.1].
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ENC, H1, H2, AUX = 256, 256, 256, 128


def elu(z):
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))


def forward(p, x):
    h1 = elu(x @ p["w1"] + p["b1"])
    h2 = elu(h1 @ p["w2"] + p["b2"])
    return h1, h2, h2 @ p["w3"] + p["b3"]


def backward(p, x, h1, h2, dout, g):
    # ELU' from the post-activation y: 1 for y > 0, else 1 + y.
    dh2 = (dout @ p["w3"].T) * np.where(h2 > 0, 1, 1 + h2)
    dh1 = (dh2 @ p["w2"].T) * np.where(h1 > 0, 1, 1 + h1)
    np.matmul(h2.T, dout, out=g["w3"])
    np.sum(dout, axis=0, out=g["b3"])
    np.matmul(h1.T, dh2, out=g["w2"])
    np.sum(dh2, axis=0, out=g["b2"])
    np.matmul(x.T, dh1, out=g["w1"])
    np.sum(dh1, axis=0, out=g["b1"])


def step_flops(b):
    macs = b * (ENC * H1 + H1 * H2 + H2 * AUX)
    return 2.0 * (macs + macs + b * (H1 * H2 + H2 * AUX))


def time_numpy(p, g, rng, b, reps):
    """Median forward, backward and step seconds of numpy at batch b."""
    f32 = np.float32
    x = rng.uniform(-1, 1, (b, ENC)).astype(f32)
    dout = rng.uniform(-1, 1, (b, AUX)).astype(f32)
    tf, tb, ts = [], [], []
    warm = reps // 10 + 3
    for i in range(reps + warm):
        t0 = time.perf_counter()
        h1, h2, _ = forward(p, x)
        t1 = time.perf_counter()
        backward(p, x, h1, h2, dout, g)
        t2 = time.perf_counter()
        if i >= warm:
            tf.append(t1 - t0)
            tb.append(t2 - t1)
            ts.append(t2 - t0)
    m = statistics.median
    return m(tf), m(tb), m(ts)


def time_kernels(path, only, threads, batches, reps, ceiling=False):
    """{(name, threads): {B: ((fwd, bwd, step) seconds, speedup or None)}} of one
    bench_cpu_kernels run of one kernel set at the thread counts `threads`
    (interleaved when there are several), with its ceiling row if asked."""
    cmd = [path, "--only", only, "--threads", ",".join(str(t) for t in threads),
           "--reps", str(reps)]
    if ceiling and len(threads) > 1:
        cmd.append("--ceiling")
    cmd += [str(b) for b in batches]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 6 and f[0].isdigit():  # one count: the row has no threads, speedup columns
            rows.setdefault((f[1], threads[0]), {})[int(f[0])] = (
                tuple(float(v) * 1e-6 for v in f[2:5]), None)
        elif len(f) == 8 and f[0].isdigit():
            t = None if f[1] == "ceiling" else tuple(float(v) * 1e-6 for v in f[2:5])
            rows.setdefault((f[1], int(f[6])), {})[int(f[0])] = (t, float(f[7]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=201, help="timed repetitions per batch (median)")
    ap.add_argument("--kernels", help="path of bench_cpu_kernels, to time beside numpy")
    ap.add_argument("--threads", default="1,2", help="cpu-blocked thread counts (with --kernels)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (with --kernels)")
    ap.add_argument("--ceiling", action="store_true",
                    help="with several --threads counts, also the machine's ceiling (as many "
                         "one-thread trunks at once as the largest count)")
    ap.add_argument("batches", type=int, nargs="*", default=[64, 256, 1024])
    a = ap.parse_args()
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1" or "OPENBLAS_CORETYPE" in os.environ:
        print("bench_numpy: run with OPENBLAS_NUM_THREADS=1 and without OPENBLAS_CORETYPE "
              "(see --help)", file=sys.stderr)
    rng = np.random.default_rng(1)
    f32 = np.float32
    shapes = {"w1": (ENC, H1), "b1": (H1,), "w2": (H1, H2), "b2": (H2,), "w3": (H2, AUX), "b3": (AUX,)}
    p = {k: rng.uniform(-0.1, 0.1, s).astype(f32) for k, s in shapes.items()}
    g = {k: np.empty(s, f32) for k, s in shapes.items()}
    hdr = f"{'B':>8} {'':<22} {'forward_us':>12} {'backward_us':>12} {'step_us':>12} {'GFLOP/s':>9}"

    def row(b, name, t, speedup=None):
        line = (f"{b:>8} {name:<22} "
                + (f"{t[0] * 1e6:>12.1f} {t[1] * 1e6:>12.1f} {t[2] * 1e6:>12.1f} "
                   f"{step_flops(b) / t[2] * 1e-9:>9.2f}" if t else
                   f"{'-':>12} {'-':>12} {'-':>12} {'-':>9}"))
        return line + (f" {speedup:>8.2f}" if speedup is not None else "")

    if not a.kernels:
        print(hdr)
        for b in a.batches:
            print(row(b, "numpy/OpenBLAS", time_numpy(p, g, rng, b, a.reps)), flush=True)
        return
    threads = [int(t) for t in a.threads.split(",")]
    if not threads or min(threads) < 1:
        ap.error("--threads takes counts of at least 1")
    runs = {}  # column name -> B -> list of ((fwd, bwd, step) or None, speedup or None)
    for r in range(a.rounds):
        for b in a.batches:
            runs.setdefault("numpy/OpenBLAS 1 thr", {}).setdefault(b, []).append(
                (time_numpy(p, g, rng, b, a.reps), None))
        for name, counts in (("cpu-ref", [1]), ("cpu-blocked", threads)):
            got = time_kernels(a.kernels, name, counts, a.batches, a.reps, a.ceiling)
            for (kname, t), per_b in got.items():
                for b, v in per_b.items():
                    runs.setdefault(f"{kname} {t} thr", {}).setdefault(b, []).append(v)
        print(f"round {r + 1} of {a.rounds} done", file=sys.stderr, flush=True)
    interleaved = len(threads) > 1
    print(f"median over {a.rounds} rounds of the median of {a.reps} repetitions"
          + ("; cpu-blocked's thread counts interleaved in one run, speedup: the median over "
             "rounds of its own" if interleaved else ""))
    print(hdr + (f" {'speedup':>8}" if interleaved else ""))
    med = statistics.median
    for b in a.batches:
        for col, per_b in runs.items():
            v = per_b[b]
            t = None if v[0][0] is None else tuple(med(x[0][i] for x in v) for i in range(3))
            sp = med(x[1] for x in v) if v[0][1] is not None else None
            print(row(b, col, t, sp))


if __name__ == "__main__":
    main()
