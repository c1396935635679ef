// MPI-IO on the program's communicators (MPI_File_open). The library opens the file at each rank on
// MPI_COMM_SELF, so the library's collective I/O reaches no other rank (its communicators are not the program's:
// nothing would log or replay them, and a failure breaks them); what the ranks of the communicator must agree on or
// do once goes over Comm on the communicator's collective channel, as its collectives do (logged between groups,
// replayed after a failure). Reads, writes and views go to the library as they are: a group that rolls back runs its
// steps again and writes its ranks' bytes again, the other groups' bytes stay.
// Done once, by the communicator's rank 0, who then tells each rank: an exclusive creation (MPI_MODE_EXCL) and a
// size set (MPI_File_set_size cuts what the ranks wrote past it). Run again after a rollback, rank 0 does it again
// only where its first execution had not been (Comm::reexecuting): the ranks that went on after it may have
// written since, which a second cut would lose. MPI_File_delete, by one rank, is skipped likewise.
// Refused on these files: the shared file pointer (MPI_File_*_shared, MPI_File_*_ordered*: one pointer for all
// ranks, which per-rank files do not share) and atomic mode (MPI_File_set_atomicity: across ranks' handles).
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "interpose/nonblocking.hpp"
#include "interpose/serve.hpp"
#include "interpose/wrapped.hpp"

