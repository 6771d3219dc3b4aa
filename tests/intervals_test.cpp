#include "util/intervals.hpp"

#include <catch2/catch.hpp>

using dtrace::IntervalSet;
using Intervals = std::vector<IntervalSet::Interval>;

TEST_CASE("an empty set", "[intervals]") {
  IntervalSet s;
  CHECK(s.empty());
  CHECK(s.size() == 0);
  CHECK_FALSE(s.contains(0));
  CHECK(s.to_string().empty());
}

TEST_CASE("contiguous inserts stay one interval", "[intervals]") {
  IntervalSet s;
  for (int v = 0; v < 10; ++v) s.insert(v);
  CHECK(s.intervals() == Intervals{{0, 9}});
  CHECK(s.size() == 10);
  CHECK(s.min() == 0);
  CHECK(s.max() == 9);
  CHECK(s.to_string() == "0-9");
}

TEST_CASE("inserts in any order merge neighbours on both sides", "[intervals]") {
  IntervalSet s;
  for (int v : {5, 3, 9, 4, 12, 11, 7}) s.insert(v);
  CHECK(s.intervals() == Intervals{{3, 5}, {7, 7}, {9, 9}, {11, 12}});
  CHECK(s.to_string() == "3-5,7,9,11-12");
  s.insert(8);  // bridges 7 and 9
  CHECK(s.intervals() == Intervals{{3, 5}, {7, 9}, {11, 12}});
  s.insert(6);  // bridges 3-5 and 7-9
  s.insert(10);
  CHECK(s.intervals() == Intervals{{3, 12}});
  s.insert(2);  // extends the front
  CHECK(s.intervals() == Intervals{{2, 12}});
  CHECK(s.size() == 11);
}

TEST_CASE("duplicates and members change nothing", "[intervals]") {
  IntervalSet s;
  for (int v : {1, 2, 3, 2, 1, 3}) s.insert(v);
  CHECK(s.intervals() == Intervals{{1, 3}});
  IntervalSet t;
  for (int v : {3, 1, 2}) t.insert(v);
  CHECK(s == t);
}

TEST_CASE("contains", "[intervals]") {
  IntervalSet s;
  for (int v : {0, 1, 2, 7, 10, 11}) s.insert(v);
  for (int v : {0, 1, 2, 7, 10, 11}) CHECK(s.contains(v));
  for (int v : {-1, 3, 6, 8, 9, 12}) CHECK_FALSE(s.contains(v));
}

TEST_CASE("negative and large values", "[intervals]") {
  IntervalSet s;
  s.insert(-3);
  s.insert(-2);
  s.insert(INT64_MAX);
  s.insert(INT64_MIN);
  CHECK(s.contains(INT64_MAX));
  CHECK(s.contains(INT64_MIN));
  CHECK(s.min() == INT64_MIN);
  CHECK(s.max() == INT64_MAX);
}

TEST_CASE("a single value prints without a range", "[intervals]") {
  IntervalSet s;
  s.insert(3);
  CHECK(s.to_string() == "3");
  CHECK(s.size() == 1);
}

TEST_CASE("a range merges with the intervals it overlaps or touches", "[intervals]") {
  IntervalSet s;
  s.insert(1);
  s.insert(5);
  s.insert(20);
  s.insert_range(3, 10);
  CHECK(s.to_string() == "1,3-10,20");
  s.insert_range(2, 2);
  CHECK(s.to_string() == "1-10,20");
  s.insert_range(11, 19);
  CHECK(s.to_string() == "1-20");
  s.insert_range(30, 40);
  s.insert_range(25, 26);
  CHECK(s.to_string() == "1-20,25-26,30-40");
  s.insert_range(INT64_MIN, INT64_MIN);
  s.insert_range(INT64_MAX - 1, INT64_MAX);
  CHECK(s.min() == INT64_MIN);
  CHECK(s.max() == INT64_MAX);
  CHECK(s.size() == 20 + 2 + 11 + 1 + 2);
}
