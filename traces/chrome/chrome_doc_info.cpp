// What a Chrome trace says about itself outside its events: who wrote it.
#include "traces/chrome/chrome_reader.h"

namespace ddp {

std::string ChromeDocInfo::producer() const {
  auto od = top.find("otherData");
  if (od != top.end() && od->is_object()) {
    auto p = od->find("producer");
    if (p != od->end() && p->is_string()) return p->get<std::string>();
  }
  if (top.contains("schemaVersion") || top.contains("deviceProperties") || top.contains("distributedInfo") ||
      top.contains("traceName"))
    return "kineto";
  return "";
}

}  // namespace ddp
