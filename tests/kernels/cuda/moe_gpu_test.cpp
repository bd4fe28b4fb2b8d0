#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_support.hpp"
#include "planner/kernels/cpu/moe.hpp"
#include "planner/kernels/cuda/moe.hpp"

namespace planner::kernels::cuda::testing {
namespace {

template <class T>
class CudaMoe : public GpuTest {};
TYPED_TEST_SUITE(CudaMoe, ElementTypes);

// Routing, its gradient, the row gather and the weighted combine against the CPU kernels on the
// same (rounded) inputs: DeepSeek-V3-style group-limited sigmoid routing and softmax routing.
TYPED_TEST(CudaMoe, RoutingAndCombineMatchTheCpu) {
  using T = TypeParam;
  const std::int64_t rows = 300, hidden = 96;
  for (bool sigmoid : {false, true}) {
    const MoeRouteConfig c{16, 4, sigmoid ? 4 : 1, sigmoid ? 2 : 1, sigmoid};
    const std::string what = sigmoid ? "sigmoid" : "softmax";
    const auto logits = quantize<T>(random_floats(rows * 16, 51, -3.0f, 3.0f));
    auto d_logits = upload<T>(logits, this->stream());
    auto d_scores = zeros<float>(rows * 16, this->stream());
    auto d_idx = upload_ids(std::vector<std::int32_t>(rows * 4, 0), this->stream());
    auto d_w = zeros<float>(rows * 4, this->stream());
    require(moe_route(d_logits.data(), rows, c, d_scores.data(), d_idx.data(), d_w.data(),
                      this->stream()));
    std::vector<float> scores(rows * 16), w(rows * 4);
    std::vector<std::int32_t> idx(rows * 4);
    cpu::moe_route(logits.data(), rows, c, scores.data(), idx.data(), w.data());
    const std::vector<std::int32_t> got_idx = require(to_host(d_idx, this->stream()), "experts");
    EXPECT_EQ(got_idx, idx) << what;
    expect_close_fp32(download(d_w, this->stream()), w, KernelKind::kReduction, what + " weights");

    const auto dw = random_floats(rows * 4, 52);
    auto d_dw = upload<float>(dw, this->stream());
    auto d_dlogits = zeros<T>(rows * 16, this->stream());
    require(moe_route_backward(d_scores.data(), d_idx.data(), d_w.data(), d_dw.data(), rows, c,
                               d_dlogits.data(), this->stream()));
    std::vector<float> dlogits(rows * 16);
    cpu::moe_route_backward(scores.data(), idx.data(), w.data(), dw.data(), rows, c,
                            dlogits.data());
    expect_matches_cpu<T>(download(d_dlogits, this->stream()), dlogits, KernelKind::kReduction,
                          what + " backward");

    // Positions: the (token, k) pairs in reverse order.
    std::vector<std::int32_t> pos(rows * 4);
    for (std::int64_t i = 0; i < rows * 4; ++i)
      pos[i] = static_cast<std::int32_t>(rows * 4 - 1 - i);
    const auto src = quantize<T>(random_floats(rows * 4 * hidden, 53));
    auto d_pos = upload_ids(pos, this->stream());
    auto d_src = upload<T>(src, this->stream());
    auto d_out = zeros<T>(rows * hidden, this->stream());
    require(moe_combine(d_src.data(), d_pos.data(), d_w.data(), rows, 4, hidden, false,
                        d_out.data(), this->stream()));
    std::vector<float> out(rows * hidden);
    cpu::moe_combine(src.data(), pos.data(), w.data(), rows, 4, hidden, false, out.data());
    expect_matches_cpu<T>(download(d_out, this->stream()), out, KernelKind::kReduction,
                          what + " combine");
    const auto dy = quantize<T>(random_floats(rows * hidden, 54));
    auto d_dy = upload<T>(dy, this->stream());
    auto d_dsrc = zeros<T>(rows * 4 * hidden, this->stream());
    auto d_dcw = zeros<float>(rows * 4, this->stream());
    require(moe_combine_backward(d_dy.data(), d_src.data(), d_pos.data(), d_w.data(), rows, 4,
                                 hidden, d_dsrc.data(), d_dcw.data(), this->stream()));
    std::vector<float> dsrc(rows * 4 * hidden), dcw(rows * 4);
    cpu::moe_combine_backward(dy.data(), src.data(), pos.data(), w.data(), rows, 4, hidden,
                              dsrc.data(), dcw.data());
    expect_matches_cpu<T>(download(d_dsrc, this->stream()), dsrc, KernelKind::kReduction,
                          what + " combine backward");
    expect_close_fp32(download(d_dcw, this->stream()), dcw, KernelKind::kReduction,
                      what + " combine weight gradients");
    auto d_gathered = zeros<T>(rows * hidden, this->stream());
    require(
        gather_rows(d_src.data(), d_pos.data(), rows, hidden, d_gathered.data(), this->stream()));
    std::vector<float> gathered(rows * hidden);
    cpu::gather_rows(src.data(), pos.data(), rows, hidden, gathered.data());
    expect_matches_cpu<T>(download(d_gathered, this->stream()), gathered, KernelKind::kExact,
                          what + " gather");
  }
}

}  // namespace
}  // namespace planner::kernels::cuda::testing
