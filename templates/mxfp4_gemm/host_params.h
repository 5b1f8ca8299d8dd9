// What the host launcher (launch_host.cpp) hands the host kernel (host_kernel.h): the GPU kernel's Params plus
// the row slabs. Expert offsets are host memory on the host path, so the launcher reads them once, clamps them
// like the device does and cuts every expert's rows into slabs; the kernel then only walks (slab, N tile) items.
// Builtin types only: included by the JIT-compiled kernel and by libktune.
#pragma once

#include "mxfp4_gemm/params.h"

namespace ktune_mxfp4 {

struct HostWork {
  Params p;           // a, w, s, bias, c, m, lda, ldc as for the GPU (w, s: prepacked layout, host memory)
  const int* slabs;   // [num_slabs][3]: expert, first row, end row (end - first <= host_slab_rows())
  int num_slabs;
  int n_tiles;        // ceil(ceil(n / 16) / tn): N tiles per slab; item = slab * n_tiles + tile
};

}  // namespace ktune_mxfp4
