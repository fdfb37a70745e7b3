// Hangs named within seconds at default settings, with what every rank was doing.
#include <gtest/gtest.h>
#include <signal.h>

#include "integration_support.h"
#include "runtime/launch/heartbeat/progress.h"

namespace {
using namespace ddp;

// The default allowance is max(10 s, 20x the median step time): the tests' steps take milliseconds, so 10 s, and the
// supervisor must end the run a little after it (it then ends the ranks within 3 s).
constexpr double kNamedWithinS = kHangFloorS + 8;

TEST(Hang, AnInjectedHangIsNamedWithinTheFloorWithWhatEveryRankWasDoing) {
  std::string d = ddptest::fresh_dir("hang");
  auto t0 = std::chrono::steady_clock::now();
  auto r = ddptest::run(
      {ddptest::kExe, "--record", "--out", d, "--epochs", "200", "--inject-fault", "rank=1,step=5,kind=hang"},
      d + ".log", 120);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_LT(took, kNamedWithinS + 5) << r.output;
  EXPECT_NE(r.output.find("rank 1 stopped in step at step 5 for 1"), std::string::npos) << r.output;
  // Rank 0 ran into step 5's gradient allreduce and waits there for rank 1.
  EXPECT_NE(r.output.find("rank 0 waits in allreduce (bucket 0, step 5)"), std::string::npos) << r.output;
  auto st = ddptest::read_json(d + "/run_status.json");
  EXPECT_EQ(st["culprit"], 1);
}

TEST(Hang, AStoppedRankIsNamedAtDefaultSettings) {
  std::string d = ddptest::fresh_dir("sigstop");
  ddptest::Proc sup = ddptest::start({ddptest::kExe, "--record", "--out", d, "--epochs", "200"}, d + ".log");
  ProgressSnapshot p1 = ddptest::wait_for_step(d, 1, 20);
  ASSERT_GE(p1.step, 20) << "rank 1 never got going";
  ASSERT_EQ(::kill(p1.pid, SIGSTOP), 0);
  auto stopped_at = std::chrono::steady_clock::now();
  int code = ddptest::wait(sup, 60);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  std::string out = ddptest::read_file(d + ".log");
  ::kill(p1.pid, SIGKILL);  // in case it outlived the run
  EXPECT_EQ(code, 1) << out;
  EXPECT_LT(took, kNamedWithinS) << out;
  EXPECT_NE(out.find("rank 1 stopped in "), std::string::npos) << out;
  EXPECT_NE(out.find("its process is stopped"), std::string::npos) << out;
  EXPECT_NE(out.find("; rank 0 waits in "), std::string::npos) << out;
  EXPECT_EQ(ddptest::read_json(d + "/run_status.json")["culprit"], 1);
}

}  // namespace
