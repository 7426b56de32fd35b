/*
 * dist_cuda.cu — the ordered combine of a data-parallel step on the device
 * (dist.h): one thread per element runs combine.h's tree over the ranks'
 * gathered values, the function the CPU test checks against the full batch.
 */
#include <cuda_runtime.h>

#include "combine.h"
#include "dist.h"

__global__ void combine_kernel(float *gathered, size_t count, uint32_t ranks, float *out)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = ath_combine_elem(gathered, count, ranks, i);
}

extern "C" int ath_cuda_combine(void *stream, float *gathered, size_t count, int ranks, float *out)
{
    size_t blocks = (count + 255) / 256;
    blocks = blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks;
    combine_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(gathered, count,
                                                                       (uint32_t)ranks, out);
    return (int)cudaGetLastError();
}
