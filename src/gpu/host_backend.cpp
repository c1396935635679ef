// Host-twin backend: "device" memory is host memory and kernels are their host twins, run inline. It lets the
// whole device data path (digest, compact, pack, double-buffered drain, unpack) run and be tested without a GPU.
#include <cstdlib>
#include <cstring>
#include <new>

#include "gpu/backend.hpp"
#include "kernels/chunk_kernels.hpp"
#include "reprise/errors.hpp"

namespace reprise::gpu {
namespace {

class InlineStream final : public Stream {};
class DoneEvent final : public Event {};

Buffer host_alloc(std::size_t bytes) {
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (!p) throw std::bad_alloc();
  return Buffer(p, bytes, [](void* q) { std::free(q); });
}

class HostTwinBackend final : public Backend {
 public:
  const char* name() const override { return "host-twin"; }
  std::string device_description() const override { return "host (kernel host twins)"; }
  bool is_device_pointer(const void*) const override { return false; }
  Buffer alloc_device(std::size_t bytes) override { return host_alloc(bytes); }
  Buffer alloc_pinned(std::size_t bytes) override { return host_alloc(bytes); }
  std::unique_ptr<Stream> create_stream(bool) override { return std::make_unique<InlineStream>(); }
  void synchronize(Stream&) override {}
  std::unique_ptr<Event> record(Stream&) override { return std::make_unique<DoneEvent>(); }
  void wait(Event&) override {}

  void digest(const void* region, std::size_t bytes, std::size_t chunk_bytes, std::uint64_t* digests,
              Stream&) override {
    kernels::digest_chunks_host(region, bytes, chunk_bytes, digests);
  }
  void compare_compact(const std::uint64_t* cur, const std::uint64_t* prev, std::uint32_t n, bool all,
                       std::uint32_t* indices, std::uint32_t* count, Stream&) override {
    *count = kernels::compare_compact_host(cur, prev, n, all, indices);
  }
  void pack(const void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices,
            std::uint32_t n, void* staging, Stream&) override {
    kernels::pack_host(region, bytes, chunk_bytes, indices, n, staging);
  }
  void unpack(void* region, std::size_t bytes, std::size_t chunk_bytes, const std::uint32_t* indices, std::uint32_t n,
              const void* staging, Stream&) override {
    kernels::unpack_host(region, bytes, chunk_bytes, indices, n, staging);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes, Stream&) override { std::memcpy(dst, src, bytes); }
  void copy_to_device(void* dst, const void* src, std::size_t bytes, Stream&) override { std::memcpy(dst, src, bytes); }
  void copy_device(void* dst, const void* src, std::size_t bytes, Stream&) override { std::memcpy(dst, src, bytes); }
};

}  // namespace

const char* to_string(DigestKind kind) {
  switch (kind) {
    case DigestKind::Xxh3:
      return "xxh3";
    case DigestKind::Lanes64:
      return "lanes64";
  }
  return "unknown";
}

std::unique_ptr<Backend> make_host_twin_backend() {
  return std::make_unique<HostTwinBackend>();
}

std::unique_ptr<Backend> make_backend(DeviceBackendKind kind, const std::string& what) {
  switch (kind) {
    case DeviceBackendKind::HostTwin:
      return make_host_twin_backend();
    case DeviceBackendKind::Cuda:
      return make_cuda_backend();
    case DeviceBackendKind::Auto:
      break;
  }
  if (cuda_device_count() > 0) return make_cuda_backend();
  throw DeviceError(what + " but " +
                    (cuda_compiled() ? "no CUDA device is usable" : "this Reprise was built without CUDA") +
                    " (REPRISE_DEVICE_BACKEND=host-twin runs the kernels' host twins on host memory, for tests)");
}

#if !defined(REPRISE_HAVE_CUDA)
bool cuda_compiled() {
  return false;
}
int cuda_device_count() {
  return 0;
}
std::vector<std::string> cuda_pci_bus_ids() {
  return {};
}
std::unique_ptr<Backend> make_cuda_backend() {
  throw DeviceError(
      "this Reprise was built without CUDA, so device memory cannot be checkpointed: rebuild with nvcc "
      "available (-DREPRISE_ENABLE_CUDA=ON)");
}
#endif

}  // namespace reprise::gpu
