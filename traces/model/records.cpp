#include "traces/model/records.h"

#include <algorithm>
#include <fstream>
#include <type_traits>
#include <utility>

#include "traces/base/json_lines.h"

namespace ddp {
namespace records {
namespace {

// A value as the table's type: false with what it is not.
bool get(const nlohmann::json& v, Int& out, std::string& e) {
  if (!v.is_number_integer()) return e = "not an integer", false;
  out = v.is_number_unsigned() ? static_cast<Int>(v.get<uint64_t>()) : v.get<Int>();
  return true;
}
bool get(const nlohmann::json& v, UInt& out, std::string& e) {
  if (v.is_number_unsigned()) return out = v.get<UInt>(), true;
  if (!v.is_number_integer() || v.get<Int>() < 0) return e = "not an integer >= 0", false;
  out = static_cast<UInt>(v.get<Int>());
  return true;
}
bool get(const nlohmann::json& v, Float& out, std::string& e) {
  if (!v.is_number()) return e = "not a number", false;
  out = v.get<double>();
  return true;
}
bool get(const nlohmann::json& v, Bool& out, std::string& e) {
  if (!v.is_boolean()) return e = "not true or false", false;
  out = v.get<bool>();
  return true;
}
bool get(const nlohmann::json& v, String& out, std::string& e) {
  if (!v.is_string()) return e = "not a string", false;
  out = v.get<std::string>();
  return true;
}
bool get(const nlohmann::json& v, Json& out, std::string& e) {
  if (v.is_null()) return e = "null", false;
  out = v;
  return true;
}
// {key: value} with every value of the type.
template <class T>
bool get(const nlohmann::json& v, std::map<std::string, T>& out, std::string& e) {
  if (!v.is_object()) return e = "not an object", false;
  out.clear();
  for (auto it = v.begin(); it != v.end(); ++it)
    if (!get(*it, out[it.key()], e)) return e = "'" + it.key() + "': " + e, false;
  return true;
}
bool get(const nlohmann::json& v, std::pair<std::string, std::string>& out, std::string& e) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_string())
    return e = "not a pair of strings", false;
  out = {v[0].get<std::string>(), v[1].get<std::string>()};
  return true;
}
// A nested record: its own reader, its keys said as 'outer.inner'.
template <class R>
auto get(const nlohmann::json& v, R& out, std::string& e) -> decltype(read(v, out, e)) {
  return read(v, out, e);
}
template <class T>
bool get(const nlohmann::json& v, std::vector<T>& out, std::string& e) {
  if (!v.is_array()) return e = "not a list", false;
  out.clear();
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    T x{};
    if (get(v[i], x, e)) {
      out.push_back(std::move(x));
      continue;
    }
    // A nested record's error reads as the item's field: "field '[2].rank': missing".
    const bool nested = e.rfind("field '", 0) == 0 || e.rfind("unknown field '", 0) == 0;
    return e = nested ? under_field("[" + std::to_string(i) + "]", e) : "item " + std::to_string(i) + ": " + e, false;
  }
  return true;
}

template <class T>
bool field(const nlohmann::json& j, const char* key, T& out, std::string& e) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return e = std::string("field '") + key + "': missing", false;
  std::string why;
  if (get(*it, out, why)) return true;
  e = under_field(key, why);
  return false;
}
template <class T>
bool field(const nlohmann::json& j, const char* key, std::optional<T>& out, std::string& e) {
  auto it = j.find(key);
  out.reset();
  if (it == j.end() || it->is_null()) return true;
  T v{};
  if (!field(j, key, v, e)) return false;
  out = std::move(v);
  return true;
}

// A field's value as JSON, for the writer: a nested record by its own writer, anything else as nlohmann writes it.
template <class T, class = void>
struct is_record : std::false_type {};
template <class T>
struct is_record<T, std::void_t<decltype(to_json(std::declval<const T&>()))>> : std::true_type {};

template <class T>
nlohmann::json value_of(const T& v) {
  if constexpr (is_record<T>::value)
    return to_json(v);
  else
    return nlohmann::json(v);
}
template <class T>
nlohmann::json value_of(const std::vector<T>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const T& x : v) a.push_back(value_of(x));
  return a;
}
template <class T>
void put(nlohmann::json& j, const char* key, const T& v) {
  j[key] = value_of(v);
}
template <class T>
void put(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = value_of(*v);
}

bool only_declared(const nlohmann::json& j, const std::vector<const char*>& keys, std::string& e) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; }))
      return e = "unknown field '" + it.key() + "'", false;
  return true;
}

}  // namespace

