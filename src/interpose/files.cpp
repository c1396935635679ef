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
// The shared file pointer is kept here, the same at every rank, moved only by the collective calls: the ordered
// ones (each rank's block at the pointer plus the blocks of the ranks before it, as MPI_Exscan sums them over Comm)
// and MPI_File_seek_shared. A file open at a checkpoint is kept with the version as its place in the program's
// opens, its individual and shared pointers and its view (region kFilesRegion): after a rollback the set-up that runs
// again opens it again (locally) and sets its view, and the program's restore() moves its pointers back to where they
// were; one not opened again by the set-up, or whose view differs, stops the job with a message (there is no handle
// to give them back to). Refused: the shared pointer's calls by one rank (MPI_File_read_shared, _write_shared,
// _iread_shared, _iwrite_shared: the others' copies of the pointer would not move), atomic mode
// (MPI_File_set_atomicity: across ranks' handles) and MPI_MODE_DELETE_ON_CLOSE (a group that rolls back would run
// again, on a file the others deleted, the steps that used it).
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  std::uint64_t seq = 0;  // the program's seq-th served open since it started (or since its rollback)
  std::string name;
  // The shared file pointer (etypes of the view), moved only by the collective calls (MPI_File_*_ordered*,
  // MPI_File_seek_shared), so every rank holds the same one; MPI_File_set_view sets it to 0.
  MPI_Offset shared = 0;
};

std::uint64_t opens = 0;        // the program's served opens so far (counted again as its set-up runs again)
std::vector<std::byte> region;  // kFilesRegion: the files open at a version
constexpr std::int64_t kFilesMagic = 0x52505246494c4531;  // "RPRFILE1"

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
    open_files()[*fh] = OpenFile{c, amode, opens++, filename};
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
  open_files()[*fh] = OpenFile{c, amode, opens++, filename};
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
         "the shared file pointer moved by one rank is not supported on a file opened on the program's "
         "communicators under Reprise (each rank's handle is its own there, and the pointer is moved by the "
         "collective calls alone): use MPI_File_write_ordered (or _read_ordered), or each rank's own offsets");
}

void free_if_derived(MPI_Datatype t) {
  int integers = 0, addresses = 0, types = 0, combiner = MPI_COMBINER_NAMED;
  PMPI_Type_get_envelope(t, &integers, &addresses, &types, &combiner);
  if (combiner == MPI_COMBINER_NAMED) return;
  forget_type(t);
  PMPI_Type_free(&t);
}

// What a file's view is, as far as its pointer's offsets depend on it: the displacement, the etype's size, the
// filetype's size and extent, the data representation's name (hashed).
std::array<std::int64_t, 5> view_of(MPI_File fh) {
  MPI_Offset disp = 0;
  MPI_Datatype etype = MPI_DATATYPE_NULL, filetype = MPI_DATATYPE_NULL;
  char representation[MPI_MAX_DATAREP_STRING + 1] = {};
  PMPI_File_get_view(fh, &disp, &etype, &filetype, representation);
  int etype_size = 0, filetype_size = 0;
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_size(etype, &etype_size);
  PMPI_Type_size(filetype, &filetype_size);
  PMPI_Type_get_extent(filetype, &lb, &extent);
  free_if_derived(etype);
  free_if_derived(filetype);
  return {disp, etype_size, filetype_size, extent, static_cast<std::int64_t>(std::hash<std::string>{}(representation))};
}

// MPI_File_write_ordered and the others: the ranks' blocks one after the other in rank order from the shared
// pointer, each rank's place the sum of the blocks before it (exscan_sum over Comm, logged and replayed as every
// collective), then moved past them all; each rank reads or writes its block at its place (`io`, an explicit-offset
// call of the library).
int ordered(MPI_File fh, int count, MPI_Datatype type, const std::function<int(MPI_Offset)>& io) {
  OpenFile& f = *served(fh);
  const std::int64_t etype_size = std::max<std::int64_t>(view_of(fh)[1], 1);
  int type_size = 0;
  PMPI_Type_size(type, &type_size);
  const std::int64_t mine = static_cast<std::int64_t>(count) * type_size / etype_size;
  std::int64_t total = 0;
  const std::int64_t before = exscan_sum(f.comm, mine, &total);
  const MPI_Offset at = f.shared + before;
  f.shared += total;
  return io(at);
}

