// One file per rank per version: DIR/rank-<r>/version-<v>.reprise. A file appears only complete: it is written
// under a temporary name, fsync'ed, renamed, and the directory fsync'ed. DIR/job.reprise records the job's rank
// count; DIR/previous-<k>/rank-<r> holds what a relaunch set aside.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/format.hpp"
#include "core/version_store.hpp"
#include "reprise/errors.hpp"

namespace reprise::core {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void make_dirs(const std::string& path) {
  std::string cur;
  for (std::size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
        throw StoreError("cannot create checkpoint directory " + cur + ": " + errno_text() +
                         " (check REPRISE_DIR and its permissions)");
    }
    if (i < path.size()) cur.push_back(path[i]);
  }
}

void write_all(int fd, const void* data, std::size_t bytes, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, std::min<std::size_t>(bytes, std::size_t(1) << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw StoreError("cannot write " + path + ": " + errno_text() + " (disk full?)");
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void read_all(int fd, void* data, std::size_t bytes, const std::string& path) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, p, std::min<std::size_t>(bytes, std::size_t(1) << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw StoreError("cannot read " + path + ": " + errno_text());
    if (n == 0) throw CorruptCheckpointError(path, "truncated: file ended early");
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void sync_dir(const std::string& path) {
  Fd d(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() >= 0) ::fsync(d.get());
}

std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Complete or not at all: the pieces go to a temporary file, fsync'ed, renamed to `path`, its folder fsync'ed.
void write_durably(const std::string& path, std::initializer_list<std::pair<const void*, std::size_t>> pieces) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw StoreError("cannot create " + tmp + ": " + errno_text());
    try {
      for (const auto& [data, bytes] : pieces)
        if (bytes) write_all(fd.get(), data, bytes, tmp);
      if (::fsync(fd.get()) != 0) throw StoreError("fsync " + tmp + " failed: " + errno_text());
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
    if (::close(fd.release()) != 0) {
      ::unlink(tmp.c_str());
      throw StoreError("close " + tmp + " failed: " + errno_text());
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw StoreError("cannot rename " + tmp + " to " + path + ": " + errno_text());
  }
  sync_dir(parent_of(path));
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string aside_folder(const std::string& dir, int k) {
  return dir + "/previous-" + std::to_string(k);
}

class DirectoryStore final : public VersionStore {
 public:
  DirectoryStore(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {
    rank_dir_ = rank_folder(dir_, rank_);
    make_dirs(rank_dir_);
    remove_stale_temporaries();
  }

  std::string describe() const override { return "directory " + rank_dir_; }
  std::string locate(std::uint64_t version) const override { return version_file_path(dir_, rank_, version); }

  void put(const Manifest& manifest, std::shared_ptr<const HostBytes> payload, std::uint64_t sum) override {
    const std::vector<std::byte> head = encode_head(manifest, sum);
    write_durably(locate(manifest.version),
                  {{head.data(), head.size()}, {payload ? payload->data() : nullptr, payload ? payload->size() : 0}});
  }

  std::vector<std::uint64_t> list() const override {
    std::vector<std::uint64_t> out;
    DIR* d = ::opendir(rank_dir_.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
      unsigned long long v = 0;
      char tail[16] = {};
      if (std::sscanf(e->d_name, "version-%llu.reprise%15s", &v, tail) == 1) out.push_back(v);
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }

  Manifest load_manifest(std::uint64_t version) const override {
    const std::string path = locate(version);
    Fd fd = open_version(path, version);
    return read_head(fd.get(), path).manifest;
  }

  StoredVersion load(std::uint64_t version, PayloadCheck check) const override {
    const std::string path = locate(version);
    Fd fd = open_version(path, version);
    Head head = read_head(fd.get(), path);
    auto payload = std::make_shared<HostBytes>(head.header.payload_bytes);
    read_all(fd.get(), payload->data(), head.header.payload_bytes, path);
    if (check == PayloadCheck::Chunks) verify_payload(head.header, head.manifest, payload->data(), path);
    return StoredVersion{std::move(head.manifest), std::move(payload), path};
  }

  void release(std::uint64_t version) override {
    const std::string path = locate(version);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw StoreError("cannot remove " + path + ": " + errno_text());
  }

 private:
  struct Head {
    Header header;
    Manifest manifest;
  };
  // Reads and checks header and manifest; leaves the file positioned at the payload.
  static Head read_head(int fd, const std::string& path) {
    const std::uint64_t size = file_size(fd, path);
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size, kHeaderBytes));
    std::byte hb[kHeaderBytes];
    read_all(fd, hb, n, path);
    Head head{decode_header(hb, n, path, size), {}};
    std::vector<std::byte> mb(head.header.manifest_bytes);
    read_all(fd, mb.data(), mb.size(), path);
    head.manifest = decode_head_manifest(head.header, mb.data(), path);
    return head;
  }
  Fd open_version(const std::string& path, std::uint64_t version) const {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ENOENT) throw RestoreError("version " + std::to_string(version) + " is missing: no file " + path);
      throw StoreError("cannot open " + path + ": " + errno_text());
    }
    return Fd(fd.release());
  }
  static std::uint64_t file_size(int fd, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw StoreError("cannot stat " + path + ": " + errno_text());
    return static_cast<std::uint64_t>(st.st_size);
  }
  void remove_stale_temporaries() const {
    DIR* d = ::opendir(rank_dir_.c_str());
    if (!d) return;
    while (dirent* e = ::readdir(d))
      if (std::strstr(e->d_name, ".reprise.tmp.")) ::unlink((rank_dir_ + "/" + e->d_name).c_str());
    ::closedir(d);
  }

  std::string dir_;
  int rank_;
  std::string rank_dir_;
};

}  // namespace

std::string version_file_path(const std::string& dir, int rank, std::uint64_t version) {
  char name[64];
  std::snprintf(name, sizeof name, "/version-%012llu.reprise", static_cast<unsigned long long>(version));
  return rank_folder(dir, rank) + name;
}

std::string rank_folder(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank);
}

