#pragma once
// An EventSink that keeps what an ActivityCollector writes, for tests to inspect: lanes and interned names by id, and
// every event in the order written.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "profiler/gpu_activity.h"
#include "traces/model/event.h"

namespace ddp::testing {

struct MemoryEventSink final : prof::EventSink {
  std::vector<std::string> lane_names;
  std::map<uint16_t, std::string> names;
  std::vector<Event> got;
  int max_lanes = 250;

  int lane(const std::string& name) override {
    for (size_t i = 0; i < lane_names.size(); ++i)
      if (lane_names[i] == name) return static_cast<int>(i);
    if (static_cast<int>(lane_names.size()) >= max_lanes) return -1;
    lane_names.push_back(name);
    return static_cast<int>(lane_names.size() - 1);
  }
  void name(uint16_t id, const std::string& text) override { names[id] = text; }
  void events(uint8_t lane, const Event* e, size_t n) override {
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(e[i].lane, lane);
      got.push_back(e[i]);
    }
  }

  const std::string& lane_of(const Event& e) const { return lane_names.at(e.lane); }
  const std::string& name_of(const Event& e) const { return names.at(e.bucket); }
  std::vector<Event> with(Stage s) const {
    std::vector<Event> v;
    for (const auto& e : got)
      if (e.stage_id() == s) v.push_back(e);
    return v;
  }
};

}  // namespace ddp::testing
