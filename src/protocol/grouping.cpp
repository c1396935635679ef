#include "protocol/grouping.hpp"

#include <metis.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "reprise/errors.hpp"

namespace reprise::protocol {
namespace {

int nodes_of(int ranks, int ranks_per_node) {
  return (ranks + ranks_per_node - 1) / ranks_per_node;
}

}  // namespace

void read_matrix(std::istream& in, const std::string& where, CommMatrix& into) {
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& why) {
    throw ConfigError(where + ":" + std::to_string(number) + ": " + why + " (a communication matrix: a line \"" +
                      kCommMatrixHeader +
                      "\", a line \"ranks N\", then lines \"FROM TO BYTES\"; REPRISE_COMM_MATRIX writes them)");
  };
  ++number;
  if (!std::getline(in, line) || line != kCommMatrixHeader) fail("not a communication matrix");
  ++number;
  int ranks = 0;
  {
    std::istringstream s(std::getline(in, line) ? line : "");
    std::string word, rest;
    if (!(s >> word >> ranks) || word != "ranks" || ranks < 1 || (s >> rest)) fail("expected \"ranks N\", N >= 1");
  }
  if (into.ranks != 0 && into.ranks != ranks)
    fail("a matrix of " + std::to_string(ranks) + " ranks read with one of " + std::to_string(into.ranks));
  into.ranks = ranks;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    std::istringstream s(line);
    long long from = -1, to = -1, bytes = -1;
    std::string rest;
    if (!(s >> from >> to >> bytes) || (s >> rest)) fail("expected \"FROM TO BYTES\", got \"" + line + "\"");
    if (from < 0 || from >= ranks || to < 0 || to >= ranks || bytes < 0)
      fail("ranks must be in 0.." + std::to_string(ranks - 1) + " and bytes >= 0, got \"" + line + "\"");
    into.entries.push_back({static_cast<int>(from), static_cast<int>(to), static_cast<std::uint64_t>(bytes)});
  }
}

CommMatrix read_matrix_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".matrix") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw ConfigError(path + ": no *.matrix file in this directory");
  } else {
    files.push_back(path);
  }
  CommMatrix m;
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) throw ConfigError(f + ": cannot be read");
    read_matrix(in, f, m);
  }
  return m;
}

Grouping evaluate(const CommMatrix& m, const std::vector<int>& group_of, int ranks_per_node) {
  if (static_cast<int>(group_of.size()) != m.ranks)
    throw ConfigError("a grouping of " + std::to_string(group_of.size()) + " ranks for a matrix of " +
                      std::to_string(m.ranks));
  Grouping g;
  g.group_of = group_of;
  std::map<int, int> size_of;
  for (int r = 0; r < m.ranks; ++r) ++size_of[group_of[static_cast<std::size_t>(r)]];
  g.groups = static_cast<int>(size_of.size());
  for (const auto& [group, size] : size_of) g.max_group_ranks = std::max(g.max_group_ranks, size);
  std::uint64_t all = 0, between = 0;
  for (const auto& e : m.entries) {
    all += e.bytes;
    if (group_of[static_cast<std::size_t>(e.from)] != group_of[static_cast<std::size_t>(e.to)]) between += e.bytes;
  }
  g.logged_share = all ? static_cast<double>(between) / static_cast<double>(all) : 0.0;
  // A node failure rolls back the node's group: averaged over the nodes (each as likely to fail).
  const int nodes = nodes_of(m.ranks, ranks_per_node);
  double rolled = 0;
  for (int n = 0; n < nodes; ++n)
    rolled += size_of[group_of[static_cast<std::size_t>(n) * static_cast<std::size_t>(ranks_per_node)]];
  g.rolled_back_share = rolled / nodes / m.ranks;
  return g;
}

