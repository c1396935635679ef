// Per-checkpoint metrics: what was protected, what was dirty, and how long each pipeline stage took.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace reprise {

struct StageTime {
  double seconds = 0;
  std::uint64_t bytes = 0;
  double gbps() const { return seconds > 0 ? double(bytes) / seconds * 1e-9 : 0.0; }
};

struct CheckpointMetrics {
  std::uint64_t version = 0;
  bool full = false;
  /// A differential version stored as a full one: at least Config::full_at_dirty_percent of the data changed.
  /// bytes_dirty and chunks_dirty count what was stored: every chunk (of a runtime region, every one that holds data).
  bool promoted = false;
  bool forced = false;  ///< taken by the runtime, not the application (MpiRuntime's message log bound)
  std::uint64_t bytes_protected = 0;
  std::uint64_t bytes_dirty = 0;
  std::uint64_t chunks_total = 0;
  std::uint64_t chunks_dirty = 0;
  double dirty_ratio() const { return bytes_protected ? double(bytes_dirty) / double(bytes_protected) : 0.0; }
  StageTime digest;                ///< digest + compare + compact (bytes = bytes scanned)
  StageTime pack;                  ///< dirty chunks copied to staging (bytes = dirty bytes)
  StageTime drain;                 ///< device staging -> pinned -> version buffer (device regions)
  StageTime store;                 ///< checksum + write to the store (bytes = encoded version size)
  unsigned pack_rounds = 0;        ///< > 1 when staging memory was short
  double app_visible_seconds = 0;  ///< time checkpoint() blocked the application
  double durable_seconds = 0;      ///< from checkpoint() entry until the version was durable
  std::uint64_t released_versions = 0;
  std::string device_backend;   ///< "cuda", "host-twin" or "" when no device region
  bool payload_pinned = false;  ///< the version went to pinned memory (else through the bounce buffers)
  /// Host chunks were packed into memory touched before (a recycled version buffer, or the one reserved when the
  /// regions were protected): checkpoint() took no first-touch page faults for them. False when the buffer was
  /// newly allocated, or no host chunk was packed.
  bool payload_warm = false;
  /// Payload bytes already on their way to the buddy when the drain's last part reached host memory (the
  /// transfer overlapping the drain; 0 without a buddy level or without device regions).
  std::uint64_t streamed_bytes = 0;
  /// This rank's memory (Runtime::memory_json()'s total) once the version was stored, before older ones were
  /// released; the peak so far and the budget (Config::memory_budget_bytes, or the default one).
  std::uint64_t memory_bytes = 0;
  std::uint64_t memory_peak_bytes = 0;
  std::uint64_t memory_budget_bytes = 0;
};

/// JSON array of the given metrics.
std::string to_json(const std::vector<CheckpointMetrics>& all);

}  // namespace reprise
