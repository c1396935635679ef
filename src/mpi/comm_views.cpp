// reprise::Comm at checkpoints: the group barrier's channel check and capture, the committed views announced to the
// senders of other groups (their logs' garbage collection) and received from them, the log bound's checkpoint
// asks, and the protocol state restored with a version.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "mpi/check.hpp"
#include "mpi/comm_state.hpp"
#include "mpi/polled.hpp"
#include "protocol/group_channels.hpp"

namespace reprise::mpi {

void CommState::maybe_poll_views() {
  if (++ops_since_poll_ >= kPollEvery) poll_views();
}

void CommState::poll_views() {
  ops_since_poll_ = 0;
  // One wildcard probe per message: committed views (kViewTag) and checkpoint asks of the log bound (kAskTag).
  for (;;) {
    int flag = 0;
    MPI_Status st;
    REPRISE_COMM_CHECK(probe_any_source(host_.view_comm(), MPI_ANY_TAG, &flag, &st));
    if (!flag) break;
    if (st.MPI_SOURCE < 0 || st.MPI_SOURCE >= size() || (st.MPI_TAG != kViewTag && st.MPI_TAG != kAskTag)) {
      std::fprintf(stderr,
                   "reprise: rank %d: a message from rank %d on the view communicator (tag %d, error %d) "
                   "ignored\n",
                   rank_, st.MPI_SOURCE, st.MPI_TAG, st.MPI_ERROR);
      break;
    }
    std::uint64_t v[2];
    const int rc = polled::recv(v, 2, MPI_UINT64_T, st.MPI_SOURCE, st.MPI_TAG, host_.view_comm(), MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {  // spurious (probe again) or a repair (the communicators changed)
      host_.check_mpi(rc, REPRISE_MPI_SITE(polled::recv(v, 2, MPI_UINT64_T, src, tag, view_comm)));
      continue;
    }
    if (st.MPI_TAG == kAskTag) {
      asked_ = true;
      ++stats_.asks_received;
      if (v[0] == kFloodAsk) flood_ask(st.MPI_SOURCE);
      continue;
    }
    const std::size_t before = p_->log().live_entries();
    p_->apply_view(st.MPI_SOURCE, protocol::View{v[0], v[1]});
    stats_.released += before - p_->log().live_entries();
    ++stats_.views_received;
  }
  pop_completed(view_sends_);
}

std::vector<std::uint64_t> CommState::barrier_contribution() {
  poll_views();
  return protocol::barrier_contribution(*p_, members_);
}

void CommState::barrier_result(const std::vector<const std::uint64_t*>& member, std::uint64_t version) {
  const std::uint64_t phase = protocol::check_group_channels(members_, member, version);
  ++stats_.channel_checks;
  asks_sent_ = flooded_ = false;
  p_->raise_phase(phase);
  log_copies_done();  // the snapshot's payloads are read below
  // Capture into the regions (counters and views; log snapshot and orphan record), keeping the capture in memory.
  // The log region's payloads go into the version on the checkpoint's background thread (take_log_plan).
  counters_.write(*p_);
  drop_log_plan();
  log_plan_ = log_region_.plan(captures_[version] = p_->capture(), groups_.ranks());
}

protocol::LogRegion::Plan CommState::take_log_plan() {
  if (!log_plan_) return log_region_.unchanged();
  protocol::LogRegion::Plan p = std::move(*log_plan_);
  log_plan_.reset();
  return p;
}

void CommState::drop_log_plan() {
  if (log_plan_) log_region_.abandon(*log_plan_);
  log_plan_.reset();
}

std::pair<void*, std::size_t> CommState::locate_counter_region(std::optional<std::size_t> bytes) {
  return counters_.locate(bytes);
}

std::pair<void*, std::size_t> CommState::locate_log_region(std::optional<std::size_t> bytes) {
  return log_region_.locate(bytes);
}

void CommState::committed(std::uint64_t version) {
  if (!floor_gated_) {
    announce(version);
  } else if (floor_) {
    announce(std::min(version, *floor_));
  }
}

void CommState::job_floor(std::uint64_t floor) {
  if (!floor_ || floor > *floor_) floor_ = floor;
}

void CommState::announce(std::uint64_t through) {
  auto it = captures_.upper_bound(through);
  if (it == captures_.begin()) return;  // none that old (committed before this process used Comm's checkpoints)
  --it;
  const std::uint64_t version = it->first;
  if (announced_ && version <= *announced_) return;
  const protocol::Capture& c = it->second;
  for (const auto& [q, ch] : c.channels) {  // the peers this process counts, not every rank
    if (group_of(q) == group_of(rank_)) continue;
    // Views only grow and q keeps the largest (Process::apply_view): one q has, or one of a silent channel, tells
    // it nothing.
    if (ch.delivered == 0 && ch.sent == 0) continue;
    const auto told = views_told_.find(q);
    if (told != views_told_.end() && told->second.delivered == ch.delivered && told->second.sent == ch.sent) continue;
    views_told_[q] = protocol::View{ch.delivered, ch.sent};
    view_sends_.push_back({MPI_REQUEST_NULL, {ch.delivered, ch.sent}});
    auto& back = view_sends_.back();
    REPRISE_COMM_CHECK(MPI_Isend(back.second.data(), 2, MPI_UINT64_T, q, kViewTag, host_.view_comm(), &back.first));
    ++stats_.views_sent;
  }
  announced_ = version;
  captures_.erase(captures_.begin(), it);  // older ones are obsolete
}

void CommState::send_ask(int q, std::uint64_t kind) {
  view_sends_.push_back({MPI_REQUEST_NULL, {kind, 0}});
  auto& back = view_sends_.back();
  REPRISE_COMM_CHECK(MPI_Isend(back.second.data(), 2, MPI_UINT64_T, q, kAskTag, host_.view_comm(), &back.first));
  ++stats_.asks_sent;
}

// A checkpoint ask for every group (the log bound under the job floor) at a group's first rank: passed on once per
// checkpoint of its group to its neighbours in the groups' tree (protocol::group_tree_ranks: the parent group's
// first rank and the child groups'), except the one it came from. A tree has one path between two groups, so an ask
// reaches every group, and no rank sends or receives more than kFloorFanIn + 1 of them per checkpoint (plus its
// own group's members' asks), whatever the number of groups (one rank asked each of G - 1 groups before).
void CommState::flood_ask(int from) {
  if (flooded_) return;
  flooded_ = true;
  if (!tree_) {
    tree_ = protocol::group_tree_ranks(groups_, rank_);
  }
  if (tree_->parent >= 0 && tree_->parent != from) send_ask(tree_->parent, kFloodAsk);
  for (int c : tree_->children)
    if (c != from) send_ask(c, kFloodAsk);
}

std::map<std::string, std::size_t> CommState::memory_use() const {
  std::map<std::string, std::size_t> use{{"message_log", p_->log().held_bytes()},
                                         {"log_pool", p_->log().pooled_bytes()},
                                         {"log_region", log_region_.held_bytes()},
                                         {"comm_staging", staging_pool_->pooled_bytes()}};
  for (const auto& [name, held] : counted_) use[name] += held();
  return use;
}

std::size_t CommState::release_pools(std::size_t excess) {
  std::size_t released = 0;
  auto limit = [&](std::size_t pooled, auto&& set_limit) {
    const std::size_t cut = std::min(pooled, excess - released);
    if (cut) set_limit(pooled - cut);
    released += cut;
  };
  limit(p_->log().pooled_bytes(), [&](std::size_t keep) { p_->log().limit_pool(keep); });
  limit(staging_pool_->pooled_bytes(), [&](std::size_t keep) { staging_pool_->limit(keep); });
  return released;
}

std::size_t CommState::shed_log_pool(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(process_mutex_);
  return p_ ? p_->log().shed_pool(bytes) : 0;
}

void CommState::bound_log_by_budget(std::size_t bytes) {
  log_options_.bound_bytes = bytes;
  p_->log().set_bound(bytes);
  log_bound_by_budget_ = true;
}

bool CommState::checkpoint_wanted() {
  poll_views();
  const bool over = p_->log().over_bound();
  if (over && log_bound_by_budget_ && !std::exchange(budget_warned_, true))
    std::fprintf(stderr,
                 "reprise: rank %d: warning: its message log holds %zu bytes, over the bound of %zu bytes its "
                 "memory budget sets (a sixteenth of REPRISE_MEMORY_BUDGET, at least two log segments): the groups it "
                 "holds entries for are asked to checkpoint, so that their commits release them; raise "
                 "REPRISE_MEMORY_BUDGET or set REPRISE_LOG_BOUND\n",
                 rank_, p_->log().held_bytes(), log_options_.bound_bytes);
  stats_.over_bound_streak = over ? stats_.over_bound_streak + 1 : 0;
  stats_.over_bound_streak_max = std::max(stats_.over_bound_streak_max, stats_.over_bound_streak);
  if (stats_.over_bound_streak == kBoundTooLowChecks) {
    const std::string segments = log_options_.bound_bytes <= log_options_.segment_bytes
                                     ? " (the log takes memory in segments of " +
                                           std::to_string(log_options_.segment_bytes) +
                                           " bytes: a bound of one segment is passed whenever an entry is live)"
                                     : std::string();
    std::fprintf(
        stderr,
        "reprise: warning: rank %d: its message log held %zu bytes, over the log bound (REPRISE_LOG_BOUND, "
        "%zu bytes), at %llu log checks in a row although each asked for a checkpoint: entries wait until "
        "their receivers' groups commit%s, and what this rank sends to other groups meanwhile needs more "
        "than the bound, so its group now checkpoints at every check%s. Raise the bound above %zu bytes (the "
        "most its log has held).\n",
        rank_, p_->log().held_bytes(), log_options_.bound_bytes, static_cast<unsigned long long>(kBoundTooLowChecks),
        floor_gated_ ? " and every group committed again (the job floor)" : "", segments.c_str(), stats_.log_max_held);
  }
  if (over) {
    ++stats_.log_over_bound;
    if (!asks_sent_) {
      asks_sent_ = true;
      // Gated on the job floor, the views release nothing until every group committed again: ask every group (a
      // group that exchanges nothing and never checkpoints on its own would otherwise hold every log forever).
      // One member of a group is enough (the group's log check is a reduction over its members): the ask floods
      // the tree of the groups' first ranks (flood_ask), from this rank's group's first rank.
      if (!floor_gated_) {
        for (int q : p_->log().dests()) send_ask(q, 0);
      } else if (members_.front() == rank_) {
        flood_ask(-1);
      } else {
        send_ask(members_.front(), kFloodAsk);
      }
    }
  }
  return over || std::exchange(asked_, false);
}

void CommState::after_restore(std::uint64_t version) {
  protocol::Capture c = counters_.read();
  // The log snapshot and orphan record of that version: still in memory when this process took it, otherwise (a
  // replacement, a relaunch) from the version's own region.
  auto it = captures_.find(version);
  if (it != captures_.end()) {
    c.log = it->second.log;
    c.orphan_record = it->second.orphan_record;
  } else {
    log_region_.read(c, p_->log(), groups_.ranks());
  }
  captures_.erase(captures_.upper_bound(version), captures_.end());
  drop_log_plan();
  log_region_.rewrite_next();  // the restored region's offsets are not this process's map
  if (announced_ && *announced_ > version) announced_ = version;
  views_told_.clear();
  p_->restore(c);
}

void CommState::start_over() {
  auto fresh = std::make_unique<protocol::Process>(rank_, groups_, log_options_, log_memory_);
  {
    std::lock_guard<std::mutex> lock(process_mutex_);
    fresh.swap(p_);
  }
  fresh.reset();  // the old process's log gives its segments back to its own pool, outside the lock
  counters_.clear();
  captures_.clear();
  announced_.reset();
  views_told_.clear();
  floor_.reset();
  drop_log_plan();
  log_region_.rewrite_next();
}

}  // namespace reprise::mpi
