#include "runtime/data/dataset_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "traces/base/atomic_file.h"

namespace ddp {
namespace {
constexpr char kMagic[8] = {'D', 'D', 'P', 'D', 'A', 'T', 'A', '1'};

// SplitMix64: tiny, seedable, identical everywhere.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }
};

bool pwrite_all(int fd, const void* p, size_t n, uint64_t off) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    c += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return true;
}
bool pread_all(int fd, void* p, size_t n, uint64_t off) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::pread(fd, c, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return true;
}
}  // namespace

bool write_synthetic_dataset(const std::string& path, int64_t samples, int64_t features, uint64_t seed,
                             std::string& error) {
  AtomicFile file(path);
  if (!file.is_open()) {
    error = "cannot create dataset " + file.temp_path() + ": " + file.open_error();
    return false;
  }
  const int fd = file.fd();
  DatasetHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = 1;
  h.features = static_cast<uint32_t>(features);
  h.samples = static_cast<uint64_t>(samples);
  h.stats_offset = sizeof(h);
  h.record_offset = sizeof(h) + 2 * features * sizeof(float);
  Rng rng{seed * 0x2545F4914F6CDD1Dull + 1};
  std::vector<double> w(features);
  for (auto& v : w) v = rng.normal();
  const size_t rec = features * sizeof(float) + sizeof(int32_t);
  std::vector<double> sum(features, 0.0), sq(features, 0.0);
  std::vector<char> block;
  const int64_t kBlock = 4096;
  bool ok = true;
  for (int64_t i0 = 0; i0 < samples && ok; i0 += kBlock) {
    int64_t n = std::min(kBlock, samples - i0);
    block.resize(n * rec);
    for (int64_t i = 0; i < n; ++i) {
      float* x = reinterpret_cast<float*>(block.data() + i * rec);
      double proj = 0;
      for (int64_t f = 0; f < features; ++f) {
        x[f] = static_cast<float>(rng.normal());
        proj += w[f] * x[f];
        sum[f] += x[f];
        sq[f] += static_cast<double>(x[f]) * x[f];
      }
      int32_t label = proj + 0.5 * std::sqrt(static_cast<double>(features)) * rng.normal() > 0 ? 1 : 0;
      std::memcpy(block.data() + i * rec + features * sizeof(float), &label, sizeof(label));
    }
    ok = pwrite_all(fd, block.data(), block.size(), h.record_offset + i0 * rec);
  }
  std::vector<float> stats(2 * features);
  for (int64_t f = 0; f < features; ++f) {
    double m = sum[f] / static_cast<double>(samples);
    double var = sq[f] / static_cast<double>(samples) - m * m;
    stats[f] = static_cast<float>(m);
    stats[features + f] = static_cast<float>(std::sqrt(std::max(var, 1e-12)));
  }
  ok = ok && pwrite_all(fd, stats.data(), stats.size() * sizeof(float), h.stats_offset) &&
       pwrite_all(fd, &h, sizeof(h), 0) && ::fsync(fd) == 0;  // gigabytes a later run trusts: on disk before the rename
  if (!ok) {
    error = "cannot write dataset " + path + ": " + std::strerror(errno);
    return false;
  }
  return file.commit(error);
}

DatasetFile::~DatasetFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool DatasetFile::open(const std::string& path, std::string& error) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    error = "cannot open dataset " + path + ": " + std::strerror(errno);
    return false;
  }
  return read_header(error) && check_labels(error);
}

bool DatasetFile::read_header(std::string& error) {
  const std::string& path = path_;
  off_t size = ::lseek(fd_, 0, SEEK_END);
  if (size < static_cast<off_t>(sizeof(header_)) || !pread_all(fd_, &header_, sizeof(header_), 0) ||
      std::memcmp(header_.magic, kMagic, 8) != 0) {
    error = path + " is not a ddp_profile dataset (.ddpd)";
    return false;
  }
  if ((header_.version != 1 && header_.version != 2) || header_.features == 0 || header_.samples == 0) {
    error = path + ": unsupported dataset version " + std::to_string(header_.version) + " or empty dataset";
    return false;
  }
  shape_ = {static_cast<int64_t>(header_.features)};
  if (header_.version == 2) {
    const uint32_t rank = header_.shape_rank;
    int64_t product = 1;
    if (rank >= 1 && rank <= 4) {
      shape_.assign(header_.shape, header_.shape + rank);
      // Stop as soon as the product passes the feature count: a crafted header cannot overflow it.
      const int64_t features = header_.features;
      for (int64_t d : shape_) {
        if (d < 1 || product > features / d) {
          product = -1;
          break;
        }
        product *= d;
      }
    }
    if (rank < 1 || rank > 4 || product != static_cast<int64_t>(header_.features)) {
      error = path + ": the header's sample shape (rank " + std::to_string(rank) + ") does not hold " +
              std::to_string(header_.features) + " features";
      return false;
    }
    if (header_.classes < 2 || header_.classes > kMaxClasses) {
      error = path + ": the header says " + std::to_string(header_.classes) + " classes (2 to " +
              std::to_string(kMaxClasses) + ")";
      return false;
    }
  }
  uint64_t need = header_.record_offset + header_.samples * record_bytes();
  if (header_.stats_offset + 2ull * header_.features * sizeof(float) > header_.record_offset ||
      need > static_cast<uint64_t>(size)) {
    error = path + " is truncated: needs " + std::to_string(need) + " bytes, has " + std::to_string(size);
    return false;
  }
  std::vector<float> stats(2 * header_.features);
  if (!pread_all(fd_, stats.data(), stats.size() * sizeof(float), header_.stats_offset)) {
    error = path + ": cannot read the normalisation statistics";
    return false;
  }
  mean_.assign(stats.begin(), stats.begin() + header_.features);
  std_.assign(stats.begin() + header_.features, stats.end());
  for (float& s : std_)
    if (!(s > 0)) s = 1;
  return true;
}

