// Which command replays each run, and whether we may run it.
#include <filesystem>
#include <string_view>

#include "bisect/session.hpp"

namespace dtrace::bisect {

namespace {

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// The minor version of a dtrace-replay/1.x protocol (0 for 1.0, "dtrace-replay/1" or
// anything else): each adds to the ones before it (man/dtrace-fp.5).
int minor_version(const std::string& protocol) {
  constexpr std::string_view prefix = "dtrace-replay/1.";
  if (!protocol.starts_with(prefix)) return 0;
  const std::string minor = protocol.substr(prefix.size());
  if (minor.empty() || minor.size() > 6 || minor.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoi(minor);
}

Result<Side> plan_side(const Options& options, char name, const std::string& run, std::int32_t rank,
                       nlohmann::json& config) {
  auto reader = log::RunReader::open(run);
  if (!reader) return reader.error();
  const log::Header& header = (*reader)->header();
  // Checked before anything runs: a replay of a rank the job never had would
  // cost a whole replay only to find nothing.
  if (rank >= header.world_size) {
    return Error{"rank " + std::to_string(rank) + " is outside run " + std::string(1, name) + " (" +
                 run + "): its world_size is " + std::to_string(header.world_size)};
  }
  Side side;
  side.name = name;
  side.run = run;
  config = header.config;
  for (auto it = header.env.begin(); it != header.env.end(); ++it) {
    side.env.emplace_back(it.key(), it->is_string() ? it->get<std::string>() : it->dump());
  }
  side.world_size = header.world_size;
  const nlohmann::json& replay = header.replay;
  if (replay.is_object()) side.protocol = replay.value("protocol", std::string());
  // 1.2: the workload serves replay sessions; 1.3: it honours pins.
  side.serves_sessions = minor_version(side.protocol) >= 2;
  side.honours_pins = minor_version(side.protocol) >= 3;
  if (options.replay) {
    side.argv = *options.replay;
    return side;
  }
  const std::string who = "run " + std::string(1, name) + " (" + run + ")";
  if (!replay.is_object() || !replay.contains("argv")) {
    return Error{who + " declares no replay command in its header; give one with --replay 'ARGV'"};
  }
  // Minor versions extend 1.0 compatibly (1.1: several processes, one replay).
  if (const std::string protocol = replay.value("protocol", std::string());
      protocol != "dtrace-replay/1" && !protocol.starts_with("dtrace-replay/1.")) {
    return Error{who + " declares replay protocol \"" + protocol +
                 "\"; this dtrace speaks dtrace-replay/1 (and its minor versions: 1.1, 1.2, 1.3)"};
  }
  const nlohmann::json& argv = replay["argv"];
  if (!argv.is_array() || argv.empty()) return Error{who + ": header field replay.argv must be a non-empty array"};
  for (const auto& word : argv) {
    if (!word.is_string()) return Error{who + ": header field replay.argv must hold strings"};
    side.argv.push_back(word.get<std::string>());
  }
  if (!options.trust) {
    return Error{"the replay command comes from the log of " + who + ": " + joined(side.argv) +
                 "; run it only if you trust that log: pass --trust, or give the command with --replay 'ARGV'"};
  }
  if (replay.contains("cwd") && replay["cwd"].is_string()) {
    std::error_code ec;
    const std::string cwd = replay["cwd"].get<std::string>();
    if (std::filesystem::is_directory(cwd, ec)) side.cwd = cwd;
  }
  return side;
}

}  // namespace

Result<void> plan_sides(Session& session) {
  nlohmann::json config_a, config_b;
  const std::int32_t rank = session.report.rank;
  auto a = plan_side(session.options, 'A', session.options.run_a, rank, config_a);
  if (!a) return a.error();
  auto b = plan_side(session.options, 'B', session.options.run_b, rank, config_b);
  if (!b) return b.error();
  session.a = std::move(*a);
  session.b = std::move(*b);
  // Read once here, before anything runs: the restore check compares the
  // replays against these. A step neither run recorded has nothing to check a
  // replay against: its restore check would pass on no evidence and any
  // verdict would mislead. One run without it is normal (a resumed run starts
  // later).
  const std::int64_t step = session.report.step;
  for (Side* side : {&session.a, &session.b}) {
    auto loaded = load_step(side->run, rank, step);
    if (!loaded) return loaded.error();
    side->recorded = std::move(*loaded);
  }
  if (!session.a.recorded && !session.b.recorded) {
    return Error{"step " + std::to_string(step) + " of rank " + std::to_string(rank) +
                 " is complete in neither run (A: " + session.a.run + ", B: " + session.b.run +
                 "); bisect replays a step the runs recorded (`dtrace show RUN` lists them)"};
  }
  // Sessions where the workload serves them (man/dtrace-fp.5, "Replay sessions").
  Report& rep = session.report;
  const auto describe = [](const Side& side) {
    return "run " + std::string(1, side.name) + "'s workload speaks " +
           (side.protocol.empty() ? std::string("dtrace-replay/1") : side.protocol);
  };
  if (session.options.launches) {
    rep.replay_mode = "launches";
    rep.replay_mode_why = "--launches";
  } else if (session.a.serves_sessions && session.b.serves_sessions) {
    rep.replay_mode = "sessions";
    rep.replay_mode_why = "both runs' workloads serve replay sessions (dtrace-replay/1.2)";
  } else if (session.a.serves_sessions || session.b.serves_sessions) {
    rep.replay_mode = "mixed";
    const Side& launched = session.a.serves_sessions ? session.b : session.a;
    rep.replay_mode_why = describe(launched) + ", which has no sessions: it is launched for each replay";
  } else {
    rep.replay_mode = "launches";
    rep.replay_mode_why = session.a.protocol == session.b.protocol
                              ? "the runs' workloads speak " +
                                    (session.a.protocol.empty() ? std::string("dtrace-replay/1") : session.a.protocol) +
                                    ", which has no sessions"
                              : describe(session.a) + " and " + describe(session.b) + ", which have no sessions";
  }
  session.report.shared_configuration = config_a == config_b && session.a.env == session.b.env;
  if (session.report.shared_configuration) {
    session.report.notes.push_back(
        "A and B share one configuration (config and env): their replays are repetitions of it");
  }
  return {};
}

}  // namespace dtrace::bisect