// MPI_File_seek_shared (collective, the same arguments at every rank): where the individual pointer would go, read
// back (MPI_SEEK_END: the end of the file in etypes of the view), the individual pointer left as it was.
int seek_shared(MPI_File fh, MPI_Offset offset, int whence) {
  OpenFile& f = *served(fh);
  if (whence == MPI_SEEK_CUR) {
    offset += f.shared;
    whence = MPI_SEEK_SET;
  }
  MPI_Offset individual = 0, to = 0;
  PMPI_File_get_position(fh, &individual);
  int rc = PMPI_File_seek(fh, offset, whence);
  if (rc == MPI_SUCCESS) rc = PMPI_File_get_position(fh, &to);
  PMPI_File_seek(fh, individual, MPI_SEEK_SET);
  if (rc != MPI_SUCCESS) return rc;
  barrier(f.comm);  // (MPI's is collective: no rank moves on before every rank moved it)
  f.shared = to;
  return MPI_SUCCESS;
}

}  // namespace

void close_files_after_rollback() {
  for (auto& [handle, file] : open_files()) {
    MPI_File fh = handle;
    PMPI_File_close(&fh);  // (the program's handle died with its stack; nothing to report)
  }
  open_files().clear();
  opens = 0;
}

// Words: magic, opens so far, count; per file its open's number, its individual and shared pointers (etypes of its
// view), its view (view_of), the length of its name and the name (padded to a word); zeros to a multiple of 64 words.
std::pair<void*, std::size_t> locate_files(std::optional<std::size_t> bytes) {
  if (bytes) {
    region.resize(*bytes);
    return {region.data(), region.size()};
  }
  std::vector<std::int64_t> w{kFilesMagic, static_cast<std::int64_t>(opens),
                              static_cast<std::int64_t>(open_files().size())};
  for (const auto& [fh, file] : open_files()) {
    MPI_Offset position = 0;
    PMPI_File_get_position(fh, &position);
    w.insert(w.end(), {static_cast<std::int64_t>(file.seq), position, file.shared});
    const auto view = view_of(fh);
    w.insert(w.end(), view.begin(), view.end());
    w.push_back(static_cast<std::int64_t>(file.name.size()));
    const std::size_t at = w.size();
    w.resize(at + (file.name.size() + sizeof(std::int64_t) - 1) / sizeof(std::int64_t));
    if (!file.name.empty()) std::memcpy(w.data() + at, file.name.data(), file.name.size());
  }
  // In steps of 512 bytes: the same size, the same place, so the version stays differential (a resizable region
  // that moves makes the next version a full one).
  w.resize((w.size() + 63) / 64 * 64);
  region.resize(w.size() * sizeof(std::int64_t));
  std::memcpy(region.data(), w.data(), region.size());
  return {region.data(), region.size()};
}

void files_restored() {
  std::vector<std::int64_t> w(region.size() / sizeof(std::int64_t));
  if (w.empty()) return;  // (a version of a run that opened no file through a checkpoint before this one)
  std::memcpy(w.data(), region.data(), w.size() * sizeof(std::int64_t));
  std::size_t at = 0;
  auto next = [&]() -> std::int64_t {
    if (at >= w.size()) throw Error("the interposition's table of open files in the checkpoint is truncated");
    return w[at++];
  };
  if (next() != kFilesMagic) throw Error("the interposition's table of open files in the checkpoint is not one");
  opens = static_cast<std::uint64_t>(next());
  const std::int64_t count = next();
  for (std::int64_t i = 0; i < count; ++i) {
    const auto seq = static_cast<std::uint64_t>(next());
    const MPI_Offset position = next(), shared = next();
    std::array<std::int64_t, 5> view{};
    for (std::int64_t& v : view) v = next();
    std::string name(static_cast<std::size_t>(next()), '\0');
    const std::size_t words = (name.size() + sizeof(std::int64_t) - 1) / sizeof(std::int64_t);
    if (at + words > w.size()) throw Error("the interposition's table of open files in the checkpoint is truncated");
    if (!name.empty()) std::memcpy(name.data(), w.data() + at, name.size());
    at += words;
    MPI_File fh = MPI_FILE_NULL;
    for (const auto& [handle, file] : open_files())
      if (file.seq == seq && file.name == name) fh = handle;
    if (fh == MPI_FILE_NULL)
      throw UsageError("the file '" + name +
                       "' was open at the version restored, and the program's set-up, run again before restore(), "
                       "did not open it again: open the files kept open across checkpoints in the set-up (as the "
                       "communicators it keeps), or open and close them between checkpoints");
    if (view_of(fh) != view)
      throw UsageError("the file '" + name +
                       "' had another view at the version restored than the one the set-up, run again before "
                       "restore(), gave it: set the view of a file kept open across checkpoints in the set-up");
    open_files()[fh].shared = shared;
    const int rc = PMPI_File_seek(fh, position, MPI_SEEK_SET);
    if (rc != MPI_SUCCESS)
      throw UsageError("the file '" + name +
                       "' could not be moved back to where its pointer was at the version: " + error_text(rc));
  }
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
#undef REPRISE_SHARED_POINTER

// The ordered calls and the shared pointer's collective moves: every rank holds the same shared pointer.
extern "C" int MPI_File_write_ordered(MPI_File fh, const void* buf, int count, MPI_Datatype type, MPI_Status* status) {
  if (!serving() || !ri::served(fh)) return PMPI_File_write_ordered(fh, buf, count, type, status);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_write_ordered", {
    rc = ri::ordered(fh, count, type,
                     [&](MPI_Offset at) { return PMPI_File_write_at(fh, at, buf, count, type, status); });
  });
  return rc;
}

