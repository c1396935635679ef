#include "protocol/restart_exchange.hpp"

#include <string>

#include "reprise/errors.hpp"

namespace reprise::protocol {

std::vector<std::uint64_t> exchange_counts(const Process& p, bool rolled_back, const Capture* committed) {
  const std::size_t N = p.ranks();
  std::vector<std::uint64_t> mine(4 * N, 0);
  for (std::size_t q = 0; q < N; ++q) {
    const int r = static_cast<int>(q);
    std::uint64_t* x = &mine[4 * q];
    x[0] = p.sent(r);
    x[1] = p.delivered(r);
    x[2] = rolled_back ? p.delivered(r) : committed ? committed->delivered(r) : 0;
    x[3] = rolled_back ? p.sent(r) : committed ? committed->sent(r) : 0;
  }
  return mine;
}

std::vector<PeerCounts> peer_counts(const std::vector<std::uint64_t>& received, const std::vector<int>& group_of,
                                    int me, const std::set<int>& rolled_back) {
  const std::size_t N = group_of.size(), m = static_cast<std::size_t>(me);
  if (received.size() != 4 * N)
    throw ProtocolError("restart exchange: " + std::to_string(received.size()) + " counts for " + std::to_string(N) +
                        " ranks (" + std::to_string(4 * N) + " expected)");
  std::vector<PeerCounts> peers;
  for (std::size_t q = 0; q < N; ++q) {
    if (group_of[q] == group_of[m]) continue;
    const std::uint64_t* x = &received[4 * q];  // q's sent[me], delivered[me], view (delivered, sent)
    peers.push_back(
        PeerCounts{static_cast<int>(q), rolled_back.count(static_cast<int>(q)) > 0, x[1], x[0], View{x[2], x[3]}});
  }
  return peers;
}

std::vector<std::uint64_t> encode_report(const RecoveryWork& w) {
  std::vector<std::uint64_t> report{w.phase, w.replay_phases.size()};
  report.insert(report.end(), w.replay_phases.begin(), w.replay_phases.end());
  report.push_back(w.orphan_phases.size());
  report.insert(report.end(), w.orphan_phases.begin(), w.orphan_phases.end());
  return report;
}

CoordinatorInput decode_reports(const std::vector<std::uint64_t>& reports, const std::vector<int>& displs) {
  CoordinatorInput in;
  for (std::size_t i = 0; i < displs.size(); ++i) {
    std::size_t at = static_cast<std::size_t>(displs[i]);
    const auto word = [&]() {
      if (at >= reports.size())
        throw ProtocolError("restart exchange: the report of rank " + std::to_string(i) + " is truncated");
      return reports[at++];
    };
    const int process = static_cast<int>(i);
    in.items.push_back({process, ItemKind::Block, word()});
    for (std::uint64_t k = word(); k > 0; --k) in.items.push_back({process, ItemKind::Replay, word()});
    for (std::uint64_t k = word(); k > 0; --k) in.orphan_phases.push_back(word());
  }
  return in;
}

}  // namespace reprise::protocol
