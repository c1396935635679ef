// What the served calls share: the error rule, datatypes, the program's ranks and tags on Comm, statuses, and the
// collectives the communicator calls need.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "interpose/wrapped.hpp"
#include "reprise/errors.hpp"

// A served call's body: the runtime's own MPI calls inside it go to the library (Serving); a rollback leaves the
// call as it leaves any runtime call (reprise::Rollback), the program's requests dropped first (their receives
// cancelled before the unwinding frees their buffers); any other error stops the job with a message naming the
// call (the program's calls on its communicators have no error to return that it could act on).
#define REPRISE_SERVE(call, ...)                               \
  do {                                                         \
    try {                                                      \
      ::reprise::interpose::Serving serving_guard_;            \
      __VA_ARGS__                                              \
    } catch (const ::reprise::Rollback&) {                     \
      ::reprise::interpose::Wrapped::get().abandon_requests(); \
      throw;                                                   \
    } catch (const std::exception& e) {                        \
      ::reprise::interpose::refuse(call, e.what());            \
    }                                                          \
  } while (0)

// Calls of MPI 4 (persistent collectives, MPI_Comm_idup_with_info, ...): Open MPI 5 has them but still says MPI 3.1.
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define REPRISE_MPI_4 1
#else
#define REPRISE_MPI_4 0
#endif

namespace reprise::interpose {

/// Bytes of `count` elements of `type`; whether they lie contiguously from the buffer's address.
std::size_t bytes_of(int count, MPI_Datatype type);
bool contiguous(MPI_Datatype type);
/// MPI_Type_free: the handle's cached size and layout are forgotten.
void forget_type(MPI_Datatype type);
MPI_Aint extent_of(MPI_Datatype type);

/// The job rank (Comm's) of `rank` in `c`; refuses ranks outside it, and MPI_ANY_SOURCE unless `any_source` (a
/// receive or a probe: then MPI_ANY_SOURCE is returned). MPI_PROC_NULL passes.
int peer(const VComm& c, int rank, const char* call, bool any_source = false);
/// Comm's tag for the program's `tag` on `c`; refuses MPI_ANY_TAG and tags above the program's MPI_TAG_UB.
int wire_tag(const VComm& c, int tag, const char* call);
/// The wire tags a receive or a probe of `tag` on `c` matches: that one, or (MPI_ANY_TAG) the program's range on c.
std::pair<int, int> wire_tags(const VComm& c, int tag, const char* call);
inline int collective_tag(const VComm& c) {
  return Wrapped::get().tags().collective(c.context);
}

/// The library's group of `c`'s ranks (job ranks of the runtime's communicator), as MPI_Comm_group gives it.
MPI_Group job_group(const VComm& c);

/// After a rollback: the files the program opened on its communicators (files.cpp) are closed (their handles died
/// with its stack).
void close_files_after_rollback();
/// The region kFilesRegion: the files open now (a checkpoint), or room for `bytes` of them (a restore).
std::pair<void*, std::size_t> locate_files(std::optional<std::size_t> bytes);
/// After the program's restore(): each file open at the version, opened again by the set-up, gets back its pointer.
void files_restored();

/// A status as MPI fills it (MPI_Get_count reads the count set here).
void fill_status(MPI_Status* status, int source, int tag, std::size_t bytes);

// Attributes (attributes.cpp): MPI_Comm_dup copies those of `from` to `to` through their keyvals' copy callbacks;
// MPI_Comm_free deletes those of `c` through their delete callbacks (last set, first deleted). The callbacks run as
// the program's code: their MPI calls are served.
void copy_attributes(MPI_Comm from_handle, const VComm& from, VComm& to);
void delete_attributes(MPI_Comm handle, VComm& c);

/// MPI_Comm_dup of an intercommunicator (intercomm.cpp): the same groups on a context free in both.
MPI_Comm dup_intercomm(VComm& c);

// Collectives over Comm's point-to-point (collectives.cpp): the same tree every time, so results are
// bit-reproducible and replayable.
void allreduce_bits(VComm& c, std::uint64_t* words, std::size_t count);  // bitwise OR of `count` words
std::vector<std::int64_t> allgather_ints(VComm& c, const std::vector<std::int64_t>& mine);
/// The sum of `mine` over the ranks of `c` before this one (a chain in rank order, as MPI_Exscan's), and in `total`
/// over all of them.
std::int64_t exscan_sum(VComm& c, std::int64_t mine, std::int64_t* total);
/// A sparse exchange over `c`: `records` of `words` words each, the first naming the rank of `c` it is for, delivered
/// there in log2(size) rounds of one message per partner, nothing held per rank of `c`. Returns the records for this
/// rank (their order depends on the routes: the caller sorts them).
std::vector<std::int64_t> route(VComm& c, std::vector<std::int64_t> records, std::size_t words);

}  // namespace reprise::interpose
