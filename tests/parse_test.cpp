#include "log/parse.hpp"
#include "log/writer.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <random>

using dtrace::log::Intern;
using dtrace::log::Io;
using dtrace::log::kLinePadding;
using dtrace::log::LineKind;
using dtrace::log::LineParser;
using dtrace::log::parse_digest;
using dtrace::log::parse_header;
using dtrace::log::ParsedLine;

namespace {

// Parses one line as the reader hands it over: readable padding after the text.
struct Parse {
  Intern intern;
  LineParser parser;
  ParsedLine out;
  std::string buffer;

  const ParsedLine& operator()(const std::string& line) {
    buffer = line;
    buffer.append(kLinePadding, '\0');
    parser.parse(std::string_view(buffer.data(), line.size()), intern, out);
    return out;
  }
};

const std::string kTensor =
    R"({"step":37,"rank":2,"seq":118,"scope":"fwd/layer.1/mlp","op":"gemm_fc2","io":"out",)"
    R"("name":"y","dtype":"bf16","shape":[8,64,256],"hash":"9f0a1b2c3d4e5f60"})";
const std::string kScalar =
    R"({"step":37,"rank":2,"seq":0,"scope":"step","op":"loss","io":"metric","name":"loss",)"
    R"("dtype":"f32","bits":"3f9e0419","value":1.2345})";

}  // namespace

TEST_CASE("a tensor record's fields", "[parse]") {
  Parse parse;
  const ParsedLine& p = parse(kTensor);
  REQUIRE(p.kind == LineKind::record);
  const auto& r = p.record;
  CHECK(r.step == 37);
  CHECK(r.rank == 2);
  CHECK(p.rank == 2);
  CHECK(r.seq == 118);
  CHECK(r.scope == "fwd/layer.1/mlp");
  CHECK(r.op == "gemm_fc2");
  CHECK(r.io == Io::out);
  CHECK(r.io_text == "out");
  CHECK(r.name == "y");
  CHECK(r.dtype == "bf16");
  REQUIRE(r.has_shape);
  CHECK(std::vector<std::int64_t>(r.shape.begin(), r.shape.end()) == std::vector<std::int64_t>{8, 64, 256});
  CHECK_FALSE(r.scalar);
  CHECK(r.digest.hex() == "9f0a1b2c3d4e5f60");
  CHECK(r.digest.digits == 16);
  CHECK_FALSE(r.has_value);
}

TEST_CASE("a scalar record's fields", "[parse]") {
  Parse parse;
  const ParsedLine& p = parse(kScalar);
  REQUIRE(p.kind == LineKind::record);
  CHECK(p.record.scalar);
  CHECK(p.record.io == Io::metric);
  CHECK(p.record.digest.hex() == "3f9e0419");
  CHECK(p.record.digest.digits == 8);
  CHECK(p.record.has_value);
  CHECK(p.record.value == Approx(1.2345));
  CHECK_FALSE(p.record.has_shape);
}

TEST_CASE("end records and headers are told apart from records", "[parse]") {
  Parse parse;
  const ParsedLine& end = parse(R"({"step":37,"rank":2,"end":true,"count":119})");
  REQUIRE(end.kind == LineKind::end);
  CHECK(end.step == 37);
  CHECK(end.rank == 2);
  CHECK(end.count == 119);
  // A header's `hash` is an algorithm name, not hex digits.
  CHECK(parse(R"({"dtrace":"fp/1","run":"a","world_size":4,"hash":"xxh3-64k/1"})").kind ==
        LineKind::header);
  CHECK(parse(R"({"hash":"xxh3-64k/1","world_size":4,"dtrace":"fp/1"})").kind == LineKind::header);
  CHECK(parse(R"({"step":1,"rank":0,"end":true})").problem == "end record without field 'count'");
}

