#include "report/html_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "report/bisect_report.hpp"
#include "util/words.hpp"

namespace dtrace::report {

namespace {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double v, const char* format = "%.2f") {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string where(const diff::Mismatch& m) {
  return with_call(m.scope + " " + m.op + " " + m.io + " " + m.name, m.occurrence, m.calls);
}

// A shell word for a copyable command: plain words stay as they are.
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-./:=,+@%") == std::string::npos;
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// What a map cell or record says when hovered (its <title>) and in the side
// panel when clicked (data-detail), as one text.
std::string mismatch_detail(const diff::Mismatch& m) {
  std::string s = "rank " + std::to_string(m.rank) + ", step " + std::to_string(m.step) + ", seq " +
                  std::to_string(m.seq) + "\n" + where(m) + "\n" +
                  std::string(diff::kind_name(m.kind)) + " (" +
                  std::string(diff::role_name(m.role)) + "): " + m.detail;
  if (m.ulp) s += ", " + std::to_string(*m.ulp) + " ulp";
  if (!m.a_location.empty()) s += "\nA: " + m.a_location;
  if (!m.b_location.empty()) s += "\nB: " + m.b_location;
  return s;
}

const char* kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
main{margin-right:360px;padding:16px 24px}
aside{position:fixed;top:0;right:0;width:336px;height:100%;overflow:auto;background:#fff;
 border-left:1px solid #ccc;padding:12px;box-sizing:border-box}
h1{font-size:20px;margin:0 0 8px} h2{font-size:16px;margin:20px 0 6px}
section{background:#fff;border:1px solid #ddd;border-radius:4px;padding:8px 12px;margin-bottom:12px;overflow-x:auto}
.verdict{font-size:16px} .origin-text{color:#c0392b;font-weight:bold}
code,pre,.cmd{font:12px/1.35 ui-monospace,monospace}
.cmd{display:block;background:#f3f3f3;border:1px solid #ddd;padding:4px 6px;margin:3px 0;
 white-space:pre-wrap;word-break:break-all;user-select:all;cursor:copy}
pre.detail{white-space:pre-wrap;word-break:break-all;background:#f7f7f7;padding:6px;min-height:3em}
table{border-collapse:collapse} td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #eee}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:12px;height:12px;vertical-align:-2px;margin-right:4px;border:1px solid #999}
svg text{font:11px system-ui,sans-serif;fill:#444}
.pick{cursor:pointer} .pick:hover{stroke:#000;stroke-width:1}
.role-origin{fill:#c0392b} .role-receiver{fill:#e67e22} .role-unknown{fill:#8e44ad}
.after-origin{fill:#f2b8b0} .after-receiver{fill:#f8d7b0} .after-unknown{fill:#dcc6e6}
.compared{fill:#d5e8d4} .m-matched{fill:#9bbf9a} .m-differs{fill:#c0392b} .m-a-only,.m-b-only{fill:#e67e22}
.scope-band-0{fill:#eef} .scope-band-1{fill:#dde}
.origin-mark{fill:none;stroke:#000;stroke-width:2}
.bar{fill:#34699a} .bar-nan{fill:#8e44ad} .time{fill:#7fa7cf}
.stage-done{color:#1e7b34} .stage-stop{color:#c0392b} .stage-skip{color:#888}
.chip{display:inline-block;width:14px;height:14px;border-radius:7px;vertical-align:-3px}
table.ladder{width:100%} .ladder td,.ladder th{white-space:nowrap}
.ladder td.cmd-cell{white-space:normal;width:100%} .ladder .cmd{min-width:24em}
)";

// Errors are counted into the page itself, where a test (or a reader) can see
// them; clicking anything with data-detail shows it in the side panel.
const char* kErrorScript = R"(<script>
window.addEventListener('error',function(e){var b=document.body;
b.setAttribute('data-js-errors',String(Number(b.getAttribute('data-js-errors'))+1));
b.setAttribute('data-js-error',String(e.message));});
</script>
)";

// data-load-ms: the page's own time from navigation to the load event (layout
// of the whole map included), which tests and RESULTS.md read.
const char* kPanelScript = R"(<script>
window.addEventListener('load',function(){
document.body.setAttribute('data-load-ms',String(Math.round(performance.now())));});
document.addEventListener('click',function(e){
var t=e.target.closest?e.target.closest('[data-detail]'):null;if(!t)return;
document.getElementById('detail').textContent=t.getAttribute('data-detail');});
</script>
)";

const char* kChipColours[] = {"#34699a", "#c0392b", "#e67e22", "#27ae60",
                              "#8e44ad", "#7f8c8d", "#f1c40f", "#16a085"};

struct RowBin {
  std::int32_t rank_lo = 0, rank_hi = 0;
  // Earliest, then origin > unknown > receiver, then lowest rank.
  const diff::Mismatch* first = nullptr;
  int diverged = 0;
};

int precedence(diff::Role role) {
  return role == diff::Role::origin ? 0 : role == diff::Role::unknown ? 1 : 2;
}

// The rank x step map: ranks binned into rows, steps into columns; each row
// shows where its earliest rank first diverged (the cell, in the role's
// colour) and the steps after it (lighter). One row per bin, so the page's
// size depends on the bins, not on the run.
void write_map(std::ostringstream& o, const diff::Report& d) {
  std::int64_t ranks = d.compared.ranks;
  for (const auto& m : d.ranks) ranks = std::max<std::int64_t>(ranks, m.rank + 1);
  ranks = std::max<std::int64_t>(ranks, 1);
  const std::int64_t lo = d.compared.first_step, hi = std::max(d.compared.last_step, lo);
  const std::int64_t steps = hi - lo + 1;
  const std::int64_t rows = std::min<std::int64_t>(ranks, kMapRows);
  const std::int64_t ranks_per_row = (ranks + rows - 1) / rows;
  const std::int64_t columns = std::min<std::int64_t>(steps, kMapColumns);
  const std::int64_t steps_per_column = (steps + columns - 1) / columns;
  const std::int64_t used_rows = (ranks + ranks_per_row - 1) / ranks_per_row;
  const std::int64_t used_columns = (steps + steps_per_column - 1) / steps_per_column;
  const double width = 760, row_h = std::clamp(480.0 / static_cast<double>(used_rows), 1.0, 18.0);
  const double col_w = width / static_cast<double>(used_columns);
  const double left = 70, top = 8, height = row_h * static_cast<double>(used_rows);

  std::vector<RowBin> bins(static_cast<std::size_t>(used_rows));
  for (std::size_t i = 0; i < bins.size(); ++i) {
    bins[i].rank_lo = static_cast<std::int32_t>(static_cast<std::int64_t>(i) * ranks_per_row);
    bins[i].rank_hi = static_cast<std::int32_t>(
        std::min(ranks, static_cast<std::int64_t>(i + 1) * ranks_per_row) - 1);
  }
  for (const auto& m : d.ranks) {
    RowBin& b = bins[static_cast<std::size_t>(m.rank / ranks_per_row)];
    ++b.diverged;
    if (b.first == nullptr ||
        std::tuple(m.step, precedence(m.role), m.rank) <
            std::tuple(b.first->step, precedence(b.first->role), b.first->rank)) {
      b.first = &m;
    }
  }
  o << "<section id=\"map\"><h2>Ranks &times; steps</h2>\n<p>" << ranks << " rank"
    << (ranks == 1 ? "" : "s") << " by steps " << lo << "&ndash;" << hi << "; one row per "
    << (ranks_per_row == 1 ? "rank" : plural(ranks_per_row, "rank", "ranks")) << ", one column per "
    << (steps_per_column == 1 ? "step" : plural(steps_per_column, "step", "steps"))
    << ". Each row shows where its earliest rank first diverged and that rank's role; hover or "
       "click a cell.</p>\n";
  o << "<svg id=\"map-svg\" width=\"" << number(left + width + 10, "%.0f") << "\" height=\""
    << number(top + height + 34, "%.0f") << "\" role=\"img\" aria-label=\"rank by step map\">\n";
  o << "<rect class=\"compared\" x=\"" << left << "\" y=\"" << top << "\" width=\"" << width
    << "\" height=\"" << number(height) << "\"><title>compared, matching</title></rect>\n";
  for (const RowBin& b : bins) {
    if (b.first == nullptr) continue;
    const diff::Mismatch& m = *b.first;
    const std::string role(diff::role_name(m.role));
    const double y = top + row_h * static_cast<double>(b.rank_lo / ranks_per_row);
    const double x = left + col_w * static_cast<double>((m.step - lo) / steps_per_column);
    const std::string ranks_text = b.rank_lo == b.rank_hi ? "rank " + std::to_string(b.rank_lo)
                                                          : "ranks " + std::to_string(b.rank_lo) +
                                                                "-" + std::to_string(b.rank_hi);
    std::string detail = ranks_text + ": " + std::to_string(b.diverged) + " diverged; earliest:\n" +
                         mismatch_detail(m);
    if (x + col_w < left + width) {
      o << "<rect class=\"after-" << role << "\" x=\"" << number(x + col_w) << "\" y=\""
        << number(y) << "\" width=\"" << number(left + width - x - col_w) << "\" height=\""
        << number(row_h) << "\"/>\n";
    }
    o << "<rect class=\"cell pick role-" << role << "\" id=\"cell-" << b.rank_lo
      << "\" data-role=\"" << role << "\" data-rank-lo=\"" << b.rank_lo << "\" data-rank-hi=\""
      << b.rank_hi << "\" data-rank=\"" << m.rank << "\" data-step=\"" << m.step
      << "\" data-detail=\"" << escape(detail) << "\" x=\"" << number(x) << "\" y=\"" << number(y)
      << "\" width=\"" << number(std::max(col_w, 2.0)) << "\" height=\"" << number(row_h)
      << "\"><title>" << escape(detail) << "</title></rect>\n";
  }
  // Axes: ranks down the left (the first and the last; one row, one label:
  // two would be drawn over each other), steps along the bottom.
  if (used_rows == 1) {
    o << "<text x=\"" << left - 6 << "\" y=\"" << number(top + row_h / 2 + 4) << "\" text-anchor=\"end\">"
      << (ranks == 1 ? "rank 0" : "ranks 0-" + std::to_string(ranks - 1)) << "</text>\n";
  } else {
    o << "<text x=\"" << left - 6 << "\" y=\"" << top + 10 << "\" text-anchor=\"end\">rank 0</text>\n";
    o << "<text x=\"" << left - 6 << "\" y=\"" << number(top + height) << "\" text-anchor=\"end\">"
      << ranks - 1 << "</text>\n";
  }
  o << "<text x=\"" << left << "\" y=\"" << number(top + height + 16) << "\">step " << lo
    << "</text>\n";
  o << "<text x=\"" << left + width << "\" y=\"" << number(top + height + 16)
    << "\" text-anchor=\"end\">step " << hi << "</text>\n</svg>\n";
  o << "<p class=\"legend\"><span><i class=\"sw compared\" "
       "style=\"background:#d5e8d4\"></i>matching</span>"
       "<span><i class=\"sw\" style=\"background:#c0392b\"></i>origin</span>"
       "<span><i class=\"sw\" style=\"background:#e67e22\"></i>receiver</span>"
       "<span><i class=\"sw\" style=\"background:#8e44ad\"></i>unknown</span>"
       "<span>lighter: steps after a rank's first divergence</span></p>\n";
  // The diverged ranks themselves, exactly, as far as a table stays readable.
  constexpr std::size_t kListed = 64;
  o << "<details><summary>" << d.ranks.size() << " diverged rank"
    << (d.ranks.size() == 1 ? "" : "s")
    << "</summary><table><tr><th>rank</th><th>step</th><th>seq</th><th>record</th><th>role</"
       "th><th>A</th></tr>\n";
  for (std::size_t i = 0; i < d.ranks.size() && i < kListed; ++i) {
    const auto& m = d.ranks[i];
    o << "<tr class=\"pick\" data-detail=\"" << escape(mismatch_detail(m)) << "\"><td>" << m.rank
      << "</td><td>" << m.step << "</td><td>" << m.seq << "</td><td>" << escape(where(m))
      << "</td><td>" << diff::role_name(m.role) << "</td><td><code>" << escape(m.a_location)
      << "</code></td></tr>\n";
  }
  o << "</table>";
  if (d.ranks.size() > kListed)
    o << "<p>and " << d.ranks.size() - kListed << " more (dtrace diff --json lists all)</p>";
  o << "</details></section>\n";
}

// The first divergent step of the first rank: its records in seq order, one
// mark each (matched or differing), over bands naming the scopes, with the
// first mismatch outlined.
void write_strip(std::ostringstream& o, const diff::Report& d) {
  const diff::Mismatch& f = *d.first;
  o << "<section id=\"strip\"><h2>Step " << f.step << " on rank " << f.rank
    << ", in execution order</h2>\n";
  if (d.first_step.empty()) {
    o << "<p>The records of this step were not kept.</p></section>\n";
    return;
  }
  // A window around the first mismatch when the step is very long.
  constexpr std::size_t kWindow = 3000;
  std::size_t at = 0;
  for (std::size_t i = 0; i < d.first_step.size(); ++i) {
    if (d.first_step[i].seq == f.seq) at = i;
  }
  std::size_t begin = 0, end = d.first_step.size();
  if (end > kWindow) {
    begin = at > kWindow / 2 ? std::min(at - kWindow / 2, end - kWindow) : 0;
    end = begin + kWindow;
  }
  std::size_t differing = 0;
  for (const auto& r : d.first_step) differing += r.match != diff::Match::matched;
  o << "<p>" << plural(static_cast<std::int64_t>(d.first_step.size()), "record", "records") << " compared, "
    << differing << " differing; the first mismatch is outlined";
  if (f.role == diff::Role::origin)
    o << " (the <span class=\"origin-text\">origin</span>: its inputs match)";
  if (begin > 0 || end < d.first_step.size())
    o << "; shown: records " << begin << "&ndash;" << end - 1;
  o << ".</p>\n";
  const std::size_t n = end - begin;
  const double width = 900, mark_w = std::clamp(width / static_cast<double>(n), 1.0, 14.0);
  const double band_y = 46, mark_y = 14, mark_h = 28;
  o << "<svg id=\"strip-svg\" width=\"" << number(mark_w * static_cast<double>(n) + 20, "%.0f")
    << "\" height=\"80\" role=\"img\" aria-label=\"records of the first divergent step\">\n";
  // Scope bands: consecutive records of one scope.
  int band = 0;
  for (std::size_t i = begin; i < end;) {
    std::size_t j = i;
    while (j < end && d.first_step[j].scope == d.first_step[i].scope) ++j;
    const double x = mark_w * static_cast<double>(i - begin);
    const double w = mark_w * static_cast<double>(j - i);
    o << "<rect class=\"scope-band-" << band << "\" x=\"" << number(x) << "\" y=\"" << band_y
      << "\" width=\"" << number(w) << "\" height=\"16\"><title>" << escape(d.first_step[i].scope)
      << "</title></rect>\n";
    if (w > 7.0 * static_cast<double>(d.first_step[i].scope.size())) {
      o << "<text x=\"" << number(x + 2) << "\" y=\"" << band_y + 12 << "\">"
        << escape(d.first_step[i].scope) << "</text>\n";
    }
    band ^= 1;
    i = j;
  }
  for (std::size_t i = begin; i < end; ++i) {
    const diff::StepRecord& r = d.first_step[i];
    const bool first = r.seq == f.seq && i == at;
    const std::string match(diff::match_name(r.match));
    const std::string detail =
        "seq " + std::to_string(r.seq) + ": " + r.scope + " " + r.op + " " + r.io + " " + r.name +
        "\n" + match +
        (first ? " (first mismatch, " + std::string(diff::role_name(f.role)) + ")" : "") + "\n" +
        r.location;
    o << "<rect class=\"rec pick m-" << match << (first ? " first" : "") << "\" data-seq=\""
      << r.seq << "\" data-match=\"" << match << "\""
      << (first ? " data-role=\"" + std::string(diff::role_name(f.role)) + "\"" : "")
      << " data-detail=\"" << escape(detail) << "\" x=\""
      << number(mark_w * static_cast<double>(i - begin)) << "\" y=\"" << mark_y << "\" width=\""
      << number(std::max(mark_w - 1, 1.0)) << "\" height=\"" << mark_h << "\"><title>"
      << escape(detail) << "</title></rect>\n";
    if (first) {
      o << "<rect class=\"origin-mark\" x=\"" << number(mark_w * static_cast<double>(i - begin) - 1)
        << "\" y=\"" << mark_y - 4 << "\" width=\"" << number(std::max(mark_w + 1, 3.0))
        << "\" height=\"" << mark_h + 8 << "\"/>\n<text x=\""
        << number(mark_w * static_cast<double>(i - begin)) << "\" y=\"8\">"
        << diff::role_name(f.role) << "</text>\n";
    }
  }
  o << "</svg>\n<p class=\"legend\"><span><i class=\"sw\" "
       "style=\"background:#9bbf9a\"></i>matched</span>"
       "<span><i class=\"sw\" style=\"background:#c0392b\"></i>differs</span>"
       "<span><i class=\"sw\" style=\"background:#e67e22\"></i>in one run "
       "only</span></p></section>\n";
}

void write_diff_summary(std::ostringstream& o, const diff::Report& d) {
  o << "<section id=\"summary\"><h2>dtrace diff</h2>\n<p>A: <code>" << escape(d.run_a)
    << "</code><br>B: <code>" << escape(d.run_b) << "</code></p>\n";
  if (!d.first) {
    o << "<p class=\"verdict\">identical over steps " << d.compared.first_step << "&ndash;"
      << d.compared.last_step << " on " << plural(d.compared.ranks, "rank", "ranks") << " ("
      << plural(static_cast<std::int64_t>(d.compared.records), "record", "records") << ")</p>\n";
  } else {
    const auto& f = *d.first;
    o << "<p class=\"verdict\">diverged at step " << f.step << ", rank " << f.rank << ": <code>"
      << escape(where(f)) << "</code>, " << diff::kind_name(f.kind) << ", <span class=\""
      << (f.role == diff::Role::origin ? "origin-text" : "") << "\">" << diff::role_name(f.role)
      << "</span></p>\n";
    o << "<p>" << escape(f.detail) << (f.ulp ? ", " + std::to_string(*f.ulp) + " ulp" : "")
      << "</p>\n";
    if (!f.a_location.empty()) o << "<p>A: <code>" << escape(f.a_location) << "</code></p>\n";
    if (!f.b_location.empty()) o << "<p>B: <code>" << escape(f.b_location) << "</code></p>\n";
    o << "<p>compared steps " << d.compared.first_step << "&ndash;" << d.compared.last_step
      << " on " << plural(d.compared.ranks, "rank", "ranks") << ", "
      << plural(static_cast<std::int64_t>(d.compared.records), "record", "records") << "</p>\n";
  }
  if (!d.header_differences.empty()) {
    o << "<p>header differences (the first suspects):</p><table>\n";
    for (const auto& h : d.header_differences) {
      o << "<tr><td>" << escape(h.section + (h.key.empty() ? "" : " " + h.key))
        << "</td><td>A <code>" << escape(h.a.is_null() ? "(unset)" : h.a.dump())
        << "</code></td><td>B <code>" << escape(h.b.is_null() ? "(unset)" : h.b.dump())
        << "</code></td></tr>\n";
    }
    o << "</table>\n";
  }
  o << "</section>\n";
}

std::string generator_record(const bisect::GeneratorDifference& g) {
  return g.scope + " " + g.op + " " + g.io + " " + g.name;
}

// The stages in the order bisect runs them, with the replays each ran.
struct Stage {
  const char* name;
  std::vector<const char*> replay_stages;
};

void write_ladder(std::ostringstream& o, const bisect::Report& b) {
  o << "<section id=\"ladder\"><h2>dtrace bisect: step " << b.step << ", rank " << b.rank
    << "</h2>\n";
  o << "<p class=\"verdict\">" << bisect::verdict_name(b.verdict);
  if (b.verdict == bisect::Verdict::named) {
    o << ": <code>" << escape(with_call(b.scope + " " + b.op, b.occurrence, b.calls)) << "</code> (<span class=\""
      << (b.role == "origin" ? "origin-text" : "") << "\">" << escape(b.role) << "</span>, "
      << bisect::basis_name(b.basis) << ")";
  }
  if (b.verdict == bisect::Verdict::restore) o << ": " << escape(bisect::state_record(b));
  if (b.input) o << ": " << escape(b.input->text());
  if (b.generator) o << ": " << escape(generator_record(*b.generator));
  o << "</p>\n<p>" << escape(b.reached) << "</p>\n";
  const Stage stages[] = {{"restore", {}},
                          {"layer", {"layer"}},
                          {"kernel", {"capture", "kernel"}},
                          {"confirm", {"confirm"}}};
  // The ladder is the first culprit's: the later ones' replays are in the
  // culprits section (write_culprits).
  const std::vector<bisect::Replay> replays(
      b.replays.begin(),
      b.replays.begin() + static_cast<std::ptrdiff_t>(b.culprits.empty() ? b.replays.size()
                                                                         : static_cast<std::size_t>(b.culprits.front().end_replay)));
  double longest = 0;
  for (const auto& r : replays) longest = std::max(longest, r.seconds);
  const bool had_layer = std::any_of(replays.begin(), replays.end(),
                                     [](const auto& r) { return r.stage == "layer"; });
  o << "<table class=\"ladder\">\n";
  for (const Stage& s : stages) {
    std::vector<const bisect::Replay*> mine;
    for (const auto& r : replays) {
      if (std::find_if(s.replay_stages.begin(), s.replay_stages.end(),
                       [&](const char* x) { return r.stage == x; }) != s.replay_stages.end()) {
        mine.push_back(&r);
      }
    }
    std::string state, css;
    if (std::string_view(s.name) == "restore") {
      if (b.verdict == bisect::Verdict::restore)
        state = "the restored state differs: " + bisect::state_record(b), css = "stage-stop";
      else if (b.verdict == bisect::Verdict::diverged_earlier)
        state = "the runs already differ before this step", css = "stage-stop";
      else if (b.verdict == bisect::Verdict::fast_forward)
        state = "fast-forward departed from run " + std::string(1, b.departed_side) + " at step " +
                std::to_string(b.departed->step),
        css = "stage-stop";
      else if (b.verdict == bisect::Verdict::data)
        state = "what the step consumed differs: " + b.input->text(),
        css = "stage-stop";
      else if (b.verdict == bisect::Verdict::generator && b.reached.starts_with("restore"))
        state = "a generator's state differs: " + generator_record(*b.generator), css = "stage-stop";
      else if (had_layer)
        state = "restored state matches (read from the layer replays)", css = "stage-done";
      else
        state = "not reached", css = "stage-skip";
    } else if (std::string_view(s.name) == "layer" && b.verdict == bisect::Verdict::generator &&
               b.reached.starts_with("layer")) {
      state = "a generator's state differs: " + generator_record(*b.generator), css = "stage-stop";
    } else if (std::string_view(s.name) == "layer" && !b.layer.empty()) {
      state = "suspect layer " + b.layer, css = "stage-done";
    } else if (std::string_view(s.name) == "kernel" && b.verdict == bisect::Verdict::named) {
      state = "suspect kernel " + with_call(b.scope + " " + b.op, b.occurrence, b.calls), css = "stage-done";
    } else if (std::string_view(s.name) == "confirm" && b.evidence) {
      state = std::to_string(b.evidence->distinct_outputs) + " distinct output" +
              (b.evidence->distinct_outputs == 1 ? "" : "s"),
      css = b.evidence->distinct_outputs > 1 ? "stage-done" : "stage-stop";
    } else {
      state = mine.empty() ? "not reached" : "ran",
      css = mine.empty() ? "stage-skip" : "stage-stop";
    }
    o << "<tr class=\"stage\" id=\"stage-" << s.name << "\"><th>" << s.name << "</th><td class=\""
      << css << "\" colspan=\"4\">" << escape(state) << "</td></tr>\n";
    for (const bisect::Replay* r : mine) {
      std::string quoted;
      for (const auto& [k, v] : r->env) quoted += k + "=" + shell_word(v) + " ";
      for (std::size_t i = 0; i < r->argv.size(); ++i)
        quoted += (i ? " " : "") + shell_word(r->argv[i]);
      const double bar = longest > 0 ? 120 * r->seconds / longest : 0;
      o << "<tr class=\"replay pick\" data-detail=\"" << escape(quoted) << "\"><td></td><td>"
        << escape(r->stage) << " " << r->side
        << "</td><td><svg width=\"124\" height=\"10\"><rect class=\"time\" x=\"0\" y=\"1\" width=\""
        << number(std::max(bar, 1.0)) << "\" height=\"8\"/></svg> " << number(r->seconds)
        << " s</td><td>" << escape(r->outcome) << "</td><td class=\"cmd-cell\"><code class=\"cmd\">"
        << escape(quoted) << "</code></td></tr>\n";
    }
  }
  o << "</table>\n";
  if (b.earlier) {
    o << "<p>The runs' records first differ at step " << b.earlier->step << " (rank "
      << b.earlier->rank << ", <code>" << escape(b.earlier->record)
      << "</code>); bisect there:</p><code class=\"cmd\">" << escape(b.earlier->command)
      << "</code>\n";
  }
  if (b.departed) {
    o << "<p>Replaying run " << b.departed_side << " from its checkpoint, step " << b.departed->step
      << " came out otherwise than the run recorded it (<code>" << escape(b.departed->record)
      << "</code>); bisect there:</p><code class=\"cmd\">" << escape(b.departed->command) << "</code>\n";
  }
  o << "</section>\n";
}

// Every culprit of the step (dtrace(1), EVERY CULPRIT), in the order found,
// each later one with the ops pinned while it was searched for, and what
// ended the search.
void write_culprits(std::ostringstream& o, const bisect::Report& b) {
  if (b.culprits.size() < 2 && b.search_end.empty()) return;
  o << "<section id=\"culprits\"><h2>Every culprit at step " << b.step << ": "
    << plural(static_cast<std::int64_t>(b.culprits.size()), "op", "ops") << "</h2>\n<p>" << escape(b.search_end)
    << "</p>\n<table><tr><th>#</th><th>op</th><th>layer</th><th>basis</th><th>pinned</th><th>evidence</th>"
       "<th>replays</th></tr>\n";
  for (std::size_t i = 0; i < b.culprits.size(); ++i) {
    const bisect::Culprit& c = b.culprits[i];
    std::string pinned;
    for (const auto& p : c.pinned) pinned += (pinned.empty() ? "" : ", ") + p;
    double seconds = 0;
    for (int k = c.first_replay; k < c.end_replay && k < static_cast<int>(b.replays.size()); ++k) {
      seconds += b.replays[static_cast<std::size_t>(k)].seconds;
    }
    o << "<tr class=\"culprit\"><td>" << i + 1 << "</td><td><code>"
      << escape(with_call(c.scope + " " + c.op, c.occurrence, c.calls)) << "</code> (rank " << c.rank
      << ")</td><td><code>" << escape(c.layer) << "</code>"
      << (c.region ? " (" + escape(c.region->kind) + " region" +
                         (c.region->part.empty() ? "" : ", part " + escape(c.region->part)) + ")"
                   : std::string())
      << "</td><td>" << bisect::basis_name(c.basis)
      << "</td><td>" << (pinned.empty() ? "none" : escape(pinned)) << "</td><td>"
      << (c.evidence ? escape(plural(c.evidence->distinct_outputs, "distinct output", "distinct outputs") + ": " +
                              c.evidence->reading)
                     : std::string("not confirmed alone"))
      << "</td><td>" << c.end_replay - c.first_replay << ", " << number(seconds) << " s</td></tr>\n";
  }
  o << "</table>\n</section>\n";
}

// A count that fits above a histogram bar (its exact value is in the bar's title).
std::string short_count(std::uint64_t count) {
  if (count < 10000) return std::to_string(count);
  if (count < 1000000) return number(static_cast<double>(count) / 1e3, "%.0fk");
  return number(static_cast<double>(count) / 1e6, "%.1fM");
}

void write_evidence(std::ostringstream& o, const bisect::Evidence& e) {
  o << "<section id=\"evidence\"><h2>Evidence: output <code>" << escape(e.output) << "</code> ("
    << escape(e.dtype) << ")</h2>\n<p>" << escape(e.reading) << "</p>\n";
  o << "<table><tr><th></th><th>A</th><th>B</th></tr><tr><td>NaN</td><td>" << e.nan_a << "</td><td>"
    << e.nan_b << "</td></tr><tr><td>Inf</td><td>" << e.inf_a << "</td><td>" << e.inf_b
    << "</td></tr></table>\n";
  o << "<p>" << e.elements_differing << " of "
    << plural(static_cast<std::int64_t>(e.elements), "element", "elements")
    << (e.elements_differing == 1 ? " differs" : " differ") << "; max "
    << (e.max_ulp ? std::to_string(*e.max_ulp) : std::string("-")) << " ulp, max |difference| "
    << number(e.max_abs_difference, "%.3g") << "</p>\n";
  // Histogram of the differing elements by distance in ulp (power-of-two buckets).
  std::vector<std::pair<std::string, std::uint64_t>> bars;
  for (std::size_t k = 0; k < e.ulp_histogram.size(); ++k) {
    const std::uint64_t lo = std::uint64_t{1} << k,
                        hi = k >= 63 ? UINT64_MAX : (std::uint64_t{1} << (k + 1)) - 1;
    bars.emplace_back(lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi),
                      e.ulp_histogram[k]);
  }
  if (e.ulp_undefined > 0) bars.emplace_back("NaN", e.ulp_undefined);
  if (!bars.empty()) {
    std::uint64_t most = 1;
    for (const auto& [label, count] : bars) most = std::max(most, count);
    const double bar_w = 44, chart_h = 120;
    o << "<svg id=\"histogram\" width=\""
      << number(bar_w * static_cast<double>(bars.size()) + 20, "%.0f") << "\" height=\""
      << chart_h + 40 << "\" role=\"img\" aria-label=\"differing elements by ulp\">\n";
    for (std::size_t i = 0; i < bars.size(); ++i) {
      const double h = chart_h * static_cast<double>(bars[i].second) / static_cast<double>(most);
      const double x = bar_w * static_cast<double>(i) + 4;
      const bool nan = bars[i].first == "NaN";
      // An empty bucket between others keeps its place on the axis, without a bar.
      if (bars[i].second > 0) {
        o << "<rect class=\"" << (nan ? "bar-nan" : "bar") << "\" x=\"" << number(x) << "\" y=\""
          << number(chart_h - h + 14) << "\" width=\"" << bar_w - 8 << "\" height=\""
          << number(std::max(h, 1.0)) << "\"><title>" << bars[i].second << " element"
          << (bars[i].second == 1 ? "" : "s")
          << (nan ? " with a NaN on either side" : " " + bars[i].first + " ulp apart")
          << "</title></rect>\n";
        o << "<text x=\"" << number(x) << "\" y=\"" << number(chart_h - h + 10) << "\">"
          << short_count(bars[i].second) << "</text>\n";
      }
      // The bucket's lower bound (its range is in the bar's title): "1024-2047" would not fit,
      // and from 2^17 on, neither would the bound's digits beside the next bar's.
      std::string label = bars[i].first.substr(0, bars[i].first.find('-'));
      if (!nan && i >= 17) label = "2^" + std::to_string(i);
      o << "<text x=\"" << number(x) << "\" y=\"" << chart_h + 28 << "\">" << escape(label)
        << "</text>\n";
    }
    o << "</svg>\n<p>differing elements by distance in ulp (a bar counts from its label to just "
         "under twice it)</p>\n";
  }
  if (!e.outputs.empty()) {
    std::map<std::string, std::size_t> distinct;
    for (const auto& out : e.outputs) distinct.emplace(out.fingerprint, distinct.size());
    o << "<p>" << plural(e.distinct_outputs, "distinct output", "distinct outputs") << " in "
      << plural(e.repetitions, "repetition", "repetitions")
      << " per side:</p><table id=\"repetitions\"><tr><th>side</th><th>repetition</th>"
      << "<th>output</th><th>fingerprint</th></tr>\n";
    for (const auto& out : e.outputs) {
      const std::size_t k = distinct[out.fingerprint];
      o << "<tr><td>" << out.side << "</td><td>" << out.repetition
        << "</td><td><i class=\"chip\" style=\"background:"
        << kChipColours[k % std::size(kChipColours)] << "\"></i> #" << k + 1 << "</td><td><code>"
        << escape(out.fingerprint) << "</code></td></tr>\n";
    }
    o << "</table>\n";
  }
  o << "</section>\n";
}

void write_commands(std::ostringstream& o, const diff::Report* d, const bisect::Report* b) {
  const std::string& a = d ? d->run_a : b->run_a;
  const std::string& bb = d ? d->run_b : b->run_b;
  o << "<h2>Commands</h2><p>Click a command to select it.</p>\n";
  o << "<code class=\"cmd\">dtrace diff " << escape(shell_word(a) + " " + shell_word(bb))
    << "</code>\n";
  if (d && d->first) {
    o << "<code class=\"cmd\">dtrace show --step " << d->first->step << " --rank " << d->first->rank
      << " " << escape(shell_word(a)) << "</code>\n";
    o << "<code class=\"cmd\">dtrace bisect --trust --step " << d->first->step << " --rank "
      << d->first->rank << " " << escape(shell_word(a) + " " + shell_word(bb)) << "</code>\n";
  }
}

// The page's title and heading: what was found, named as the text report
// names it (verdict, scope, op, the call, step, rank), so the first line a
// reader sees answers the question.
std::string page_title(const diff::Report* d, const bisect::Report* b) {
  const auto at = [](std::int64_t step, std::int32_t rank) {
    return " at step " + std::to_string(step) + ", rank " + std::to_string(rank);
  };
  if (b) {
    std::string t = "dtrace bisect: ";
    if (b->nothing_to_bisect) return t + "nothing to bisect, the runs are identical";
    t += bisect::verdict_name(b->verdict);
    if (b->verdict == bisect::Verdict::named) {
      t += " " + with_call(b->scope + " " + b->op, b->occurrence, b->calls);
    } else if (b->verdict == bisect::Verdict::restore) {
      t += " " + bisect::state_record(*b);
    } else if (b->verdict == bisect::Verdict::data && b->input) {
      t += " " + b->input->text();
    } else if (b->verdict == bisect::Verdict::generator && b->generator) {
      t += " " + generator_record(*b->generator);
    } else if (b->verdict == bisect::Verdict::fast_forward && b->departed) {
      // The step to bisect next, which the replay departed at.
      return t + at(b->step, b->rank) + ": step " + std::to_string(b->departed->step) + " departed from run " +
             std::string(1, b->departed_side);
    }
    return t + at(b->step, b->rank);
  }
  if (d && d->first) {
    return "dtrace diff: diverged" + at(d->first->step, d->first->rank) + ": " + where(*d->first);
  }
  return "dtrace diff: identical";
}

}  // namespace

std::string divergence_html(const diff::Report* d, const bisect::Report* b) {
  std::ostringstream o;
  const std::string title = page_title(d, b);
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" << escape(title)
    << "</title>\n<style>" << kStyle << "</style></head>\n<body data-js-errors=\"0\">\n"
    << kErrorScript;
  o << "<main><h1>" << escape(title) << "</h1>\n";
  if (d) {
    write_diff_summary(o, *d);
    if (d->first) {
      write_map(o, *d);
      write_strip(o, *d);
    }
  }
  if (b) {
    write_ladder(o, *b);
    write_culprits(o, *b);
    if (b->evidence) write_evidence(o, *b->evidence);
  }
  std::vector<std::string> notes;
  if (d) notes = d->notes;
  if (b) notes.insert(notes.end(), b->notes.begin(), b->notes.end());
  if (!notes.empty()) {
    o << "<section id=\"notes\"><h2>Notes</h2><ul>\n";
    for (const auto& n : notes) o << "<li>" << escape(n) << "</li>\n";
    o << "</ul></section>\n";
  }
  o << "</main>\n<aside><h2>Details</h2><p>Hover over a mark for its record; click it to show it "
       "here.</p>\n"
       "<pre class=\"detail\" id=\"detail\">";
  if (d && d->first) o << escape(mismatch_detail(*d->first));
  o << "</pre>\n";
  write_commands(o, d, b);
  o << "</aside>\n" << kPanelScript << "</body></html>\n";
  return o.str();
}

}  // namespace dtrace::report
