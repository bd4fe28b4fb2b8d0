// Strong unit types used everywhere inside planner.
//
// Units appear in JSON key names at the boundary (`hbm_GiB`, `bandwidth_GBps`, `usd_per_hour`) and
// as these types inside, so a byte count cannot be added to a duration by accident.
//
//   Time       integer picoseconds (int64: +-106 days). Simulated time is exact; arithmetic with a
//              double factor rounds to the nearest picosecond.
//   Bytes      integer bytes (int64).
//   Flops      a count of floating-point operations (double: a training run exceeds 1e23).
//   FlopRate   FLOP/s (double).
//   Bandwidth  bytes/s (double). Decimal prefixes: 1 GB/s = 1e9 B/s; 1 Gb/s = 1e9/8 B/s.
//   Usd        US dollars (double).
//
// Conversions: Bytes / Bandwidth -> Time, Flops / FlopRate -> Time, Bandwidth * Time -> Bytes.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace planner {

template <class Tag, class Rep>
class Quantity {
 public:
  using rep = Rep;
  constexpr Quantity() = default;
  constexpr explicit Quantity(Rep value) : value_(value) {}

  constexpr Rep raw() const { return value_; }
  static constexpr Quantity zero() { return Quantity(Rep{0}); }
  static constexpr Quantity max() { return Quantity(std::numeric_limits<Rep>::max()); }

