#include "runtime/data/image_dataset.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "traces/base/atomic_file.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
double unit(uint64_t& s) { return static_cast<double>((s = mix(s)) >> 11) * (1.0 / 9007199254740992.0); }
}  // namespace

bool write_synthetic_images(const std::string& dir, int64_t count, uint64_t seed, std::string& error) {
  constexpr int W = 40, H = 40;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    error = "cannot create " + dir + ": " + ec.message();
    return false;
  }
  std::ostringstream index;
  std::vector<uint8_t> px(W * H * 3);
  for (int64_t i = 0; i < count; ++i) {
    uint64_t s = mix(seed * 1000003u + static_cast<uint64_t>(i));
    const int label = static_cast<int>(mix(s) & 1);
    const double period = 4 + 5 * unit(s), phase = 6.283 * unit(s);
    uint8_t fg[3], bg[3];
    for (int c = 0; c < 3; ++c) {
      fg[c] = static_cast<uint8_t>(40 + 200 * unit(s));
      bg[c] = static_cast<uint8_t>(40 + 200 * unit(s));
    }
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        double t = std::sin(6.283 * (label ? x : y) / period + phase);
        for (int c = 0; c < 3; ++c) {
          double v = (t > 0 ? fg[c] : bg[c]) + 30 * (unit(s) - 0.5);
          px[(y * W + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
        }
      }
    char name[64];
    std::snprintf(name, sizeof(name), "img_%06lld.png", static_cast<long long>(i));
    if (!stbi_write_png((fs::path(dir) / name).c_str(), W, H, 3, px.data(), W * 3)) {
      error = "cannot write " + (fs::path(dir) / name).string();
      return false;
    }
    index << name << ' ' << label << '\n';
  }
  // The index goes last, through a rename: a folder without index.txt is an unfinished one.
  return write_file_atomically((fs::path(dir) / "index.txt").string(), index.str(), error);
}

bool ImageFolder::open(const std::string& dir, uint64_t seed, std::string& error) {
  dir_ = dir;
  seed_ = seed;
  std::ifstream in(fs::path(dir) / "index.txt");
  if (!in) {
    error = "image folder " + dir + " has no index.txt (lines: 'relative/path.png label')";
    return false;
  }
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::istringstream ls(line);
    std::string file;
    int64_t label = -1;
    if (!(ls >> file >> label) || label < 0 || label >= kMaxClasses) {
      error = dir + "/index.txt line " + std::to_string(lineno) + ": expected 'path label', got '" + line + "'";
      return false;
    }
    files_.push_back((fs::path(dir) / file).string());
    labels_.push_back(label);
  }
  if (files_.empty()) {
    error = dir + "/index.txt lists no images";
    return false;
  }
  return true;
}

int64_t ImageFolder::classes() const {
  int64_t top = 1;
  for (int64_t l : labels_) top = std::max(top, l);
  return top + 1;
}

uint64_t ImageFolder::read(const int64_t* idx, size_t n, RawBatch& out) const {
  out.bytes.clear();
  out.offsets.assign(1, 0);
  out.labels.clear();
  for (size_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= samples()) throw std::out_of_range("image index out of range");
    std::ifstream f(files_[idx[i]], std::ios::binary);
    if (!f) throw std::runtime_error("cannot read image " + files_[idx[i]]);
    out.bytes.insert(out.bytes.end(), std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    out.offsets.push_back(out.bytes.size());
    out.labels.push_back(labels_[idx[i]]);
  }
  return out.bytes.size();
}

void ImageFolder::transform(const RawBatch& raw, const int64_t* idx, size_t n, int epoch, float* x) const {
  const int C = kImageCrop;
  for (size_t i = 0; i < n; ++i) {
    int w = 0, h = 0, ch = 0;
    const uint8_t* p = raw.bytes.data() + raw.offsets[i];
    const int len = static_cast<int>(raw.offsets[i + 1] - raw.offsets[i]);
    uint8_t* img = stbi_load_from_memory(p, len, &w, &h, &ch, 3);
    if (!img) throw std::runtime_error("cannot decode image " + files_[idx[i]] + ": " + stbi_failure_reason());
    if (w < C || h < C) {
      stbi_image_free(img);
      throw std::runtime_error("image " + files_[idx[i]] + " is smaller than the " + std::to_string(C) + "px crop");
    }
    uint64_t s = mix(seed_ ^ mix(static_cast<uint64_t>(epoch) * 0x1000003ull + static_cast<uint64_t>(idx[i])));
    const int ox = static_cast<int>(mix(s) % static_cast<uint64_t>(w - C + 1));
    const int oy = static_cast<int>(mix(s + 1) % static_cast<uint64_t>(h - C + 1));
    float* out = x + i * 3 * C * C;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < C; ++y)
        for (int xx = 0; xx < C; ++xx)
          out[(c * C + y) * C + xx] = img[((oy + y) * w + ox + xx) * 3 + c] / 127.5f - 1.0f;
    stbi_image_free(img);
  }
}

std::string ImageFolder::description() const {
  return "image folder " + dir_ + " (" + std::to_string(files_.size()) + " images, random " +
         std::to_string(kImageCrop) + "px crops)";
}

}  // namespace ddp