namespace {
constexpr const char* kJobRecord = "/job.reprise";
}  // namespace

namespace {
// "reprise job\nranks N\n" and the XXH3-64 of those lines: a flipped or truncated record is told apart.
std::string job_record_text(int ranks) {
  return "reprise job\nranks " + std::to_string(ranks) + "\n";
}
std::string job_record_checksum(const std::string& text) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(checksum64(text.data(), text.size())));
  return hex;
}
}  // namespace

std::optional<int> read_job_ranks(const std::string& dir) {
  const std::string path = dir + kJobRecord;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw StoreError("cannot open " + path + ": " + errno_text());
  }
  char text[256] = {};
  std::size_t got = 0;
  for (;;) {
    const ssize_t n = ::read(fd.get(), text + got, sizeof text - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw StoreError("cannot read " + path + ": " + errno_text());
    if (n == 0 || (got += static_cast<std::size_t>(n)) == sizeof text - 1) break;
  }
  const std::string all(text, got);
  int ranks = 0;
  char sum[17] = {};
  char tail = 0;
  const int fields = std::sscanf(all.c_str(), "reprise job\nranks %d\nchecksum %16[0-9a-f]\n%c", &ranks, sum, &tail);
  if (fields < 1 || ranks < 1 ||
      all != job_record_text(ranks) + (fields >= 2 ? "checksum " + std::string(sum) + "\n" : ""))
    throw CorruptCheckpointError(path,
                                 "not a Reprise job record (expected \"reprise job\", \"ranks N\" and its checksum): "
                                 "restore it, or move the directory aside to start afresh");
  // (A record of two lines is one written before the checksum existed: accepted, as it was then.)
  if (fields >= 2 && job_record_checksum(job_record_text(ranks)) != sum)
    throw CorruptCheckpointError(path, "the job record's checksum does not match its rank count (" +
                                           std::to_string(ranks) +
                                           "): it was damaged. Restore it, or move the directory aside to start "
                                           "afresh");
  return ranks;
}

void write_job_ranks(const std::string& dir, int ranks) {
  make_dirs(dir);
  const std::string lines = job_record_text(ranks);
  const std::string text = lines + "checksum " + job_record_checksum(lines) + "\n";
  write_durably(dir + kJobRecord, {{text.data(), text.size()}});
}

int next_set_aside(const std::string& dir, int rank) {
  int k = 1;
  while (exists(rank_folder(aside_folder(dir, k), rank))) ++k;
  return k;
}

std::string set_aside(const std::string& dir, int rank, int k) {
  const std::string aside = aside_folder(dir, k), from = rank_folder(dir, rank);
  std::string to = rank_folder(aside, rank);
  make_dirs(aside);
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw StoreError("cannot move " + from + " to " + to + ": " + errno_text());
  make_dirs(from);
  sync_dir(aside);
  sync_dir(dir);
  return to;
}

std::vector<std::uint64_t> set_aside_newer(const std::string& dir, int rank, int k, std::uint64_t version) {
  std::vector<std::uint64_t> moved;
  for (std::uint64_t v : make_directory_store(dir, rank)->list()) {
    if (v <= version) continue;
    if (moved.empty()) make_dirs(rank_folder(aside_folder(dir, k), rank));
    const std::string from = version_file_path(dir, rank, v), to = version_file_path(aside_folder(dir, k), rank, v);
    if (exists(to)) throw StoreError("cannot move " + from + " to " + to + ": the target exists");
    if (::rename(from.c_str(), to.c_str()) != 0)
      throw StoreError("cannot move " + from + " to " + to + ": " + errno_text());
    moved.push_back(v);
  }
  if (!moved.empty()) {
    sync_dir(rank_folder(aside_folder(dir, k), rank));
    sync_dir(rank_folder(dir, rank));
  }
  return moved;
}

std::vector<int> list_store_ranks(const std::string& dir) {
  std::vector<int> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    int r = -1;
    char tail = 0;
    if (std::sscanf(e->d_name, "rank-%d%c", &r, &tail) == 1 && r >= 0) out.push_back(r);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<VersionStore> make_directory_store(const std::string& dir, int rank) {
  return std::make_unique<DirectoryStore>(dir, rank);
}

}  // namespace reprise::core
