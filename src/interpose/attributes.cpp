// What a program hangs on its communicators besides their ranks: names (MPI_Comm_set_name), info hints
// (MPI_Comm_set_info) and attributes (MPI_Comm_set_attr with keyvals of MPI_Comm_create_keyval), as libraries
// that cache their state on the program's communicator use them. None of it is kept with a version: after a
// rollback the set-up that made the communicators sets them again (the old values are dropped without their delete
// callbacks: the program they belonged to is gone).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/serve.hpp"
#include "interpose/wrapped.hpp"

namespace reprise::interpose {
namespace {

// A keyval's callbacks, from MPI_Comm_create_keyval (the library makes the keyval; its callbacks are called here
// for the program's communicators, which the library does not know).
struct Keyval {
  MPI_Comm_copy_attr_function* copy = nullptr;
  MPI_Comm_delete_attr_function* del = nullptr;
  void* extra_state = nullptr;
};

std::mutex keyvals_mutex;  // (a keyval may be made on any thread)
std::map<int, Keyval> keyvals;

Keyval keyval_of(int keyval, const char* call) {
  const std::lock_guard<std::mutex> lock(keyvals_mutex);
  const auto k = keyvals.find(keyval);
  if (k == keyvals.end())
    refuse(call, "keyval " + std::to_string(keyval) +
                     " was not made by MPI_Comm_create_keyval (a predefined attribute cannot be set)");
  return k->second;
}

// A callback of the program runs as its code: its own MPI calls on the program's communicators are served (the
// served call that runs it is left for that time).
class AsProgram {
 public:
  AsProgram() : depth_(Wrapped::get().depth) { Wrapped::get().depth = 0; }
  ~AsProgram() { Wrapped::get().depth = depth_; }
  AsProgram(const AsProgram&) = delete;
  AsProgram& operator=(const AsProgram&) = delete;

 private:
  int depth_;
};

void delete_one(MPI_Comm handle, int keyval, void* value, const char* call) {
  const Keyval k = keyval_of(keyval, call);
  if (!k.del) return;
  int rc = MPI_SUCCESS;
  {
    const AsProgram as_program;
    rc = k.del(handle, keyval, value, k.extra_state);
  }
  if (rc != MPI_SUCCESS)
    refuse(call, "the delete callback of keyval " + std::to_string(keyval) + " returned error " + std::to_string(rc));
}

}  // namespace

void copy_attributes(MPI_Comm from_handle, const VComm& from, VComm& to) {
  for (const auto& [keyval, value] : from.attributes) {
    const Keyval k = keyval_of(keyval, "MPI_Comm_dup");
    if (!k.copy) continue;
    void* copied = nullptr;
    int flag = 0, rc = MPI_SUCCESS;
    {
      const AsProgram as_program;
      rc = k.copy(from_handle, keyval, k.extra_state, value, &copied, &flag);
    }
    if (rc != MPI_SUCCESS)
      refuse("MPI_Comm_dup",
             "the copy callback of keyval " + std::to_string(keyval) + " returned error " + std::to_string(rc));
    if (flag) to.attributes.emplace_back(keyval, copied);
  }
}

void delete_attributes(MPI_Comm handle, VComm& c) {
  while (!c.attributes.empty()) {
    const auto [keyval, value] = c.attributes.back();
    c.attributes.pop_back();
    delete_one(handle, keyval, value, "MPI_Comm_free");
  }
}

}  // namespace reprise::interpose

using reprise::interpose::ours;
using reprise::interpose::serving;
using reprise::interpose::VComm;
using reprise::interpose::Wrapped;
namespace ri = reprise::interpose;

// Every keyval's callbacks are noted (the library's keyval is the program's handle): the program's communicators
// are not the library's, so their attributes' callbacks are called here.
extern "C" int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* copy, MPI_Comm_delete_attr_function* del,
                                      int* keyval, void* extra_state) {
  const int rc = PMPI_Comm_create_keyval(copy, del, keyval, extra_state);
  if (rc == MPI_SUCCESS) {
    const std::lock_guard<std::mutex> lock(ri::keyvals_mutex);
    ri::keyvals[*keyval] = ri::Keyval{copy, del, extra_state};
  }
  return rc;
}

