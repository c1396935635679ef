#include "coord/recovery_plan.hpp"

#include <algorithm>
#include <iterator>
#include <set>

#include "reprise/errors.hpp"

namespace reprise::coord {

std::string list_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += i + 1 == ranks.size() ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

namespace {
// The plan over the ranks of `scope` (every rank, or the ranks of one failed group).
RecoveryPlan plan_over(const Layout& layout, const std::vector<int>& failed_in,
                       const std::vector<RankHoldings>& holdings, bool persistent_level,
                       const std::vector<int>& scope) {
  const int n = layout.size();
  if (static_cast<int>(holdings.size()) != n)
    throw Error("recovery plan: " + std::to_string(holdings.size()) + " holdings for " + std::to_string(n) + " ranks");
  RecoveryPlan plan;
  plan.failed = failed_in;
  std::sort(plan.failed.begin(), plan.failed.end());
  const std::set<int> failed(plan.failed.begin(), plan.failed.end());

  std::vector<std::set<std::uint64_t>> restorable(static_cast<std::size_t>(n));
  std::vector<std::set<std::uint64_t>> from_buddy(static_cast<std::size_t>(n));
  std::vector<std::string> lost;
  std::vector<int> lost_ranks;
  std::vector<int> never_committed;  // failed ranks whose surviving buddy holds no complete version of theirs
  for (int r : scope) {
    const auto& h = holdings[static_cast<std::size_t>(r)];
    for (auto v : complete_versions(h.own)) restorable[static_cast<std::size_t>(r)].insert(v);
    if (failed.count(r))
      for (auto v : complete_versions(h.at_buddy)) {
        restorable[static_cast<std::size_t>(r)].insert(v);
        from_buddy[static_cast<std::size_t>(r)].insert(v);
      }
    if (!restorable[static_cast<std::size_t>(r)].empty()) continue;
    lost_ranks.push_back(r);
    const int b = layout.buddy_of[static_cast<std::size_t>(r)];
    if (failed.count(r) && failed.count(b))
      lost.push_back("rank " + std::to_string(r) + " and its buddy rank " + std::to_string(b) +
                     " were lost together" +
                     (persistent_level ? " and rank " + std::to_string(r) + " has no intact file either"
                                       : " and no persistent level is configured (set REPRISE_DIR to keep "
                                         "committed versions in files)"));
    else if (failed.count(r))
      never_committed.push_back(r);
    else
      lost.push_back("rank " + std::to_string(r) + " holds no complete checkpoint");
  }
  // A failed rank whose buddy survived yet holds no complete version never had a version acknowledged, so its
  // group never committed one: no version is common to every rank, and the consistent state every rank can
  // reach is the initial one. Nothing committed is lost by starting over.
  if (!never_committed.empty()) {
    plan.from_start = true;
    plan.source.assign(static_cast<std::size_t>(n), DataSource::Own);
    plan.rolled_back = scope;
    return plan;
  }
  if (!lost.empty()) {
    std::string what = "unrecoverable failure of rank" + std::string(plan.failed.size() > 1 ? "s " : " ") +
                       list_ranks(plan.failed) + ": the data of rank" + (lost_ranks.size() > 1 ? "s " : " ") +
                       list_ranks(lost_ranks) + " are lost (";
    for (std::size_t i = 0; i < lost.size(); ++i) what += (i ? "; " : "") + lost[i];
    what += "). Files already written were left intact; rerun the job (from REPRISE_DIR if one was set).";
    throw UnrecoverableFailure(what);
  }

  std::set<std::uint64_t> common = restorable[static_cast<std::size_t>(scope.front())];
  for (int r : scope) {
    std::set<std::uint64_t> next;
    std::set_intersection(common.begin(), common.end(), restorable[static_cast<std::size_t>(r)].begin(),
                          restorable[static_cast<std::size_t>(r)].end(), std::inserter(next, next.begin()));
    common = std::move(next);
  }
  if (common.empty()) {
    std::string what = "unrecoverable failure of rank" + std::string(plan.failed.size() > 1 ? "s " : " ") +
                       list_ranks(plan.failed) + ": no version is restorable on every rank (";
    for (int r : scope) {
      const auto& s = restorable[static_cast<std::size_t>(r)];
      what += (r != scope.front() ? "; rank " : "rank ") + std::to_string(r) + ": " + std::to_string(*s.begin()) +
              ".." + std::to_string(*s.rbegin());
    }
    throw UnrecoverableFailure(what + "). Files already written were left intact.");
  }
  plan.version = *common.rbegin();
  plan.source.assign(static_cast<std::size_t>(n), DataSource::Own);
  for (int r : plan.failed)
    if (from_buddy[static_cast<std::size_t>(r)].count(plan.version)) plan.source[static_cast<std::size_t>(r)] = DataSource::Buddy;
  plan.rolled_back = scope;
  return plan;
}

}  // namespace

RecoveryPlan plan_recovery(const Layout& layout, const std::vector<int>& failed,
                           const std::vector<RankHoldings>& holdings, bool persistent_level) {
  const int n = layout.size();
  if (static_cast<int>(holdings.size()) != n)
    throw Error("recovery plan: " + std::to_string(holdings.size()) + " holdings for " + std::to_string(n) + " ranks");
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) all[static_cast<std::size_t>(r)] = r;
  return plan_over(layout, failed, holdings, persistent_level, all);
}

