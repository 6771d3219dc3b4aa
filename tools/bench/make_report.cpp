// make_report: writes the HTML report (dtrace(1), HTML REPORT) of a synthetic
// divergence too large to record for a test: every one of R ranks diverged
// somewhere in S steps, rank K first, as the origin, the others later, as
// receivers. It measures what the page costs at scale (its size, and a
// browser's time to render it: tests/e2e/report_browser.sh, RESULTS.md).
//
//   make_report FILE [--ranks 4096] [--steps 1000000] [--origin 1234]
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "report/html_report.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_report FILE [--ranks R] [--steps S] [--origin K]\n");
    return 2;
  }
  long ranks = 4096, steps = 1'000'000, origin = 1234;
  for (int i = 2; i + 1 < argc; i += 2) {
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--ranks"))
      ranks = v;
    else if (!std::strcmp(argv[i], "--steps"))
      steps = v;
    else if (!std::strcmp(argv[i], "--origin"))
      origin = v;
    else {
      std::fprintf(stderr, "make_report: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (ranks < 1 || steps < 4 || origin < 0 || origin >= ranks) {
    std::fprintf(stderr, "make_report: needs ranks >= 1, steps >= 4, 0 <= origin < ranks\n");
    return 2;
  }
  dtrace::diff::Report d;
  d.run_a = "synthetic/a";
  d.run_b = "synthetic/b";
  d.compared = {0, steps - 1, steps, ranks, static_cast<std::uint64_t>(ranks * steps * 14)};
  for (long r = 0; r < ranks; ++r) {
    dtrace::diff::Mismatch m;
    m.rank = static_cast<std::int32_t>(r);
    const bool first = r == origin;
    m.step = first ? steps / 2 : steps / 2 + 1 + (r * 7919) % (steps / 2 - 1);
    m.seq = first ? 5 : 9;
    m.scope = first ? "fwd/layer.0/mlp" : "comm/grad_allreduce";
    m.op = first ? "mlp" : "all_reduce";
    m.io = "out";
    m.name = first ? "y" : "grad";
    m.role = first ? dtrace::diff::Role::origin : dtrace::diff::Role::receiver;
    m.detail = "hash differs";
    m.a_location =
        d.run_a + "/rank" + std::to_string(r) + ".jsonl:" + std::to_string(m.step * 15 + m.seq + 2);
    m.b_location =
        d.run_b + "/rank" + std::to_string(r) + ".jsonl:" + std::to_string(m.step * 15 + m.seq + 2);
    d.ranks.push_back(m);
  }
  d.first = d.ranks[static_cast<std::size_t>(origin)];
  const char* subs[] = {"attn", "mlp"};
  for (int i = 0; i < 13; ++i) {
    dtrace::diff::StepRecord s;
    s.seq = i;
    s.scope = i == 12 ? "step"
                      : std::string("fwd/layer.") + std::to_string(i / 6) + "/" + subs[(i / 3) % 2];
    s.op = i == 12 ? "loss" : subs[(i / 3) % 2];
    s.io = i == 12 ? "metric" : i % 3 == 2 ? "out" : "in";
    s.name = i % 3 == 2 ? "y" : "x";
    s.match = i < 5 ? dtrace::diff::Match::matched : dtrace::diff::Match::differs;
    s.location = d.first->a_location;
    d.first_step.push_back(s);
  }
  std::ofstream out(argv[1], std::ios::binary);
  out << dtrace::report::divergence_html(&d, nullptr);
  out.close();
  if (!out) {
    std::fprintf(stderr, "make_report: cannot write %s\n", argv[1]);
    return 2;
  }
  return 0;
}
