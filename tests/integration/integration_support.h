#pragma once
// What every integration test needs: our binary, a fresh folder per test, real processes started with their output
// captured into a file and waited for with a deadline, and the JSON they write or print.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/launch/environment/loopback_port.h"
#include "runtime/launch/heartbeat/progress.h"
#include "tests/support/remove_tree.h"

namespace ddptest {

inline const std::string kExe = DDP_PROFILE_EXE;

// TMP/ddp_it_<pid>/<name>, removed if it exists; its parent is created, so `name` can be a run folder to create.
inline std::string fresh_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("ddp_it_" + std::to_string(::getpid())) / name;
  ddp::testing::remove_tree(d.string());  // not fs::remove_all: see remove_tree.h
  fs::create_directories(d.parent_path());
  return d.string();
}

struct Proc {
  pid_t pid = -1;
  std::string log;
};

inline Proc start(const std::vector<std::string>& args, const std::string& log,
                  const std::map<std::string, std::string>& env = {}) {
  Proc p;
  p.log = log;
  p.pid = ::fork();
  if (p.pid == 0) {
    int fd = ::open(log.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return p;
}

// Exit code (128+signal when killed), or -1 on timeout (the process is then killed).
inline int wait(Proc& p, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(p.pid, &status, WNOHANG);
    if (r == p.pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(p.pid, SIGKILL);
      ::waitpid(p.pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Result {
  int code;
  std::string output;
};

inline Result run(const std::vector<std::string>& args, const std::string& log, double timeout_s = 300,
                  const std::map<std::string, std::string>& env = {}) {
  Proc p = start(args, log, env);
  int code = wait(p, timeout_s);
  return {code, read_file(log)};
}

// A TCP port free on loopback right now, for a rendezvous the test starts itself (the supervisor's own pick).
inline int free_port() { return ddp::free_loopback_port(); }

// Waits (up to timeout_s) until `rank` of the run in `dir` has reached `step`; returns its last heartbeat.
inline ddp::ProgressSnapshot wait_for_step(const std::string& dir, int rank, int64_t step, double timeout_s = 120) {
  ddp::ProgressSnapshot p;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    p = ddp::read_progress(ddp::progress_file(dir, rank));
    if (p.present && p.step >= step) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return p;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

// The JSON document a command printed (--json), after any progress lines before it.
inline nlohmann::json printed_json(const std::string& output) {
  auto at = output.find('{');
  return at == std::string::npos ? nlohmann::json(nlohmann::json::value_t::discarded)
                                 : nlohmann::json::parse(output.substr(at), nullptr, false);
}

}  // namespace ddptest
