// `reprise-sim`: the protocol core (protocol::Process, protocol::Coordinator) run for N simulated ranks over a
// network model (src/sim/simulator.hpp). For each --ranks value: a failure-free run and one with the --fail
// failures; every rank must end as in the failure-free run. Prints one line per run, writes JSON (--json, for
// bench/plot.py) and the pattern's communication matrix (--write-matrix, for `reprise groups`). --pattern and
// --ranks take comma lists: one run per pair.
//   reprise-sim --pattern stencil2d --ranks 10000,100000 --ranks-per-node 4 --fail 17:12 --json out.json
// Exit status: 0 when every run matched the failure-free one, 1 when one did not (hang, other final state, a
// protocol error), 2 for options it cannot run.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "reprise/errors.hpp"
#include "sim/simulator.hpp"

namespace {

using namespace reprise;

std::vector<int> list_of_ints(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      out.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw ConfigError(what + ": '" + item + "' is not an integer");
    }
  }
  return out;
}

// "nodes", or a file holding the value of REPRISE_GROUPS ("0,0,1,1,...", or the line `reprise groups` prints).
std::vector<int> read_groups(const std::string& spec) {
  if (spec == "nodes") return {};
  std::ifstream f(spec);
  if (!f) throw ConfigError("--groups " + spec + ": cannot read the file (give 'nodes' or a REPRISE_GROUPS file)");
  std::string line, text;
  while (std::getline(f, line)) {
    if (line.rfind("REPRISE_GROUPS=", 0) == 0) line = line.substr(15);
    if (!line.empty() && (line[0] < '0' || line[0] > '9')) continue;  // `reprise groups`' other lines
    text += line;
  }
  return list_of_ints(text, "--groups " + spec);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reprise-sim: Reprise's protocol core at scale, over a network model"};
  sim::Options o;
  std::string pattern = "stencil2d", ranks = "64", groups = "nodes", json, write_matrix;
  std::vector<std::string> fails;
  app.add_option("--pattern", pattern,
                 "stencil2d | stencil3d | cg (halos + an allreduce) | cholesky | alltoall, or a comma list");
  app.add_option("--ranks", ranks, "ranks, or a comma list of rank counts (one run each)");
  app.add_option("--ranks-per-node", o.ranks_per_node, "consecutive ranks of a node")->check(CLI::PositiveNumber);
  app.add_option("--groups", groups, "nodes, or a file with the REPRISE_GROUPS value (`reprise groups` output)");
  app.add_option("--steps", o.steps, "application steps")->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-every", o.checkpoint_every, "group checkpoints every k steps (0: none)");
  app.add_option("--fail", fails, "RANK:STEP: the rank dies when it starts that step (repeatable)");
  app.add_option("--message-bytes", o.message_bytes, "bytes of a halo or tile message (model)");
  app.add_option("--state-bytes", o.state_bytes, "protected bytes per rank (model: checkpoint and commit times)");
  app.add_option("--compute-seconds", o.compute_seconds, "compute per step (model, +-10%)");
  app.add_option("--latency", o.latency_seconds, "seconds between nodes (model)");
  app.add_option("--bandwidth", o.bandwidth, "bytes/s of a node's link (model)");
  app.add_option("--detect-seconds", o.detect_seconds, "from a death to the recovery's start (model)");
  app.add_flag("--job-floor", o.job_floor, "hold a job floor, as with REPRISE_DIR or REPRISE_ROLLBACK=all");
  app.add_option("--seed", o.seed, "seed of the compute-time jitter");
  app.add_option("--json", json, "write {\"kind\": \"sim\", \"runs\": [...]} to this file");
  app.add_option("--write-matrix", write_matrix, "write the pattern's communication matrix (of the last --ranks)");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<sim::Pattern> patterns;
    std::stringstream names(pattern);
    for (std::string name; std::getline(names, name, ',');) patterns.push_back(sim::parse_pattern(name));
    o.group_of = read_groups(groups);
    for (const std::string& f : fails) {
      const auto colon = f.find(':');
      const auto v = colon == std::string::npos
                         ? std::vector<int>{}
                         : list_of_ints(f.substr(0, colon) + "," + f.substr(colon + 1), "--fail " + f);
      if (v.size() != 2) throw ConfigError("--fail " + f + ": expected RANK:STEP");
      o.failures.push_back({v[0], v[1]});
    }
    nlohmann::json out{{"kind", "sim"}, {"runs", nlohmann::json::array()}};
    bool all_ok = true;
    for (const sim::Pattern p : patterns)
      for (int n : list_of_ints(ranks, "--ranks")) {
        o.pattern = p;
        o.ranks = n;
        if (!write_matrix.empty()) {
          std::ofstream m(write_matrix);
          const auto mat = sim::matrix(o);
          protocol::write_matrix_header(m, mat.ranks);
          for (const auto& e : mat.entries) m << e.from << " " << e.to << " " << e.bytes << "\n";
          if (!m) throw ConfigError("--write-matrix " + write_matrix + ": cannot write the file");
        }
        const sim::Result r = sim::simulate(o);
        std::printf(
            "%s ranks %d groups %d: state %zu B/rank max, control %.1f msgs/rank/checkpoint max, recovery %zu "
            "msgs/rank "
            "max (coordinator %zu), logged %.3f, rolled back %.3g, recovery %.4f s (model), %llu events, %.1f s, "
            "%.0f MiB: %s\n",
            sim::pattern_name(o.pattern), r.ranks, r.groups, r.per_rank_state_bytes_max,
            r.control_messages_per_rank_per_checkpoint_max, r.recovery_messages_per_rank_max_others,
            r.recovery_messages_coordinator, r.logged_share, r.rolled_back_share, r.recovery_seconds_model,
            static_cast<unsigned long long>(r.events), r.wall_seconds,
            static_cast<double>(r.peak_rss_bytes) / (1 << 20), r.problems.empty() ? "ok" : "PROBLEMS");
        for (const auto& p : r.problems) std::printf("  %s\n", p.c_str());
        std::fflush(stdout);
        all_ok = all_ok && r.problems.empty();
        out["runs"].push_back(nlohmann::json::parse(sim::to_json(o, r)));
      }
    if (!json.empty()) {
      std::ofstream f(json);
      f << out.dump(1) << "\n";
      if (!f) throw ConfigError("--json " + json + ": cannot write the file");
    }
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "reprise-sim: " << e.what() << "\n";
    return 2;
  }
}
