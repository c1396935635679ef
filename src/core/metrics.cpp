#include "reprise/metrics.hpp"

#include <nlohmann/json.hpp>

namespace reprise {
namespace {
nlohmann::json stage(const StageTime& s) {
  return {{"seconds", s.seconds}, {"bytes", s.bytes}, {"gbps", s.gbps()}};
}
}  // namespace

std::string to_json(const std::vector<CheckpointMetrics>& all) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : all)
    out.push_back({{"version", m.version},
                   {"full", m.full},
                   {"forced", m.forced},
                   {"promoted", m.promoted},
                   {"bytes_protected", m.bytes_protected},
                   {"bytes_dirty", m.bytes_dirty},
                   {"dirty_ratio", m.dirty_ratio()},
                   {"chunks_total", m.chunks_total},
                   {"chunks_dirty", m.chunks_dirty},
                   {"digest", stage(m.digest)},
                   {"pack", stage(m.pack)},
                   {"drain", stage(m.drain)},
                   {"store", stage(m.store)},
                   {"pack_rounds", m.pack_rounds},
                   {"app_visible_seconds", m.app_visible_seconds},
                   {"durable_seconds", m.durable_seconds},
                   {"released_versions", m.released_versions},
                   {"device_backend", m.device_backend},
                   {"payload_pinned", m.payload_pinned},
                   {"payload_warm", m.payload_warm},
                   {"streamed_bytes", m.streamed_bytes},
                   {"memory_bytes", m.memory_bytes},
                   {"memory_peak_bytes", m.memory_peak_bytes},
                   {"memory_budget_bytes", m.memory_budget_bytes}});
  return out.dump(2);
}

}  // namespace reprise
