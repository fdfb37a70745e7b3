// What a run listens on: the rendezvous store of a supervisor-launched run on loopback only, never on every interface
// (anyone who could reach the host could otherwise write into a running job's store).
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <set>

#include "integration_support.h"
#include "runtime/launch/heartbeat/progress.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;

struct Listener {
  std::string local;  // /proc/net/tcp's hex "ADDR:PORT"
  bool wildcard;      // 0.0.0.0 or ::
  int port;
};

// The sockets a process listens on: its fds' socket inodes matched against /proc/<pid>/net/tcp and tcp6.
std::vector<Listener> listening_sockets(int pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::string target = fs::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<Listener> out;
  for (const char* table : {"tcp", "tcp6"}) {
    std::istringstream in(ddptest::read_file("/proc/" + std::to_string(pid) + "/net/" + table));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> inode;
      if (st != "0A" || !inodes.count(inode)) continue;  // 0A: LISTEN
      const std::string addr = local.substr(0, local.find(':'));
      out.push_back({local, addr.find_first_not_of('0') == std::string::npos,
                     std::stoi(local.substr(local.find(':') + 1), nullptr, 16)});
    }
  }
  return out;
}

TEST(ListeningSockets, ASupervisedRunListensOnLoopbackOnly) {
  std::string d = ddptest::fresh_dir("listen");
  ddptest::Proc sup = ddptest::start({ddptest::kExe, "--record", "--out", d, "--epochs", "200"}, d + ".log");
  ProgressSnapshot p[2];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    p[0] = read_progress(progress_file(d, 0));
    p[1] = read_progress(progress_file(d, 1));
    if (p[0].present && p[1].present && p[0].step >= 5 && p[1].step >= 5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(p[1].step, 5) << "the ranks never got going";
  std::vector<Listener> all;
  for (int r = 0; r < 2; ++r)
    for (const Listener& l : listening_sockets(p[r].pid)) {
      all.push_back(l);
      EXPECT_FALSE(l.wildcard) << "rank " << r << " listens on every interface: " << l.local;
    }
  ::kill(sup.pid, SIGTERM);
  ddptest::wait(sup, 30);
  // Rank 0 serves the store (and Gloo its pairs): there is something to look at, all of it on 127.0.0.1.
  ASSERT_FALSE(all.empty());
  for (const Listener& l : all) EXPECT_EQ(l.local.substr(0, 8), "0100007F") << l.local;
}

}  // namespace
