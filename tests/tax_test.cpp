// dtrace tax's arithmetic and its reading of step times (src/workflow/tax.cpp).
#include "workflow/tax.hpp"

#include <bit>

#include "dtrace/recorder.hpp"
#include "recorder_support.hpp"

using dtrace::Level;
using dtrace::Recorder;
using dtrace::RecordIo;
using dtrace::ReplayRequest;
using test_support::options_for;
using test_support::TempDir;

namespace {

// One rank's steps, each with a loss metric and a step_seconds timing record.
void write_rank(const std::string& run, int rank, const std::vector<double>& seconds,
                bool last_step_open = false) {
  auto options = options_for(run, rank, 2);
  auto recorder = Recorder::open(options, ReplayRequest{});
  for (std::size_t step = 0; step < seconds.size(); ++step) {
    recorder->begin_step(static_cast<std::int64_t>(step));
    auto scope = recorder->scope("step");
    recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 1.0f);
    recorder->scalar(Level::step, "time", RecordIo::timing, "record_seconds", "f64",
                     std::bit_cast<std::uint64_t>(100.0), 100.0);  // not the step time
    recorder->scalar(Level::step, "time", RecordIo::timing, "step_seconds", "f64",
                     std::bit_cast<std::uint64_t>(seconds[step]), seconds[step]);
    if (!last_step_open || step + 1 < seconds.size()) recorder->end_step();
  }
}

}  // namespace

TEST_CASE("quantile interpolates between the sorted values") {
  using dtrace::workflow::quantile;
  CHECK(quantile({}, 0.5) == 0.0);
  CHECK(quantile({3.0}, 0.25) == 3.0);
  CHECK(quantile({4.0, 1.0, 3.0, 2.0}, 0.5) == Approx(2.5));
  CHECK(quantile({4.0, 1.0, 3.0, 2.0}, 0.25) == Approx(1.75));
  CHECK(quantile({4.0, 1.0, 3.0, 2.0}, 1.0) == 4.0);
}

TEST_CASE("step_times: the slowest rank's step_seconds per complete step, in step order") {
  TempDir dir;
  write_rank(dir / "run", 0, {0.5, 0.10, 0.20, 0.9});
  write_rank(dir / "run", 1, {0.4, 0.15, 0.10, 0.9}, /*last_step_open=*/true);
  auto times = dtrace::workflow::step_times(dir / "run");
  INFO((times ? std::string() : times.error().message));
  REQUIRE(times.ok());
  // Step 3 is incomplete on rank 1, so only rank 0's record counts for it.
  CHECK(*times == std::vector<double>{0.5, 0.15, 0.20, 0.9});
}

TEST_CASE("step_times: a run without step_seconds records is an error that says what is missing") {
  TempDir dir;
  {
    auto recorder = Recorder::open(options_for(dir / "run"), ReplayRequest{});
    recorder->begin_step(0);
    recorder->scalar_f32(Level::step, "loss", RecordIo::metric, "loss", 1.0f);
    recorder->end_step();
  }
  auto times = dtrace::workflow::step_times(dir / "run");
  REQUIRE_FALSE(times.ok());
  CHECK_THAT(times.error().message,
             Catch::Contains("\"io\":\"timing\"") && Catch::Contains("step_seconds"));
}
