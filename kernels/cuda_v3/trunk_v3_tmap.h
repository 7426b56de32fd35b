/*
 * trunk_v3_tmap.h — the host side of cuda-v3's bulk tensor copies: the
 * driver's tensor-map encoder, reached through the runtime (no link
 * against the driver library), and the one kind of map every user takes,
 * a 2-D FP32 tensor with zero fill past its edges. Used by the fused path
 * (trunk_v3.cu), fast mode (trunk_v3_fast_wgmma.cu) and the floors program
 * (tests/cuda/floors), so all encode their maps the same way.
 */
#ifndef AUXTRUNK_TRUNK_V3_TMAP_H
#define AUXTRUNK_TRUNK_V3_TMAP_H

#include <cuda.h> /* CUtensorMap and its enums */
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace v3tmap {

typedef PFN_cuTensorMapEncodeTiled_v12000 encoder_t;

/* The driver's cuTensorMapEncodeTiled, or null where the driver has none;
 * a failed lookup leaves no CUDA error behind. */
inline encoder_t find_encoder()
{
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return reinterpret_cast<encoder_t>(fn);
}

/* The map of t [height, width] (width contiguous, rows width floats
 * apart) in boxes of box_rows x box_cols, zero-filled past both edges;
 * true if the driver took it. */
inline bool encode_2d(encoder_t encode, CUtensorMap *map, const float *t, int width, int height,
                      int box_cols, int box_rows, CUtensorMapSwizzle swizzle,
                      CUtensorMapL2promotion promotion)
{
    const cuuint64_t dims[2] = {(cuuint64_t)width, (cuuint64_t)height};
    const cuuint64_t strides[1] = {(cuuint64_t)width * sizeof(float)};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows}, estr[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float *>(t), dims, strides,
                  box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

} /* namespace v3tmap */

#endif /* AUXTRUNK_TRUNK_V3_TMAP_H */
