// The test binaries' main: GoogleTest's, with the temporary files of each test process under a folder of its own.
// ctest runs every test in a process of its own; each one (and every rank, launcher or script it starts, through the
// inherited TMPDIR) writes its run folders and scratch files there, and the folder is removed when the process' tests
// passed. A failed test's files stay, named on stderr, to be looked at. Before, a suite run left some seventy folders
// in /tmp, more with every run.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/remove_tree.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/ddp_test.XXXXXX";
  const char* dir = ::mkdtemp(templ.data());
  if (!dir) {
    std::perror(("cannot make a temporary folder from " + templ).c_str());
    return 2;
  }
  ::chmod(dir, 0755);  // daemons a test starts that drop privileges (Slurm's, munge's) reach their files in it
  ::setenv("TMPDIR", dir, 1);
  const int rc = RUN_ALL_TESTS();
  if (rc == 0)
    ddp::testing::remove_tree(dir);
  else
    std::fprintf(stderr, "the failed test's temporary files are kept in %s\n", dir);
  return rc;
}
