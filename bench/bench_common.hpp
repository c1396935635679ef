// Helpers shared by the benchmarks: timing, medians, machine description, JSON output.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace reprise::bench {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}
inline double minimum(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}

inline nlohmann::json machine() {
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  char date[64] = "";
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"hostname", host},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"date", date},
          {"compiler", __VERSION__}};
}

inline void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream(path) << j.dump(2) << "\n";
}

}  // namespace reprise::bench
