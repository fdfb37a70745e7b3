#include "runtime/data/dataset_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

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
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot create dataset " + tmp + ": " + std::strerror(errno);
    return false;
  }
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
       pwrite_all(fd, &h, sizeof(h), 0) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot write dataset " + path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
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
  off_t size = ::lseek(fd_, 0, SEEK_END);
  if (size < static_cast<off_t>(sizeof(header_)) || !pread_all(fd_, &header_, sizeof(header_), 0) ||
      std::memcmp(header_.magic, kMagic, 8) != 0) {
    error = path + " is not a ddp_profile dataset (.ddpd)";
    return false;
  }
  if (header_.version != 1 || header_.features == 0 || header_.samples == 0) {
    error = path + ": unsupported dataset version or empty dataset";
    return false;
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
