// Groups chosen from the communication pattern (`reprise groups`): the ranks of a node contracted into one vertex
// (a node fails as a whole), the node graph partitioned by METIS's recursive bisection into 1, 2, 4, ... groups,
// and each level weighed by what HydEE trades (seed 000): the share of bytes that crosses groups (logged by their
// senders) against the share of the job that rolls back after a node failure. Pure logic over a matrix read from
// files; compiled into its own library (reprise_grouping) so that libreprise does not depend on METIS.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace reprise::protocol {

/// The first line of a communication matrix file (REPRISE_COMM_MATRIX writes them; see read_matrix).
inline constexpr const char* kCommMatrixHeader = "reprise comm matrix";

/// Bytes each rank sent to each other rank: sparse (a rank's peers only), as REPRISE_COMM_MATRIX writes it.
struct CommMatrix {
  struct Entry {
    int from = 0, to = 0;
    std::uint64_t bytes = 0;
  };
  int ranks = 0;
  std::vector<Entry> entries;
};

/// The text format: a line "reprise comm matrix", a line "ranks N", then one line "FROM TO BYTES" per pair (any
/// order; pairs repeated across files add up). `where` names the input in errors (ConfigError: line and why).
void read_matrix(std::istream& in, const std::string& where, CommMatrix& into);
/// A file, or a directory whose *.matrix files (one per rank) are read together. Throws ConfigError.
CommMatrix read_matrix_path(const std::string& path);
/// The two header lines; then the writer adds one "FROM TO BYTES" line per pair. Inline: libreprise's
/// REPRISE_COMM_MATRIX writer uses it without linking this library (and METIS).
inline void write_matrix_header(std::ostream& out, int ranks) {
  out << kCommMatrixHeader << "\nranks " << ranks << "\n";
}

struct Grouping {
  std::vector<int> group_of;     ///< rank -> group
  int groups = 0;                ///< number of groups
  int max_group_ranks = 0;       ///< ranks in the largest group
  double logged_share = 0;       ///< bytes sent between groups / bytes sent (L)
  double rolled_back_share = 0;  ///< ranks rolled back after a node failure, averaged over nodes, / ranks (R)
};

/// L and R of `group_of` for the matrix, nodes of `ranks_per_node` consecutive ranks.
Grouping evaluate(const CommMatrix& m, const std::vector<int>& group_of, int ranks_per_node);

/// One grouping per level of the recursive bisection: 1, 2, 4, ... groups of whole nodes, up to one group per node
/// (every rank count, not only powers of two: METIS balances the nodes' ranks). Deterministic (a fixed seed).
std::vector<Grouping> bisection_levels(const CommMatrix& m, int ranks_per_node);

/// The level to use: with `max_group_ranks`, the least logged share among the levels whose groups have at most that
/// many ranks; otherwise the least alpha * L + (1 - alpha) * R. Throws ConfigError when no level fits.
const Grouping& choose(const std::vector<Grouping>& levels, std::optional<int> max_group_ranks, double alpha);

/// "0,0,1,1,...": the value of REPRISE_GROUPS for `group_of`.
std::string groups_value(const std::vector<int>& group_of);

}  // namespace reprise::protocol
