#include "log/parse.hpp"

#include <simdjson.h>

#include <charconv>

#include "log/parse_fast.hpp"

namespace dtrace::log {

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING);

namespace od = simdjson::ondemand;

struct LineParser::Impl {
  od::parser parser;
  std::vector<std::int64_t> dims;  // scratch for shapes, reused across lines
  CanonicalLines canonical;
  std::string scratch;  // identity bytes wrapped as an object, for learning templates
};

LineParser::LineParser() : impl_(std::make_unique<Impl>()) {}
LineParser::~LineParser() = default;
LineParser::LineParser(LineParser&&) noexcept = default;
LineParser& LineParser::operator=(LineParser&&) noexcept = default;

namespace {

// Which fields a line had, to report the first one missing.
enum Field : unsigned {
  kStep = 1u << 0, kRank = 1u << 1, kSeq = 1u << 2, kScope = 1u << 3, kOp = 1u << 4,
  kIo = 1u << 5, kName = 1u << 6, kHash = 1u << 7, kBits = 1u << 8, kEnd = 1u << 9,
  kCount = 1u << 10, kHeader = 1u << 11, kBadDigest = 1u << 12,
};

bool malformed(ParsedLine& out, std::string problem) {
  out.kind = LineKind::malformed;
  out.problem = std::move(problem);
  return false;
}

bool get_int(od::value value, std::string_view key, std::int64_t& out, ParsedLine& line) {
  if (value.get_int64().get(out) != simdjson::SUCCESS) {
    return malformed(line, "field '" + std::string(key) + "' must be an integer");
  }
  return true;
}

bool get_text(od::value value, std::string_view key, std::string_view& out, ParsedLine& line) {
  if (value.get_string().get(out) != simdjson::SUCCESS) {
    return malformed(line, "field '" + std::string(key) + "' must be a string");
  }
  return true;
}

// JSON's number grammar. simdjson's own number parsers also refuse what is valid
// but does not fit a double or a 64-bit integer (1e400), which this must allow.
bool json_number(std::string_view token) {
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  std::size_t i = 0;
  auto digits = [&] {
    const std::size_t start = i;
    while (i < token.size() && token[i] >= '0' && token[i] <= '9') ++i;
    return i - start;
  };
  if (i < token.size() && token[i] == '-') ++i;
  if (i < token.size() && token[i] == '0') {
    ++i;
  } else if (digits() == 0) {
    return false;
  }
  if (i < token.size() && token[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  }
  if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    if (i < token.size() && (token[i] == '+' || token[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == token.size();
}

// Walks a value this reader does not use, so that a broken one makes the line
// malformed: on-demand parsing would otherwise skip it unchecked.
bool valid_json(od::value value, int depth = 0) {
  od::json_type type;
  if (depth > 1024 || value.type().get(type) != simdjson::SUCCESS) return false;
  switch (type) {
    case od::json_type::array: {
      od::array array;
      if (value.get_array().get(array) != simdjson::SUCCESS) return false;
      for (auto element : array) {
        od::value v;
        if (element.get(v) != simdjson::SUCCESS || !valid_json(v, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::object: {
      od::object object;
      if (value.get_object().get(object) != simdjson::SUCCESS) return false;
      for (auto field_result : object) {
        od::field field;
        std::string_view key;
        if (std::move(field_result).get(field) != simdjson::SUCCESS ||
            field.unescaped_key().get(key) != simdjson::SUCCESS || !valid_json(field.value(), depth + 1)) {
          return false;
        }
      }
      return true;
    }
    case od::json_type::number: {
      return json_number(value.raw_json_token());
    }
    case od::json_type::string: {
      std::string_view text;
      return value.get_string().get(text) == simdjson::SUCCESS;
    }
    case od::json_type::boolean: {
      bool flag;
      return value.get_bool().get(flag) == simdjson::SUCCESS;
    }
    case od::json_type::null: {
      bool null = false;
      return value.is_null().get(null) == simdjson::SUCCESS && null;
    }
  }
  return false;
}

bool parse_fields(od::object object, Intern& intern, std::vector<std::int64_t>& dims,
                  ParsedLine& out, unsigned& seen) {
  Record& r = out.record;
  for (auto field_result : object) {
    od::field field;
    if (std::move(field_result).get(field) != simdjson::SUCCESS) return malformed(out, "not valid JSON");
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) {
      return malformed(out, "not valid JSON");
    }
    od::value value = field.value();
    std::int64_t number = 0;
    std::string_view text;
    if (key == "step") {
      if (!get_int(value, key, r.step, out)) return false;
      seen |= kStep;
    } else if (key == "rank") {
      if (!get_int(value, key, number, out)) return false;
      out.rank = number;
      seen |= kRank;
    } else if (key == "seq") {
      if (!get_int(value, key, r.seq, out)) return false;
      seen |= kSeq;
    } else if (key == "scope") {
      if (!get_text(value, key, text, out)) return false;
      r.scope = intern.string(text);
      seen |= kScope;
    } else if (key == "op") {
      if (!get_text(value, key, text, out)) return false;
      r.op = intern.string(text);
      seen |= kOp;
    } else if (key == "io") {
      if (!get_text(value, key, text, out)) return false;
      r.io = parse_io(text);
      r.io_text = intern.string(text);
      seen |= kIo;
    } else if (key == "name") {
      if (!get_text(value, key, text, out)) return false;
      r.name = intern.string(text);
      seen |= kName;
    } else if (key == "dtype") {
      if (!get_text(value, key, text, out)) return false;
      r.dtype = intern.string(text);
    } else if (key == "shape") {
      od::array array;
      if (value.get_array().get(array) != simdjson::SUCCESS) {
        return malformed(out, "field 'shape' must be an array of integers");
      }
      dims.clear();
      for (auto element : array) {
        std::int64_t dim;
        if (element.get_int64().get(dim) != simdjson::SUCCESS) {
          return malformed(out, "field 'shape' must be an array of integers");
        }
        dims.push_back(dim);
      }
      r.shape = intern.shape(dims);
      r.has_shape = true;
    } else if (key == "hash" || key == "bits") {
      // A header's `hash` names the algorithm: judge it once the line's kind is
      // known (the problem waits in out.problem, flagged by kBadDigest).
      if (value.get_string().get(text) != simdjson::SUCCESS || !parse_digest(text, r.digest)) {
        out.problem = "field '" + std::string(key) + "' must be 1 to 32 hex digits";
        if (!text.empty()) out.problem += ", not '" + std::string(text.substr(0, 40)) + "'";
        seen |= kBadDigest;
      }
      r.scalar = key == "bits";
      seen |= r.scalar ? kBits : kHash;
    } else if (key == "value") {
      od::json_type type;
      if (value.type().get(type) == simdjson::SUCCESS && type == od::json_type::number) {
        double v;
        if (value.get_double().get(v) == simdjson::SUCCESS) {
          r.value = v;
          r.has_value = true;
        }
      } else if (!valid_json(value)) {
        return malformed(out, "not valid JSON");
      }
    } else if (key == "end") {
      bool flag = false;
      if (value.get_bool().get(flag) != simdjson::SUCCESS) {
        return malformed(out, "field 'end' must be true");
      }
      if (flag) seen |= kEnd;
    } else if (key == "count") {
      if (!get_int(value, key, out.count, out)) return false;
      seen |= kCount;
    } else if (key == "chain") {
      // dtrace-fp(5): 16 hex digits, or the end record is malformed.
      std::string_view text;
      Digest digest;
      if (value.get_string().get(text) != simdjson::SUCCESS || text.size() != 16 ||
          !parse_digest(text, digest)) {
        return malformed(out, "field 'chain' must be a string of 16 hex digits");
      }
      out.chain = digest.low;
    } else if (key == "line") {
      // dtrace-fp(5): the end record's own 1-based line number; the header is line 1.
      std::int64_t number = 0;
      if (!get_int(value, key, number, out)) return false;
      if (number < 2) return malformed(out, "field 'line' must be a line number after the header (2 or more)");
      out.line = number;
    } else if (key == "dtrace") {
      seen |= kHeader;
    } else if (!valid_json(value)) {
      // Any other field is ignored (forward compatibility, dtrace-fp(5)), but
      // the line must still be JSON.
      return malformed(out, "not valid JSON");
    }
  }
  return true;
}

const char* first_missing(unsigned seen, unsigned wanted) {
  static constexpr std::pair<Field, const char*> kNames[] = {
      {kStep, "step"}, {kRank, "rank"}, {kSeq, "seq"}, {kScope, "scope"},
      {kOp, "op"},     {kIo, "io"},     {kName, "name"}, {kCount, "count"}};
  for (auto [bit, name] : kNames) {
    if ((wanted & bit) && !(seen & bit)) return name;
  }
  return nullptr;
}

}  // namespace

void LineParser::parse(std::string_view line, Intern& intern, ParsedLine& out) {
  if (impl_->canonical.parse(line, out)) return;
  parse_full(line, intern, out);
  if (out.kind != LineKind::record) return;
  // Teach the fast path this seq's identity bytes, provided they hold only
  // identity fields: a line whose identity part also set step, seq or hash
  // would mean something else than its canonical reading.
  impl_->canonical.learn(line, out.record,
                         [&](std::string_view identity) { return identity_only(identity, intern); });
}

bool LineParser::identity_only(std::string_view identity, Intern& intern) {
  Impl& impl = *impl_;
  impl.scratch.assign("{").append(identity).append("}");
  const std::size_t size = impl.scratch.size();
  impl.scratch.append(kLinePadding, '\0');
  od::document doc;
  od::object object;
  if (impl.parser.iterate(impl.scratch.data(), size, impl.scratch.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(object) != simdjson::SUCCESS) {
    return false;
  }
  ParsedLine probe;
  unsigned seen = 0;
  if (!parse_fields(object, intern, impl.dims, probe, seen)) return false;
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) return false;
  const unsigned identity_fields = kScope | kOp | kIo | kName;
  return (seen & ~identity_fields) == 0 && (seen & identity_fields) == identity_fields;
}

void LineParser::parse_full(std::string_view line, Intern& intern, ParsedLine& out) {
  out.record = Record{};
  out.chain.reset();
  out.line.reset();
  out.problem.clear();
  od::document doc;
  if (impl_->parser.iterate(line.data(), line.size(), line.size() + kLinePadding).get(doc) !=
      simdjson::SUCCESS) {
    malformed(out, "not valid JSON");
    return;
  }
  od::object object;
  if (auto error = doc.get_object().get(object); error != simdjson::SUCCESS) {
    // Only a well-formed value of another type is "not an object"; a line cut
    // short or otherwise broken is not JSON at all.
    // simdjson says "incorrect type" for anything that does not open an object,
    // NUL bytes and a stray byte-order mark included.
    const auto start = line.find_first_not_of(" \t");
    const bool value_start = start != std::string_view::npos &&
                             std::string_view("[\"-0123456789tfn").find(line[start]) != std::string_view::npos;
    malformed(out, error == simdjson::INCORRECT_TYPE && value_start ? "not a JSON object" : "not valid JSON");
    return;
  }
  unsigned seen = 0;
  if (!parse_fields(object, intern, impl_->dims, out, seen)) return;
  // Past the object only the end of input may follow.
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) {
    malformed(out, "unexpected text after the JSON object");
    return;
  }
  if (seen & kHeader) {
    out.kind = LineKind::header;
    out.problem.clear();
    return;
  }
  if (seen & kBadDigest) {
    out.kind = LineKind::malformed;
    return;
  }
  if (seen & kEnd) {
    if (const char* missing = first_missing(seen, kStep | kRank | kCount)) {
      malformed(out, std::string("end record without field '") + missing + "'");
      return;
    }
    out.step = out.record.step;
    out.kind = LineKind::end;
    return;
  }
  if (const char* missing = first_missing(seen, kStep | kRank | kSeq | kScope | kOp | kIo | kName)) {
    malformed(out, std::string("record without field '") + missing + "'");
    return;
  }
  Record& r = out.record;
  if ((seen & kHash) && (seen & kBits)) {
    malformed(out, "record has both 'hash' and 'bits'");
    return;
  }
  if (is_compared(r.io) && !(seen & (kHash | kBits))) {
    malformed(out, "record without field 'hash' (tensor) or 'bits' (scalar)");
    return;
  }
  if (out.rank < 0 || out.rank > INT32_MAX) {
    malformed(out, "field 'rank' out of range");
    return;
  }
  r.rank = static_cast<std::int32_t>(out.rank);
  out.kind = LineKind::record;
}

namespace {

// Parses "fp/<major>[.<minor>]"; the major must be 1.
Result<void> check_format(const std::string& format) {
  if (format.rfind("fp/", 0) != 0) {
    return Error{"header field 'dtrace' is '" + format + "', expected \"fp/1\""};
  }
  const std::string version = format.substr(3);
  int major = 0;
  auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), major);
  if (ec != std::errc() || (end != version.data() + version.size() && *end != '.')) {
    return Error{"header field 'dtrace' is '" + format + "', expected \"fp/1\""};
  }
  if (major != 1) {
    return Error{"log format " + format + " is newer than this dtrace reads (fp/1)"};
  }
  return {};
}

// True when arrays and objects in `text` nest deeper than `limit`. nlohmann/json
// parses any depth, but copying or printing a value recurses once per level, so
// a header nested a hundred thousand deep would overflow the stack later.
bool nested_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

Result<Header> parse_header(std::string_view line) {
  // simdjson's default limit, which record lines are held to as well.
  constexpr int kMaxNesting = 1024;
  if (nested_deeper_than(line, kMaxNesting)) {
    return Error{"header nested deeper than " + std::to_string(kMaxNesting) + " levels"};
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::out_of_range&) {
    // nlohmann/json refuses numbers beyond a double's range, which JSON allows.
    return Error{"header has a number beyond the range of a double: this reader cannot hold it"};
  } catch (const nlohmann::json::exception&) {
    return Error{"header is not valid JSON"};
  }
  if (!j.is_object()) return Error{"header is not a JSON object"};
  Header h;
  auto text_field = [&](const char* key, std::string& out, bool required) -> Result<void> {
    auto it = j.find(key);
    if (it == j.end()) {
      if (required) return Error{std::string("header without field '") + key + "'"};
      return {};
    }
    if (!it->is_string()) return Error{std::string("header field '") + key + "' must be a string"};
    out = it->get<std::string>();
    return {};
  };
  if (auto r = text_field("dtrace", h.format, true); !r) return r.error();
  if (auto r = check_format(h.format); !r) return r.error();
  if (auto r = text_field("run", h.run, false); !r) return r.error();
  if (auto r = text_field("hash", h.hash, true); !r) return r.error();
  if (auto r = text_field("level", h.level, false); !r) return r.error();
  auto ws = j.find("world_size");
  if (ws == j.end()) return Error{"header without field 'world_size'"};
  if (!ws->is_number_integer() || ws->get<std::int64_t>() < 1) {
    return Error{"header field 'world_size' must be a positive integer"};
  }
  h.world_size = ws->get<std::int64_t>();
  if (auto it = j.find("rank"); it != j.end()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() >= h.world_size) {
      return Error{"header field 'rank' must be an integer from 0 to world_size - 1"};
    }
    h.rank = static_cast<std::int32_t>(it->get<std::int64_t>());
  }
  for (auto [key, target] : {std::pair{"env", &h.env}, std::pair{"config", &h.config}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_object()) return Error{std::string("header field '") + key + "' must be an object"};
    *target = *it;
  }
  if (auto it = j.find("replay"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Error{"header field 'replay' must be an object"};
    h.replay = *it;
  }
  h.raw = std::move(j);
  return h;
}

}  // namespace dtrace::log
