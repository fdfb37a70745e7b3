// The commands held to their recorded answers: each line of tests/data/golden/commands.txt runs on the recorded runs
// beside it (two of our job's, a user's script under --record, a user's check run replayed into the ladder, users'
// profiler traces) and must give the exit code, stdout and files expected/ holds. A change that moves an answer
// fails here, naming the command and the first difference; a change meant to move it writes expected/ anew
// (tests/data/golden/expect.sh) and the diff of expected/ shows what moved.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "integration_support.h"

namespace {
namespace fs = std::filesystem;

const std::string kGolden = std::string(DDP_SOURCE_DIR) + "/tests/data/golden";

struct GoldenCommand {
  std::string name;
  std::vector<std::string> args;  // {data} and {out} still in them
  std::vector<std::string> files;
};

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<GoldenCommand> golden_commands() {
  std::vector<GoldenCommand> out;
  std::ifstream in(kGolden + "/commands.txt");
  for (std::string line; std::getline(in, line);) {
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    std::vector<std::string> cols;
    for (size_t at = 0;;) {
      const size_t bar = line.find('|', at);
      cols.push_back(trim(line.substr(at, bar == std::string::npos ? std::string::npos : bar - at)));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    out.push_back({cols[0], words(cols.at(1)), cols.size() > 2 ? words(cols[2]) : std::vector<std::string>{}});
  }
  return out;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the command in the golden folder, stdout into a file; its exit code.
int run_in_golden(const std::vector<std::string>& args, const std::string& stdout_path, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(kGolden.c_str()) != 0) ::_exit(126);
    const int out = ::open(stdout_path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    const int err = ::open(log.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A member that is null says what an absent one says (records.def reads them alike): both are left out.
nlohmann::json without_nulls(const nlohmann::json& j) {
  if (j.is_array()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : j) a.push_back(without_nulls(x));
    return a;
  }
  if (!j.is_object()) return j;
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [k, v] : j.items())
    if (!v.is_null()) o[k] = without_nulls(v);
  return o;
}

// "" when equal, else where they first differ.
std::string json_difference(const nlohmann::json& want_in, const nlohmann::json& got_in) {
  const nlohmann::json want = without_nulls(want_in), got = without_nulls(got_in);
  if (want == got) return "";
  const nlohmann::json patch = nlohmann::json::diff(want, got);
  std::string text = patch.size() > 3 ? nlohmann::json(patch.begin(), patch.begin() + 3).dump() : patch.dump();
  return text.size() > 1200 ? text.substr(0, 1200) + "..." : text;
}

std::string text_difference(const std::string& want, const std::string& got) {
  if (want == got) return "";
  if (want.find('\0') != std::string::npos || got.find('\0') != std::string::npos)
    return "the bytes differ (" + std::to_string(want.size()) + " expected, " + std::to_string(got.size()) +
           " written)";
  std::istringstream a(want), b(got);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ea = !std::getline(a, la), eb = !std::getline(b, lb);
    if (ea || eb || la != lb)
      return "line " + std::to_string(line) + ": expected \"" + (ea ? "<end>" : la) + "\", got \"" +
             (eb ? "<end>" : lb) + "\"";
  }
}

// JSON as JSON (a --json document may follow progress lines), anything else as text or bytes.
std::string difference(const std::string& path, std::string want, std::string got) {
  const bool json = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  const nlohmann::json jw = nlohmann::json::parse(want, nullptr, false);
  if (json || (!jw.is_discarded() && !want.empty()))
    return json_difference(jw, nlohmann::json::parse(got, nullptr, false));
  return text_difference(want, got);
}

class Golden : public ::testing::TestWithParam<GoldenCommand> {};

TEST_P(Golden, GivesItsRecordedAnswer) {
  const GoldenCommand& c = GetParam();
  const std::string out = ddptest::fresh_dir("golden_" + c.name);
  fs::create_directories(out);
  std::vector<std::string> args = {DDP_PROFILE_EXE};
  for (std::string a : c.args) {
    replace_all(a, "{data}", ".");
    replace_all(a, "{out}", out);
    args.push_back(a);
  }
  const std::string expected = kGolden + "/expected/" + c.name;
  const int rc = run_in_golden(args, out + ".stdout", out + ".log");
  EXPECT_EQ(std::to_string(rc) + "\n", slurp(expected + ".rc")) << ddptest::read_file(out + ".log");
  std::string printed = slurp(out + ".stdout");
  replace_all(printed, out, "{out}");
  EXPECT_EQ(difference(c.name + ".stdout", slurp(expected + ".stdout"), printed), "") << c.name << " stdout";
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(expected, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), expected).string();
    ASSERT_TRUE(fs::exists(out + "/" + rel)) << c.name << " wrote no " << rel;
    std::string got = slurp(out + "/" + rel);
    if (rel.find(".json") != std::string::npos) replace_all(got, out, "{out}");
    EXPECT_EQ(difference(rel, slurp(e.path().string()), got), "") << c.name << ": " << rel;
  }
}

INSTANTIATE_TEST_SUITE_P(Commands, Golden, ::testing::ValuesIn(golden_commands()),
                         [](const ::testing::TestParamInfo<GoldenCommand>& i) { return i.param.name; });

// The list is read, and every command has its answer: a line added without expect.sh fails here, not silently.
TEST(GoldenList, EveryCommandHasAnAnswer) {
  const std::vector<GoldenCommand> commands = golden_commands();
  ASSERT_GE(commands.size(), 20u);
  for (const GoldenCommand& c : commands) EXPECT_TRUE(fs::exists(kGolden + "/expected/" + c.name + ".rc")) << c.name;
}

}  // namespace