std::vector<Grouping> bisection_levels(const CommMatrix& m, int ranks_per_node) {
  if (ranks_per_node < 1) throw ConfigError("--ranks-per-node must be at least 1");
  if (m.ranks < 1) throw ConfigError("the communication matrix has no ranks");
  const int nodes = nodes_of(m.ranks, ranks_per_node);
  // The node graph: symmetric weights (bytes both ways between two nodes), a node's ranks as its weight.
  std::map<std::pair<int, int>, std::uint64_t> between;
  std::uint64_t heaviest = 0;
  for (const auto& e : m.entries) {
    const int a = e.from / ranks_per_node, b = e.to / ranks_per_node;
    if (a == b || e.bytes == 0) continue;
    heaviest = std::max(heaviest, between[{std::min(a, b), std::max(a, b)}] += e.bytes);
  }
  std::vector<std::vector<std::pair<idx_t, idx_t>>> adjacent(static_cast<std::size_t>(nodes));
  for (const auto& [ab, bytes] : between) {
    // METIS's weights are 32-bit: scaled to at most 2^20, at least 1 for any traffic.
    const auto w =
        static_cast<idx_t>(std::max<std::uint64_t>(1, bytes * (1u << 20) / std::max<std::uint64_t>(heaviest, 1)));
    adjacent[static_cast<std::size_t>(ab.first)].push_back({ab.second, w});
    adjacent[static_cast<std::size_t>(ab.second)].push_back({ab.first, w});
  }
  std::vector<idx_t> xadj{0}, adjncy, adjwgt, vwgt;
  for (int n = 0; n < nodes; ++n) {
    for (const auto& [to, w] : adjacent[static_cast<std::size_t>(n)]) {
      adjncy.push_back(to);
      adjwgt.push_back(w);
    }
    xadj.push_back(static_cast<idx_t>(adjncy.size()));
    vwgt.push_back(std::min(ranks_per_node, m.ranks - n * ranks_per_node));
  }
  std::vector<Grouping> levels;
  std::vector<int> group_of(static_cast<std::size_t>(m.ranks));
  for (int parts = 1;; parts = std::min(parts * 2, nodes)) {
    std::vector<idx_t> part(static_cast<std::size_t>(nodes), 0);
    if (parts == nodes) {
      for (int n = 0; n < nodes; ++n) part[static_cast<std::size_t>(n)] = n;
    } else if (parts > 1) {
      idx_t nvtxs = nodes, ncon = 1, nparts = parts, objval = 0;
      idx_t options[METIS_NOPTIONS];
      METIS_SetDefaultOptions(options);
      options[METIS_OPTION_SEED] = 1;
      options[METIS_OPTION_NUMBERING] = 0;
      const int rc = METIS_PartGraphRecursive(&nvtxs, &ncon, xadj.data(), adjncy.empty() ? nullptr : adjncy.data(),
                                              vwgt.data(), nullptr, adjwgt.empty() ? nullptr : adjwgt.data(), &nparts,
                                              nullptr, nullptr, options, &objval, part.data());
      if (rc != METIS_OK)
        throw Error("METIS_PartGraphRecursive failed (status " + std::to_string(rc) + ") for " + std::to_string(parts) +
                    " groups of " + std::to_string(nodes) + " nodes");
    }
    for (int r = 0; r < m.ranks; ++r)
      group_of[static_cast<std::size_t>(r)] = static_cast<int>(part[static_cast<std::size_t>(r / ranks_per_node)]);
    // Groups numbered in order of their lowest rank (as REPRISE_GROUPS renumbers them).
    std::map<int, int> dense;
    for (int& g : group_of) g = dense.emplace(g, static_cast<int>(dense.size())).first->second;
    levels.push_back(evaluate(m, group_of, ranks_per_node));
    if (parts == nodes) break;
  }
  return levels;
}

const Grouping& choose(const std::vector<Grouping>& levels, std::optional<int> max_group_ranks, double alpha) {
  if (alpha < 0 || alpha > 1) throw ConfigError("--alpha must be between 0 and 1");
  const Grouping* best = nullptr;
  for (const auto& g : levels) {
    if (max_group_ranks) {
      if (g.max_group_ranks > *max_group_ranks) continue;
      if (!best || g.logged_share < best->logged_share) best = &g;
    } else {
      auto cost = [alpha](const Grouping& x) { return alpha * x.logged_share + (1 - alpha) * x.rolled_back_share; };
      if (!best || cost(g) < cost(*best)) best = &g;
    }
  }
  if (!best)
    throw ConfigError("no grouping of whole nodes has groups of at most " + std::to_string(*max_group_ranks) +
                      " ranks (a node is never split: a node fails as a whole); raise --max-group-ranks");
  return *best;
}

std::string groups_value(const std::vector<int>& group_of) {
  std::string out;
  for (std::size_t r = 0; r < group_of.size(); ++r) out += (r ? "," : "") + std::to_string(group_of[r]);
  return out;
}

}  // namespace reprise::protocol
