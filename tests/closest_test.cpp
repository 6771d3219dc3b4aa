// The words closest to a mistyped command (src/util/closest.hpp).
#include "util/closest.hpp"

#include <catch2/catch.hpp>

using dtrace::closest_words;
using dtrace::edit_distance;
using Words = std::vector<std::string>;

TEST_CASE("edit distance counts inserts, deletes, replacements and swaps", "[closest]") {
  CHECK(edit_distance("diff", "diff") == 0);
  CHECK(edit_distance("difff", "diff") == 1);  // one inserted
  CHECK(edit_distance("dif", "diff") == 1);    // one deleted
  CHECK(edit_distance("dIff", "diff") == 1);   // one replaced
  CHECK(edit_distance("shwo", "show") == 1);   // two neighbours swapped
  CHECK(edit_distance("", "tax") == 3);
  CHECK(edit_distance("tax", "") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("bisect", "verify") == edit_distance("verify", "bisect"));
}

TEST_CASE("the closest commands are named, and none when nothing is close", "[closest]") {
  const Words commands{"diff", "bisect", "hash", "show", "check", "env", "exec", "tax", "verify"};
  CHECK(closest_words("difff", commands) == Words{"diff"});
  CHECK(closest_words("bisetc", commands) == Words{"bisect"});
  CHECK(closest_words("chek", commands) == Words{"check"});
  CHECK(closest_words("exe", commands) == Words{"exec"});
  CHECK(closest_words("hsow", commands) == Words{"show"});
  CHECK(closest_words("ta", commands) == Words{"tax"});
  // Equally close: both, in the given order.
  CHECK(closest_words("dift", Words{"diff", "dirt", "dip"}) == Words{"diff", "dirt"});
  // Two edits from a two-letter word would reach anything: not suggested.
  CHECK(closest_words("ex", commands).empty());
  CHECK(closest_words("frobnicate", commands).empty());
  CHECK(closest_words("xy", commands).empty());
  CHECK(closest_words("", commands).empty());
}