RecoveryPlan plan_group_recovery(const Layout& layout, const std::vector<int>& failed,
                                 const std::vector<RankHoldings>& holdings, bool persistent_level,
                                 const std::set<int>& also) {
  const int n = layout.size();
  if (static_cast<int>(holdings.size()) != n)
    throw Error("recovery plan: " + std::to_string(holdings.size()) + " holdings for " + std::to_string(n) + " ranks");
  RecoveryPlan plan;
  plan.partial = true;
  plan.failed = failed;
  std::sort(plan.failed.begin(), plan.failed.end());
  plan.source.assign(static_cast<std::size_t>(n), DataSource::Own);
  plan.version_of.assign(static_cast<std::size_t>(n), 0);
  plan.starts_over.assign(static_cast<std::size_t>(n), 0);
  std::set<int> groups = also;
  for (int f : plan.failed) groups.insert(layout.group_of[static_cast<std::size_t>(f)]);
  for (int g : groups) {
    std::vector<int> members;
    for (int r = 0; r < n; ++r)
      if (layout.group_of[static_cast<std::size_t>(r)] == g) members.push_back(r);
    bool has_failed = false;
    for (int r : members) has_failed |= std::binary_search(plan.failed.begin(), plan.failed.end(), r);
    if (!has_failed) {
      // A group that rolls back again while it re-executes (`also`): every member is alive and holds its own
      // versions; the newest one all of them hold, or, when it committed nothing since it started over, the
      // beginning again.
      std::vector<std::uint64_t> common;
      for (std::size_t i = 0; i < members.size(); ++i) {
        const auto mine = complete_versions(holdings[static_cast<std::size_t>(members[i])].own);
        if (i == 0) {
          common = mine;
        } else {
          std::vector<std::uint64_t> next;
          std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(), std::back_inserter(next));
          common = std::move(next);
        }
      }
      for (int r : members) {
        plan.rolled_back.push_back(r);
        plan.version_of[static_cast<std::size_t>(r)] = common.empty() ? 0 : common.back();
        plan.starts_over[static_cast<std::size_t>(r)] = common.empty() ? 1 : 0;
      }
      continue;
    }
    // Every failure counts (a member whose buddy in another group failed too lost its data).
    const RecoveryPlan p = plan_over(layout, plan.failed, holdings, persistent_level, members);
    for (int r : members) {
      plan.rolled_back.push_back(r);
      plan.version_of[static_cast<std::size_t>(r)] = p.version;
      plan.starts_over[static_cast<std::size_t>(r)] = p.from_start ? 1 : 0;
      plan.source[static_cast<std::size_t>(r)] = p.source[static_cast<std::size_t>(r)];
    }
  }
  std::sort(plan.rolled_back.begin(), plan.rolled_back.end());
  return plan;
}

}  // namespace reprise::coord