namespace reprise::interpose {
namespace {

// A file the program opened on one of its communicators: that communicator as it was at the open (MPI's file
// keeps its own, so the program may free it) and the access mode the program gave.
struct OpenFile {
  VComm comm;
  int amode = 0;
};

std::map<MPI_File, OpenFile>& open_files() {
  static std::map<MPI_File, OpenFile> files;
  return files;
}

OpenFile* served(MPI_File fh) {
  const auto it = open_files().find(fh);
  return it == open_files().end() ? nullptr : &it->second;
}

std::string error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  PMPI_Error_string(rc, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

// Every rank of `c` gets the lowest error class any rank got (MPI_SUCCESS when every one did), so that all open the
// file or none does. The ranks must give the same name and access mode (MPI's rule): checked, as `key`'s bits and
// their complement ORed over the ranks (both have a bit set only where ranks differ).
int agree(VComm& c, int rc, std::uint64_t key) {
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS && PMPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = MPI_ERR_OTHER;
  if (cls < 0 || cls >= 128) cls = MPI_ERR_OTHER;
  std::uint64_t words[4] = {0, 0, key, ~key};
  if (cls != MPI_SUCCESS) words[cls / 64] |= std::uint64_t{1} << (cls % 64);
  allreduce_bits(c, words, 4);
  if ((words[2] & words[3]) != 0)
    refuse("MPI_File_open",
           "the ranks of the communicator gave different file names or access modes (MPI requires the same at every "
           "rank)");
  for (int k = 0; k < 128; ++k)
    if ((words[k / 64] >> (k % 64) & 1u) != 0) return k;
  return MPI_SUCCESS;
}

// Rank 0 of `c` does `act` and tells every other rank its result, each directly: no rank goes on before rank 0
// did it. `act(again)`: `again` when rank 0 rolled back and runs again where it had been (a rank of another group
// has a message it is yet to send: Comm::reexecuting), so it did this the first time and the others may have acted
// on it since; otherwise none of them heard of it (each hears from rank 0 itself), and it can be done again.
int once_at_rank_0(VComm& c, const std::function<int(bool again)>& act) {
  carry_out_collectives();  // (after the collectives started before, as every collective)
  Comm& m = Wrapped::get().comm();
  int rc = MPI_SUCCESS;
  if (c.rank == 0) {
    rc = act(m.reexecuting());
    for (int r = 1; r < c.size; ++r) m.send(&rc, 1, c.job_rank(r), collective_tag(c));
  } else {
    m.recv(&rc, 1, c.job_rank(0), collective_tag(c));
  }
  return rc;
}

// Every rank of `c` came (a rank's writes before the call are in the file before rank 0 cuts it).
void barrier(VComm& c) {
  std::uint64_t nothing = 0;
  allreduce_bits(c, &nothing, 1);
}

int open(MPI_Comm comm, const char* filename, int amode, MPI_Info info, MPI_File* fh) {
  Wrapped& w = Wrapped::get();
  VComm& c = w.intra(comm, "MPI_File_open");
  if ((amode & MPI_MODE_DELETE_ON_CLOSE) != 0)
    refuse("MPI_File_open",
           "MPI_MODE_DELETE_ON_CLOSE is not supported under Reprise: a group that rolls back would run again, on a "
           "file the others deleted, the steps that read or wrote it. Delete it once the job no longer needs it");
  const int existing = amode & ~(MPI_MODE_CREATE | MPI_MODE_EXCL);  // once the file exists
  *fh = MPI_FILE_NULL;
  if (w.replaying()) {
    // The set-up run again before restore(): the file was opened (and made) at its first execution; no message.
    const int rc = PMPI_File_open(MPI_COMM_SELF, filename, existing, info, fh);
    if (rc != MPI_SUCCESS)
      throw UsageError(std::string("run again after a rollback, could not open '") + filename +
                       "', which it opened the first time: " + error_text(rc));
    open_files()[*fh] = OpenFile{c, amode};
    return MPI_SUCCESS;
  }
  int rc = MPI_SUCCESS;
  if ((amode & MPI_MODE_EXCL) != 0) {  // made by rank 0 alone (made again, it exists: opened), then opened
    rc = once_at_rank_0(
        c, [&](bool again) { return PMPI_File_open(MPI_COMM_SELF, filename, again ? existing : amode, info, fh); });
    if (c.rank != 0 && rc == MPI_SUCCESS) rc = PMPI_File_open(MPI_COMM_SELF, filename, existing, info, fh);
  } else {
    rc = PMPI_File_open(MPI_COMM_SELF, filename, amode, info, fh);
  }
  const std::uint64_t key = std::hash<std::string>{}(filename) ^ (static_cast<std::uint64_t>(amode) << 48);
  const int agreed = agree(c, rc, key);
  if (agreed != MPI_SUCCESS) {
    if (*fh != MPI_FILE_NULL) PMPI_File_close(fh);
    *fh = MPI_FILE_NULL;
    return agreed;
  }
  open_files()[*fh] = OpenFile{c, amode};
  return MPI_SUCCESS;
}

// MPI_File_close is collective: no rank goes on before every rank closed (its writes are in the file: MPI's
// close-then-open consistency).
int close(MPI_File* fh) {
  auto node = open_files().extract(*fh);
  const int rc = PMPI_File_close(fh);
  if (!Wrapped::get().replaying()) barrier(node.mapped().comm);
  return rc;
}

// MPI_File_set_size and MPI_File_preallocate (the same size at every rank): once every rank came, rank 0 sets it
// for all, once.
int resize(MPI_File fh, MPI_Offset size, bool preallocate) {
  if (Wrapped::get().replaying()) return MPI_SUCCESS;  // the set-up run again: done at its first execution
  VComm& c = served(fh)->comm;
  barrier(c);
  return once_at_rank_0(c, [&](bool again) {
    if (again) return MPI_SUCCESS;
    return preallocate ? PMPI_File_preallocate(fh, size) : PMPI_File_set_size(fh, size);
  });
}

[[noreturn]] void refuse_shared(const char* call) {
  refuse(call,
         "the shared file pointer is not supported on a file opened on the program's communicators under Reprise "
         "(each rank's file is its own there): give each rank's offset (MPI_File_write_at_all with an offset from "
         "MPI_Exscan of the sizes, as the ordered calls do)");
}

}  // namespace

void close_files_after_rollback() {
  for (auto& [handle, file] : open_files()) {
    MPI_File fh = handle;
    PMPI_File_close(&fh);  // (the program's handle died with its stack; nothing to report)
  }
  open_files().clear();
}

}  // namespace reprise::interpose

namespace ri = reprise::interpose;
using reprise::interpose::serving;

extern "C" int MPI_File_open(MPI_Comm comm, const char* filename, int amode, MPI_Info info, MPI_File* fh) {
  if (!serving() || !ri::ours(comm)) return PMPI_File_open(comm, filename, amode, info, fh);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_open", { rc = ri::open(comm, filename, amode, info, fh); });
  return rc;
}

extern "C" int MPI_File_close(MPI_File* fh) {
  if (!serving() || !ri::served(*fh)) return PMPI_File_close(fh);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_close", { rc = ri::close(fh); });
  return rc;
}

extern "C" int MPI_File_set_size(MPI_File fh, MPI_Offset size) {
  if (!serving() || !ri::served(fh)) return PMPI_File_set_size(fh, size);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_set_size", { rc = ri::resize(fh, size, false); });
  return rc;
}

extern "C" int MPI_File_preallocate(MPI_File fh, MPI_Offset size) {
  if (!serving() || !ri::served(fh)) return PMPI_File_preallocate(fh, size);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_preallocate", { rc = ri::resize(fh, size, true); });
  return rc;
}

// Run again where it had been (the set-up before restore(), or a rolled-back rank's steps before it is past where its
// first execution was: Comm::reexecuting), the file was deleted the first time, and what is there now was written
// since: kept.
extern "C" int MPI_File_delete(const char* filename, MPI_Info info) {
  if (!serving() || !ri::Wrapped::get().running()) return PMPI_File_delete(filename, info);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_delete", {
    ri::Wrapped& w = ri::Wrapped::get();
    if (!w.replaying() && !w.comm().reexecuting()) rc = PMPI_File_delete(filename, info);
  });
  return rc;
}