TEST_CASE("unknown fields are ignored, whatever their value", "[parse]") {
  Parse parse;
  const std::string line =
      R"({"future":{"nested":[1,{"x":null}],"s":"a\"}b"},"step":37,"rank":2,"seq":118,)"
      R"("scope":"fwd/layer.1/mlp","device":"cuda:2","op":"gemm_fc2","io":"out","name":"y",)"
      R"("dtype":"bf16","shape":[8,64,256],"hash":"9f0a1b2c3d4e5f60","stats":[1.5,-2e10,true,false]})";
  const ParsedLine& p = parse(line);
  REQUIRE(p.kind == LineKind::record);
  CHECK(p.record.op == "gemm_fc2");
  // Numbers too large for a double or an integer are still JSON.
  CHECK(parse(R"({"big":[1e400,18446744073709551616,-0.5E-3,0],)" + kTensor.substr(1)).kind ==
        LineKind::record);
  CHECK(p.record.digest.hex() == "9f0a1b2c3d4e5f60");
  // An end record with an extra field is still an end record.
  CHECK(parse(R"({"step":1,"rank":0,"end":true,"count":3,"wall_ms":12.5})").kind == LineKind::end);
  // An io this reader does not know is kept as written and needs no hash.
  const ParsedLine& other =
      parse(R"({"step":1,"rank":0,"seq":5,"scope":"step","op":"t","io":"timing2","name":"t"})");
  REQUIRE(other.kind == LineKind::record);
  CHECK(other.record.io == Io::other);
  CHECK(other.record.io_text == "timing2");
}

TEST_CASE("escapes in strings are decoded", "[parse]") {
  Parse parse;
  const ParsedLine& p = parse(
      R"({"step":0,"rank":0,"seq":0,"scope":"fwd\/layer.0","op":"q\"k\\v","io":"in",)"
      R"("name":"caf\u00e9\ttab","hash":"0123456789abcdef"})");
  REQUIRE(p.kind == LineKind::record);
  CHECK(p.record.scope == "fwd/layer.0");
  CHECK(p.record.op == "q\"k\\v");
  CHECK(p.record.name == "caf\xc3\xa9\ttab");
  CHECK(p.record.io == Io::in);
}

TEST_CASE("a record line written with escapes reads back as written", "[parse]") {
  // The writer appends runs that need no escape whole: each escape at the
  // start, middle and end of a name, and a name of escapes only.
  Parse parse;
  dtrace::log::Record r;
  r.step = 3;
  r.seq = 7;
  r.io = Io::out;
  r.dtype = "f32";
  r.digest = dtrace::log::Digest::from_u64(0x0123456789abcdefULL);
  for (const std::string& name : {std::string("plain.name"), std::string("\"q\\b\nn\rr\tt\x01\x1f"),
                                 std::string("a\"b\\c\nd\re\tf\x02g"), std::string("end\\"),
                                 std::string("\"\"")}) {
    const std::string scope = "fwd/" + name, op = name, record_name = name + "x";  // the record's views
    r.scope = scope;
    r.op = op;
    r.name = record_name;
    std::string line;
    dtrace::log::append_record_line(line, r);
    REQUIRE(line.back() == '\n');
    line.pop_back();
    INFO(line);
    const ParsedLine& p = parse(line);
    REQUIRE(p.kind == LineKind::record);
    CHECK(p.record.scope == r.scope);
    CHECK(p.record.op == r.op);
    CHECK(p.record.name == r.name);
    CHECK(p.record.digest == r.digest);
  }
}

TEST_CASE("surrounding whitespace is allowed", "[parse]") {
  Parse parse;
  CHECK(parse("  " + kTensor + " \t").kind == LineKind::record);
}

TEST_CASE("malformed records say what is wrong", "[parse]") {
  Parse parse;
  auto problem = [&](const std::string& line) {
    const ParsedLine& p = parse(line);
    CHECK(p.kind == LineKind::malformed);
    return p.problem;
  };
  CHECK(problem(R"({"step":0,"rank":0,"seq":0,"scope":"s","op":"o","io":"out","name":"n",)"
                R"("hash":"0123456789abcdef","bits":"3f800000"})") ==
        "record has both 'hash' and 'bits'");
  CHECK(problem(R"({"step":0,"rank":0,"seq":0,"scope":"s","op":"o","io":"out","name":"n"})") ==
        "record without field 'hash' (tensor) or 'bits' (scalar)");
  CHECK(problem(R"({"step":0,"rank":0,"scope":"s","op":"o","io":"out","name":"n","hash":"00"})") ==
        "record without field 'seq'");
  CHECK(problem(R"({"step":"0","rank":0})") == "field 'step' must be an integer");
  CHECK(problem(R"({"step":1.5,"rank":0})") == "field 'step' must be an integer");
  CHECK(problem(R"({"step":0,"rank":0,"seq":0,"scope":3})") == "field 'scope' must be a string");
  CHECK(problem(R"({"step":0,"rank":0,"seq":0,"scope":"s","op":"o","io":"out","name":"n",)"
                R"("shape":[2,"x"],"hash":"00"})") == "field 'shape' must be an array of integers");
  CHECK(problem(R"({"step":0,"rank":0,"seq":0,"scope":"s","op":"o","io":"out","name":"n",)"
                R"("hash":"xyz"})") == "field 'hash' must be 1 to 32 hex digits, not 'xyz'");
  CHECK(problem(R"({"step":0,"rank":0,"seq":0,"scope":"s","op":"o","io":"out","name":"n",)"
                R"("bits":7})") == "field 'bits' must be 1 to 32 hex digits");
  CHECK(problem(R"({"step":0,"rank":-1,"seq":0,"scope":"s","op":"o","io":"out","name":"n",)"
                R"("hash":"00"})") == "field 'rank' out of range");
  CHECK(problem("[1,2,3]") == "not a JSON object");
  CHECK(problem("42") == "not a JSON object");
  CHECK(problem(R"({"step":0,"rank":0)") == "not valid JSON");
  CHECK(problem(R"({"step":0,"rank":)") == "not valid JSON");
  CHECK(problem("{oops}") == "not valid JSON");
  CHECK(problem(kTensor + " {}") == "unexpected text after the JSON object");
  CHECK(problem(R"({"step":0 "rank":0})") == "not valid JSON");
}

