#include "core/version_store.hpp"

#include <algorithm>

#include "reprise/errors.hpp"

namespace reprise::core {

PieceFrontier::PieceFrontier(std::size_t payload_bytes, std::size_t piece) : payload_(payload_bytes), piece_(piece) {
  if (piece_ == 0) throw Error("PieceFrontier: piece size 0");
  missing_.resize((payload_ + piece_ - 1) / piece_);
  for (std::size_t k = 0; k < missing_.size(); ++k) missing_[k] = piece_bytes(k);
}

std::size_t PieceFrontier::piece_bytes(std::size_t piece) const {
  return std::min(piece_, payload_ - piece * piece_);
}

std::size_t PieceFrontier::add(std::size_t offset, std::size_t bytes) {
  if (offset > payload_ || bytes > payload_ - offset)
    throw Error("PieceFrontier: bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                ") outside a payload of " + std::to_string(payload_));
  for (std::size_t end = offset + bytes; offset < end;) {
    const std::size_t k = offset / piece_;
    const std::size_t n = std::min(end, (k + 1) * piece_) - offset;
    if (n > missing_[k]) throw Error("PieceFrontier: bytes of piece " + std::to_string(k) + " marked ready twice");
    missing_[k] -= n;
    offset += n;
  }
  while (ready_pieces_ < missing_.size() && missing_[ready_pieces_] == 0) ++ready_pieces_;
  return ready_pieces_;
}

namespace {
// Keeps the version until it is whole, then puts it.
class WholePut final : public PutStream {
 public:
  WholePut(VersionStore& store, const Manifest& m, std::shared_ptr<const HostBytes> payload)
      : store_(store), manifest_(m), payload_(std::move(payload)) {}
  void ready(std::size_t, std::size_t) override {}
  void finish(std::uint64_t sum) override {
    stored();
    store_.put(manifest_, payload_, sum);
  }

 private:
  VersionStore& store_;
  Manifest manifest_;
  std::shared_ptr<const HostBytes> payload_;
};
}  // namespace

std::unique_ptr<PutStream> VersionStore::begin_put(const Manifest& manifest, std::shared_ptr<const HostBytes> payload) {
  return std::make_unique<WholePut>(*this, manifest, std::move(payload));
}

}  // namespace reprise::core
