/*
 * cuda_ck.h — CK(call) for the measurement programs under tests/cuda
 * (auxtrunk-floors, auxtrunk-trace-v3): a failed CUDA runtime call prints
 * where and why and exits 1. Programs only; never for a library.
 */
#ifndef AUXTRUNK_TESTS_CUDA_CK_H
#define AUXTRUNK_TESTS_CUDA_CK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif /* AUXTRUNK_TESTS_CUDA_CK_H */
