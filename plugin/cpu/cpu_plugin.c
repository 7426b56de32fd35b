/*
 * cpu_plugin.c — libauxtrunk.so "cpu-ref", the CPU reference plugin:
 * kernels/cpu (exact, canonical order; deterministic) behind the shared host
 * adapter (plugin/common/host_plugin.c), which implements every entry of the
 * ABI. This file is the table: names, caps and the kernel functions.
 *
 * Host memory per handle, besides the adapter's h1/h2 record: kernels/cpu's
 * inference scratch (independent of the batch) and its backward workspace
 * (never proportional to the batch).
 */
#include "auxtrunk.h"
#include "auxtrunk_canon.h"
#include "cpu_trunk.h"
#include "host_plugin.h"

#define CPU_STR_(x) #x
#define CPU_STR(x) CPU_STR_(x)

const atp_host_kernels_t atp_host_plugin_kernels = {
    .impl_name = "cpu-ref",
    .kernel_version =
        "cpu-ref " AUXTRUNK_KERNEL_VERSION " (canon " CPU_STR(AUXTRUNK_CANON_VERSION) ")",
    .caps = AUXTRUNK_CAP_MEM_HOST | AUXTRUNK_CAP_DETERMINISTIC | AUXTRUNK_CAP_EXACT,
    .infer_workspace = cpu_trunk_infer_workspace,
    .backward_workspace = cpu_trunk_backward_workspace,
    .forward = cpu_trunk_forward,
    .infer = cpu_trunk_infer,
    .backward = cpu_trunk_backward,
};
