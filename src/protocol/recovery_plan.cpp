#include "protocol/recovery_plan.hpp"

#include <algorithm>
#include <iterator>
#include <set>

#include "reprise/errors.hpp"

namespace reprise::protocol {

namespace {
// The plan over the ranks of `scope` (every rank, or the ranks of one failed group).
RecoveryPlan plan_over(const Layout& layout, const std::vector<int>& failed_in, const Holdings& holdings,
                       bool persistent_level, const std::vector<int>& scope) {
  RecoveryPlan plan;
  plan.failed = failed_in;
  std::sort(plan.failed.begin(), plan.failed.end());
  const std::set<int> failed(plan.failed.begin(), plan.failed.end());

  // Per rank of the scope (not of the job: a group's plan costs its members' records)
  std::map<int, std::set<std::uint64_t>> restorable, in_own, from_buddy;
  std::vector<std::string> lost;
  std::vector<int> lost_ranks;
  std::vector<int> never_committed;  // ranks with nothing restorable, where a store proves none is relied on
  for (int r : scope) {
    const RankHoldings& h = holdings_of(holdings, r);
    for (auto v : complete_versions(h.own)) in_own[r].insert(v);
    // A live rank's own store is authoritative, unless it is a replacement whose recovery was interrupted.
    if (failed.count(r) || h.replacing)
      for (auto v : complete_versions(h.at_buddy)) from_buddy[r].insert(v);
    restorable[r] = in_own[r];
    restorable[r].insert(from_buddy[r].begin(), from_buddy[r].end());
    if (!restorable[r].empty()) continue;
    const int b = layout.buddy_of(r);
    // Every committed version of r is in its own store while it lives (unless it is a replacement that had not
    // got its chain back) and in its buddy's copy while that one lives (unless the buddy is such a replacement).
    // Its files, when they were read (a failed rank's, an interrupted replacement's), hold every version anybody
    // relies on: they are written behind the commit, but with a persistent level no committed view (what lets
    // senders release logged messages) and no job floor passes a version every rank has in its files, so files
    // that hold nothing of r mean that everything sent to r's group since the beginning is still logged.
    const bool own_proves = h.files_read || (!failed.count(r) && !h.replacing);
    const bool buddy_proves = b >= 0 && !failed.count(b) && !holdings_of(holdings, b).replacing;  // (-1: files only)
    if (own_proves || buddy_proves) {
      never_committed.push_back(r);
      continue;
    }
    lost_ranks.push_back(r);
    const std::string files = persistent_level ? " and rank " + std::to_string(r) + " has no intact file either"
                                               : " and no persistent level is configured (set REPRISE_DIR to keep "
                                                 "committed versions in files)";
    if (failed.count(r) && failed.count(b))
      lost.push_back("rank " + std::to_string(r) + " and its buddy rank " + std::to_string(b) + " were lost together" +
                     files);
    else if (failed.count(r))
      lost.push_back("rank " + std::to_string(r) + " failed before its buddy rank " + std::to_string(b) +
                     ", a replacement, got its checkpoints back" + files);
    else
      lost.push_back("replacement rank " + std::to_string(r) +
                     " had not got its checkpoints back when its buddy rank " + std::to_string(b) +
                     (failed.count(b) ? " failed" : ", a replacement too, lost them") + files);
  }
  // A rank with provably no version to restore means its group has none: no version is common to every rank of
  // the scope, and the consistent state they can all reach is the initial one. Nothing anybody relies on is lost
  // by starting over (above).
  if (!never_committed.empty()) {
    plan.from_start = true;
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

  std::set<std::uint64_t> common = restorable[scope.front()];
  for (int r : scope) {
    std::set<std::uint64_t> next;
    std::set_intersection(common.begin(), common.end(), restorable[r].begin(), restorable[r].end(),
                          std::inserter(next, next.begin()));
    common = std::move(next);
  }
  if (common.empty()) {
    // No failed rank: a relaunch from files, which says so itself.
    std::string what = plan.failed.empty()
                           ? std::string("no version is restorable on every rank (")
                           : "unrecoverable failure of rank" + std::string(plan.failed.size() > 1 ? "s " : " ") +
                                 list_ranks(plan.failed) + ": no version is restorable on every rank (";
    for (int r : scope) {
      const auto& s = restorable[r];
      what += (r != scope.front() ? "; rank " : "rank ") + std::to_string(r) + ": " + std::to_string(*s.begin()) +
              ".." + std::to_string(*s.rbegin());
    }
    throw UnrecoverableFailure(what + "). Files already written were left intact.");
  }
  plan.version = *common.rbegin();
  for (int r : scope) {
    // A failed rank reads its buddy's copy when there is one (memory, not files); a live rank its own store.
    const bool buddy = failed.count(r) ? from_buddy[r].count(plan.version) > 0 : !in_own[r].count(plan.version);
    if (buddy) plan.source.set(static_cast<std::size_t>(r), DataSource::Buddy);
  }
  plan.rolled_back = scope;
  return plan;
}

}  // namespace

void append_records(std::vector<std::uint64_t>& out, int owner, const std::vector<VersionRecord>& records,
                    RecordSource source) {
  const auto put = [&](std::uint64_t version, std::uint64_t base, bool full, RecordSource from) {
    out.insert(out.end(),
               {static_cast<std::uint64_t>(owner), version, base, full ? 1u : 0u, static_cast<std::uint64_t>(from)});
  };
  if (source == RecordSource::FilesRead) put(~std::uint64_t{0}, 0, false, RecordSource::FilesRead);
  for (const auto& r : records)
    put(r.version, r.base, r.full, source == RecordSource::AtBuddy ? source : RecordSource::Own);
}

const RankHoldings& holdings_of(const Holdings& holdings, int rank) {
  static const RankHoldings none;
  const auto it = holdings.find(rank);
  return it == holdings.end() ? none : it->second;
}

Holdings holdings_from(const std::vector<std::uint64_t>& all, int ranks) {
  Holdings h;
  for (std::size_t i = 0; i + 5 <= all.size(); i += 5) {
    if (all[i] >= static_cast<std::uint64_t>(ranks)) continue;
    RankHoldings& of = h[static_cast<int>(all[i])];
    const auto source = static_cast<RecordSource>(all[i + 4]);
    if (source == RecordSource::FilesRead) {
      of.files_read = true;
      continue;
    }
    const VersionRecord r{all[i + 1], all[i + 2], all[i + 3] != 0};
    auto& list = source == RecordSource::AtBuddy ? of.at_buddy : of.own;
    if (std::find(list.begin(), list.end(), r) == list.end()) list.push_back(r);
  }
  return h;
}

RecoveryPlan plan_recovery(const Layout& layout, const std::vector<int>& failed, const Holdings& holdings,
                           bool persistent_level) {
  const int n = layout.size();
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) all[static_cast<std::size_t>(r)] = r;
  return plan_over(layout, failed, holdings, persistent_level, all);
}

std::set<int> rolled_back_groups(const Layout& layout, const std::vector<int>& failed, const std::set<int>& also) {
  std::set<int> groups = also;
  for (int f : failed) groups.insert(layout.group_of(f));
  return groups;
}

RecoveryPlan plan_group_recovery(const Layout& layout, const std::vector<int>& failed, const Holdings& holdings,
                                 bool persistent_level, const std::set<int>& also) {
  RecoveryPlan plan;
  plan.partial = true;
  plan.failed = failed;
  std::sort(plan.failed.begin(), plan.failed.end());
  for (int g : rolled_back_groups(layout, plan.failed, also)) {
    const std::vector<int> members = layout.members_of_group(g);
    // Every failure counts (a member whose buddy in another group failed too lost its data). A group in `also`
    // has no failed member: its members restore their own newest common version (or their buddy's copy, for a
    // replacement that had not got its chain back), or start over when the group committed nothing since it did.
    const RecoveryPlan p = plan_over(layout, plan.failed, holdings, persistent_level, members);
    for (int r : members) {
      plan.rolled_back.push_back(r);
      const auto i = static_cast<std::size_t>(r);
      plan.version_of.set(i, p.version);  // (0 when the group starts over)
      plan.starts_over.set(i, p.from_start ? 1 : 0);
      plan.source.set(i, p.source[i]);
    }
  }
  std::sort(plan.rolled_back.begin(), plan.rolled_back.end());
  return plan;
}

}  // namespace reprise::protocol