extern "C" int MPI_File_read_ordered(MPI_File fh, void* buf, int count, MPI_Datatype type, MPI_Status* status) {
  if (!serving() || !ri::served(fh)) return PMPI_File_read_ordered(fh, buf, count, type, status);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_read_ordered", {
    rc = ri::ordered(fh, count, type,
                     [&](MPI_Offset at) { return PMPI_File_read_at(fh, at, buf, count, type, status); });
  });
  return rc;
}

extern "C" int MPI_File_write_ordered_begin(MPI_File fh, const void* buf, int count, MPI_Datatype type) {
  if (!serving() || !ri::served(fh)) return PMPI_File_write_ordered_begin(fh, buf, count, type);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_write_ordered_begin", {
    rc = ri::ordered(fh, count, type,
                     [&](MPI_Offset at) { return PMPI_File_write_at_all_begin(fh, at, buf, count, type); });
  });
  return rc;
}

extern "C" int MPI_File_write_ordered_end(MPI_File fh, const void* buf, MPI_Status* status) {
  if (!serving() || !ri::served(fh)) return PMPI_File_write_ordered_end(fh, buf, status);
  return PMPI_File_write_at_all_end(fh, buf, status);  // (begun as that)
}

extern "C" int MPI_File_read_ordered_begin(MPI_File fh, void* buf, int count, MPI_Datatype type) {
  if (!serving() || !ri::served(fh)) return PMPI_File_read_ordered_begin(fh, buf, count, type);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_read_ordered_begin", {
    rc = ri::ordered(fh, count, type,
                     [&](MPI_Offset at) { return PMPI_File_read_at_all_begin(fh, at, buf, count, type); });
  });
  return rc;
}

extern "C" int MPI_File_read_ordered_end(MPI_File fh, void* buf, MPI_Status* status) {
  if (!serving() || !ri::served(fh)) return PMPI_File_read_ordered_end(fh, buf, status);
  return PMPI_File_read_at_all_end(fh, buf, status);
}

extern "C" int MPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence) {
  if (!serving() || !ri::served(fh)) return PMPI_File_seek_shared(fh, offset, whence);
  int rc = MPI_SUCCESS;
  REPRISE_SERVE("MPI_File_seek_shared", { rc = ri::seek_shared(fh, offset, whence); });
  return rc;
}

extern "C" int MPI_File_get_position_shared(MPI_File fh, MPI_Offset* offset) {
  if (!serving() || !ri::served(fh)) return PMPI_File_get_position_shared(fh, offset);
  *offset = ri::served(fh)->shared;
  return MPI_SUCCESS;
}

// A new view puts both pointers at 0 (MPI's rule): the shared one is this file's.
extern "C" int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                                 const char* datarep, MPI_Info info) {
  const int rc = PMPI_File_set_view(fh, disp, etype, filetype, datarep, info);
  if (rc == MPI_SUCCESS && serving())
    if (ri::OpenFile* f = ri::served(fh)) f->shared = 0;
  return rc;
}
