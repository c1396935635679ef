// `reprise`: look into checkpoint directories, and choose groups.
//   reprise inspect DIR   versions, kinds, chains, regions, sizes and dirty ratios of every rank
//   reprise verify DIR    checks every checksum and every chain link; exit 0 when sound, 1 otherwise
//   reprise groups --matrix PATH --ranks-per-node K [--max-group-ranks M] [--alpha A]
//                         groups of whole nodes from a communication matrix (REPRISE_COMM_MATRIX): each level of
//                         METIS's recursive bisection with its logged and rolled-back shares, then the chosen
//                         REPRISE_GROUPS line
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/restore.hpp"
#include "core/version_store.hpp"
#include "reprise/errors.hpp"
#ifdef REPRISE_HAVE_GROUPING
#include "protocol/grouping.hpp"
#endif

namespace {

using namespace reprise;

std::string human(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Exit code 2: nothing to look at.
int check_dir(const std::string& dir, std::vector<int>& ranks) {
  if (!is_dir(dir)) {
    std::cerr << "reprise: " << dir << " is not a directory (give the REPRISE_DIR of a run)\n";
    return 2;
  }
  ranks = core::list_store_ranks(dir);
  if (ranks.empty()) {
    std::cerr << "reprise: " << dir << " holds no checkpoint (no rank-N folders)\n";
    return 2;
  }
  return 0;
}

int inspect(const std::string& dir, bool as_json) {
  std::vector<int> ranks;
  if (int rc = check_dir(dir, ranks)) return rc;
  nlohmann::json out = {{"dir", dir}, {"ranks", nlohmann::json::array()}};
  int damaged = 0;
  std::string job = "no job record";  // written by MPI jobs (job.reprise): the rank count a relaunch needs
  try {
    if (const auto n = core::read_job_ranks(dir)) {
      out["job_ranks"] = *n;
      job = "written by a job of " + std::to_string(*n) + " ranks";
    }
  } catch (const Error& e) {
    ++damaged;
    out["job_record_error"] = e.what();
    job = std::string("DAMAGED job record: ") + e.what();
  }
  if (!as_json) std::cout << "checkpoint directory " << dir << ": " << ranks.size() << " rank(s), " << job << "\n";
  for (int rank : ranks) {
    auto store = core::make_directory_store(dir, rank);
    const auto versions = store->list();
    nlohmann::json jr = {{"rank", rank}, {"versions", nlohmann::json::array()}};
    if (!as_json) {
      std::cout << "rank " << rank << ": " << versions.size() << " version(s)\n";
      std::printf("  %10s  %-12s %10s %6s %12s %12s %7s\n", "version", "kind", "base", "chain", "protected", "stored",
                  "dirty");
    }
    for (auto v : versions) {
      try {
        const core::Manifest m = store->load_manifest(v);
        const double ratio = m.protected_bytes() ? double(m.payload_bytes()) / double(m.protected_bytes()) : 0.0;
        nlohmann::json jv = {{"version", v},
                             {"kind", core::to_string(m.kind)},
                             {"base", m.base_version},
                             {"chain_index", m.chain_index},
                             {"bytes_protected", m.protected_bytes()},
                             {"bytes_stored", m.payload_bytes()},
                             {"dirty_ratio", ratio},
                             {"file", store->locate(v)},
                             {"regions", nlohmann::json::array()}};
        if (!as_json)
          std::printf("  %10llu  %-12s %10llu %6u %12s %12s %6.1f%%\n", static_cast<unsigned long long>(v),
                      core::to_string(m.kind), static_cast<unsigned long long>(m.base_version), m.chain_index,
                      human(m.protected_bytes()).c_str(), human(m.payload_bytes()).c_str(), 100 * ratio);
        for (const auto& r : m.regions) {
          jv["regions"].push_back({{"name", r.name},
                                   {"bytes", r.bytes},
                                   {"space", to_string(r.space)},
                                   {"chunk_bytes", r.chunk_bytes},
                                   {"chunks", r.chunk_count()},
                                   {"chunks_stored", r.chunks.size()},
                                   {"digest", gpu::to_string(r.digest_kind)}});
          if (!as_json)
            std::printf("      region %-20s %-6s %12s  %llu of %llu chunks of %s stored  (%s)\n", r.name.c_str(),
                        to_string(r.space), human(r.bytes).c_str(), static_cast<unsigned long long>(r.chunks.size()),
                        static_cast<unsigned long long>(r.chunk_count()), human(r.chunk_bytes).c_str(),
                        gpu::to_string(r.digest_kind));
        }
        jr["versions"].push_back(jv);
      } catch (const Error& e) {
        ++damaged;
        jr["versions"].push_back({{"version", v}, {"error", e.what()}});
        if (!as_json) std::printf("  %10llu  DAMAGED: %s\n", static_cast<unsigned long long>(v), e.what());
      }
    }
    out["ranks"].push_back(jr);
  }
  if (as_json) std::cout << out.dump(2) << "\n";
  return damaged ? 1 : 0;
}

int verify(const std::string& dir) {
  std::vector<int> ranks;
  if (int rc = check_dir(dir, ranks)) return rc;
  int bad = 0, good = 0;
  try {  // the rank count of the job that wrote it (a relaunch reads it first)
    if (const auto n = core::read_job_ranks(dir))
      std::cout << "ok       " << dir << "/job.reprise (" << *n << " ranks)\n";
  } catch (const Error& e) {
    ++bad;
    std::cout << "DAMAGED  " << e.what() << "\n";  // (it names the file)
  }
  for (int rank : ranks) {
    auto store = core::make_directory_store(dir, rank);
    for (auto v : store->list()) {
      try {
        // The whole chain of v: every checksum, every link, every stored chunk against its digest.
        const core::RestoreChain chain = core::load_chain(*store, v);
        std::vector<core::Region> regions;
        for (const auto& r : chain.target().regions)
          regions.push_back(core::Region{r.name, nullptr, r.bytes, r.space, nullptr});
        core::verify_chain(chain, regions);
        ++good;
        std::cout << "ok       " << store->locate(v) << " (" << core::to_string(chain.target().kind) << ", chain of "
                  << chain.versions.size() << ")\n";
      } catch (const Error& e) {
        ++bad;
        std::cout << "DAMAGED  " << store->locate(v) << ": " << e.what() << "\n";
      }
    }
  }
  std::cout << good << " version(s) sound, " << bad << " damaged file(s)\n";
  if (bad)
    std::cerr << "reprise verify: " << bad << " file(s) in " << dir
              << " are damaged (see DAMAGED lines); intact versions are still restorable with "
                 "Runtime::restore(version), a relaunch of the job needs its job.reprise\n";
  return bad ? 1 : 0;
}

// The levels, then the chosen one as a line to paste into the job's environment.
int groups(const std::string& path, int ranks_per_node, std::optional<int> max_group_ranks, double alpha) {
#ifdef REPRISE_HAVE_GROUPING
  const protocol::CommMatrix m = protocol::read_matrix_path(path);
  const auto levels = protocol::bisection_levels(m, ranks_per_node);
  for (const auto& g : levels)
    std::printf("level groups %d max_group_ranks %d logged_share %.4f rolled_back_share %.4f\n", g.groups,
                g.max_group_ranks, g.logged_share, g.rolled_back_share);
  const protocol::Grouping& best = protocol::choose(levels, max_group_ranks, alpha);
  std::printf("REPRISE_GROUPS=%s\n", protocol::groups_value(best.group_of).c_str());
  std::printf("groups %d logged_share %.4f rolled_back_share %.4f\n", best.groups, best.logged_share,
              best.rolled_back_share);
  return 0;
#else
  (void)path, (void)ranks_per_node, (void)max_group_ranks, (void)alpha;
  throw UsageError("this build has no METIS (Debian's libmetis-dev; scripts/setup.sh installs it): rebuild with it");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reprise: inspect and verify Reprise checkpoint directories, choose groups"};
  app.require_subcommand(1);
  std::string dir;
  bool as_json = false;
  auto* ins = app.add_subcommand("inspect", "list versions, chains, regions, sizes and dirty ratios");
  ins->add_option("DIR", dir, "checkpoint directory (REPRISE_DIR of a run)")->required();
  ins->add_flag("--json", as_json, "print JSON instead of a table");
  auto* ver = app.add_subcommand("verify", "check every checksum and chain link; exit 0 when sound");
  ver->add_option("DIR", dir, "checkpoint directory (REPRISE_DIR of a run)")->required();
  std::string matrix;
  int ranks_per_node = 0;
  std::optional<int> max_group_ranks;
  double alpha = 0.5;
  auto* grp = app.add_subcommand("groups", "choose groups of whole nodes from a communication matrix (METIS)");
  grp->add_option("--matrix", matrix, "a matrix file, or the directory REPRISE_COMM_MATRIX wrote")->required();
  grp->add_option("--ranks-per-node", ranks_per_node, "ranks of a node (consecutive)")
      ->required()
      ->check(CLI::PositiveNumber);
  grp->add_option("--max-group-ranks", max_group_ranks, "the least logged share with groups of at most M ranks")
      ->check(CLI::PositiveNumber);
  grp->add_option("--alpha", alpha, "without --max-group-ranks: minimise A*logged + (1-A)*rolled back (0.5)")
      ->check(CLI::Range(0.0, 1.0));
  CLI11_PARSE(app, argc, argv);
  try {
    if (grp->parsed()) return groups(matrix, ranks_per_node, max_group_ranks, alpha);
    if (ins->parsed()) return inspect(dir, as_json);
    return verify(dir);
  } catch (const std::exception& e) {
    std::cerr << "reprise: " << e.what() << "\n";
    return 2;
  }
}
