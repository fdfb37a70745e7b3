// A pickle machine for plain data only. Values live in an arena and the stack and memo hold their indices, as
// Python's hold references: a dict memoized when it was empty and filled afterwards is seen filled by a later BINGET.
// The arena becomes JSON at STOP; a value reached twice is written twice, so the written size is bounded (a pickle of
// 40 bytes can name a value 2^64 times).
#include "traces/flight_recorder/plain_pickle.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace ddp {
namespace {

constexpr int kMaxDepth = 200;
// JSON values written per input byte, at most: a real dump writes about one per 10 bytes.
constexpr size_t kMaxValuesPerByte = 16;

enum class Kind { none, boolean, integer, real, text, list, dict, mark };

struct Value {
  explicit Value(Kind k = Kind::none) : kind(k) {}
  static Value list_of(std::vector<size_t> items) {
    Value v(Kind::list);
    v.items = std::move(items);
    return v;
  }
  Kind kind;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
  std::vector<size_t> items;                     // list, tuple, set
  std::vector<std::pair<size_t, size_t>> pairs;  // dict: key, value
};

class Machine {
 public:
  explicit Machine(std::string_view in) : in_(in) {}

  bool run(nlohmann::json& out, std::string& error) {
    while (pos_ < in_.size()) {
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
      if (op == '.') return finish(out, error, at);
      if (!step(op)) {
        error = "pickle: " + why_ + " (opcode 0x" + hex(op) + " at byte " + std::to_string(at) + ")";
        return false;
      }
    }
    error = "pickle: ends at byte " + std::to_string(in_.size()) + " without STOP (a cut file?)";
    return false;
  }

 private:
  static std::string hex(uint8_t v) {
    const char* d = "0123456789abcdef";
    return {d[v >> 4], d[v & 15]};
  }

