// Writes python/ddp_profile/records_table.py, the companion's copy of the record table, from records.def (through
// records::schema(), so the table is read by the C preprocessor alone, never by a second parser).
//   records_table_py --check PATH   exit 1, saying how to write it anew, when PATH is not what the table says
//   records_table_py --write PATH   write it
// The build runs --check (traces/model/CMakeLists.txt): a record changed on one side only fails the build.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "traces/model/records.h"

namespace {

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

std::string python_type(const ddp::records::FieldSchema& f) {
  if (!f.nested) return f.type;
  return (f.list ? "records:" : "record:") + f.type;
}

std::string module_text() {
  std::ostringstream o;
  o << "\"\"\"The run folder's records, field by field: @generated from traces/model/records.def by the build\n"
       "(traces/model/records_table_py.cpp). Do not edit: change records.def and rebuild (a stale copy fails the\n"
       "build and says how to write it anew).\"\"\"\n"
       "from typing import Dict, Tuple\n\n"
       "# record -> key -> (type, unit, required). type: records.def's word; \"record:NAME\" a nested record,\n"
       "# \"records:NAME\" a list of them.\n"
       "RECORDS: Dict[str, Dict[str, Tuple[str, str, bool]]] = {\n";
  for (const auto& rec : ddp::records::schema()) {
    o << "    " << quoted(rec.name) << ": {\n";
    for (const auto& f : rec.fields)
      o << "        " << quoted(f.key) << ": (" << quoted(python_type(f)) << ", " << quoted(f.unit) << ", "
        << (f.required ? "True" : "False") << "),\n";
    o << "    },\n";
  }
  o << "}\n\n# record -> what one holds.\nRECORD_DOCS: Dict[str, str] = {\n";
  for (const auto& rec : ddp::records::schema()) o << "    " << quoted(rec.name) << ": " << quoted(rec.doc) << ",\n";
  o << "}\n\n# record -> key -> what an optional field's absence means, or what a field holds.\n"
       "FIELD_MEANINGS: Dict[str, Dict[str, str]] = {\n";
  for (const auto& rec : ddp::records::schema()) {
    o << "    " << quoted(rec.name) << ": {\n";
    for (const auto& f : rec.fields)
      if (!f.meaning.empty()) o << "        " << quoted(f.key) << ": " << quoted(f.meaning) << ",\n";
    o << "    },\n";
  }
  o << "}\n";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "--check" && mode != "--write") {
    std::fprintf(stderr, "usage: records_table_py --check|--write PATH\n");
    return 2;
  }
  const std::string path = argv[2];
  const std::string want = module_text();
  if (mode == "--write") {
    std::ofstream out(path, std::ios::binary);
    out << want;
    if (!out) std::fprintf(stderr, "records_table_py: cannot write %s\n", path.c_str());
    return out ? 0 : 1;
  }
  std::ifstream in(path, std::ios::binary);
  const std::string have((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (have == want) return 0;
  std::fprintf(stderr,
               "%s is not what traces/model/records.def says: write it anew with\n"
               "  cmake --build build --target records_table_py_write\n",
               path.c_str());
  return 1;
}
