#pragma once
// The run folder's records as typed structs, one per row group of traces/model/records.def, one reader and one writer
// per record. Reading: a required field absent, null or of another type, or a key the table does not declare, is an
// error naming the file, the line and the key; an optional field's absence is an empty std::optional the reader's
// caller decides about. Writing: every field under its table key, an empty optional left out.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddp {
namespace records {

// The field types of records.def, as C++ types.
using Int = int64_t;
using UInt = uint64_t;  // a count or size that may pass 2^63 (a seed, bytes)
using Float = double;
using Bool = bool;
using String = std::string;
using IntList = std::vector<int64_t>;
using IntLists = std::vector<std::vector<int64_t>>;
using FloatList = std::vector<double>;
using StringList = std::vector<std::string>;
using StringPairs = std::vector<std::pair<std::string, std::string>>;
using StringMap = std::map<std::string, std::string>;
using IntMap = std::map<std::string, int64_t>;
using Json = nlohmann::json;
template <class T>
using required = T;
template <class T>
using optional = std::optional<T>;

#define DDP_RECORD(rec, doc) struct rec {
#define DDP_FIELD(rec, member, key, type, unit, presence, meaning) presence<type> member{};
#define DDP_NESTED(rec, member, key, sub, presence, meaning) presence<sub> member{};
#define DDP_NESTED_LIST(rec, member, key, sub, presence, meaning) presence<std::vector<sub>> member{};
#define DDP_RECORD_END(rec) \
  }                         \
  ;
#include "traces/model/records.def"

// One record from one JSON object: false with `error` ("field 'x': missing" / "field 'x': not an integer" /
// "unknown field 'y'"; a nested record's keys as 'a.b').
#define DDP_RECORD(rec, doc) bool read(const nlohmann::json& j, rec& out, std::string& error);
#include "traces/model/records.def"

// A reader's error `why` (a field's: "field 'b': missing", or a value's: "not an integer") as the error of field
// `key` that holds it: "field 'a.b': missing", "field 'a': not an integer"; a list's items are keys "[i]".
std::string under_field(const std::string& key, const std::string& why);

// One record as one JSON object, every key from the table (what every C++ writer of the run folder writes).
#define DDP_RECORD(rec, doc) nlohmann::json to_json(const rec& r);
#include "traces/model/records.def"

// A field of the table, as the contract test compares it with python/ddp_profile/layout.py.
struct FieldSchema {
  std::string key;
  std::string type;  // records.def's type word, or the nested record's name
  std::string unit;
  bool required = true;
  bool nested = false;
  bool list = false;  // a list of the nested record (DDP_NESTED_LIST)
  std::string meaning;
};
struct RecordSchema {
  std::string name;
  std::string doc;
  std::vector<FieldSchema> fields;
};
const std::vector<RecordSchema>& schema();

}  // namespace records

// Every line of a JSON-lines file as records of type R: false with `error` "PATH:LINE: field 'x': ..." at the first
// line that breaks the contract, "PATH: N unreadable line(s), first at line L" for damaged lines, "cannot open PATH".
template <class R>
bool read_record_lines(const std::string& path, std::vector<R>& out, std::string& error);
// One JSON file holding one record of type R.
template <class R>
bool read_record_file(const std::string& path, R& out, std::string& error);

}  // namespace ddp
