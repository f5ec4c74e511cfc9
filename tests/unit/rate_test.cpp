#include "floodgate/rate.hpp"

#include <gtest/gtest.h>

namespace floodgate {
namespace {

constexpr Micros kSec = kMicrosPerSecond;

Limit one(std::string_view text) {
  auto parsed = parse_limits(text);
  EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.status();
  if (!parsed.ok()) return {};
  EXPECT_EQ(parsed->size(), 1u) << text;
  return parsed->front();
}

std::string error_of(std::string_view text) {
  auto parsed = parse_limits(text);
  EXPECT_FALSE(parsed.ok()) << text << " parsed";
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

TEST(ParseLimits, LimitsNotation) {
  EXPECT_EQ(one("10/minute"), (Limit{10, 60 * kSec, 0}));
  EXPECT_EQ(one("10 per minute"), (Limit{10, 60 * kSec, 0}));
  EXPECT_EQ(one("5 per 2 seconds"), (Limit{5, 2 * kSec, 0}));
  EXPECT_EQ(one("100/hour"), (Limit{100, 3600 * kSec, 0}));
  EXPECT_EQ(one("  7 / 3 hours "), (Limit{7, 3 * 3600 * kSec, 0}));
  EXPECT_EQ(one("1/Second"), (Limit{1, kSec, 0}));
  EXPECT_EQ(one("10per minute"), (Limit{10, 60 * kSec, 0}));
}

TEST(ParseLimits, UnitsSingularPluralAndShort) {
  EXPECT_EQ(one("1/day").period, 86400 * kSec);
  EXPECT_EQ(one("1 per 2 days").period, 2 * 86400 * kSec);
  EXPECT_EQ(one("1/month").period, 30 * 86400 * kSec);
  EXPECT_EQ(one("1/year").period, 360 * 86400 * kSec);  // as Python's limits
  EXPECT_EQ(one("1/ms").period, 1000);
  EXPECT_EQ(one("1/microsecond").period, 1);
  EXPECT_EQ(one("1 per 250 milliseconds").period, 250'000);
  EXPECT_EQ(one("1/s").period, kSec);
  EXPECT_EQ(one("3 per 10 secs").period, 10 * kSec);
  EXPECT_EQ(one("1/min").period, 60 * kSec);
  EXPECT_EQ(one("1/hr").period, 3600 * kSec);
}

TEST(ParseLimits, SeveralLimitsWithEverySeparator) {
  for (const char* text : {"2/second; 10/minute", "2/second, 10/minute", "2/second|10/minute"}) {
    auto parsed = parse_limits(text);
    ASSERT_TRUE(parsed.ok()) << text;
    ASSERT_EQ(parsed->size(), 2u);
    EXPECT_EQ((*parsed)[0], (Limit{2, kSec, 0}));
    EXPECT_EQ((*parsed)[1], (Limit{10, 60 * kSec, 0}));
  }
}

TEST(ParseLimits, Burst) {
  EXPECT_EQ(one("10/second burst 50"), (Limit{10, kSec, 50}));
  EXPECT_EQ(one("10/second burst 50").capacity(), 50);
  EXPECT_EQ(one("10/second").capacity(), 10);
}

TEST(ParseLimits, ErrorsQuoteTheOffendingText) {
  EXPECT_NE(error_of("10/fortnight").find("\"fortnight\""), std::string::npos);
  EXPECT_NE(error_of("10/fortnight").find("unknown unit"), std::string::npos);
  EXPECT_NE(error_of("ten/minute").find("the amount"), std::string::npos);
  EXPECT_NE(error_of("0/minute").find("at least 1"), std::string::npos);
  EXPECT_NE(error_of("-5/minute").find("\"-5\""), std::string::npos);
  EXPECT_NE(error_of("1.5/minute").find("\"1.5\""), std::string::npos);
  EXPECT_NE(error_of("10 every minute").find("\"every\""), std::string::npos);
  EXPECT_NE(error_of("10/minute extra").find("\"extra\""), std::string::npos);
  EXPECT_NE(error_of("10/minute;").find("empty limit"), std::string::npos);
  EXPECT_NE(error_of("").find("empty limit"), std::string::npos);
  EXPECT_NE(error_of("10/").find("unknown unit"), std::string::npos);
  EXPECT_NE(error_of("10/second burst").find("the burst"), std::string::npos);
  EXPECT_NE(error_of("10/second burst 0").find("at least 1"), std::string::npos);
  // Every error says what was expected.
  EXPECT_NE(error_of("10/fortnight").find("expected e.g."), std::string::npos);
}

TEST(ParseLimits, NumbersBeyond2To53AreRejectedNotRounded) {
  EXPECT_EQ(one("9007199254740992/second").amount, kMaxAmount);  // 2^53 itself
  EXPECT_NE(error_of("9007199254740993/second").find("exceeds 2^53"), std::string::npos);
  EXPECT_NE(error_of("99999999999999999999999/second").find("exceeds 2^53"), std::string::npos);
  // A period longer than 2^53 µs (285 years).
  EXPECT_EQ(one("1 per 100 years").period, Micros{100} * 360 * 86400 * kSec);
  EXPECT_NE(error_of("1 per 1000 years").find("period"), std::string::npos);
}

TEST(ParseLimits, RoundTripsThroughToString) {
  for (const char* text : {"10/minute", "5 per 2 seconds", "3/second burst 5", "1/microsecond",
                           "2/second; 10/minute", "7 per 90 minutes"}) {
    auto parsed = parse_limits(text);
    ASSERT_TRUE(parsed.ok());
    auto again = parse_limits(to_string(*parsed));
    ASSERT_TRUE(again.ok()) << to_string(*parsed);
    EXPECT_EQ(*parsed, *again) << text;
  }
  EXPECT_EQ(to_string(one("10 per 60 seconds")), "10/minute");
}

TEST(LimitMake, RejectsOutOfRange) {
  EXPECT_FALSE(Limit::make(0, kSec).ok());
  EXPECT_FALSE(Limit::make(kMaxAmount + 1, kSec).ok());
  EXPECT_FALSE(Limit::make(1, 0).ok());
  EXPECT_FALSE(Limit::make(1, -5).ok());
  EXPECT_FALSE(Limit::make(1, kMaxPeriod + 1).ok());
  EXPECT_FALSE(Limit::make(1, kSec, -1).ok());
  EXPECT_TRUE(Limit::make(kMaxAmount, kMaxPeriod, kMaxAmount).ok());
}

}  // namespace
}  // namespace floodgate
