#include "planner/sim/trace.hpp"

#include <array>
#include <cinttypes>
#include <cstdio>

namespace planner::sim {
namespace {

// Integer picoseconds as microseconds with 6 decimals ("12.000345").
void append_us(std::string& out, Time t) {
  const std::int64_t ps = t.raw();
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%" PRId64 ".%06" PRId64, ps < 0 ? "-" : "",
                (ps < 0 ? -ps : ps) / 1000000, (ps < 0 ? -ps : ps) % 1000000);
  out += buf;
}

void append_int(std::string& out, std::int64_t v) {
  out += std::to_string(v);
}

// A metadata event: {"ph":"M","name":<name>,"pid":<pid>[,"tid":<tid>],"args":{<key>:<value>}}
// with `value` already JSON (a number or a quoted string).
void append_metadata(std::string& out, const char* name, std::int64_t pid, std::int64_t tid,
                     const char* key, const std::string& value) {
  out += "{\"ph\":\"M\",\"name\":\"";
  out += name;
  out += "\",\"pid\":";
  append_int(out, pid);
  if (tid >= 0) {
    out += ",\"tid\":";
    append_int(out, tid);
  }
  out += ",\"args\":{\"";
  out += key;
  out += "\":";
  out += value;
  out += "}}";
}

}  // namespace

std::string chrome_trace(std::span<const RankRun> ranks) {
  std::string out;
  out.reserve(256 + ranks.size() * 256);
  out += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const RankRun& r : ranks) {
    const std::string name =
        "\"rank " + std::to_string(r.rank) +
        (r.kind == RankKind::kParameterServer ? " · parameter server\""
                                              : " · stage " + std::to_string(r.stage) + "\"");
    sep();
    append_metadata(out, "process_name", r.rank, -1, "name", name);
    sep();
    append_metadata(out, "process_sort_index", r.rank, -1, "sort_index", std::to_string(r.rank));
    std::array<bool, kNumStreams> used{};
    for (const OpTiming& op : r.ops)
      used[static_cast<std::size_t>(op.stream)] = true;
    for (std::size_t s = 0; s < kNumStreams; ++s) {
      if (!used[s]) continue;
      const auto tid = static_cast<std::int64_t>(s);
      sep();
      append_metadata(out, "thread_name", r.rank, tid, "name",
                      "\"" + std::string(to_string(static_cast<Stream>(s))) + "\"");
      sep();
      append_metadata(out, "thread_sort_index", r.rank, tid, "sort_index", std::to_string(tid));
    }
    for (const OpTiming& op : r.ops) {
      sep();
      out += "{\"ph\":\"X\",\"name\":\"";
      out += to_string(op.id);
      out += "\",\"cat\":\"";
      out += to_string(op.kind);
      out += "\",\"pid\":";
      append_int(out, r.rank);
      out += ",\"tid\":";
      append_int(out, static_cast<std::int64_t>(op.stream));
      out += ",\"ts\":";
      append_us(out, op.issue);
      out += ",\"dur\":";
      append_us(out, op.end - op.issue);
      out += ",\"args\":{\"bytes\":";
      append_int(out, op.bytes.raw());
      if (op.start != op.issue) {
        out += ",\"wait_us\":";
        append_us(out, op.start - op.issue);
      }
      out += "}}";
    }
  }
  out += "\n]}\n";
  return out;
}

}  // namespace planner::sim
