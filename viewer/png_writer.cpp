// PNG output for screenshot mode (stb_image_write; Debian's libstb carries the implementation).
#include <stb/stb_image_write.h>

#include <cstring>
#include <vector>

#include "viewer/app.h"

namespace ddp::viewer {

bool write_png(const std::string& path, int width, int height, const uint8_t* rgba_bottom_up, std::string& error) {
  if (width <= 0 || height <= 0) {
    error = "empty image";
    return false;
  }
  const size_t stride = static_cast<size_t>(width) * 4;
  std::vector<uint8_t> top_down(stride * static_cast<size_t>(height));
  for (int y = 0; y < height; ++y)
    std::memcpy(&top_down[static_cast<size_t>(y) * stride],
                rgba_bottom_up + static_cast<size_t>(height - 1 - y) * stride, stride);
  if (!stbi_write_png(path.c_str(), width, height, 4, top_down.data(), static_cast<int>(stride))) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace ddp::viewer
