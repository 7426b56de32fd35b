/*
 * trunk_v3_trace.h — the per-phase trace of cuda-v3's fused kernels, read by
 * the trace program (tests/cuda/trace_v3). Only that program's own build of
 * trunk_v3.cu sets AUXTRUNK_V3_TRACE=1; the plugin's build does not, and its
 * kernels then hold no stamp at all.
 *
 * With the trace on, thread 0 of every block writes %globaltimer (ns, one
 * clock for the whole GPU) and clock64 (its SM's cycles) at the end of each
 * phase into a device buffer, overwritten by every launch; the gradient loop
 * of the backward records the first V3_TRACE_GROUP_ITEMS items of each of a
 * block's two groups (stamped by the group's first thread), and the first
 * stamp of each block the SM it runs on (%smid).
 */
#ifndef AUXTRUNK_TRUNK_V3_TRACE_H
#define AUXTRUNK_TRUNK_V3_TRACE_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

#define V3_TRACE_BLOCKS 128                       /* the largest grid of either kernel */
#define V3_TRACE_ITEMS 12                         /* gradient items recorded per block */
#define V3_TRACE_GROUP_ITEMS (V3_TRACE_ITEMS / 2) /* of each of its two groups */

/* Forward slots: the end of each phase. */
enum v3_fwd_slot {
    V3F_START,   /* first instruction */
    V3F_ISSUED,  /* mbarriers initialised, W1 slice's copy issued (thread 0) */
    V3F_XROWS,   /* x rows landed (cp.async, block barrier) */
    V3F_STAGED,  /* W1 slice landed (bulk tensor copy) */
    V3F_L1,      /* layer-1 chain and ELU (thread 0's warp) */
    V3F_CLUSTER, /* cluster barrier: every peer's mbarrier initialised */
    V3F_PUSH1,   /* h1 slice pushed to the 8 blocks, stored to global */
    V3F_W2,      /* W3 copy issued, W2 slice landed (thread 0 sees its mbarrier) */
    V3F_X1,      /* h1 exchange complete (mbarrier) */
    V3F_L2,      /* layer-2 chain and ELU */
    V3F_PUSH2,   /* h2 slice pushed and stored */
    V3F_W3,      /* W3 slice landed (thread 0 sees its mbarrier) */
    V3F_X2,      /* h2 exchange complete */
    V3F_L3,      /* layer-3 chain and the output stored: the block's end */
    V3F_SLOTS
};

/* Backward slots. Blocks without rows stamp only START, PUB1 and on. */
enum v3_bwd_slot {
    V3B_START,   /* first instruction */
    V3B_ISSUED,  /* dout rows' copies issued (cp.async, thread 0) */
    V3B_DOUT,    /* dout rows landed (the row group's barrier after its wait) */
    V3B_ARMED,   /* dh2 exchange's bytes expected (thread 0; 3.51.0: W2 issued) */
    V3B_STAGED,  /* W3 rows (bulk copies, asked for before the grid wait) landed */
    V3B_DH2,     /* dh2_pre chain and ELU gradient */
    V3B_CLUSTER, /* cluster barrier */
    V3B_PUT2,    /* dh2_pre pushed to the cluster and stored */
    V3B_PUB2,    /* dh2 handed on: the row group arrives, the other group releases */
    V3B_X,       /* W2 rows (bulk copies) landed, dh2_pre exchange complete */
    V3B_DH1,     /* dh1_pre chain and ELU gradient */
    V3B_PUT1,    /* dh1_pre stored */
    V3B_PUB1,    /* dh1 flag published */
    V3B_ITEM0,   /* per item k: ITEM0 + 3k begin, + 1 flags awaited, + 2 done */
    V3B_NODES_PUB = V3B_ITEM0 + 3 * V3_TRACE_ITEMS, /* tree-node flag published */
    V3B_NODES_WAIT,                                 /* every block's nodes awaited */
    V3B_END,                                        /* the block's end */
    V3B_SLOTS
};

typedef struct v3_stamp {
    unsigned long long ns, clk; /* 0: not stamped */
} v3_stamp_t;

typedef struct v3_trace {
    v3_stamp_t fwd[V3_TRACE_BLOCKS][V3F_SLOTS];
    v3_stamp_t bwd[V3_TRACE_BLOCKS][V3B_SLOTS];
    /* Item k of block b (k < V3_TRACE_GROUP_ITEMS: its first group's
     * k-th item; then its second group's): 1 + 6 pair + 2 which + bias
     * (which 0: dW3/db3, 1: dW2/db2, 2: dW1/db1), 0 if the group ran fewer
     * items. */
    int item[V3_TRACE_BLOCKS][V3_TRACE_ITEMS];
    /* Each backward block's first instruction, before its grid dependency wait. */
    v3_stamp_t bwd_resident[V3_TRACE_BLOCKS];
    /* The SM of each block, forward and backward (valid where START is stamped). */
    unsigned sm_fwd[V3_TRACE_BLOCKS], sm_bwd[V3_TRACE_BLOCKS];
} v3_trace_t;

/* Zeroes the device's trace (synchronously). */
cudaError_t v3_trace_clear(void);
/* Copies it to *t (synchronously, after the stream's work is done). */
cudaError_t v3_trace_get(v3_trace_t *t);

#ifdef __cplusplus
}
#endif

#endif /* AUXTRUNK_TRUNK_V3_TRACE_H */
