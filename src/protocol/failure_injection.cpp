#include "protocol/failure_injection.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "protocol/topology.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {

const char* to_string(KillPoint p) {
  switch (p) {
    case KillPoint::Compute:
      return "compute";
    case KillPoint::Checkpoint:
      return "checkpoint";
    case KillPoint::Drain:
      return "drain";
    case KillPoint::Commit:
      return "commit";
    case KillPoint::Recovery:
      return "recovery";
    case KillPoint::Transfer:
      return "transfer";
    case KillPoint::Exchange:
      return "exchange";
    case KillPoint::Stall:
      return "stall";
    case KillPoint::StallSpawn:
      return "stall_spawn";
    case KillPoint::Join:
      return "join";
    case KillPoint::StallFiles:
      return "stall_files";
    case KillPoint::SlowFiles:
      return "slow_files";
    case KillPoint::Collective:
      return "collective";
  }
  return "?";
}

std::vector<KillOrder> parse_kill_spec(const std::string& spec) {
  std::vector<KillOrder> out;
  std::stringstream in(spec);
  std::string entry;
  const std::string form =
      " (expected RANK:STEP[:POINT], POINT one of compute, checkpoint, drain, commit, recovery, "
      "transfer, exchange, stall, stall_spawn, join, stall_files, slow_files, collective)";
  while (std::getline(in, entry, ',')) {
    if (entry.empty()) continue;
    std::stringstream e(entry);
    std::string rank, step, point;
    std::getline(e, rank, ':');
    std::getline(e, step, ':');
    std::getline(e, point, ':');
    std::string rest;
    if (std::getline(e, rest) || rank.empty() || step.empty())
      throw ConfigError("REPRISE_KILL entry '" + entry + "' is malformed" + form);
    KillOrder k{};
    try {
      std::size_t p1 = 0, p2 = 0;
      const long r = std::stol(rank, &p1);
      const unsigned long long s = std::stoull(step, &p2);
      if (p1 != rank.size() || p2 != step.size() || r < 0 || step[0] == '-') throw std::invalid_argument("x");
      k.rank = static_cast<int>(r);
      k.step = s;
    } catch (const std::exception&) {
      throw ConfigError("REPRISE_KILL entry '" + entry + "': rank and step must be numbers >= 0" + form);
    }
    // (The names are to_string's; none: compute.)
    const std::string name = point.empty() ? "compute" : point;
    std::optional<KillPoint> named;
    for (int p = 0; p <= static_cast<int>(KillPoint::Collective); ++p)  // (Collective: the last)
      if (name == to_string(static_cast<KillPoint>(p))) named = static_cast<KillPoint>(p);
    if (!named) throw ConfigError("REPRISE_KILL entry '" + entry + "': unknown point '" + point + "'" + form);
    k.point = *named;
    out.push_back(k);
  }
  return out;
}

namespace {
bool in_recovery(KillPoint p) {
  return p == KillPoint::Recovery || p == KillPoint::Transfer || p == KillPoint::Exchange || p == KillPoint::Stall ||
         p == KillPoint::StallSpawn || p == KillPoint::Join;
}
}  // namespace

bool kill_due(const std::vector<KillOrder>& orders, int rank, std::uint64_t step, KillPoint point) {
  for (const auto& k : orders)
    if (k.rank == rank && k.point == point && (k.step == step || (in_recovery(point) && k.step <= step))) return true;
  return false;
}

KillFloors kill_floors(const std::vector<KillOrder>& orders, KillFloors floors, const std::vector<int>& failed,
                       std::uint64_t max_step) {
  for (int f : failed) {
    std::uint64_t& floor = floors[f];
    std::uint64_t fired = 0;
    for (const auto& k : orders)
      if (k.rank == f && k.step > floor && (fired == 0 || k.step < fired)) fired = k.step;
    floor = std::max({floor, max_step, fired});
  }
  return floors;
}

std::uint64_t kill_floor(const KillFloors& floors, int rank) {
  const auto it = floors.find(rank);
  return it == floors.end() ? 0 : it->second;
}

std::vector<KillOrder> unfired_orders(const std::vector<KillOrder>& orders, int rank,
                                      std::optional<std::uint64_t> floor) {
  std::vector<KillOrder> out;
  for (const auto& k : orders) {
    const bool kills = k.point != KillPoint::Stall && k.point != KillPoint::StallSpawn && k.point != KillPoint::Join &&
                       k.point != KillPoint::StallFiles && k.point != KillPoint::SlowFiles;
    if (k.rank == rank && kills && (!floor || k.step > *floor)) out.push_back(k);
  }
  return out;
}

std::string to_string(const KillOrder& order) {
  return std::to_string(order.rank) + ":" + std::to_string(order.step) + ":" + to_string(order.point);
}

bool rank_listed(const char* name, const std::string& list, int rank) {
  const std::vector<int> ranks = parse_id_list(list, name);
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

bool rank_listed_in_env(const char* name, int rank) {
  const char* v = std::getenv(name);
  return v && rank_listed(name, v, rank);
}

}  // namespace reprise::protocol
