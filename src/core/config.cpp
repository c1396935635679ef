#include "reprise/config.hpp"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

#include "reprise/errors.hpp"
#include "reprise/memory_space.hpp"

namespace reprise {

const char* to_string(MemorySpace space) {
  return space == MemorySpace::Host ? "host" : "device";
}

std::size_t parse_bytes(const std::string& text, const std::string& what) {
  std::size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw ConfigError(what + "='" + text + "' is not a size (examples: 65536, 64K, 64KiB, 8M, 1GiB)");
  }
  std::string unit = text.substr(pos);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  unsigned shift = 0;
  if (unit.empty() || unit == "B")
    shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    shift = 30;
  else
    throw ConfigError(what + "='" + text + "': unknown unit '" + text.substr(pos) + "' (use K, M or G)");
  return static_cast<std::size_t>(value) << shift;
}

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

unsigned parse_unsigned(const char* text, const char* what) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (!end || *end || v > 1000000) throw ConfigError(std::string(what) + "='" + text + "' is not a count");
  return static_cast<unsigned>(v);
}

bool parse_bool(const char* text, const char* what) {
  const std::string t = text;
  if (t == "1" || t == "true" || t == "on" || t == "yes") return true;
  if (t == "0" || t == "false" || t == "off" || t == "no") return false;
  throw ConfigError(std::string(what) + "='" + t + "' is not a boolean (use 1/0, true/false, on/off)");
}

// One of a few words (`words`: each word and its value); anything else: a ConfigError quoting `meaning`.
template <class T>
T parse_choice(const char* text, const char* what, std::initializer_list<std::pair<const char*, T>> words,
               const char* meaning) {
  for (const auto& [word, value] : words)
    if (std::strcmp(text, word) == 0) return value;
  throw ConfigError(std::string(what) + "='" + text + "' (" + meaning + ")");
}

}  // namespace

Config Config::from_env(Config c) {
  if (auto v = env("REPRISE_RANK")) c.rank = static_cast<int>(parse_unsigned(v, "REPRISE_RANK"));
  if (auto v = env("REPRISE_CHUNK_BYTES")) c.chunk_bytes = parse_bytes(v, "REPRISE_CHUNK_BYTES");
  if (auto v = env("REPRISE_FULL_EVERY")) c.full_every = parse_unsigned(v, "REPRISE_FULL_EVERY");
  if (auto v = env("REPRISE_FULL_AT_DIRTY_PERCENT"))
    c.full_at_dirty_percent = parse_unsigned(v, "REPRISE_FULL_AT_DIRTY_PERCENT");
  if (auto v = env("REPRISE_KEEP_CHAINS")) c.keep_chains = parse_unsigned(v, "REPRISE_KEEP_CHAINS");
  if (auto v = env("REPRISE_DIR")) c.dir = v;
  if (auto v = env("REPRISE_FILES_SKIP")) c.files_skip = parse_bool(v, "REPRISE_FILES_SKIP");
  if (auto v = env("REPRISE_DIGEST_THREADS")) c.digest_threads = parse_unsigned(v, "REPRISE_DIGEST_THREADS");
  if (auto v = env("REPRISE_PINNED_PIECE_BYTES")) c.pinned_piece_bytes = parse_bytes(v, "REPRISE_PINNED_PIECE_BYTES");
  if (auto v = env("REPRISE_STAGING_BYTES")) c.staging_bytes = parse_bytes(v, "REPRISE_STAGING_BYTES");
  if (auto v = env("REPRISE_MEMORY_BUDGET")) c.memory_budget_bytes = parse_bytes(v, "REPRISE_MEMORY_BUDGET");
  if (auto v = env("REPRISE_MAX_INFLIGHT")) c.max_inflight = parse_unsigned(v, "REPRISE_MAX_INFLIGHT");
  if (auto v = env("REPRISE_VERIFY_RESTORE")) c.verify_restore = parse_bool(v, "REPRISE_VERIFY_RESTORE");
  if (auto v = env("REPRISE_METRICS")) c.metrics_file = v;
  if (auto v = env("REPRISE_ROLLBACK"))
    c.group_rollback = parse_choice<bool>(v, "REPRISE_ROLLBACK", {{"group", true}, {"all", false}},
                                          "use group: only the groups of failed ranks roll back, their messages "
                                          "replayed from the senders' logs; or all: every rank rolls back");
  if (auto v = env("REPRISE_COMM_MATRIX")) c.comm_matrix_dir = v;
  if (auto v = env("REPRISE_LOG_BOUND")) c.log_bound_bytes = parse_bytes(v, "REPRISE_LOG_BOUND");
  if (auto v = env("REPRISE_LOG_SEGMENT_BYTES")) c.log_segment_bytes = parse_bytes(v, "REPRISE_LOG_SEGMENT_BYTES");
  if (auto v = env("REPRISE_LOG_CHECK_EVERY")) c.log_check_every = parse_unsigned(v, "REPRISE_LOG_CHECK_EVERY");
  if (auto v = env("REPRISE_RECOVERY_WATCH_MS")) c.recovery_watch_ms = parse_unsigned(v, "REPRISE_RECOVERY_WATCH_MS");
  if (auto v = env("REPRISE_RECOVERY_TIMEOUT_S"))
    c.recovery_timeout_s = parse_unsigned(v, "REPRISE_RECOVERY_TIMEOUT_S");
  if (auto v = env("REPRISE_MAX_REPEATED_FAILURES"))
    c.max_repeated_failures = parse_unsigned(v, "REPRISE_MAX_REPEATED_FAILURES");
  if (auto v = env("REPRISE_SPARES")) c.spares = parse_unsigned(v, "REPRISE_SPARES");
  if (auto v = env("REPRISE_SPAWN")) c.spawn = parse_bool(v, "REPRISE_SPAWN");
  if (auto v = env("REPRISE_PINNED_PAYLOAD")) c.pinned_payload = parse_bool(v, "REPRISE_PINNED_PAYLOAD");
  if (auto v = env("REPRISE_PINNED_ARENA_BYTES")) c.pinned_arena_bytes = parse_bytes(v, "REPRISE_PINNED_ARENA_BYTES");
  if (auto v = env("REPRISE_DEVICE_BACKEND"))
    c.device_backend = parse_choice<DeviceBackendKind>(v, "REPRISE_DEVICE_BACKEND",
                                                       {{"auto", DeviceBackendKind::Auto},
                                                        {"cuda", DeviceBackendKind::Cuda},
                                                        {"host-twin", DeviceBackendKind::HostTwin}},
                                                       "use auto, cuda or host-twin");
  if (auto v = env("REPRISE_GROUP_BARRIER"))
    c.group_barrier = parse_choice<GroupBarrierKind>(
        v, "REPRISE_GROUP_BARRIER",
        {{"mpi", GroupBarrierKind::Mpi}, {"nccl", GroupBarrierKind::Nccl}, {"auto", GroupBarrierKind::Auto}},
        "use mpi, nccl or auto");
  if (auto v = env("REPRISE_CUDA_AWARE_MPI"))
    c.cuda_aware_mpi = parse_choice<CudaAwareMpi>(
        v, "REPRISE_CUDA_AWARE_MPI",
        {{"auto", CudaAwareMpi::Auto}, {"yes", CudaAwareMpi::Yes}, {"no", CudaAwareMpi::No}},
        "use auto: ask the MPI, yes: hand device buffers to MPI, or no: stage them through host memory");
  c.validate();
  return c;
}

