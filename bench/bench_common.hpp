// Helpers shared by the benchmarks: timing, medians, pre-touched buffers, machine description, JSON output and
// the `key value` headline lines.
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
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

/// A host buffer whose every page has been written: on these VMs the first touch of a page costs a fault
/// (about 9 us per 4 KiB), which must not land in a timed section.
inline std::vector<unsigned char> touched_buffer(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> b(bytes);  // value-initialised: every page written once
  for (std::size_t i = 0; i < bytes; i += 64) b[i] = static_cast<unsigned char>((i >> 6) * 2654435761u >> (seed % 24));
  return b;
}

inline nlohmann::json machine() {
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  char date[64] = "";
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
#if defined(__clang__)
  const std::string compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = std::string("g++ ") + __VERSION__;
#else
  const std::string compiler = "unknown";
#endif
  return {{"hostname", host}, {"nproc", ::sysconf(_SC_NPROCESSORS_ONLN)}, {"date", date}, {"compiler", compiler}};
}

/// Why `path` cannot be written as an output file ("" when it can): its folder must exist and be writable, and
/// the file, if there, writable. The CLI check of every --json option (`kWritableFile`), so a bad path fails at
/// once with a usage message, not after the measurements (nor with rank 0 throwing while the other ranks of an
/// MPI benchmark wait for it).
inline std::string unwritable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (fs::is_directory(p, ec)) return path + " is a folder, not a file";
  if (!fs::is_directory(dir, ec)) return "cannot write " + path + ": no folder " + dir.string();
  if (::access(dir.c_str(), W_OK) != 0 || (fs::exists(p, ec) && ::access(path.c_str(), W_OK) != 0))
    return "cannot write " + path + ": no write permission";
  return "";
}
inline const CLI::Validator kWritableFile([](std::string& path) { return unwritable(path); }, "FILE");

/// Writes `j` to `path` and reads it back, so a run that exits 0 left parseable JSON. Throws std::runtime_error.
inline void write_json(const std::string& path, const nlohmann::json& j) {
  {
    std::ofstream out(path);
    out << j.dump(2) << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + path + " (check the --json path)");
  }
  std::ifstream in(path);
  if (nlohmann::json::parse(in, nullptr, false).is_discarded())
    throw std::runtime_error(path + " was written but does not parse back as JSON");
}

/// main() of a benchmark: runs `run`, turning an exception into a message and exit code 1.
inline int guarded_main(const char* name, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

/// A headline line, `key value`, for scripts that grep the output.
inline void print_key(const char* key, double value) {
  std::printf("%s %.3f\n", key, value);
}

}  // namespace reprise::bench
