// The NCCL group barrier: a polled allgather on a non-blocking NCCL communicator (built with CUDA and NCCL).
// libnccl is loaded when first needed (dlopen), not linked: libreprise.so then runs where NCCL is not installed
// (the barrier says so and MPI is used), and NCCL's 200 MB are not a dependency of every program.
#include "gpu/nccl_barrier.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstring>
#include <type_traits>

#include "gpu/cuda_check.hpp"
#include "reprise/errors.hpp"

namespace reprise::gpu {
namespace {

// The NCCL functions the barrier uses, from libnccl.so.2.
struct NcclApi {
  void* lib = nullptr;
  std::string problem;  // why NCCL cannot be used; empty when it can
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) init_rank_config = nullptr;
  decltype(&ncclCommGetAsyncError) get_async_error = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclGetLastError) last_error = nullptr;
};

const NcclApi& nccl() {
  static const NcclApi api = [] {
    NcclApi a;
    a.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!a.lib) {
      const char* e = dlerror();
      a.problem = std::string("libnccl.so.2 cannot be loaded (") + (e ? e : "?") +
                  "): install NCCL or add its folder to LD_LIBRARY_PATH";
      return a;
    }
    auto get = [&a](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(a.lib, name));
      if (!fn && a.problem.empty())
        a.problem = std::string("libnccl.so.2 has no ") + name + " (NCCL 2.14 or later needed)";
    };
    get(a.get_unique_id, "ncclGetUniqueId");
    get(a.init_rank_config, "ncclCommInitRankConfig");
    get(a.get_async_error, "ncclCommGetAsyncError");
    get(a.all_gather, "ncclAllGather");
    get(a.abort, "ncclCommAbort");
    get(a.error_string, "ncclGetErrorString");
    get(a.last_error, "ncclGetLastError");
    return a;
  }();
  return api;
}

const NcclApi& nccl_or_throw() {
  const NcclApi& a = nccl();
  if (!a.problem.empty()) throw DeviceError("NCCL group barrier: " + a.problem);
  return a;
}

void nccl_check(ncclResult_t rc, const char* call, ncclComm_t comm = nullptr) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  const NcclApi& a = nccl();
  const char* last = comm ? a.last_error(comm) : nullptr;
  throw DeviceError(std::string(call) + " failed: " + a.error_string(rc) +
                    (last && *last ? std::string(": ") + last : std::string()));
}

}  // namespace

std::string nccl_problem() {
  return nccl().problem;
}

NcclId nccl_unique_id() {
  ncclUniqueId id;
  nccl_check(nccl_or_throw().get_unique_id(&id), "ncclGetUniqueId");
  static_assert(sizeof(ncclUniqueId) == sizeof(NcclId));
  NcclId out;
  std::memcpy(out.data(), &id, sizeof id);
  return out;
}

struct NcclBarrier::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t finished = nullptr;
  int device = -1, members = 0;
  std::size_t words = 0;
  std::uint64_t* pinned = nullptr;  // words to send, then members x words received
  std::uint64_t* dev = nullptr;     // the same on the device
  bool enqueue_pending = false;     // the allgather was accepted (ncclInProgress) but its copy back is not queued
  bool running = false;
  std::vector<std::uint64_t> result;

  void release_buffers() {
    if (pinned) cudaFreeHost(pinned);
    if (dev) cudaFree(dev);
    pinned = nullptr;
    dev = nullptr;
  }
  // The communicator's state: true when idle (ncclSuccess), false while an operation is being queued.
  bool comm_idle() {
    ncclResult_t st = ncclSuccess;
    nccl_check(nccl().get_async_error(comm, &st), "ncclCommGetAsyncError", comm);
    if (st == ncclInProgress) return false;
    nccl_check(st, "the NCCL group barrier", comm);
    return true;
  }
  void queue_copy_back() {
    REPRISE_CUDA_CHECK(cudaMemcpyAsync(pinned + words, dev + words, words * members * sizeof(std::uint64_t),
                                       cudaMemcpyDeviceToHost, stream));
    REPRISE_CUDA_CHECK(cudaEventRecord(finished, stream));
    enqueue_pending = false;
  }
};

NcclBarrier::NcclBarrier(const NcclId& id, int members, int index) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  const NcclApi& api = nccl_or_throw();
  d.members = members;
  REPRISE_CUDA_CHECK(cudaGetDevice(&d.device));
  REPRISE_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  REPRISE_CUDA_CHECK(cudaEventCreateWithFlags(&d.finished, cudaEventDisableTiming));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; the runtime polls and can abort when a member dies
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof uid);
  nccl_check(api.init_rank_config(&d.comm, members, uid, index, &config), "ncclCommInitRankConfig", d.comm);
}

NcclBarrier::~NcclBarrier() {
  if (!impl_) return;
  abort();
  Impl& d = *impl_;
  if (d.stream) cudaStreamSynchronize(d.stream);
  d.release_buffers();
  if (d.finished) cudaEventDestroy(d.finished);
  if (d.stream) cudaStreamDestroy(d.stream);
}

bool NcclBarrier::ready() {
  if (!impl_->comm) throw DeviceError("NCCL group barrier used after abort()");
  return impl_->comm_idle();
}

void NcclBarrier::start(const std::vector<std::uint64_t>& mine) {
  Impl& d = *impl_;
  if (!d.comm) throw DeviceError("NCCL group barrier used after abort()");
  if (d.running) throw UsageError("NCCL group barrier: start() while the previous allgather runs");
  if (mine.size() != d.words) {
    d.release_buffers();
    d.words = mine.size();
    const std::size_t bytes = d.words * (static_cast<std::size_t>(d.members) + 1) * sizeof(std::uint64_t);
    REPRISE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&d.pinned), bytes));
    REPRISE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d.dev), bytes));
  }
  std::memcpy(d.pinned, mine.data(), d.words * sizeof(std::uint64_t));
  REPRISE_CUDA_CHECK(
      cudaMemcpyAsync(d.dev, d.pinned, d.words * sizeof(std::uint64_t), cudaMemcpyHostToDevice, d.stream));
  const ncclResult_t rc = nccl().all_gather(d.dev, d.dev + d.words, d.words, ncclUint64, d.comm, d.stream);
  nccl_check(rc, "ncclAllGather", d.comm);
  d.running = true;
  d.enqueue_pending = true;
  if (rc == ncclSuccess) d.queue_copy_back();
}

bool NcclBarrier::done() {
  Impl& d = *impl_;
  if (!d.running) return true;
  if (!d.comm) throw DeviceError("NCCL group barrier used after abort()");
  if (!d.comm_idle()) return false;  // also reports an error of the collective (ncclRemoteError, ...)
  if (d.enqueue_pending) d.queue_copy_back();
  const cudaError_t q = cudaEventQuery(d.finished);
  if (q == cudaErrorNotReady) return false;
  REPRISE_CUDA_CHECK(q);
  d.result.assign(d.pinned + d.words, d.pinned + d.words + d.words * static_cast<std::size_t>(d.members));
  d.running = false;
  return true;
}

const std::vector<std::uint64_t>& NcclBarrier::result() const {
  return impl_->result;
}

void NcclBarrier::abort() noexcept {
  Impl& d = *impl_;
  if (d.comm) nccl().abort(d.comm);  // local: never waits for the other members; ends the pending kernels
  d.comm = nullptr;
  d.running = false;
}

}  // namespace reprise::gpu
