#include "protocol/coordinator.hpp"

#include <string>

#include "reprise/errors.hpp"

namespace reprise::protocol {

void Coordinator::begin(std::uint32_t epoch, std::vector<Item> items, const std::vector<std::uint64_t>& orphan_phases) {
  epoch_ = epoch;
  items_ = std::move(items);
  orphans_.clear();
  for (std::uint64_t ph : orphan_phases) ++orphans_[ph];
}

std::optional<std::uint64_t> Coordinator::lowest_orphan_phase() const {
  for (const auto& [ph, n] : orphans_)
    if (n > 0) return ph;
  return std::nullopt;
}

std::vector<Coordinator::Item> Coordinator::release() {
  const auto low = lowest_orphan_phase();
  std::vector<Item> out, keep;
  for (const Item& it : items_) (!low || it.phase <= *low ? out : keep).push_back(it);
  items_ = std::move(keep);
  return out;
}

bool Coordinator::notify(std::uint32_t epoch, std::uint64_t phase) {
  if (epoch != epoch_) return false;
  if (--orphans_[phase] < 0)
    throw ProtocolError("protocol: the coordinator got a Notify at phase " + std::to_string(phase) +
                        " that matches no reported orphan (is the application send-deterministic?)");
  return true;
}

bool Coordinator::done() const {
  return items_.empty() && !lowest_orphan_phase();
}

int restart_coordinator(int ranks, const std::set<int>& rolled_back) {
  for (int r = 0; r < ranks; ++r)
    if (!rolled_back.count(r)) return r;
  return -1;
}

}  // namespace reprise::protocol
