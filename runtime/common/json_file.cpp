#include "runtime/common/json_file.h"

#include "traces/base/atomic_file.h"

namespace ddp {

bool write_json_atomic(const std::string& path, const nlohmann::json& j, std::string& error) {
  return write_file_atomically(path, j.dump(2) + "\n", error);
}

}  // namespace ddp
