// The plain-data pickle reader on pickles written by CPython's own pickler (protocols 2-4, bytes below made with
// pickle.dumps), on objects it must refuse, and on damaged or hostile bytes.
#include <gtest/gtest.h>

#include <string>

#include "traces/flight_recorder/plain_pickle.h"

namespace {

nlohmann::json read_ok(const std::string& bytes) {
  nlohmann::json j;
  std::string err;
  EXPECT_TRUE(ddp::read_plain_pickle(bytes, j, err)) << err;
  return j;
}

std::string read_error(const std::string& bytes) {
  nlohmann::json j;
  std::string err;
  EXPECT_FALSE(ddp::read_plain_pickle(bytes, j, err)) << j.dump();
  return err;
}

std::string bytes_of(const char* s, size_t n) { return std::string(s, n); }

// pickle.dumps({"a": [1, -2, 3.5, True, None, "x", 300, 70000], "b": (1, 2), "c": {5: "five"}}, protocol=2)
const std::string kPlain2 = bytes_of(
    "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4a\xfe\xff\xff\xff\x47\x40\x0c"
    "\x00\x00\x00\x00\x00\x00\x88\x4e\x58\x01\x00\x00\x00\x78\x71\x03\x4d\x2c\x01\x4a\x70\x11\x01\x00\x65\x58\x01\x00"
    "\x00\x00\x62\x71\x04\x4b\x01\x4b\x02\x86\x71\x05\x58\x01\x00\x00\x00\x63\x71\x06\x7d\x71\x07\x4b\x05\x58\x04\x00"
    "\x00\x00\x66\x69\x76\x65\x71\x08\x73\x75\x2e",
    95);

TEST(PlainPickle, ReadsProtocolTwoScalarsListsTuplesAndDicts) {
  const nlohmann::json j = read_ok(kPlain2);
  EXPECT_EQ(j["a"], nlohmann::json::parse(R"([1, -2, 3.5, true, null, "x", 300, 70000])"));
  EXPECT_EQ(j["b"], nlohmann::json::parse("[1, 2]"));  // a tuple
  EXPECT_EQ(j["c"]["5"], "five");                      // an int key, as JSON has only string keys
  EXPECT_TRUE(ddp::looks_like_pickle(kPlain2));
  EXPECT_FALSE(ddp::looks_like_pickle("{\"entries\": []}"));
}

TEST(PlainPickle, AValueMemoizedBeforeItWasFilledIsSeenFilled) {
  // x = {"k": 1}; pickle.dumps([x, x], protocol=2): x is memoized empty, filled, then fetched again by BINGET.
  const nlohmann::json j = read_ok(
      bytes_of("\x80\x02\x5d\x71\x00\x28\x7d\x71\x01\x58\x01\x00\x00\x00\x6b\x71\x02\x4b\x01\x73\x68\x01\x65\x2e", 24));
  EXPECT_EQ(j, nlohmann::json::parse(R"([{"k": 1}, {"k": 1}])"));
}

TEST(PlainPickle, LongsUpToSixtyFourBitsWithTheirSign) {
  // pickle.dumps([2**40, -2**40, -1, 2**63 - 1], protocol=2)
  const nlohmann::json j = read_ok(bytes_of(
      "\x80\x02\x5d\x71\x00\x28\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x06\x00\x00\x00\x00\x00\xff\x4a\xff\xff\xff\xff\x8a"
      "\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x65\x2e",
      39));
  EXPECT_EQ(j[0].get<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(j[1].get<int64_t>(), -(int64_t{1} << 40));
  EXPECT_EQ(j[2].get<int64_t>(), -1);
  EXPECT_EQ(j[3].get<int64_t>(), INT64_MAX);
}

TEST(PlainPickle, ProtocolFourFramesAndMemoizeAndProtocolThreeBytes) {
  // pickle.dumps({"entries": [{"op": "x"}], "version": "2.10"}, protocol=4)
  const nlohmann::json j = read_ok(bytes_of(
      "\x80\x04\x95\x2f\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x07\x65\x6e\x74\x72\x69\x65\x73\x94\x5d\x94\x7d\x94"
      "\x8c\x02\x6f\x70\x94\x8c\x01\x78\x94\x73\x61\x8c\x07\x76\x65\x72\x73\x69\x6f\x6e\x94\x8c\x04\x32\x2e\x31\x30\x94"
      "\x75\x2e",
      58));
  EXPECT_EQ(j, nlohmann::json::parse(R"({"entries": [{"op": "x"}], "version": "2.10"})"));
  // pickle.dumps({"b": b"ab"}, protocol=3)
  EXPECT_EQ(read_ok(bytes_of("\x80\x03\x7d\x71\x00\x58\x01\x00\x00\x00\x62\x71\x01\x43\x02\x61\x62\x71\x02\x73\x2e",
                             21))["b"],
            "ab");
}

TEST(PlainPickle, AnObjectIsRefusedNeverBuilt) {
  // pickle.dumps(ValueError("x"), protocol=2): GLOBAL exceptions.ValueError, then REDUCE.
  const std::string err = read_error(bytes_of(
      "\x80\x02\x63\x65\x78\x63\x65\x70\x74\x69\x6f\x6e\x73\x0a\x56\x61\x6c\x75\x65\x45\x72\x72\x6f\x72\x0a\x71\x00\x58"
      "\x01\x00\x00\x00\x78\x71\x01\x85\x71\x02\x52\x71\x03\x2e",
      42));
  EXPECT_NE(err.find("an object, not plain data"), std::string::npos) << err;
  EXPECT_NE(err.find("at byte 2"), std::string::npos) << err;
}

TEST(PlainPickle, DamagedBytesSayWhereAndWhy) {
  EXPECT_NE(read_error(kPlain2.substr(0, kPlain2.size() - 1)).find("without STOP"), std::string::npos);
  EXPECT_NE(read_error(kPlain2.substr(0, 9)).find("truncated"), std::string::npos);
  EXPECT_NE(read_error(std::string("\x80\x02h\x07.", 5)).find("memo key never stored"), std::string::npos);
  EXPECT_NE(read_error(std::string("\x80\x02s.", 4)).find("stack underflow"), std::string::npos);
  EXPECT_NE(read_error(std::string("\x80\x02K\x01K\x02.", 7)).find("2 values on the stack"), std::string::npos);
  EXPECT_NE(read_error(std::string("\x80\x02\xff.", 4)).find("opcode 0xff"), std::string::npos);
}

TEST(PlainPickle, AValueNamedTwiceAtEveryLevelCannotBlowUpTheOutput) {
  // x0 = []; x(k) = [x(k-1), x(k-1)] for 60 levels: ~500 bytes of pickle, 2^60 values if written out.
  std::string p = "\x80\x02]q";
  p += '\0';
  p += '0';
  for (int k = 1; k <= 60; ++k) {
    p += "(h";
    p += static_cast<char>(k - 1);
    p += 'h';
    p += static_cast<char>(k - 1);
    p += "lq";
    p += static_cast<char>(k);
    if (k < 60) p += '0';  // POP: only the memo keeps the lower levels
  }
  p += '.';
  EXPECT_NE(read_error(p).find("repeated beyond the file's size"), std::string::npos);
}

}  // namespace
