#include "log/record.hpp"

#include <array>

namespace dtrace::log {

std::string_view io_name(Io io) {
  switch (io) {
    case Io::in: return "in";
    case Io::out: return "out";
    case Io::state: return "state";
    case Io::metric: return "metric";
    case Io::timing: return "timing";
    case Io::other: break;
  }
  return "other";
}

Io parse_io(std::string_view text) {
  if (text == "in") return Io::in;
  if (text == "out") return Io::out;
  if (text == "state") return Io::state;
  if (text == "metric") return Io::metric;
  if (text == "timing") return Io::timing;
  return Io::other;
}

std::string capture_file_name(std::int32_t rank, std::int64_t step, std::int64_t seq) {
  return "r" + std::to_string(rank) + "-s" + std::to_string(step) + "-q" + std::to_string(seq) +
         ".bin";
}

std::string_view status_name(StepStatus status) {
  switch (status) {
    case StepStatus::complete: return "complete";
    case StepStatus::incomplete: return "incomplete";
    case StepStatus::count_mismatch: return "count-mismatch";
    case StepStatus::late: return "late";
  }
  return "unknown";
}

std::string Digest::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(digits, '0');
  for (int i = 0; i < digits; ++i) {
    const int nibble_index = digits - 1 - i;  // 0 = least significant
    const std::uint64_t word = nibble_index >= 16 ? high : low;
    const int shift = (nibble_index % 16) * 4;
    out[static_cast<std::size_t>(i)] = kDigits[(word >> shift) & 0xf];
  }
  return out;
}

Digest Digest::from_u64(std::uint64_t value, std::uint8_t digits) {
  Digest d;
  d.low = value;
  d.digits = digits;
  return d;
}

namespace {

// Hex digit values, 0xff for anything that is not a hex digit.
constexpr auto kHexValue = [] {
  std::array<unsigned char, 256> t{};
  t.fill(0xff);
  for (int c = 0; c < 10; ++c) t['0' + c] = static_cast<unsigned char>(c);
  for (int c = 0; c < 6; ++c) {
    t['a' + c] = static_cast<unsigned char>(10 + c);
    t['A' + c] = static_cast<unsigned char>(10 + c);
  }
  return t;
}();

}  // namespace

bool parse_digest(std::string_view text, Digest& out) {
  if (text.size() == 16) {  // every xxh3-64k/1 hash: one word, no shifting across words
    std::uint64_t v = 0;
    unsigned bad = 0;
    for (char c : text) {
      const unsigned d = kHexValue[static_cast<unsigned char>(c)];
      bad |= d;
      v = (v << 4) | (d & 0xf);
    }
    if (bad & 0xf0) return false;
    out = Digest{0, v, 16};
    return true;
  }
  if (text.empty() || text.size() > 32) return false;
  Digest d;
  d.digits = static_cast<std::uint8_t>(text.size());
  for (char c : text) {
    unsigned v;
    if (c >= '0' && c <= '9') v = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f') v = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v = static_cast<unsigned>(c - 'A' + 10);
    else return false;
    d.high = (d.high << 4) | (d.low >> 60);
    d.low = (d.low << 4) | v;
  }
  out = d;
  return true;
}

nlohmann::json to_json(const Record& r) {
  nlohmann::json j = {{"step", r.step},   {"rank", r.rank},
                      {"seq", r.seq},     {"scope", std::string(r.scope)},
                      {"op", std::string(r.op)},
                      {"io", std::string(r.io == Io::other ? r.io_text : io_name(r.io))},
                      {"name", std::string(r.name)}};
  if (!r.dtype.empty()) j["dtype"] = std::string(r.dtype);
  if (r.has_shape) j["shape"] = std::vector<std::int64_t>(r.shape.begin(), r.shape.end());
  if (!r.digest.empty()) j[r.scalar ? "bits" : "hash"] = r.digest.hex();
  if (r.has_value) j["value"] = r.value;
  return j;
}

}  // namespace dtrace::log
