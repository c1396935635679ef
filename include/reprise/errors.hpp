// Reprise error hierarchy. Every failure the runtime reports is one of these; the message says what happened
// and what to do about it.
#pragma once

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

}  // namespace reprise
