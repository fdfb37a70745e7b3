// A full disk must not leave a truncated trace.json: the export writes a temp file and renames it when whole.
// The disk runs full through a file-size limit (RLIMIT_FSIZE) in the child, with SIGXFSZ ignored so that the write
// fails with EFBIG as it would with ENOSPC instead of the signal killing the process.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>

#include "integration_support.h"

namespace {
namespace fs = std::filesystem;

ddptest::Result run_with_file_limit(const std::vector<std::string>& args, const std::string& log, rlim_t bytes) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{bytes, bytes};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ddptest::Proc p{pid, log};
  int code = ddptest::wait(p, 120);
  return {code, ddptest::read_file(log)};
}

TEST(AtomicOutputs, AFullDiskLeavesThePreviousTraceJsonWhole) {
  std::string d = ddptest::fresh_dir("fulldisk");
  auto rec = ddptest::run({ddptest::kExe, "--record", "--out", d, "--max-steps", "20"}, d + ".log");
  ASSERT_EQ(rec.code, 0) << rec.output;
  const std::string trace = d + "/trace.json";
  const std::string before = ddptest::read_file(trace);
  ASSERT_GT(before.size(), 4096u);
  // Room for the log file, not for a new trace.json.
  auto ex = run_with_file_limit({ddptest::kExe, "--export", d}, d + ".export.log", before.size() / 2);
  EXPECT_EQ(ex.code, 1) << ex.output;
  EXPECT_NE(ex.output.find("write to " + trace + " failed"), std::string::npos) << ex.output;
  EXPECT_EQ(std::count(ex.output.begin(), ex.output.end(), '\n'), 1) << "one clear error\n" << ex.output;
  EXPECT_EQ(ddptest::read_file(trace), before) << "the previous trace.json must be left whole";
  EXPECT_FALSE(ddptest::read_json(trace).is_discarded());
  for (const auto& e : fs::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
}

}  // namespace