extern "C" int MPI_File_get_group(MPI_File fh, MPI_Group* group) {
  if (!serving() || !ri::served(fh)) return PMPI_File_get_group(fh, group);
  REPRISE_SERVE("MPI_File_get_group", { *group = ri::job_group(ri::served(fh)->comm); });
  return MPI_SUCCESS;
}

extern "C" int MPI_File_get_amode(MPI_File fh, int* amode) {
  if (!serving() || !ri::served(fh)) return PMPI_File_get_amode(fh, amode);
  *amode = ri::served(fh)->amode;
  return MPI_SUCCESS;
}

extern "C" int MPI_File_set_atomicity(MPI_File fh, int flag) {
  if (!serving() || !ri::served(fh) || flag == 0) return PMPI_File_set_atomicity(fh, flag);
  ri::refuse("MPI_File_set_atomicity",
             "atomic mode is not supported on a file opened on the program's communicators under Reprise (each "
             "rank's handle is its own there, and atomicity holds only within one): separate the ranks' "
             "conflicting accesses with MPI_File_sync and MPI_Barrier");
}

// The shared file pointer's calls, refused on the files opened here.
#define REPRISE_SHARED_POINTER(call, params, args)          \
  extern "C" int call params {                              \
    if (!serving() || !ri::served(fh)) return P##call args; \
    ri::refuse_shared(#call);                               \
  }
REPRISE_SHARED_POINTER(MPI_File_read_shared, (MPI_File fh, void* buf, int count, MPI_Datatype type, MPI_Status* status),
                       (fh, buf, count, type, status))
REPRISE_SHARED_POINTER(MPI_File_write_shared,
                       (MPI_File fh, const void* buf, int count, MPI_Datatype type, MPI_Status* status),
                       (fh, buf, count, type, status))
REPRISE_SHARED_POINTER(MPI_File_iread_shared,
                       (MPI_File fh, void* buf, int count, MPI_Datatype type, MPI_Request* request),
                       (fh, buf, count, type, request))
REPRISE_SHARED_POINTER(MPI_File_iwrite_shared,
                       (MPI_File fh, const void* buf, int count, MPI_Datatype type, MPI_Request* request),
                       (fh, buf, count, type, request))
REPRISE_SHARED_POINTER(MPI_File_read_ordered,
                       (MPI_File fh, void* buf, int count, MPI_Datatype type, MPI_Status* status),
                       (fh, buf, count, type, status))
REPRISE_SHARED_POINTER(MPI_File_write_ordered,
                       (MPI_File fh, const void* buf, int count, MPI_Datatype type, MPI_Status* status),
                       (fh, buf, count, type, status))
REPRISE_SHARED_POINTER(MPI_File_read_ordered_begin, (MPI_File fh, void* buf, int count, MPI_Datatype type),
                       (fh, buf, count, type))
REPRISE_SHARED_POINTER(MPI_File_read_ordered_end, (MPI_File fh, void* buf, MPI_Status* status), (fh, buf, status))
REPRISE_SHARED_POINTER(MPI_File_write_ordered_begin, (MPI_File fh, const void* buf, int count, MPI_Datatype type),
                       (fh, buf, count, type))
REPRISE_SHARED_POINTER(MPI_File_write_ordered_end, (MPI_File fh, const void* buf, MPI_Status* status),
                       (fh, buf, status))
REPRISE_SHARED_POINTER(MPI_File_seek_shared, (MPI_File fh, MPI_Offset offset, int whence), (fh, offset, whence))
REPRISE_SHARED_POINTER(MPI_File_get_position_shared, (MPI_File fh, MPI_Offset* offset), (fh, offset))
#undef REPRISE_SHARED_POINTER