bool DatasetFile::check_labels(std::string& error) {
  // One sequential pass in large blocks: the labels are the last 4 bytes of each fixed-size record.
  const size_t rec = record_bytes();
  const uint64_t per_block = std::max<uint64_t>(1, (8u << 20) / rec);
  const int64_t limit = header_.version == 2 ? static_cast<int64_t>(header_.classes) : kMaxClasses;
  int64_t top = 1;
  std::vector<char> block;
  for (uint64_t i0 = 0; i0 < header_.samples; i0 += per_block) {
    const uint64_t n = std::min<uint64_t>(per_block, header_.samples - i0);
    block.resize(n * rec);
    if (!pread_all(fd_, block.data(), block.size(), header_.record_offset + i0 * rec)) {
      error = path_ + ": cannot read records at sample " + std::to_string(i0);
      return false;
    }
    for (uint64_t i = 0; i < n; ++i) {
      int32_t label;
      std::memcpy(&label, block.data() + i * rec + rec - sizeof(label), sizeof(label));
      if (label < 0 || label >= limit) {
        error = path_ + ": sample " + std::to_string(i0 + i) + " has label " + std::to_string(label) +
                ", outside [0, " + std::to_string(limit) + ")" +
                (header_.version == 2 ? " (the header's class count)" : " (the class limit)");
        return false;
      }
      top = std::max<int64_t>(top, label);
    }
  }
  // Version 1 carries no class count: the labels seen say it (at least 2, as the default binary task has).
  classes_ = header_.version == 2 ? static_cast<int64_t>(header_.classes) : top + 1;
  return true;
}

bool write_dataset_file(const std::string& path, const std::vector<int64_t>& shape, int64_t classes,
                        const std::vector<float>& x, const std::vector<int32_t>& labels, std::string& error) {
  int64_t features = 1;
  for (int64_t d : shape) features *= d;
  const size_t n = labels.size();
  if (shape.empty() || shape.size() > 4 || features <= 0 || x.size() != n * static_cast<size_t>(features) || n == 0) {
    error = "write_dataset_file: " + std::to_string(x.size()) + " floats do not make " + std::to_string(n) +
            " samples of the given shape";
    return false;
  }
  DatasetHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = 2;
  h.features = static_cast<uint32_t>(features);
  h.samples = n;
  h.stats_offset = sizeof(h);
  h.record_offset = sizeof(h) + 2 * features * sizeof(float);
  h.classes = static_cast<uint32_t>(classes);
  h.shape_rank = static_cast<uint32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) h.shape[i] = static_cast<uint32_t>(shape[i]);
  std::vector<double> sum(features, 0.0), sq(features, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (int64_t f = 0; f < features; ++f) {
      const double v = x[i * features + f];
      sum[f] += v;
      sq[f] += v * v;
    }
  std::vector<float> stats(2 * features);
  for (int64_t f = 0; f < features; ++f) {
    const double m = sum[f] / static_cast<double>(n);
    stats[f] = static_cast<float>(m);
    stats[features + f] = static_cast<float>(std::sqrt(std::max(sq[f] / static_cast<double>(n) - m * m, 1e-12)));
  }
  const size_t rec = features * sizeof(float) + sizeof(int32_t);
  std::vector<char> records(n * rec);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(records.data() + i * rec, x.data() + i * features, features * sizeof(float));
    std::memcpy(records.data() + i * rec + features * sizeof(float), &labels[i], sizeof(int32_t));
  }
  AtomicFile file(path);
  const int fd = file.fd();
  const bool ok = fd >= 0 && pwrite_all(fd, &h, sizeof(h), 0) &&
                  pwrite_all(fd, stats.data(), stats.size() * sizeof(float), h.stats_offset) &&
                  pwrite_all(fd, records.data(), records.size(), h.record_offset);
  if (!ok) {
    error = "cannot write dataset " + path + ": " + std::strerror(errno);
    return false;
  }
  return file.commit(error);
}

uint64_t DatasetFile::read(const int64_t* idx, size_t n, RawBatch& out) const {
  const size_t rec = record_bytes();
  out.bytes.resize(n * rec);
  out.offsets.resize(n + 1);
  out.labels.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= samples()) throw std::out_of_range("sample index out of range");
    if (!pread_all(fd_, out.bytes.data() + i * rec, rec, header_.record_offset + static_cast<uint64_t>(idx[i]) * rec))
      throw std::runtime_error("read of " + path_ + " failed: " + std::strerror(errno));
    out.offsets[i] = i * rec;
    int32_t label;
    std::memcpy(&label, out.bytes.data() + i * rec + features() * sizeof(float), sizeof(label));
    out.labels[i] = label;
  }
  out.offsets[n] = n * rec;
  return n * rec;
}

void DatasetFile::transform(const RawBatch& raw, const int64_t* /*idx*/, size_t n, int /*epoch*/, float* x) const {
  // The host transform: x = (x - mean) / std per feature, with the file's statistics.
  const size_t F = static_cast<size_t>(features());
  for (size_t i = 0; i < n; ++i) {
    float* xi = x + i * F;
    std::memcpy(xi, raw.bytes.data() + raw.offsets[i], F * sizeof(float));
    for (size_t f = 0; f < F; ++f) xi[f] = (xi[f] - mean_[f]) / std_[f];
  }
}

}  // namespace ddp
