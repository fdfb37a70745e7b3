#pragma once
#include <string>
#include <vector>

#include "runtime/common/command.h"

namespace ddp {

struct ParseResult {
  Command cmd;
  int exit_code = -1;   // >= 0: exit now with this code (help printed, or a usage error reported)
  std::string message;  // what to print before exiting
};

ParseResult parse_command_line(int argc, const char* const* argv);

// Parsers for the structured options, exposed for tests. Return false with `error` set on bad input.
bool parse_slow_spec(const std::string& text, SlowSpec& out, std::string& error);
bool parse_fault_spec(const std::string& text, FaultSpec& out, std::string& error);

}  // namespace ddp
