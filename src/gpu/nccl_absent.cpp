// The NCCL barrier in a build without NCCL (compiled instead of nccl_barrier.cpp): every use says so.
#include "gpu/nccl_barrier.hpp"
#include "reprise/errors.hpp"

namespace reprise::gpu {

namespace {
[[noreturn]] void no_nccl() {
  throw DeviceError("this build of Reprise has no NCCL: the group barrier runs on MPI (REPRISE_GROUP_BARRIER=mpi)");
}
}  // namespace

std::string nccl_problem() {
  return "this build of Reprise has no NCCL (configure with CUDA and NCCL)";
}
NcclId nccl_unique_id() {
  no_nccl();
}
struct NcclBarrier::Impl {};
NcclBarrier::NcclBarrier(const NcclId&, int, int) {
  no_nccl();
}
NcclBarrier::~NcclBarrier() = default;
bool NcclBarrier::ready() {
  no_nccl();
}
void NcclBarrier::start(const std::vector<std::uint64_t>&) {
  no_nccl();
}
bool NcclBarrier::done() {
  no_nccl();
}
const std::vector<std::uint64_t>& NcclBarrier::result() const {
  no_nccl();
}
void NcclBarrier::abort() noexcept {}

}  // namespace reprise::gpu
