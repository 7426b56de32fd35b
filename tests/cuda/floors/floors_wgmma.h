/*
 * floors_wgmma.h — the wgmma table of auxtrunk-floors (floors_wgmma.cu, an
 * sm_90a build of its own). Prints the table on the current device, or a
 * line saying why it is skipped where the device has no sm_90a image.
 */
#ifndef AUXTRUNK_FLOORS_WGMMA_H
#define AUXTRUNK_FLOORS_WGMMA_H

#include <cuda_runtime.h>

void floors_wgmma(const cudaDeviceProp &prop);

#endif /* AUXTRUNK_FLOORS_WGMMA_H */
