#include "runtime/common/json_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace ddp {

bool write_json_atomic(const std::string& path, const nlohmann::json& j, std::string& error) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    out.close();  // a full disk may only show when the last block is written
    if (!out) {
      error = "cannot write " + tmp + ": " + std::strerror(errno);
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace ddp
