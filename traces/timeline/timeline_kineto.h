#pragma once
// Per-rank PyTorch profiler traces as one timeline, built in the same reading as the analysis: the viewer hands
// load_kineto_run (traces/kineto/kineto_import.h) a KinetoTimelineParts' reader, each file's events go into a
// builder of their own while the importer reads them, and timeline_from_kineto_run then puts the parts on the clock
// the import measured. A file is read once, not once for the analysis and again for the timeline.
#include <memory>
#include <string>
#include <vector>

#include "traces/kineto/kineto_import.h"
#include "traces/timeline/timeline.h"

namespace ddp {

class KinetoTimelineParts {
 public:
  KinetoTimelineParts();
  ~KinetoTimelineParts();
  KinetoTimelineParts(const KinetoTimelineParts&) = delete;
  KinetoTimelineParts& operator=(const KinetoTimelineParts&) = delete;

  // For load_kineto_run's each_file. Without a step window only: with --steps the window is known after the
  // reading, so those files are read again, keeping only the window's events (a big trace a few steps at a time).
  KinetoFileEvents reader();

  struct Part;  // one file's builder (timeline_from_kineto.cpp)

 private:
  friend bool timeline_from_kineto_run(const RunTrace& run, KinetoTimelineParts& parts, Timeline& out,
                                       std::string& error);
  std::vector<std::unique_ptr<Part>> parts_;
};

// As timeline_from_kineto_run(run, out, error) (traces/timeline/timeline.h), taking each file's events from `parts`
// where the reading filled one, reading it again where not (a step window, a file the reader did not see).
bool timeline_from_kineto_run(const RunTrace& run, KinetoTimelineParts& parts, Timeline& out, std::string& error);

}  // namespace ddp
