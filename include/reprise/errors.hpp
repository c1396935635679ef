// Reprise error hierarchy. Every failure the runtime reports is one of these; the message says what happened
// and what to do about it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace reprise {

/// Base of every error Reprise throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A configuration value (struct field or REPRISE_* variable) is invalid.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// The API was called in a way the runtime does not support (e.g. non-increasing versions, a
/// non-contiguous view, a region registered twice).
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A stored checkpoint is damaged or incomplete (truncated file, checksum mismatch, broken chain,
/// unknown format version). `where()` names the file or store entry.
class CorruptCheckpointError : public Error {
 public:
  CorruptCheckpointError(std::string where, const std::string& what)
      : Error(where + ": " + what), where_(std::move(where)) {}
  const std::string& where() const noexcept { return where_; }

 private:
  std::string where_;
};

/// A restore cannot be done as asked (no such version, region missing or of another size). Protected data
/// are left untouched when this is thrown.
class RestoreError : public Error {
 public:
  using Error::Error;
};

/// Writing or reading a store failed (I/O error, disk full).
class StoreError : public Error {
 public:
  using Error::Error;
};

/// A CUDA (or NCCL) call failed; the message names the call, the file and the line.
class DeviceError : public Error {
 public:
  using Error::Error;
};

/// A process failed and this rank's group rolls back (distributed runtime). The runtime has already repaired its
/// communicators and placed the data of `version()` where restore() finds them: catch it around the time loop,
/// call restore(), take the communicator again (MpiRuntime::comm()) and continue from the restored step.
///
/// `from_start()`: the failure came before any version was committed (no checkpoint had reached a buddy yet), so
/// there is nothing to restore and every rank starts the run over: initialise the protected data as at the first
/// start instead of calling restore() (replacement processes simply start from the beginning). The runtime has
/// dropped every stored version; the next checkpoint is a full one and may reuse earlier version numbers.
class Rollback : public Error {
 public:
  Rollback(std::uint64_t version, const std::string& what, bool from_start = false)
      : Error(what), version_(version), from_start_(from_start) {}
  std::uint64_t version() const noexcept { return version_; }
  bool from_start() const noexcept { return from_start_; }

 private:
  std::uint64_t version_;
  bool from_start_;
};

/// The hierarchical protocol met a state it must not go on from: a message out of sequence that never filled
/// its gap, an intra-group channel not empty at a group checkpoint, a re-executed send that differs from the
/// first execution (the application is not send-deterministic). The message says which processes and channel.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

/// Failures the runtime cannot recover from (e.g. a rank and its buddy lost together with no persistent level,
/// or no version every rank can restore). The message names the lost ranks; files already written stay intact.
/// The application should report it and exit non-zero.
class UnrecoverableFailure : public Error {
 public:
  using Error::Error;
};

}  // namespace reprise
