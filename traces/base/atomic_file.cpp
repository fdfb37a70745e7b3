#include "traces/base/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ddp {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) open_errno_ = errno;
}

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_) std::remove(tmp_.c_str());
}

int AtomicFile::fd() const { return f_ ? ::fileno(f_) : -1; }

std::string AtomicFile::open_error() const { return "cannot write " + path_ + ": " + std::strerror(open_errno_); }

bool AtomicFile::commit(std::string& error) {
  if (!f_) {
    error = open_error();
    return false;
  }
  // A full disk may only show when the last block is written, or at close: every step is checked.
  // No fsync: the rename makes the file whole or absent for any process that reads it, also after a crash of ours;
  // surviving a power cut is the caller's choice (fsync(fd()) before commit), not a cost every export pays.
  bool ok = std::fflush(f_) == 0 && !std::ferror(f_);
  int err = ok ? 0 : errno;
  if (std::fclose(f_) != 0 && ok) {
    ok = false;
    err = errno;
  }
  f_ = nullptr;
  if (ok && std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    error = "write to " + path_ + " failed: " + std::strerror(err) + " (the previous file, if any, is left as it was)";
    return false;
  }
  committed_ = true;
  return true;
}

bool write_file_atomically(const std::string& path, std::string_view bytes, std::string& error) {
  AtomicFile f(path);
  if (!f.is_open()) {
    error = f.open_error();
    return false;
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f.file()) != bytes.size()) {
    error = "write to " + path + " failed: " + std::strerror(errno) + " (the previous file, if any, is left as it was)";
    return false;
  }
  return f.commit(error);
}

}  // namespace ddp
