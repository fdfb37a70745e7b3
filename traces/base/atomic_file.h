#pragma once
// The project's one temp-file-and-rename: a file appears whole or not at all. Written into PATH.tmp.<pid> beside
// it (same filesystem, so the rename is atomic), flushed, renamed over PATH on commit. Whatever goes
// wrong — a full disk, a failed write, an exception, a commit never reached — the temp file is removed and PATH is
// left as it was. Used by every writer of a whole file: JSON, traces' exports, checkpoints, datasets.
#include <cstdio>
#include <string>
#include <string_view>

namespace ddp {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // not committed: the temp file goes
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  bool is_open() const { return f_ != nullptr; }
  FILE* file() { return f_; }
  int fd() const;
  const std::string& temp_path() const { return tmp_; }
  // Flush, fsync, close and rename. False with `error` naming PATH and why; the temp file is then gone.
  bool commit(std::string& error);
  // What `error` says when the file could not even be created.
  std::string open_error() const;

 private:
  std::string path_, tmp_;
  FILE* f_ = nullptr;
  int open_errno_ = 0;
  bool committed_ = false;
};

// `bytes` as the whole of `path`.
bool write_file_atomically(const std::string& path, std::string_view bytes, std::string& error);

}  // namespace ddp