std::string under_field(const std::string& key, const std::string& why) {
  for (const std::string prefix : {"field '", "unknown field '"})
    if (why.compare(0, prefix.size(), prefix) == 0) {
      const std::string inner = why.substr(prefix.size());  // "b': missing", "[2].b': ..."
      return prefix + key + (inner.empty() || inner[0] == '[' ? "" : ".") + inner;
    }
  return "field '" + key + "': " + why;
}

// Each record's declared keys, for only_declared.
#define DDP_RECORD(rec, doc)                        \
  const std::vector<const char*>& keys_of_##rec() { \
    static const std::vector<const char*> k = {
#define DDP_FIELD(rec, member, key, type, unit, presence, meaning) key,
#define DDP_NESTED(rec, member, key, sub, presence, meaning) key,
#define DDP_NESTED_LIST(rec, member, key, sub, presence, meaning) key,
#define DDP_RECORD_END(rec) \
  }                         \
  ;                         \
  return k;                 \
  }
namespace {
#include "traces/model/records.def"
}  // namespace

#define DDP_RECORD(rec, doc)                                         \
  bool read(const nlohmann::json& j, rec& out, std::string& error) { \
    if (!j.is_object()) return error = "not a JSON object", false;   \
    out = rec{};
#define DDP_FIELD(rec, member, key, type, unit, presence, meaning) \
  if (!field(j, key, out.member, error)) return false;
#define DDP_NESTED(rec, member, key, sub, presence, meaning) \
  if (!field(j, key, out.member, error)) return false;
#define DDP_NESTED_LIST(rec, member, key, sub, presence, meaning) \
  if (!field(j, key, out.member, error)) return false;
#define DDP_RECORD_END(rec)                        \
  return only_declared(j, keys_of_##rec(), error); \
  }
#include "traces/model/records.def"

#define DDP_RECORD(rec, doc)             \
  nlohmann::json to_json(const rec& r) { \
    nlohmann::json j = nlohmann::json::object();
#define DDP_FIELD(rec, member, key, type, unit, presence, meaning) put(j, key, r.member);
#define DDP_NESTED(rec, member, key, sub, presence, meaning) put(j, key, r.member);
#define DDP_NESTED_LIST(rec, member, key, sub, presence, meaning) put(j, key, r.member);
#define DDP_RECORD_END(rec) \
  return j;                 \
  }
#include "traces/model/records.def"

const std::vector<RecordSchema>& schema() {
  static const std::vector<RecordSchema> table = [] {
    std::vector<RecordSchema> t;
#define DDP_RECORD(rec, doc) t.push_back({#rec, doc, {}});
#define DDP_FIELD(rec, member, key, type, unit, presence, meaning) \
  t.back().fields.push_back({key, #type, unit, std::string(#presence) == "required", false, false, meaning});
#define DDP_NESTED(rec, member, key, sub, presence, meaning) \
  t.back().fields.push_back({key, #sub, "", std::string(#presence) == "required", true, false, meaning});
#define DDP_NESTED_LIST(rec, member, key, sub, presence, meaning) \
  t.back().fields.push_back({key, #sub, "", std::string(#presence) == "required", true, true, meaning});
#include "traces/model/records.def"
    return t;
  }();
  return table;
}

}  // namespace records

namespace {
std::string at_line(const std::string& path, size_t line, const std::string& what) {
  return path + ":" + std::to_string(line) + ": " + what;
}
}  // namespace

template <class R>
bool read_record_lines(const std::string& path, std::vector<R>& out, std::string& error) {
  JsonLines lines;
  if (!read_json_lines(path, lines, error)) return false;
  if (lines.bad_lines > 0) return error = lines.problem(path), false;
  out.clear();
  out.reserve(lines.objects.size());
  for (size_t i = 0; i < lines.objects.size(); ++i) {
    R r;
    std::string why;
    if (!records::read(lines.objects[i], r, why)) return error = at_line(path, lines.line_numbers[i], why), false;
    out.push_back(std::move(r));
  }
  return true;
}

template <class R>
bool read_record_file(const std::string& path, R& out, std::string& error) {
  std::ifstream in(path);
  if (!in) return error = "cannot open " + path, false;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error = path + ": not JSON", false;
  std::string why;
  if (!records::read(j, out, why)) return error = path + ": " + why, false;
  return true;
}

#define DDP_RECORD(rec, doc)                                                                                   \
  template bool read_record_lines<records::rec>(const std::string&, std::vector<records::rec>&, std::string&); \
  template bool read_record_file<records::rec>(const std::string&, records::rec&, std::string&);
#include "traces/model/records.def"

}  // namespace ddp