TEST_CASE("a line is malformed when an unknown field's value is not valid JSON", "[parse]") {
  // Unknown fields are ignored, but the line must still be one JSON object
  // (dtrace-fp(5)): garbage inside an ignored value is not silently accepted.
  Parse parse;
  for (const char* extra : {R"("x":[1,,2])", R"("x":{"a" 1})", R"("x":tru)", R"("x":"\q")",
                            R"("x":[1,2})",
                            R"("value":tru)", R"("x":01)", R"("x":1.)", R"("x":-)", R"("x":1e+)", R"("x":{"a":1 "b":2})", R"("x":[1 2])"}) {
    INFO(extra);
    const ParsedLine& p = parse(R"({"step":0,"rank":0,"seq":0,"scope":"s","op":"o","io":"out",)"
                                R"("name":"n","hash":"00",)" +
                                std::string(extra) + "}");
    CHECK(p.kind == LineKind::malformed);
  }
}

TEST_CASE("digests keep their digit count", "[parse]") {
  dtrace::log::Digest a, b;
  REQUIRE(parse_digest("3f80", a));
  REQUIRE(parse_digest("00003f80", b));
  CHECK(a != b);
  CHECK(a.hex() == "3f80");
  CHECK(b.hex() == "00003f80");
  REQUIRE(parse_digest("0123456789ABCDEF0123456789abcdef", a));
  CHECK(a.hex() == "0123456789abcdef0123456789abcdef");
  CHECK_FALSE(parse_digest("", a));
  CHECK_FALSE(parse_digest("0123456789abcdef0123456789abcdef0", a));
  CHECK_FALSE(parse_digest("12g4", a));
}

