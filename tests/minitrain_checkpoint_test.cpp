// minitrain checkpoints: exact round trip, the newest one found, and every kind
// of bad file refused with a message naming it.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "minitrain/checkpoint.hpp"
#include "recorder_support.hpp"

namespace mt = minitrain;

namespace {

mt::TrainState sample_state(const mt::ModelShape& shape, std::int64_t step) {
  const auto layout = mt::Layout::of(shape);
  mt::TrainState s;
  s.step = step;
  mt::init_params(layout, 3, s.params);
  s.adam_m.assign(layout.total, 0.25f);
  s.adam_v.assign(layout.total, 0.5f);
  s.adam_step = step;
  s.data_position = 4 * step;
  s.rngs = {mt::Xoshiro::seeded(1), mt::Xoshiro::seeded(2)};
  return s;
}

}  // namespace

TEST_CASE("minitrain checkpoint round trip and newest", "[minitrain]") {
  test_support::TempDir dir;
  mt::ModelShape shape;
  shape.d_model = 16;
  for (std::int64_t step : {4, 8, 12})
    mt::write_checkpoint(dir / "ck", shape, sample_state(shape, step));
  std::ofstream(dir / "ck/ckpt-00000016.bin.tmp") << "a torn write";

  CHECK(mt::newest_checkpoint(dir / "ck", std::nullopt) == 12);
  CHECK(mt::newest_checkpoint(dir / "ck", 11) == 8);
  CHECK(mt::newest_checkpoint(dir / "ck", 3) == std::nullopt);
  CHECK(mt::newest_checkpoint(dir / "missing", std::nullopt) == std::nullopt);

  const auto expected = sample_state(shape, 8);
  const auto got = mt::read_checkpoint(mt::checkpoint_path(dir / "ck", 8), shape, 2);
  CHECK(got.step == 8);
  CHECK(got.params == expected.params);
  CHECK(got.adam_m == expected.adam_m);
  CHECK(got.adam_v == expected.adam_v);
  CHECK(got.adam_step == expected.adam_step);
  CHECK(got.data_position == expected.data_position);
  REQUIRE(got.rngs.size() == 2);
  CHECK(got.rngs[1].s == expected.rngs[1].s);
}

TEST_CASE("minitrain refuses bad checkpoints", "[minitrain]") {
  test_support::TempDir dir;
  mt::ModelShape shape;
  shape.d_model = 16;
  mt::write_checkpoint(dir / "ck", shape, sample_state(shape, 4));
  const std::string path = mt::checkpoint_path(dir / "ck", 4);

  SECTION("another model shape") {
    mt::ModelShape other = shape;
    other.n_layer = 3;
    CHECK_THROWS_WITH(mt::read_checkpoint(path, other, 2),
                      Catch::Contains("another configuration"));
  }
  SECTION("another world size") {
    CHECK_THROWS_WITH(mt::read_checkpoint(path, shape, 4),
                      Catch::Contains("another configuration"));
  }
  SECTION("a flipped byte") {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
    f.close();
    CHECK_THROWS_WITH(mt::read_checkpoint(path, shape, 2), Catch::Contains("checksum"));
  }
  SECTION("truncated") {
    std::filesystem::resize_file(path, 1000);
    CHECK_THROWS_WITH(mt::read_checkpoint(path, shape, 2), Catch::Contains(path));
  }
  SECTION("not a checkpoint") {
    std::ofstream(path, std::ios::trunc) << "hello";
    CHECK_THROWS_WITH(mt::read_checkpoint(path, shape, 2),
                      Catch::Contains("not a minitrain checkpoint"));
  }
  SECTION("missing") {
    CHECK_THROWS_WITH(mt::read_checkpoint(dir / "nope.bin", shape, 2),
                      Catch::Contains("cannot open"));
  }
}

TEST_CASE("minitrain checkpoint writes replace a torn temporary and leave none behind",
          "[minitrain]") {
  namespace fs = std::filesystem;
  test_support::TempDir dir;
  mt::ModelShape shape;
  shape.d_model = 16;
  const std::string path = mt::checkpoint_path(dir / "ck", 4);
  fs::create_directories(dir / "ck");
  std::ofstream(path + ".tmp") << "left by a process killed in the middle of a write";

  mt::write_checkpoint(dir / "ck", shape, sample_state(shape, 4));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  CHECK(mt::read_checkpoint(path, shape, 2).step == 4);

  // A write that cannot be put into place says so and removes its temporary.
  const std::string blocked = mt::checkpoint_path(dir / "ck", 8);
  fs::create_directories(fs::path(blocked) / "in-the-way");
  CHECK_THROWS_WITH(mt::write_checkpoint(dir / "ck", shape, sample_state(shape, 8)),
                    Catch::Contains(blocked) && Catch::Contains("cannot rename into place"));
  CHECK_FALSE(fs::exists(blocked + ".tmp"));
}