  bool fail(std::string why) {
    why_ = std::move(why);
    return false;
  }
  bool take(size_t n, const char*& p) {
    if (in_.size() - pos_ < n) return fail("truncated argument");
    p = in_.data() + pos_;
    pos_ += n;
    return true;
  }
  template <typename T>
  bool uint_le(size_t n, T& v) {
    const char* p;
    if (!take(n, p)) return false;
    v = 0;
    for (size_t k = n; k-- > 0;) v = static_cast<T>((v << 8) | static_cast<uint8_t>(p[k]));
    return true;
  }
  size_t make(Value v) {
    arena_.push_back(std::move(v));
    return arena_.size() - 1;
  }
  bool push(Value v) {
    stack_.push_back(make(std::move(v)));
    return true;
  }
  bool push_text(size_t len_bytes) {
    uint64_t n;
    const char* p;
    if (!uint_le(len_bytes, n) || n > in_.size() - pos_ || !take(static_cast<size_t>(n), p))
      return fail("truncated string");
    Value v(Kind::text);
    v.s.assign(p, static_cast<size_t>(n));
    return push(std::move(v));
  }
  bool push_int(int64_t i) {
    Value v(Kind::integer);
    v.i = i;
    return push(std::move(v));
  }
  // LONG1/LONG4: little-endian two's complement of n bytes; beyond 64 bits is not a number a dump holds.
  bool push_long(size_t len_bytes) {
    uint64_t n;
    const char* p;
    if (!uint_le(len_bytes, n) || n > in_.size() - pos_ || !take(static_cast<size_t>(n), p))
      return fail("truncated long");
    if (n > 8) return fail("an integer wider than 64 bits");
    uint64_t u = 0;
    for (size_t k = n; k-- > 0;) u = (u << 8) | static_cast<uint8_t>(p[k]);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(p[n - 1]) & 0x80)) u |= ~uint64_t{0} << (8 * n);  // sign-extend
    return push_int(static_cast<int64_t>(u));
  }
  bool top(size_t& v) {
    if (stack_.empty()) return fail("stack underflow");
    v = stack_.back();
    return true;
  }
  bool pop(size_t& v) {
    if (!top(v)) return false;
    stack_.pop_back();
    return true;
  }
  // The values above the topmost MARK, the mark removed.
  bool pop_to_mark(std::vector<size_t>& items) {
    size_t m = stack_.size();
    while (m > 0 && arena_[stack_[m - 1]].kind != Kind::mark) --m;
    if (m == 0) return fail("no MARK");
    items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m - 1);
    return true;
  }
  bool container(size_t at, Kind k, Value*& c) {
    if (arena_[at].kind != k) return fail(k == Kind::dict ? "SETITEM(S) on a non-dict" : "APPEND(S) on a non-list");
    c = &arena_[at];
    return true;
  }
  bool set_items(const std::vector<size_t>& kv) {
    size_t d;
    Value* c;
    if (kv.size() % 2 != 0) return fail("odd number of dict items");
    if (!top(d) || !container(d, Kind::dict, c)) return false;
    for (size_t k = 0; k < kv.size(); k += 2) arena_[d].pairs.emplace_back(kv[k], kv[k + 1]);
    return true;
  }
  bool append_items(const std::vector<size_t>& items) {
    size_t l;
    Value* c;
    if (!top(l) || !container(l, Kind::list, c)) return false;
    c->items.insert(c->items.end(), items.begin(), items.end());
    return true;
  }
  bool tuple_of(size_t n) {
    if (stack_.size() < n) return fail("stack underflow");
    Value t(Kind::list);
    t.items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return push(std::move(t));
  }
  bool memo_put(uint64_t key) {
    size_t v;
    if (!top(v)) return false;
    if (key > in_.size()) return fail("memo key out of range");
    if (memo_.size() <= key) memo_.resize(static_cast<size_t>(key) + 1, SIZE_MAX);
    memo_[static_cast<size_t>(key)] = v;
    return true;
  }
  bool memo_get(uint64_t key) {
    if (key >= memo_.size() || memo_[static_cast<size_t>(key)] == SIZE_MAX) return fail("memo key never stored");
    stack_.push_back(memo_[static_cast<size_t>(key)]);
    return true;
  }

  bool step(uint8_t op) {
    uint64_t n = 0;
    std::vector<size_t> items;
    size_t a, b, c;
    switch (op) {
      case 0x80:  // PROTO
        return uint_le(1, n) && (n <= 5 || fail("protocol " + std::to_string(n) + " is newer than 5"));
      case 0x95:  // FRAME: a length we need not check, the opcodes inside follow in line
        return uint_le(8, n);
      case '(':
        return push(Value(Kind::mark));
      case '}':
        return push(Value(Kind::dict));
      case ']':
      case 0x8f:  // EMPTY_SET: a list here
        return push(Value(Kind::list));
      case ')':
        return tuple_of(0);
      case 0x85:
      case 0x86:
      case 0x87:
        return tuple_of(op - 0x84u);
      case 't':
      case 0x91:  // FROZENSET
        return pop_to_mark(items) && push(Value::list_of(items));
      case 'l':  // LIST
        return pop_to_mark(items) && push(Value::list_of(items));
      case 'd':  // DICT
        if (!pop_to_mark(items)) return false;
        push(Value(Kind::dict));
        return set_items(items);
      case 's':
        if (!pop(c) || !pop(b)) return false;
        return set_items({b, c});
      case 'u':
        return pop_to_mark(items) && set_items(items);
      case 'a':
        return pop(a) && append_items({a});
      case 'e':
      case 0x90:  // ADDITEMS
        return pop_to_mark(items) && append_items(items);
      case 'X':
        return push_text(4);
      case 0x8c:
        return push_text(1);
      case 0x8d:
        return push_text(8);
      case 'C':  // SHORT_BINBYTES
      case 'U':  // SHORT_BINSTRING
        return push_text(1);
      case 'B':
      case 'T':
        return push_text(4);
      case 0x8e:
        return push_text(8);
      case 'J': {
        uint32_t u;
        return uint_le(4, u) && push_int(static_cast<int32_t>(u));
      }
      case 'K':
        return uint_le(1, n) && push_int(static_cast<int64_t>(n));
      case 'M':
        return uint_le(2, n) && push_int(static_cast<int64_t>(n));
      case 0x8a:
        return push_long(1);
      case 0x8b:
        return push_long(4);
      case 'N':
        return push(Value(Kind::none));
      case 0x88:
      case 0x89: {
        Value v(Kind::boolean);
        v.b = op == 0x88;
        return push(std::move(v));
      }
      case 'G': {
        const char* p;
        if (!take(8, p)) return false;
        uint64_t u = 0;
        for (int k = 0; k < 8; ++k) u = (u << 8) | static_cast<uint8_t>(p[k]);  // big-endian
        Value v(Kind::real);
        std::memcpy(&v.d, &u, sizeof v.d);
        return push(std::move(v));
      }
      case 'q':
        return uint_le(1, n) && memo_put(n);
      case 'r':
        return uint_le(4, n) && memo_put(n);
      case 0x94:  // MEMOIZE
        return memo_put(memo_.size());
      case 'h':
        return uint_le(1, n) && memo_get(n);
      case 'j':
        return uint_le(4, n) && memo_get(n);
      case '0':
        return pop(a);
      case '1':
        return pop_to_mark(items);
      case '2':
        return top(a) && (stack_.push_back(a), true);
      case 'c':
      case 0x93:
      case 'R':
      case 'b':
      case 0x81:
      case 0x92:
      case 'i':
      case 'o':
      case 'P':
      case 'Q':
        return fail("an object, not plain data: this reader never builds objects");
      default:
        return fail("an opcode plain data does not use");
    }
  }

  bool to_json(size_t at, nlohmann::json& out, int depth) {
    if (depth > kMaxDepth) return fail("nested deeper than " + std::to_string(kMaxDepth) + " (or a cycle)");
    if (++written_ > kMaxValuesPerByte * in_.size() + 64) return fail("a value repeated beyond the file's size");
    const Value& v = arena_[at];
    switch (v.kind) {
      case Kind::none:
        out = nullptr;
        return true;
      case Kind::boolean:
        out = v.b;
        return true;
      case Kind::integer:
        out = v.i;
        return true;
      case Kind::real:
        out = v.d;
        return true;
      case Kind::text:
        out = v.s;
        return true;
      case Kind::mark:
        return fail("a MARK left in a value");
      case Kind::list:
        out = nlohmann::json::array();
        for (size_t item : v.items) {
          nlohmann::json e;
          if (!to_json(item, e, depth + 1)) return false;
          out.push_back(std::move(e));
        }
        return true;
      case Kind::dict:
        out = nlohmann::json::object();
        for (auto [k, val] : v.pairs) {
          const Value& key = arena_[k];
          std::string name;
          if (key.kind == Kind::text)
            name = key.s;
          else if (key.kind == Kind::integer)
            name = std::to_string(key.i);
          else
            return fail("a dict key that is neither a string nor an integer");
          nlohmann::json e;
          if (!to_json(val, e, depth + 1)) return false;
          out[name] = std::move(e);
        }
        return true;
    }
    return fail("unknown value");
  }

  bool finish(nlohmann::json& out, std::string& error, size_t at) {
    size_t v;
    if (stack_.size() != 1 || !pop(v)) {
      error = "pickle: STOP at byte " + std::to_string(at) + " with " + std::to_string(stack_.size()) +
              " values on the stack, not one";
      return false;
    }
    if (!to_json(v, out, 0)) {
      error = "pickle: " + why_;
      return false;
    }
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::vector<Value> arena_;
  std::vector<size_t> stack_;
  std::vector<size_t> memo_;
  size_t written_ = 0;
  std::string why_;
};

}  // namespace

bool looks_like_pickle(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x80 && static_cast<uint8_t>(bytes[1]) >= 2 &&
         static_cast<uint8_t>(bytes[1]) <= 5;
}

bool read_plain_pickle(std::string_view bytes, nlohmann::json& out, std::string& error) {
  Machine m(bytes);
  return m.run(out, error);
}

}  // namespace ddp
