// Level names as logs and DTRACE_LEVEL spell them (dtrace-fp(5)).
#include "dtrace/recorder.hpp"

namespace dtrace {

std::string_view level_name(Level level) {
  switch (level) {
    case Level::step: return "step";
    case Level::layer: return "layer";
    case Level::kernel: return "kernel";
  }
  return "step";
}

std::optional<Level> parse_level(std::string_view text) {
  if (text == "step") return Level::step;
  if (text == "layer") return Level::layer;
  if (text == "kernel") return Level::kernel;
  return std::nullopt;
}

}  // namespace dtrace
