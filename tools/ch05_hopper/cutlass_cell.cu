%%nvcc cl
// The same GEMM, C (M, N) bf16 = A (M, K) bf16 · B (K, N) bf16 with fp32 accumulation, built from
// CUTLASS 3.x's three layers: collectives (what one CTA does: the mainloop and the epilogue), the
// kernel (GemmUniversal: warp roles, tile scheduler), the device layer (GemmUniversalAdapter: the
// host side that checks the arguments, encodes the TMA descriptors and launches).
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"

using namespace cute;

using Element = cutlass::bfloat16_t;                   // A, B and D
using Accumulator = float;
using LayoutA = cutlass::layout::RowMajor;             // A (M, K): K contiguous ("K-major")
using LayoutB = cutlass::layout::RowMajor;             // B (K, N): N contiguous ("N-major": GMMA transposes it)
using LayoutD = cutlass::layout::RowMajor;             // D (M, N)
constexpr int kAlign = 16 / sizeof(Element);           // 8 elements: TMA's 16-byte rule

using TileShape = Shape<_128, _256, _64>;              // one CTA's (BM, BN, BK)
using ClusterShape = Shape<_2, _1, _1>;                // two CTAs along M share each B tile (multicast)

// The epilogue first: the mainloop's stage count is what shared memory has left after it.
using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    TileShape, ClusterShape, cutlass::epilogue::collective::EpilogueTileAuto,
    Accumulator, Accumulator,                          // accumulator, and the type alpha·acc is computed in
    void, LayoutD, kAlign,                             // no C operand (beta = 0: D = alpha·A·B)
    Element, LayoutD, kAlign,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, LayoutA, kAlign,
    Element, LayoutB, kAlign,
    Accumulator, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;   // 1 producer + 2 consumer warpgroups

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

// The host entry point Python calls (ctypes): 0 on success, else a CUTLASS status or a CUDA error.
extern "C" int cutlass_gemm(const void* a, const void* b, void* d, int M, int N, int K, void* stream) {
  static int sms = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
  // strides in elements, for modes (M or N, K, L): L is the batch (one matrix here)
  typename GemmKernel::StrideA sa = make_stride(int64_t(K), Int<1>{}, int64_t(M) * K);
  typename GemmKernel::StrideB sb = make_stride(Int<1>{}, int64_t(N), int64_t(N) * K);
  typename GemmKernel::StrideD sd = make_stride(int64_t(N), Int<1>{}, int64_t(M) * N);
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K, 1},
      {static_cast<const Element*>(a), sa, static_cast<const Element*>(b), sb},
      {{1.0f, 0.0f}, nullptr, sd, static_cast<Element*>(d), sd},
      cutlass::KernelHardwareInfo{0, sms}};
  Gemm gemm;
  cutlass::Status status = gemm.can_implement(args);
  if (status != cutlass::Status::kSuccess) return 1000 + int(status);
  if (Gemm::get_workspace_size(args) != 0) return 2000;      // this schedule needs none
  status = gemm.initialize(args, nullptr, static_cast<cudaStream_t>(stream));
  if (status != cutlass::Status::kSuccess) return 1000 + int(status);
  status = gemm.run(static_cast<cudaStream_t>(stream));
  if (status != cutlass::Status::kSuccess) return 1000 + int(status);
  return int(cudaGetLastError());
}