void Config::validate() const {
  if (rank < 0) throw ConfigError("rank must be >= 0");
  if (chunk_bytes < 256 || chunk_bytes % 16 != 0 || chunk_bytes > (std::size_t(1) << 30))
    throw ConfigError("chunk_bytes (REPRISE_CHUNK_BYTES) = " + std::to_string(chunk_bytes) +
                      ": must be a multiple of 16 between 256 bytes and 1 GiB");
  if (full_every < 1) throw ConfigError("full_every (REPRISE_FULL_EVERY) must be >= 1 (1 = every version full)");
  if (full_at_dirty_percent > 100)
    throw ConfigError("full_at_dirty_percent (REPRISE_FULL_AT_DIRTY_PERCENT) = " +
                      std::to_string(full_at_dirty_percent) + ": must be a percentage, 0 (never) to 100");
  if (keep_chains < 1) throw ConfigError("keep_chains (REPRISE_KEEP_CHAINS) must be >= 1");
  if (digest_threads < 1 || digest_threads > 256)
    throw ConfigError("digest_threads (REPRISE_DIGEST_THREADS) must be between 1 and 256");
  if (pinned_piece_bytes < 4096)
    throw ConfigError("pinned_piece_bytes (REPRISE_PINNED_PIECE_BYTES) must be at least 4 KiB");
  if (staging_bytes < chunk_bytes + 256)
    throw ConfigError("staging_bytes (REPRISE_STAGING_BYTES) must hold at least one chunk");
  if (max_inflight < 1) throw ConfigError("max_inflight (REPRISE_MAX_INFLIGHT) must be >= 1");
  if (log_segment_bytes != 0 && log_segment_bytes < 4096)
    throw ConfigError("log_segment_bytes (REPRISE_LOG_SEGMENT_BYTES) must be 0 (the default) or at least 4 KiB");
  if (log_check_every < 1) throw ConfigError("log_check_every (REPRISE_LOG_CHECK_EVERY) must be >= 1");
}

}  // namespace reprise
