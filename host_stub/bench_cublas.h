/*
 * bench_cublas.h — the benchmark's comparison point: the same trunk written
 * the way a user would without auxtrunk (cublasSgemm for every product, small
 * custom kernels for bias+ELU and ELU', Sgemv for the bias gradients), captured into
 * one CUDA graph per pass and timed by graph replay. Benchmark-only code: it
 * is never part of a plugin and its results are not exact.
 */
#ifndef AUXTRUNK_BENCH_CUBLAS_H
#define AUXTRUNK_BENCH_CUBLAS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bench_cublas_result {
    double fwd_us;  /* median forward graph replay */
    double bwd_us;  /* median backward graph replay */
    double step_us; /* median forward+backward graph replay */
} bench_cublas_result_t;

/* Times the cuBLAS equivalent at one batch size on the current device.
 * tf32 != 0 allows TF32 tensor cores (CUBLAS_TF32_TENSOR_OP_MATH). Returns 0,
 * or -1 with a message in err (err_len bytes) if anything failed. */
int bench_cublas_run(int enc, int h1, int h2, int aux, int batch, int warmup, int iters, int tf32,
                     bench_cublas_result_t *res, char *err, int err_len);

#ifdef __cplusplus
}
#endif

#endif
