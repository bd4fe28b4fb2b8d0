#include "planner/core/calibration_point.hpp"

#include <charconv>
#include <cmath>

namespace planner {
namespace {

std::int64_t parse_int(std::string_view text, bool& ok) {
  std::int64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  ok = ok && r.ec == std::errc() && r.ptr == text.data() + text.size();
  return v;
}

}  // namespace

std::string benchmark_name(const CalibrationPoint& p) {
  if (p.desc.kind == OpKind::kAttention && p.backward) return "attention_backward";
  return std::string(to_string(p.desc.kind));
}

std::string encode_shape(const CalibrationPoint& p) {
  const OpDesc& d = p.desc;
  std::string s;
  auto add = [&](const char* key, std::int64_t v) {
    if (v == 0) return;
    if (!s.empty()) s += ',';
    s += key;
    s += '=';
    s += std::to_string(v);
  };
  add("m", d.m);
  add("n", d.n);
  add("k", d.k);
  if (d.batch != 1) add("batch", d.batch);
  add("aux", d.aux);
  add("flops", std::llround(d.flops.raw()));
  add("read", d.bytes_read.raw());
  add("written", d.bytes_written.raw());
  add("comm", d.comm_bytes.raw());
  add("flags", d.flags);
  add("stream", static_cast<std::int64_t>(d.stream));
  return s;
}

Result<CalibrationPoint> decode_point(std::string_view benchmark, std::string_view shape,
                                      Precision precision, int group_size, Time measured) {
  CalibrationPoint p;
  p.group_size = group_size;
  p.measured = measured;
  p.desc.precision = precision;
  if (benchmark == "attention_backward") {
    p.desc.kind = OpKind::kAttention;
    p.backward = true;
  } else if (auto kind = parse_enum<OpKind>(benchmark)) {
    p.desc.kind = *kind;
  } else {
    return Status::invalid_input("unknown calibration benchmark \"" + std::string(benchmark) +
                                 "\": expected an op kind (" + enum_choices<OpKind>() +
                                 ") or attention_backward");
  }
  while (!shape.empty()) {
    const auto comma = shape.find(',');
    const std::string_view item = shape.substr(0, comma);
    shape = comma == std::string_view::npos ? std::string_view{} : shape.substr(comma + 1);
    const auto eq = item.find('=');
    bool ok = eq != std::string_view::npos;
    const std::string_view key = item.substr(0, eq);
    const std::int64_t v = ok ? parse_int(item.substr(eq + 1), ok) : 0;
    OpDesc& d = p.desc;
    if (!ok) {
      return Status::invalid_input("calibration shape item \"" + std::string(item) +
                                   "\": expected key=integer");
    }
    if (key == "m") {
      d.m = v;
    } else if (key == "n") {
      d.n = v;
    } else if (key == "k") {
      d.k = v;
    } else if (key == "batch") {
      d.batch = v;
    } else if (key == "aux") {
      d.aux = v;
    } else if (key == "flops") {
      d.flops = Flops(static_cast<double>(v));
    } else if (key == "read") {
      d.bytes_read = Bytes(v);
    } else if (key == "written") {
      d.bytes_written = Bytes(v);
    } else if (key == "comm") {
      d.comm_bytes = Bytes(v);
    } else if (key == "flags") {
      d.flags = static_cast<std::uint8_t>(v);
    } else if (key == "stream") {
      d.stream = static_cast<Stream>(v);
    } else {
      return Status::invalid_input("calibration shape key \"" + std::string(key) +
                                   "\": expected m, n, k, batch, aux, flops, read, written, "
                                   "comm, flags or stream");
    }
  }
  return p;
}

}  // namespace planner
