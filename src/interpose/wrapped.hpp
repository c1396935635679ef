// The interposition's state (libreprise_interpose.so): the runtime MPI_Init started, the program's communicators
// and requests, and the rule that decides who serves a call. A program linked with it (or with it in LD_PRELOAD)
// calls our MPI_* functions; each serves the call when it comes from the program's thread with one of the
// program's handles (MPI_COMM_WORLD, a communicator derived from it, a request made by a call served here), and
// otherwise calls the library (PMPI_*): the runtime's own MPI calls, on its own communicators and threads, reach the
// library unchanged. Served point-to-point goes through reprise::Comm (logged between groups, replayed after a
// failure); collectives are built on it. What cannot be served correctly is refused at the call (refused.cpp).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "reprise/comm.hpp"
#include "reprise/mpi.hpp"

namespace reprise::interpose {

/// A communicator of the program: its ranks are a list of the job's (Comm's) ranks; messages on it carry its
/// context in their tags (wire tag = context * kTagsPerContext + tag; the last tag of a context is its
/// collectives').
struct VComm {
  static constexpr std::uint64_t kMagic = 0x52505256434f4d4dull;  // "RPRVCOMM"
  std::uint64_t magic = kMagic;
  int context = 0;
  int rank = 0;
  int size = 0;
  std::vector<int> members;        // comm rank -> job rank; empty: the identity (MPI_COMM_WORLD and its duplicates)
  std::vector<int> dims, periods;  // a Cartesian communicator (row-major, as MPI numbers it)
  int job_rank(int r) const { return members.empty() ? r : members[static_cast<std::size_t>(r)]; }
};

/// A request made by a served call.
struct VRequest {
  static constexpr std::uint64_t kMagic = 0x5250525652455155ull;  // "RPRVREQU"
  std::uint64_t magic = kMagic;
  Comm::Request request;
  bool receive = false;
  bool null_peer = false;               // MPI_PROC_NULL: complete at once
  int source = MPI_PROC_NULL, tag = 0;  // as the program knows them (its communicator's rank, its tag)
  void* buf = nullptr;                  // the program's buffer (a non-contiguous type: unpacked into it)
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::vector<std::byte> packed;  // a non-contiguous datatype's bytes
  bool done = false;              // completed on Comm (by a test that could not yet complete all it was given)
  std::size_t result = 0;         // then, the bytes received or sent
};

inline constexpr int kTagsPerContext = 2048;  // tags 0..2046 for the program; 2047 for collectives
inline constexpr int kContexts = 15;          // 15 * 2048 tags: Comm takes 0..32766
inline constexpr int kTagUb = kTagsPerContext - 2;

/// True when the calling thread is the program's (the one that called MPI_Init) outside a served call: only then
/// is a call the program's own.
bool serving();
/// Whether a handle is the program's (served here).
bool ours(MPI_Comm c);
bool ours(MPI_Request r);
/// Stops the job: `call` is refused on the program's handles, and why (MPI_Abort, exit status 2).
[[noreturn]] void refuse(const char* call, const std::string& why);

class Wrapped {
 public:
  static Wrapped& get();
  /// After PMPI_Init_thread: starts the runtime (a replacement process joins the job here).
  void start();
  /// MPI_Finalize: the runtime's uniform end (MpiRuntime::finish), then the runtime goes.
  void stop();
  bool started() const { return rt_ != nullptr; }
  MpiRuntime& runtime();
  Comm& comm() { return runtime().messages(); }

  VComm* find(MPI_Comm c);
  /// The program's communicator `c`, or a refusal naming `call` (a handle not derived from MPI_COMM_WORLD).
  VComm& vcomm(MPI_Comm c, const char* call);
  MPI_Comm handle(VComm* v) { return reinterpret_cast<MPI_Comm>(v); }
  /// A new communicator of `parent`'s members `members` (parent ranks, in the new order); collective over
  /// `parent` (every member calls it, `members` empty where this rank is not in it). Agrees on a free context.
  MPI_Comm derive(VComm& parent, const std::vector<int>& members, bool in_it);
  void free(MPI_Comm* c);

  VRequest* find(MPI_Request r);
  MPI_Request handle(VRequest* r) { return reinterpret_cast<MPI_Request>(r); }
  MPI_Request adopt(std::unique_ptr<VRequest> r);
  std::unique_ptr<VRequest> release(MPI_Request* r);

  bool app_thread() const;
  int depth = 0;  // served calls under way on the program's thread (their own MPI calls go to the library)

 private:
  std::unique_ptr<MpiRuntime> rt_;
  VComm world_;
  std::unordered_set<VComm*> comms_;
  std::unordered_set<VRequest*> requests_;
  std::uint32_t contexts_used_ = 1;  // bit c: context c is in use here (0: MPI_COMM_WORLD)
};

/// Inside a served call: the runtime's MPI calls go to the library.
class Serving {
 public:
  Serving() { ++Wrapped::get().depth; }
  ~Serving() { --Wrapped::get().depth; }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
};

}  // namespace reprise::interpose