extern "C" int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void* value) {
  if (!serving() || !ours(comm)) return PMPI_Comm_set_attr(comm, keyval, value);
  REPRISE_SERVE("MPI_Comm_set_attr", {
    VComm& c = Wrapped::get().vcomm(comm, "MPI_Comm_set_attr");
    ri::keyval_of(keyval, "MPI_Comm_set_attr");
    const auto old =
        std::find_if(c.attributes.begin(), c.attributes.end(), [keyval](const auto& a) { return a.first == keyval; });
    if (old != c.attributes.end()) {  // the old value is deleted first (MPI's rule)
      void* before = old->second;
      c.attributes.erase(old);
      ri::delete_one(comm, keyval, before, "MPI_Comm_set_attr");
    }
    c.attributes.emplace_back(keyval, value);
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_delete_attr(MPI_Comm comm, int keyval) {
  if (!serving() || !ours(comm)) return PMPI_Comm_delete_attr(comm, keyval);
  REPRISE_SERVE("MPI_Comm_delete_attr", {
    VComm& c = Wrapped::get().vcomm(comm, "MPI_Comm_delete_attr");
    const auto at =
        std::find_if(c.attributes.begin(), c.attributes.end(), [keyval](const auto& a) { return a.first == keyval; });
    if (at == c.attributes.end())
      reprise::interpose::refuse("MPI_Comm_delete_attr",
                                 "keyval " + std::to_string(keyval) + " has no attribute on this communicator");
    void* value = at->second;
    c.attributes.erase(at);
    ri::delete_one(comm, keyval, value, "MPI_Comm_delete_attr");
  });
  return MPI_SUCCESS;
}

// The program's own keyvals from the communicator; the predefined ones: MPI_TAG_UB is the interposition's (each
// communicator takes a range of the library's tags: TagLayout), the others (MPI_WTIME_IS_GLOBAL, ...) the job's.
extern "C" int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void* value, int* flag) {
  if (!serving() || !ours(comm)) return PMPI_Comm_get_attr(comm, keyval, value, flag);
  if (keyval == MPI_TAG_UB) {
    static int tag_ub = 0;
    tag_ub = Wrapped::get().tags().tag_ub();
    *static_cast<int**>(value) = &tag_ub;
    *flag = 1;
    return MPI_SUCCESS;
  }
  {
    const std::lock_guard<std::mutex> lock(ri::keyvals_mutex);
    if (ri::keyvals.count(keyval)) {
      const VComm& c = Wrapped::get().vcomm(comm, "MPI_Comm_get_attr");
      const auto at =
          std::find_if(c.attributes.begin(), c.attributes.end(), [keyval](const auto& a) { return a.first == keyval; });
      *flag = at != c.attributes.end() ? 1 : 0;
      if (*flag) *static_cast<void**>(value) = at->second;
      return MPI_SUCCESS;
    }
  }
  return PMPI_Comm_get_attr(Wrapped::get().runtime().comm(), keyval, value, flag);
}

// MPI-1's names for the same (deprecated, still in MPI 4).
extern "C" int MPI_Attr_put(MPI_Comm comm, int keyval, void* value) {
  if (!serving() || !ours(comm)) return PMPI_Comm_set_attr(comm, keyval, value);  // (the same call)
  return MPI_Comm_set_attr(comm, keyval, value);
}

extern "C" int MPI_Attr_get(MPI_Comm comm, int keyval, void* value, int* flag) {
  if (!serving() || !ours(comm)) return PMPI_Comm_get_attr(comm, keyval, value, flag);
  return MPI_Comm_get_attr(comm, keyval, value, flag);
}

extern "C" int MPI_Attr_delete(MPI_Comm comm, int keyval) {
  if (!serving() || !ours(comm)) return PMPI_Comm_delete_attr(comm, keyval);
  return MPI_Comm_delete_attr(comm, keyval);
}

extern "C" int MPI_Comm_set_name(MPI_Comm comm, const char* name) {
  if (!serving() || !ours(comm)) return PMPI_Comm_set_name(comm, name);
  VComm& c = Wrapped::get().vcomm(comm, "MPI_Comm_set_name");
  c.name.assign(name, strnlen(name, MPI_MAX_OBJECT_NAME - 1));
  return MPI_SUCCESS;
}

// MPI_COMM_WORLD is named so until the program names it; another communicator has an empty name.
extern "C" int MPI_Comm_get_name(MPI_Comm comm, char* name, int* length) {
  if (!serving() || !ours(comm)) return PMPI_Comm_get_name(comm, name, length);
  const VComm& c = Wrapped::get().vcomm(comm, "MPI_Comm_get_name");
  const std::string n = c.name.empty() && comm == MPI_COMM_WORLD ? "MPI_COMM_WORLD" : c.name;
  std::memcpy(name, n.c_str(), n.size() + 1);
  *length = static_cast<int>(n.size());
  return MPI_SUCCESS;
}

// Info hints: none changes what the interposition does, so a communicator's info is empty.
extern "C" int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  if (!serving() || !ours(comm)) return PMPI_Comm_set_info(comm, info);
  Wrapped::get().vcomm(comm, "MPI_Comm_set_info");
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_get_info(MPI_Comm comm, MPI_Info* info) {
  if (!serving() || !ours(comm)) return PMPI_Comm_get_info(comm, info);
  Wrapped::get().vcomm(comm, "MPI_Comm_get_info");
  return PMPI_Info_create(info);
}

// ---- Error handlers ----------------------------------------------------------------------------------------------
// A served call that fails stops the job with a message (serve.hpp), whatever handler the program set: MPI's errors
// on the program's communicators are the runtime's to handle (a failed process is recovered, not returned). The
// handler is kept all the same, as libraries save, replace and restore it: MPI_Comm_get_errhandler gives it back, a
// new communicator inherits its parent's, and MPI_Comm_call_errhandler calls it as MPI would. The library counts
// references to a handler: the interposition holds one to each handler the program set (so it outlives the program's
// MPI_Errhandler_free) and gives the program one of its own at each get, both through a communicator of the
// library's that carries nothing else (a duplicate of MPI_COMM_SELF).
namespace reprise::interpose {
namespace {

std::mutex errhandlers_mutex;
std::map<MPI_Errhandler, MPI_Comm_errhandler_function*> errhandler_functions;  // from MPI_Comm_create_errhandler
std::vector<MPI_Errhandler> errhandlers_held;

MPI_Comm errhandler_carrier() {
  static MPI_Comm carrier = [] {
    MPI_Comm c = MPI_COMM_NULL;
    PMPI_Comm_dup(MPI_COMM_SELF, &c);
    return c;
  }();
  return carrier;
}

// A reference of the library's to `handler`, or a refusal naming `call` (not an error handler).
MPI_Errhandler referenced(MPI_Errhandler handler, const char* call) {
  MPI_Errhandler out = MPI_ERRHANDLER_NULL;
  if (handler == MPI_ERRHANDLER_NULL || PMPI_Comm_set_errhandler(errhandler_carrier(), handler) != MPI_SUCCESS ||
      PMPI_Comm_get_errhandler(errhandler_carrier(), &out) != MPI_SUCCESS)
    refuse(call, "the handle given is not an error handler");
  return out;
}

[[noreturn]] void fatal(MPI_Comm comm, int code, const char* handler) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  if (PMPI_Error_string(code, text, &length) != MPI_SUCCESS) text[0] = '\0';
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr,
               "reprise: rank %d: MPI_Comm_call_errhandler: the program raised error %d (%s) on communicator %p, "
               "whose error handler is %s: the job stops (MPI_Abort with that code); committed checkpoints are "
               "kept.\n",
               rank, code, text, static_cast<void*>(comm), handler);
  std::fflush(nullptr);
  PMPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function* function, MPI_Errhandler* handler) {
  const int rc = PMPI_Comm_create_errhandler(function, handler);
  if (rc == MPI_SUCCESS) {
    const std::lock_guard<std::mutex> lock(ri::errhandlers_mutex);
    ri::errhandler_functions[*handler] = function;
  }
  return rc;
}

extern "C" int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler handler) {
  if (!serving() || !ours(comm)) return PMPI_Comm_set_errhandler(comm, handler);
  REPRISE_SERVE("MPI_Comm_set_errhandler", {
    VComm& c = Wrapped::get().vcomm(comm, "MPI_Comm_set_errhandler");
    const std::lock_guard<std::mutex> lock(ri::errhandlers_mutex);
    if (std::find(ri::errhandlers_held.begin(), ri::errhandlers_held.end(), handler) == ri::errhandlers_held.end())
      ri::errhandlers_held.push_back(ri::referenced(handler, "MPI_Comm_set_errhandler"));
    c.errhandler = handler;
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* handler) {
  if (!serving() || !ours(comm)) return PMPI_Comm_get_errhandler(comm, handler);
  REPRISE_SERVE("MPI_Comm_get_errhandler", {
    const VComm& c = Wrapped::get().vcomm(comm, "MPI_Comm_get_errhandler");
    *handler = ri::referenced(c.errhandler, "MPI_Comm_get_errhandler");
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_call_errhandler(MPI_Comm comm, int code) {
  if (!serving() || !ours(comm)) return PMPI_Comm_call_errhandler(comm, code);
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  MPI_Comm_errhandler_function* function = nullptr;
  REPRISE_SERVE("MPI_Comm_call_errhandler", {
    handler = Wrapped::get().vcomm(comm, "MPI_Comm_call_errhandler").errhandler;
    const std::lock_guard<std::mutex> lock(ri::errhandlers_mutex);
    const auto f = ri::errhandler_functions.find(handler);
    if (f != ri::errhandler_functions.end()) function = f->second;
  });
  if (handler == MPI_ERRORS_RETURN) return MPI_SUCCESS;
  if (handler == MPI_ERRORS_ARE_FATAL) ri::fatal(comm, code, "MPI_ERRORS_ARE_FATAL");
#if REPRISE_MPI_4
  if (handler == MPI_ERRORS_ABORT) ri::fatal(comm, code, "MPI_ERRORS_ABORT");
#endif
  if (!function)
    ri::refuse("MPI_Comm_call_errhandler",
               "the communicator's error handler was not made by "
               "MPI_Comm_create_errhandler, so there is no function to call");
  MPI_Comm handle = comm;
  function(&handle, &code);  // (the program's code: its MPI calls are served)
  return MPI_SUCCESS;
}
