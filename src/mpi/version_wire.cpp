#include "mpi/version_wire.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/format.hpp"
#include "mpi/check.hpp"
#include "mpi/polled.hpp"

namespace reprise::mpi {

void send_version(MPI_Comm comm, int dest, int head_tag, int piece_tag, const core::Manifest& m,
                  const core::HostBytes& payload, std::uint64_t checksum) {
  const std::vector<std::byte> head = core::encode_head(m, checksum);
  REPRISE_MPI_CHECK(polled::send(head.data(), static_cast<int>(head.size()), MPI_BYTE, dest, head_tag, comm));
  for (std::size_t off = 0; off < payload.size(); off += kPieceBytes) {
    const std::size_t n = std::min(kPieceBytes, payload.size() - off);
    REPRISE_MPI_CHECK(polled::send(payload.data() + off, static_cast<int>(n), MPI_BYTE, dest, piece_tag, comm));
  }
  REPRISE_MPI_CHECK(polled::send(&checksum, 1, MPI_UINT64_T, dest, piece_tag, comm));  // the trailer
}

Received recv_version(MPI_Comm comm, int src, int head_tag, int piece_tag, const std::string& where,
                      const std::shared_ptr<core::BufferPool>& pool, bool* reused, bool* passed_over,
                      const ReceiveCheck& check, std::atomic<std::size_t>* arriving) {
  MPI_Status st;
  REPRISE_MPI_CHECK(polled::probe(src, head_tag, comm, &st));
  int count = 0;
  REPRISE_MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
  std::vector<std::byte> head(static_cast<std::size_t>(count));
  REPRISE_MPI_CHECK(polled::recv(head.data(), count, MPI_BYTE, src, head_tag, comm, MPI_STATUS_IGNORE));
  const core::Header h = core::decode_header(head.data(), head.size(), where);
  Received r;
  r.manifest = core::decode_head_manifest(h, head.data() + core::kHeaderBytes, where);
  r.payload = pool ? core::take_pooled(pool, h.payload_bytes, reused, passed_over)
                   : std::make_shared<core::HostBytes>(h.payload_bytes);
  if (arriving) *arriving = std::max(r.payload->size(), r.payload->touched());
  std::optional<core::PayloadChecker> checker;
  if (check.verify) checker.emplace(r.manifest, r.payload->data());
  const std::size_t damaged_at = check.damage && check.damage(r.manifest) ? h.payload_bytes / 2 : SIZE_MAX;
  for (std::size_t off = 0; off < h.payload_bytes; off += kPieceBytes) {
    const std::size_t n = std::min<std::size_t>(kPieceBytes, h.payload_bytes - off);
    REPRISE_MPI_CHECK(
        polled::recv(r.payload->data() + off, static_cast<int>(n), MPI_BYTE, src, piece_tag, comm, MPI_STATUS_IGNORE));
    if (damaged_at >= off && damaged_at < off + n) r.payload->data()[damaged_at] ^= std::byte{1};
    if (checker) checker->advance(off + n);  // the piece is in the cache now
  }
  REPRISE_MPI_CHECK(
      polled::recv(&r.checksum, 1, MPI_UINT64_T, src, piece_tag, comm, MPI_STATUS_IGNORE));  // the trailer
  if (checker) {
    checker->advance(h.payload_bytes);  // (an empty payload)
    if (!checker->damage().empty())
      r.damage = checker->damage();
    else if (r.checksum != core::payload_checksum(r.manifest))
      r.damage = "its trailer's payload checksum does not follow from its manifest's chunk digests";
  }
  return r;
}

}  // namespace reprise::mpi
