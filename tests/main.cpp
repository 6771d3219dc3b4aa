// The one Catch2 main for the unit tests; each tests/*_test.cpp is named after
// the source file it tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