TEST_CASE("headers", "[parse]") {
  auto h = parse_header(
      R"({"dtrace":"fp/1","run":"a","world_size":4,"hash":"xxh3-64k/1","level":"layer",)"
      R"("env":{"NCCL_ALGO":"Ring"},"config":{"lr":0.1},"replay":{"argv":["x"]},"future":1})");
  REQUIRE(h.ok());
  CHECK(h->format == "fp/1");
  CHECK(h->run == "a");
  CHECK(h->world_size == 4);
  CHECK(h->hash == "xxh3-64k/1");
  CHECK(h->level == "layer");
  CHECK(h->env["NCCL_ALGO"] == "Ring");
  CHECK(h->config["lr"] == 0.1);
  CHECK(h->replay["argv"][0] == "x");

  // A minor version is readable; optional fields may be absent.
  CHECK(parse_header(R"({"dtrace":"fp/1.3","world_size":1,"hash":"h"})").ok());

  auto error = [](const std::string& line) {
    auto r = parse_header(line);
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK(error(R"({"dtrace":"fp/2","world_size":1,"hash":"h"})").find("fp/2") != std::string::npos);
  CHECK(error(R"({"dtrace":"fp/10","world_size":1,"hash":"h"})").find("fp/10") != std::string::npos);
  CHECK(error(R"({"dtrace":"fpx","world_size":1,"hash":"h"})").find("expected \"fp/1\"") !=
        std::string::npos);
  CHECK(error(R"({"dtrace":"fp/1","hash":"h"})") == "header without field 'world_size'");
  CHECK(error(R"({"dtrace":"fp/1","world_size":0,"hash":"h"})") ==
        "header field 'world_size' must be a positive integer");
  CHECK(error(R"({"dtrace":"fp/1","world_size":"2","hash":"h"})") ==
        "header field 'world_size' must be a positive integer");
  CHECK(error(R"({"dtrace":"fp/1","world_size":2})") == "header without field 'hash'");
  CHECK(error(R"({"dtrace":"fp/1","world_size":2,"hash":"h","env":[1]})") ==
        "header field 'env' must be an object");
  CHECK(error(R"({"run":"a"})") == "header without field 'dtrace'");
  CHECK(error("{not json") == "header is not valid JSON");
}

TEST_CASE("lines read again after the first of their seq mean the same", "[parse]") {
  // The reader keeps one LineParser for a run; lines it has seen the identity
  // of before must still read exactly as the first one did.
  Parse parse;
  const std::string first =
      R"({"step":0,"rank":1,"seq":3,"scope":"fwd/l0","op":"gemm","io":"out","name":"y",)"
      R"("dtype":"bf16","shape":[2,3],"hash":"00000000000000aa"})";
  REQUIRE(parse(first).kind == LineKind::record);
  for (int round = 0; round < 2; ++round) {
    const ParsedLine& p =
        parse(R"({"step":7,"rank":0,"seq":3,"scope":"fwd/l0","op":"gemm","io":"out","name":"y",)"
              R"("dtype":"bf16","shape":[2,3],"hash":"ABCDEF0123456789"})");
    REQUIRE(p.kind == LineKind::record);
    CHECK(p.record.step == 7);
    CHECK(p.record.rank == 0);
    CHECK(p.rank == 0);
    CHECK(p.record.seq == 3);
    CHECK(p.record.name == "y");
    CHECK(p.record.io == Io::out);
    CHECK(std::vector<std::int64_t>(p.record.shape.begin(), p.record.shape.end()) ==
          std::vector<std::int64_t>{2, 3});
    CHECK(p.record.digest.hex() == "abcdef0123456789");
  }
  // Same seq, another identity: read as written.
  const ParsedLine& other =
      parse(R"({"step":8,"rank":0,"seq":3,"scope":"fwd/l0","op":"gemm","io":"in","name":"x",)"
            R"("dtype":"bf16","shape":[2,3],"hash":"00000000000000bb"})");
  REQUIRE(other.kind == LineKind::record);
  CHECK(other.record.name == "x");
  CHECK(other.record.io == Io::in);
  // Same identity, a bad hash or rank: still malformed.
  CHECK(parse(R"({"step":9,"rank":0,"seq":3,"scope":"fwd/l0","op":"gemm","io":"out","name":"y",)"
              R"("dtype":"bf16","shape":[2,3],"hash":"00000000000000zz"})")
            .kind == LineKind::malformed);
  CHECK(parse(R"({"step":9,"rank":-1,"seq":3,"scope":"fwd/l0","op":"gemm","io":"out","name":"y",)"
              R"("dtype":"bf16","shape":[2,3],"hash":"00000000000000aa"})")
            .kind == LineKind::malformed);
  CHECK(parse(R"({"step":9,"rank":01,"seq":3,"scope":"fwd/l0","op":"gemm","io":"out","name":"y",)"
              R"("dtype":"bf16","shape":[2,3],"hash":"00000000000000aa"})")
            .kind == LineKind::malformed);
  // End records in the writer's layout.
  const ParsedLine& end = parse(R"({"step":9,"rank":1,"end":true,"count":4})");
  REQUIRE(end.kind == LineKind::end);
  CHECK(end.step == 9);
  CHECK(end.rank == 1);
  CHECK(end.count == 4);
}

TEST_CASE("parse_digest reads 16 hex digits exactly as the digit-by-digit definition") {
  std::mt19937_64 rng(42);
  const std::string alphabet = "0123456789abcdefABCDEF";
  for (int i = 0; i < 20000; ++i) {
    std::string text(16, '0');
    std::uint64_t want = 0;
    for (char& c : text) {
      c = alphabet[rng() % alphabet.size()];
      const unsigned v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
      want = want << 4 | v;
    }
    dtrace::log::Digest d;
    REQUIRE(dtrace::log::parse_digest(text, d));
    REQUIRE(d.low == want);
    REQUIRE(d.digits == 16);
    // Any one byte that is not a hex digit makes the whole digest invalid.
    std::string bad = text;
    const char others[] = {'g', 'G', '/', ':', '@', '`', ' ', '\0', '\x80', '\xff', 'z', '-'};
    bad[rng() % 16] = others[rng() % sizeof others];
    REQUIRE_FALSE(dtrace::log::parse_digest(bad, d));
  }
}
TEST_CASE("integers too long for the fast path are read by the full parser", "[parse]") {
  // Found by tests/fuzz/fuzz_parse: the fast path accumulated every digit of a
  // long seq into an int64 before refusing it (signed overflow, undefined).
  Parse parse;
  const std::string identity =
      R"("scope":"fwd/l0","op":"gemm","io":"out","name":"y","dtype":"bf16","shape":[2],"hash":"00000000000000aa"})";
  REQUIRE(parse(R"({"step":0,"rank":0,"seq":3,)" + identity).kind == LineKind::record);
  const ParsedLine& largest = parse(R"({"step":9223372036854775807,"rank":0,"seq":3,)" + identity);
  REQUIRE(largest.kind == LineKind::record);
  CHECK(largest.record.step == INT64_MAX);
  CHECK(parse(R"({"step":0,"rank":0,"seq":)" + std::string(110, '5') + "," + identity).problem ==
        "field 'seq' must be an integer");
  CHECK(parse(R"({"step":92233720368547758070,"rank":0,"seq":3,)" + identity).problem ==
        "field 'step' must be an integer");
  CHECK(parse(R"({"step":0,"rank":0,"end":true,"count":)" + std::string(40, '9') + "}").problem ==
        "field 'count' must be an integer");
  // A seq far past those seen is read right, with or without a template.
  for (int round = 0; round < 2; ++round) {
    const ParsedLine& far = parse(R"({"step":1,"rank":0,"seq":1000000,)" + identity);
    REQUIRE(far.kind == LineKind::record);
    CHECK(far.record.seq == 1000000);
  }
}

TEST_CASE("lines that do not open a JSON value are not valid JSON", "[parse]") {
  Parse parse;
  CHECK(parse(std::string("\0\0\0", 3)).problem == "not valid JSON");
  CHECK(parse("\xEF\xBB\xBF" + kScalar).problem == "not valid JSON");
  CHECK(parse("garbage").problem == "not valid JSON");
  CHECK(parse("[1,2,3]").problem == "not a JSON object");
}

TEST_CASE("a scalar line read by the fast path means what the full parser reads", "[parse]") {
  // One parser learns seq 0's template from kScalar, then reads variants of it
  // (the fast path where it applies); a parser per line, which has learned
  // nothing, reads each through the full parser. They must agree field by field.
  Parse learned;
  REQUIRE(learned(kScalar).kind == LineKind::record);
  const std::string head =
      R"({"step":38,"rank":1,"seq":0,"scope":"step","op":"loss","io":"metric","name":"loss","dtype":"f32",)";
  const std::string lines[] = {
      head + R"("bits":"3f9e0419","value":1.2345})",
      head + R"("bits":"80000000","value":-0})",          // -0.0 keeps its sign
      head + R"("bits":"00000001","value":1.4e-45})",      // subnormal
      head + R"("bits":"7f800000","value":1e400})",        // out of a double's range
      head + R"("bits":"3f800000","value":1E+0})",
      head + R"("bits":"3f800000","value":01})",           // not JSON: a leading zero
      head + R"("bits":"3f800000","value":1.})",           // not JSON: no fraction digits
      head + R"("bits":"3f800000","value":null})",         // no value
      head + R"("bits":"3f80zz00","value":1})",            // bad bits
      head + R"("bits":"3f800000","value":1,"value":2})",  // a later value wins
      head + R"("hash":"3f80000000000000"})",              // same identity, a tensor's hash
  };
  for (const std::string& line : lines) {
    INFO(line);
    Parse fresh;
    const ParsedLine want = fresh(line);
    const ParsedLine& got = learned(line);
    REQUIRE(got.kind == want.kind);
    CHECK(got.problem == want.problem);
    if (want.kind != LineKind::record) continue;
    CHECK(got.record.step == want.record.step);
    CHECK(got.record.rank == want.record.rank);
    CHECK(got.record.scalar == want.record.scalar);
    CHECK(got.record.digest == want.record.digest);
    CHECK(got.record.has_value == want.record.has_value);
    CHECK(std::memcmp(&got.record.value, &want.record.value, sizeof(double)) == 0);
    CHECK(got.record.name == want.record.name);
  }
  // And the fast path did read the plain one.
  const ParsedLine& plain = learned(lines[0]);
  CHECK(plain.record.step == 38);
  CHECK(plain.record.value == 1.2345);
  CHECK(plain.record.digest.digits == 8);
}
