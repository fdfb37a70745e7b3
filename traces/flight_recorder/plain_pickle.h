#pragma once
// Python pickles of plain data (dicts, lists, tuples, strings, bytes, ints, floats, bools, None) read into JSON
// values, without Python: what torch's Flight Recorder writes (`_dump_fr_trace`, protocol 2). Anything that would
// construct an object (GLOBAL, REDUCE, BUILD, ...) is refused by name: a dump is data, and reading one must never run
// or need code.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ddp {

// Tuples become arrays; dict keys that are ints become their decimal text (JSON keys are strings), other non-string
// keys are refused; bytes become strings (Latin-1 kept as is). False with `error` saying the opcode and byte offset.
bool read_plain_pickle(std::string_view bytes, nlohmann::json& out, std::string& error);

// Protocol 2 and later begin with PROTO (0x80) and a protocol number: what tells a pickle from a JSON file.
bool looks_like_pickle(std::string_view bytes);

}  // namespace ddp