  constexpr Quantity operator+(Quantity o) const { return Quantity(value_ + o.value_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(value_ - o.value_); }
  constexpr Quantity operator-() const { return Quantity(-value_); }
  constexpr Quantity& operator+=(Quantity o) {
    value_ += o.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value_ -= o.value_;
    return *this;
  }
  // Scaling by an integer count keeps exact integers.
  constexpr Quantity operator*(std::int64_t k) const {
    return Quantity(static_cast<Rep>(value_ * k));
  }
  // Scaling by a real factor rounds integer quantities to the nearest unit.
  constexpr Quantity scaled(double f) const {
    if constexpr (std::is_integral_v<Rep>) {
      return Quantity(static_cast<Rep>(std::llround(static_cast<double>(value_) * f)));
    } else {
      return Quantity(static_cast<Rep>(value_ * f));
    }
  }
  constexpr Quantity operator/(std::int64_t k) const {
    return Quantity(static_cast<Rep>(value_ / k));
  }
  // The ratio of two quantities of the same kind.
  constexpr double operator/(Quantity o) const {
    return static_cast<double>(value_) / static_cast<double>(o.value_);
  }
  constexpr auto operator<=>(const Quantity&) const = default;

 private:
  Rep value_{};
};

template <class Tag, class Rep>
constexpr Quantity<Tag, Rep> operator*(std::int64_t k, Quantity<Tag, Rep> q) {
  return q * k;
}

struct TimeTag {};
struct BytesTag {};
struct FlopsTag {};
struct FlopRateTag {};
struct BandwidthTag {};
struct UsdTag {};

using Time = Quantity<TimeTag, std::int64_t>;  // picoseconds
using Bytes = Quantity<BytesTag, std::int64_t>;
using Flops = Quantity<FlopsTag, double>;
using FlopRate = Quantity<FlopRateTag, double>;    // FLOP/s
using Bandwidth = Quantity<BandwidthTag, double>;  // bytes/s
using Usd = Quantity<UsdTag, double>;

// ---- Time
constexpr Time picoseconds(std::int64_t v) {
  return Time(v);
}
constexpr Time nanoseconds(double v) {
  return Time(std::llround(v * 1e3));
}
constexpr Time microseconds(double v) {
  return Time(std::llround(v * 1e6));
}
constexpr Time milliseconds(double v) {
  return Time(std::llround(v * 1e9));
}
constexpr Time seconds(double v) {
  return Time(std::llround(v * 1e12));
}
constexpr double to_seconds(Time t) {
  return static_cast<double>(t.raw()) / 1e12;
}
constexpr double to_milliseconds(Time t) {
  return static_cast<double>(t.raw()) / 1e9;
}
constexpr double to_microseconds(Time t) {
  return static_cast<double>(t.raw()) / 1e6;
}

// ---- Bytes
inline constexpr std::int64_t kKiB = 1024;
inline constexpr std::int64_t kMiB = 1024 * kKiB;
inline constexpr std::int64_t kGiB = 1024 * kMiB;
constexpr Bytes bytes(std::int64_t v) {
  return Bytes(v);
}
constexpr Bytes kibibytes(double v) {
  return Bytes(std::llround(v * static_cast<double>(kKiB)));
}
constexpr Bytes mebibytes(double v) {
  return Bytes(std::llround(v * static_cast<double>(kMiB)));
}
constexpr Bytes gibibytes(double v) {
  return Bytes(std::llround(v * static_cast<double>(kGiB)));
}
constexpr double to_GiB(Bytes b) {
  return static_cast<double>(b.raw()) / static_cast<double>(kGiB);
}
constexpr double to_MiB(Bytes b) {
  return static_cast<double>(b.raw()) / static_cast<double>(kMiB);
}
constexpr double to_GB(Bytes b) {
  return static_cast<double>(b.raw()) / 1e9;
}

// ---- Compute
constexpr Flops flops(double v) {
  return Flops(v);
}
constexpr FlopRate tflops_per_s(double v) {
  return FlopRate(v * 1e12);
}
constexpr double to_tflops_per_s(FlopRate r) {
  return r.raw() / 1e12;
}

// ---- Bandwidth (decimal prefixes, as datasheets and nccl-tests use them)
constexpr Bandwidth bytes_per_s(double v) {
  return Bandwidth(v);
}
constexpr Bandwidth GBps(double v) {
  return Bandwidth(v * 1e9);
}
constexpr Bandwidth Gbps(double v) {
  return Bandwidth(v * 1e9 / 8.0);
}
constexpr Bandwidth TBps(double v) {
  return Bandwidth(v * 1e12);
}
constexpr double to_GBps(Bandwidth b) {
  return b.raw() / 1e9;
}

// ---- Money
constexpr Usd usd(double v) {
  return Usd(v);
}

// ---- Conversions between kinds
// Time to move `b` at `bw`, rounded to the nearest picosecond. Requires bw > 0.
constexpr Time operator/(Bytes b, Bandwidth bw) {
  return Time(std::llround(static_cast<double>(b.raw()) / bw.raw() * 1e12));
}
// Time to execute `f` at `rate`, rounded to the nearest picosecond. Requires rate > 0.
constexpr Time operator/(Flops f, FlopRate rate) {
  return Time(std::llround(f.raw() / rate.raw() * 1e12));
}
constexpr Bytes operator*(Bandwidth bw, Time t) {
  return Bytes(std::llround(bw.raw() * static_cast<double>(t.raw()) * 1e-12));
}
// Achieved rates from measured amounts.
constexpr Bandwidth rate_of(Bytes b, Time t) {
  return Bandwidth(static_cast<double>(b.raw()) / to_seconds(t));
}
constexpr FlopRate rate_of(Flops f, Time t) {
  return FlopRate(f.raw() / to_seconds(t));
}

namespace literals {
constexpr Time operator""_ps(unsigned long long v) {
  return Time(static_cast<std::int64_t>(v));
}
constexpr Time operator""_ns(unsigned long long v) {
  return Time(static_cast<std::int64_t>(v) * 1000);
}
constexpr Time operator""_us(unsigned long long v) {
  return Time(static_cast<std::int64_t>(v) * 1000000);
}
constexpr Time operator""_ms(unsigned long long v) {
  return Time(static_cast<std::int64_t>(v) * 1000000000);
}
constexpr Time operator""_s(unsigned long long v) {
  return Time(static_cast<std::int64_t>(v) * 1000000000000);
}
constexpr Time operator""_us(long double v) {
  return microseconds(static_cast<double>(v));
}
constexpr Time operator""_ms(long double v) {
  return milliseconds(static_cast<double>(v));
}
constexpr Time operator""_s(long double v) {
  return seconds(static_cast<double>(v));
}
constexpr Bytes operator""_B(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v));
}
constexpr Bytes operator""_KiB(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v) * kKiB);
}
constexpr Bytes operator""_MiB(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v) * kMiB);
}
constexpr Bytes operator""_GiB(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v) * kGiB);
}
constexpr Bandwidth operator""_GBps(unsigned long long v) {
  return GBps(static_cast<double>(v));
}
constexpr Bandwidth operator""_GBps(long double v) {
  return GBps(static_cast<double>(v));
}
constexpr Bandwidth operator""_Gbps(unsigned long long v) {
  return Gbps(static_cast<double>(v));
}
constexpr FlopRate operator""_TFLOPs(unsigned long long v) {
  return tflops_per_s(static_cast<double>(v));
}
constexpr FlopRate operator""_TFLOPs(long double v) {
  return tflops_per_s(static_cast<double>(v));
}
constexpr Usd operator""_usd(long double v) {
  return Usd(static_cast<double>(v));
}
constexpr Usd operator""_usd(unsigned long long v) {
  return Usd(static_cast<double>(v));
}
}  // namespace literals

}  // namespace planner
