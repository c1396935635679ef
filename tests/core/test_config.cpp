#include <gtest/gtest.h>

#include <cstdlib>

#include "core/memory_budget.hpp"
#include "reprise/config.hpp"
#include "reprise/errors.hpp"

namespace reprise {
namespace {

struct EnvGuard {
  explicit EnvGuard(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~EnvGuard() { ::unsetenv(name_); }
  const char* name_;
};

TEST(Config, ParsesSizesWithBinaryUnits) {
  EXPECT_EQ(parse_bytes("65536", "x"), 65536u);
  EXPECT_EQ(parse_bytes("64K", "x"), 65536u);
  EXPECT_EQ(parse_bytes("64KiB", "x"), 65536u);
  EXPECT_EQ(parse_bytes("8m", "x"), 8u << 20);
  EXPECT_EQ(parse_bytes("1GiB", "x"), 1u << 30);
  EXPECT_THROW(parse_bytes("lots", "x"), ConfigError);
  EXPECT_THROW(parse_bytes("12Q", "x"), ConfigError);
}

TEST(Config, EnvironmentOverridesTheStruct) {
  EnvGuard a("REPRISE_CHUNK_BYTES", "128K"), b("REPRISE_FULL_EVERY", "3"), c("REPRISE_DIR", "/tmp/x"),
      d("REPRISE_DEVICE_BACKEND", "host-twin"), e("REPRISE_VERIFY_RESTORE", "off"), f("REPRISE_RECOVERY_WATCH_MS", "0"),
      g("REPRISE_RECOVERY_TIMEOUT_S", "30"), h("REPRISE_FULL_AT_DIRTY_PERCENT", "0"), i("REPRISE_SPARES", "2"),
      j("REPRISE_SPAWN", "0"), k("REPRISE_FILES_SKIP", "0");
  EXPECT_EQ(Config{}.spares, 0u);
  EXPECT_TRUE(Config{}.spawn);
  EXPECT_TRUE(Config{}.files_skip);
  EXPECT_EQ(Config{}.full_at_dirty_percent, 90u);
  EXPECT_EQ(Config{}.recovery_watch_ms, 20000u);
  EXPECT_EQ(Config{}.recovery_timeout_s, 600u);
  Config base;
  base.keep_chains = 5;
  const Config cfg = Config::from_env(base);
  EXPECT_EQ(cfg.chunk_bytes, 128u * 1024);
  EXPECT_EQ(cfg.full_every, 3u);
  EXPECT_EQ(cfg.dir, "/tmp/x");
  EXPECT_EQ(cfg.keep_chains, 5u);
  EXPECT_EQ(cfg.device_backend, DeviceBackendKind::HostTwin);
  EXPECT_FALSE(cfg.verify_restore);
  EXPECT_EQ(cfg.recovery_watch_ms, 0u);
  EXPECT_EQ(cfg.recovery_timeout_s, 30u);
  EXPECT_EQ(cfg.full_at_dirty_percent, 0u);
  EXPECT_EQ(cfg.spares, 2u);
  EXPECT_FALSE(cfg.spawn);
  EXPECT_FALSE(cfg.files_skip);
}

TEST(Config, BadValuesNameTheVariable) {
  {
    EnvGuard a("REPRISE_CHUNK_BYTES", "100");
    try {
      Config::from_env();
      FAIL() << "expected ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("REPRISE_CHUNK_BYTES"), std::string::npos) << e.what();
    }
  }
  {
    EnvGuard a("REPRISE_DEVICE_BACKEND", "opencl");
    EXPECT_THROW(Config::from_env(), ConfigError);
  }
  {
    EnvGuard a("REPRISE_FULL_EVERY", "0");
    EXPECT_THROW(Config::from_env(), ConfigError);
  }
  {
    EnvGuard a("REPRISE_FULL_AT_DIRTY_PERCENT", "101");
    EXPECT_THROW(Config::from_env(), ConfigError);
  }
  {
    EnvGuard a("REPRISE_RECOVERY_WATCH_MS", "soon");
    EXPECT_THROW(Config::from_env(), ConfigError);
  }
  {
    EnvGuard a("REPRISE_SPARES", "-1");
    EXPECT_THROW(Config::from_env(), ConfigError);
  }
  {
    EnvGuard a("REPRISE_SPAWN", "maybe");
    EXPECT_THROW(Config::from_env(), ConfigError);
  }
}

// The message log's segments (REPRISE_LOG_SEGMENT_BYTES): 1 MiB by default; with an explicit memory budget a 64th
// of it, between 64 KiB and 1 MiB, so that a small budget's log is not held in 1 MiB steps; set, as set (at least
// 4 KiB, or validate() says which variable).
TEST(Config, TheLogSegmentFollowsAnExplicitMemoryBudget) {
  Config c;
  EXPECT_EQ(core::log_segment_bytes(c), std::size_t{1} << 20);
  c.memory_budget_bytes = std::size_t{8} << 20;
  EXPECT_EQ(core::log_segment_bytes(c), std::size_t{128} << 10);
  c.memory_budget_bytes = std::size_t{1} << 20;
  EXPECT_EQ(core::log_segment_bytes(c), std::size_t{64} << 10);
  c.memory_budget_bytes = std::size_t{16} << 30;
  EXPECT_EQ(core::log_segment_bytes(c), std::size_t{1} << 20);
  EnvGuard a("REPRISE_LOG_SEGMENT_BYTES", "256K");
  c = Config::from_env(c);
  EXPECT_EQ(core::log_segment_bytes(c), std::size_t{256} << 10);
  c.log_segment_bytes = 100;
  try {
    c.validate();
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("REPRISE_LOG_SEGMENT_BYTES"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reprise
