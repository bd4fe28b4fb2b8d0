// An accelerator type: datasheet compute peaks, memory, power and dated prices with their sources.
//
// JSON document (kind "gpu"): name, aliases, vendor, arch, peak_tflops {fp32, tf32, bf16, fp16,
// fp8} (dense, no sparsity; a precision the part lacks is omitted or null), hbm_GiB,
// hbm_bandwidth_GBps, tdp_W, nvlink_bandwidth_GBps (per direction, per GPU; 0 when there is none),
// pcie_bandwidth_GBps (per direction), prices [price records, prices.hpp], price_as {gpu,
// reason}, source, notes.
//
// Built-in GPUs carry no prices in their preset: the catalogue attaches the records of the price
// data (core/presets/prices) that name the GPU. A preset no provider prices (the H800, sold only in
// China; the DGX-2's V100-SXM3; parts newer than the price data) names in "price_as" the GPU whose
// prices stand in for its own, with the reason; the borrowed records keep their GPU in
// PriceEntry::priced_as and every chosen price says so.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/enums.hpp"
#include "planner/core/prices.hpp"
#include "planner/core/units.hpp"

namespace planner {

// A GPU priced as another (see above).
struct PriceAs {
  std::string gpu;  // a GPU name or alias
  std::string reason;
};

struct GpuSpec {
  std::string name;
  std::vector<std::string> aliases;
  std::string vendor;
  std::string arch;
  // Dense peak per precision, indexed by Precision; zero when the part has no such mode.
  std::array<FlopRate, 5> peak{};
  Bytes hbm;
  Bandwidth hbm_bandwidth;
  double tdp_watts = 0;
  Bandwidth nvlink_bandwidth;  // per direction per GPU
  Bandwidth pcie_bandwidth;    // per direction
  std::vector<PriceEntry> prices;
  std::optional<PriceAs> price_as;
  std::string source;
  std::string notes;

  FlopRate peak_for(Precision p) const { return peak[static_cast<std::size_t>(p)]; }
  bool supports(Precision p) const { return peak_for(p).raw() > 0; }
  // The price the default rule of pricing.hpp picks for an offering, or nullptr.
  const PriceEntry* price_for(Offering o) const;
  // True when `query` equals the name or an alias, ignoring case.
  bool matches(std::string_view query) const;
};

}  // namespace planner
