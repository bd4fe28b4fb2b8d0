// CPU kernel benchmarks: GEMM through planner's wrapper against raw cblas_sgemm on the shapes of a
// GPT layer (the executor must reach >= 90% of OpenBLAS), fused attention throughput, and the
// bandwidth of the elementwise kernels.
//
// Run: build/bin/bench_kernels            (all; GFLOP/s in the "FLOP/s" counter, GB/s in
// bytes_per_second)
//      build/bin/bench_kernels --benchmark_filter=Gemm
// Each GEMM and attention benchmark takes the OpenBLAS thread count as its last argument. Rates
// with 1 thread use the process's CPU time (robust when other jobs share the machine); rates with 2
// threads use wall-clock time (the "/real_time" rows), since CPU time would count one thread only.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <vector>

#include "planner/kernels/cpu/activation.hpp"
#include "planner/kernels/cpu/adam.hpp"
#include "planner/kernels/cpu/attention.hpp"
#include "planner/kernels/cpu/cross_entropy.hpp"
#include "planner/kernels/cpu/elementwise.hpp"
#include "planner/kernels/cpu/embedding.hpp"
#include "planner/kernels/cpu/gemm.hpp"
#include "planner/kernels/cpu/loss_scale.hpp"
#include "planner/kernels/cpu/norm.hpp"
#include "planner/kernels/cpu/rng.hpp"
#include "planner/kernels/cpu/rope.hpp"

namespace {

namespace cpu = planner::kernels::cpu;

std::vector<float> random_vector(std::int64_t n, std::uint64_t stream) {
  std::vector<float> v(static_cast<std::size_t>(n));
  cpu::fill_uniform(42, stream, 0, n, -1.0f, 1.0f, v.data());
  return v;
}

// GEMMs of one GPT-2 small layer (hidden 768, 4 x 768 MLP) on 2048 tokens, forward (Y = X W) and
// the two backward products (dX = dY W^T, dW = X^T dY), plus a square reference shape.
struct GemmShape {
  const char* name;
  cpu::Transpose ta, tb;
  std::int64_t m, n, k;
};
constexpr GemmShape kGemmShapes[] = {
    {"qkv_fwd", cpu::Transpose::kNo, cpu::Transpose::kNo, 2048, 2304, 768},
    {"fc1_fwd", cpu::Transpose::kNo, cpu::Transpose::kNo, 2048, 3072, 768},
    {"fc2_fwd", cpu::Transpose::kNo, cpu::Transpose::kNo, 2048, 768, 3072},
    {"fc1_dx", cpu::Transpose::kNo, cpu::Transpose::kYes, 2048, 768, 3072},
    {"fc1_dw", cpu::Transpose::kYes, cpu::Transpose::kNo, 768, 3072, 2048},
    {"square_1024", cpu::Transpose::kNo, cpu::Transpose::kNo, 1024, 1024, 1024},
};

struct GemmOperands {
  std::vector<float> a, b, c;
  std::int64_t lda, ldb, ldc;
  explicit GemmOperands(const GemmShape& s)
      : a(random_vector(s.m * s.k, 1)),
        b(random_vector(s.k * s.n, 2)),
        c(static_cast<std::size_t>(s.m * s.n)),
        lda(s.ta == cpu::Transpose::kNo ? s.k : s.m),
        ldb(s.tb == cpu::Transpose::kNo ? s.n : s.k),
        ldc(s.n) {}
};

void set_gemm_counters(benchmark::State& state, const GemmShape& s) {
  state.SetLabel(s.name);
  state.counters["FLOP/s"] = benchmark::Counter(cpu::gemm_flops(s.m, s.n, s.k),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_GemmPlanner(benchmark::State& state) {
  const GemmShape& s = kGemmShapes[state.range(0)];
  cpu::set_blas_threads(static_cast<int>(state.range(1)));
  GemmOperands op(s);
  for (auto _ : state) {
    cpu::gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, op.a.data(), op.lda, op.b.data(), op.ldb, 0.0f,
              op.c.data(), op.ldc);
    benchmark::DoNotOptimize(op.c.data());
  }
  set_gemm_counters(state, s);
}

void BM_GemmOpenBlas(benchmark::State& state) {
  const GemmShape& s = kGemmShapes[state.range(0)];
  openblas_set_num_threads(static_cast<int>(state.range(1)));
  GemmOperands op(s);
  const auto ta = s.ta == cpu::Transpose::kNo ? CblasNoTrans : CblasTrans;
  const auto tb = s.tb == cpu::Transpose::kNo ? CblasNoTrans : CblasTrans;
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(s.m), static_cast<int>(s.n),
                static_cast<int>(s.k), 1.0f, op.a.data(), static_cast<int>(op.lda), op.b.data(),
                static_cast<int>(op.ldb), 0.0f, op.c.data(), static_cast<int>(op.ldc));
    benchmark::DoNotOptimize(op.c.data());
  }
  set_gemm_counters(state, s);
}

void gemm_args(benchmark::internal::Benchmark* b, int threads) {
  for (int shape = 0; shape < static_cast<int>(std::size(kGemmShapes)); ++shape) {
    b->Args({shape, threads});
  }
  b->ArgNames({"shape", "threads"})->Unit(benchmark::kMillisecond);
  if (threads > 1) b->UseRealTime();
}
void gemm_args_1(benchmark::internal::Benchmark* b) {
  gemm_args(b, 1);
}
void gemm_args_2(benchmark::internal::Benchmark* b) {
  gemm_args(b, 2);
}
BENCHMARK(BM_GemmPlanner)->Apply(gemm_args_1);
BENCHMARK(BM_GemmOpenBlas)->Apply(gemm_args_1);
BENCHMARK(BM_GemmPlanner)->Apply(gemm_args_2);
BENCHMARK(BM_GemmOpenBlas)->Apply(gemm_args_2);

// Attention: batch 1, causal, args {heads, kv_heads, head_dim, seq, threads}.
cpu::AttentionShape attention_shape(const benchmark::State& state) {
  cpu::AttentionShape s;
  s.heads = state.range(0);
  s.kv_heads = state.range(1);
  s.head_dim = state.range(2);
  s.q_len = s.kv_len = state.range(3);
  s.causal = true;
  s.scale = cpu::attention_default_scale(s.head_dim);
  return s;
}

struct AttentionBuffers {
  std::vector<float> q, k, v, o, lse, dout, delta, dq, dk, dv;
  explicit AttentionBuffers(const cpu::AttentionShape& s) {
    const std::int64_t nq = s.batch * s.q_len * s.heads * s.head_dim;
    const std::int64_t nk = s.batch * s.kv_len * s.kv_heads * s.head_dim;
    const std::int64_t rows = s.batch * s.q_len * s.heads;
    q = random_vector(nq, 3);
    k = random_vector(nk, 4);
    v = random_vector(nk, 5);
    dout = random_vector(nq, 6);
    o.resize(static_cast<std::size_t>(nq));
    dq.resize(static_cast<std::size_t>(nq));
    dk.resize(static_cast<std::size_t>(nk));
    dv.resize(static_cast<std::size_t>(nk));
    lse.resize(static_cast<std::size_t>(rows));
    delta.resize(static_cast<std::size_t>(rows));
  }
};

void BM_AttentionForward(benchmark::State& state) {
  const cpu::AttentionShape s = attention_shape(state);
  cpu::set_blas_threads(static_cast<int>(state.range(4)));
  AttentionBuffers buf(s);
  for (auto _ : state) {
    cpu::attention_forward(s, buf.q.data(), buf.k.data(), buf.v.data(), buf.o.data(),
                           buf.lse.data());
    benchmark::DoNotOptimize(buf.o.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * s.head_dim * cpu::attention_pairs(s),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AttentionBackward(benchmark::State& state) {
  const cpu::AttentionShape s = attention_shape(state);
  cpu::set_blas_threads(static_cast<int>(state.range(4)));
  AttentionBuffers buf(s);
  cpu::attention_forward(s, buf.q.data(), buf.k.data(), buf.v.data(), buf.o.data(), buf.lse.data());
  const std::int64_t rows = s.batch * s.q_len * s.heads;
  for (auto _ : state) {
    cpu::attention_backward_delta(rows, s.head_dim, buf.o.data(), buf.dout.data(),
                                  buf.delta.data());
    cpu::attention_backward(s, buf.q.data(), buf.k.data(), buf.v.data(), buf.dout.data(),
                            buf.lse.data(), buf.delta.data(), buf.dq.data(), buf.dk.data(),
                            buf.dv.data());
    benchmark::DoNotOptimize(buf.dq.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(10.0 * s.head_dim * cpu::attention_pairs(s),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void attention_args(benchmark::internal::Benchmark* b, int threads) {
  b->Args({12, 12, 64, 1024, threads});  // GPT-2 small
  b->Args({12, 12, 64, 2048, threads});
  b->Args({32, 8, 128, 1024, threads});  // Llama-3-8B heads (GQA 4:1)
  b->ArgNames({"heads", "kv", "d", "seq", "threads"})->Unit(benchmark::kMillisecond);
  if (threads > 1) b->UseRealTime();
}
void attention_args_1(benchmark::internal::Benchmark* b) {
  attention_args(b, 1);
}
void attention_args_2(benchmark::internal::Benchmark* b) {
  attention_args(b, 2);
}
BENCHMARK(BM_AttentionForward)->Apply(attention_args_1);
BENCHMARK(BM_AttentionBackward)->Apply(attention_args_1);
BENCHMARK(BM_AttentionForward)->Apply(attention_args_2);
BENCHMARK(BM_AttentionBackward)->Apply(attention_args_2);

// Elementwise kernels on 4 Mi floats (16 MiB per array: beyond L2, within the 32 MiB L3 of the
// reference machine), as rows of 1024. Bytes counted are the arrays each kernel reads and writes
// once.
constexpr std::int64_t kElems = 4 << 20;
constexpr std::int64_t kDim = 1024;
constexpr std::int64_t kRows = kElems / kDim;
constexpr double kF = sizeof(float);

void set_bytes(benchmark::State& state, double arrays) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * arrays * kElems * kF));
}

void BM_Add(benchmark::State& state) {
  auto a = random_vector(kElems, 7), b = random_vector(kElems, 8);
  std::vector<float> out(kElems);
  for (auto _ : state) {
    cpu::add(a.data(), b.data(), kElems, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 3);
}
BENCHMARK(BM_Add);

void BM_GeluForward(benchmark::State& state) {
  auto x = random_vector(kElems, 9);
  std::vector<float> y(kElems);
  for (auto _ : state) {
    cpu::gelu_forward(x.data(), kElems, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2);
}
BENCHMARK(BM_GeluForward);

void BM_GeluBackward(benchmark::State& state) {
  auto x = random_vector(kElems, 10), dy = random_vector(kElems, 11);
  std::vector<float> dx(kElems);
  for (auto _ : state) {
    cpu::gelu_backward(x.data(), dy.data(), kElems, dx.data());
    benchmark::DoNotOptimize(dx.data());
  }
  set_bytes(state, 3);
}
BENCHMARK(BM_GeluBackward);

void BM_SwigluForward(benchmark::State& state) {
  auto gu = random_vector(2 * kElems, 12);  // fused [rows, 2 * dim] projection output
  std::vector<float> out(kElems);
  for (auto _ : state) {
    cpu::swiglu_forward(gu.data(), gu.data() + kDim, kRows, kDim, 2 * kDim, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 3);
}
BENCHMARK(BM_SwigluForward);

void BM_SwigluBackward(benchmark::State& state) {
  auto gu = random_vector(2 * kElems, 13), dout = random_vector(kElems, 14);
  std::vector<float> dgu(2 * kElems);
  for (auto _ : state) {
    cpu::swiglu_backward(gu.data(), gu.data() + kDim, dout.data(), kRows, kDim, 2 * kDim,
                         dgu.data(), dgu.data() + kDim);
    benchmark::DoNotOptimize(dgu.data());
  }
  set_bytes(state, 5);
}
BENCHMARK(BM_SwigluBackward);

void BM_LayerNormForward(benchmark::State& state) {
  auto x = random_vector(kElems, 15), g = random_vector(kDim, 16), b = random_vector(kDim, 17);
  std::vector<float> y(kElems), mean(kRows), rstd(kRows);
  for (auto _ : state) {
    cpu::layernorm_forward(x.data(), g.data(), b.data(), kRows, kDim, 1e-5f, y.data(), mean.data(),
                           rstd.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2);
}
BENCHMARK(BM_LayerNormForward);

void BM_LayerNormBackward(benchmark::State& state) {
  auto x = random_vector(kElems, 18), g = random_vector(kDim, 19), b = random_vector(kDim, 20);
  auto dy = random_vector(kElems, 21);
  std::vector<float> y(kElems), mean(kRows), rstd(kRows), dx(kElems), dg(kDim), db(kDim);
  cpu::layernorm_forward(x.data(), g.data(), b.data(), kRows, kDim, 1e-5f, y.data(), mean.data(),
                         rstd.data());
  for (auto _ : state) {
    cpu::layernorm_backward(dy.data(), x.data(), g.data(), mean.data(), rstd.data(), kRows, kDim,
                            dx.data(), dg.data(), db.data());
    benchmark::DoNotOptimize(dx.data());
  }
  set_bytes(state, 3);
}
BENCHMARK(BM_LayerNormBackward);

void BM_RmsNormForward(benchmark::State& state) {
  auto x = random_vector(kElems, 22), g = random_vector(kDim, 23);
  std::vector<float> y(kElems), rstd(kRows);
  for (auto _ : state) {
    cpu::rmsnorm_forward(x.data(), g.data(), kRows, kDim, 1e-5f, y.data(), rstd.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2);
}
BENCHMARK(BM_RmsNormForward);

void BM_RmsNormBackward(benchmark::State& state) {
  auto x = random_vector(kElems, 24), g = random_vector(kDim, 25), dy = random_vector(kElems, 26);
  std::vector<float> y(kElems), rstd(kRows), dx(kElems), dg(kDim);
  cpu::rmsnorm_forward(x.data(), g.data(), kRows, kDim, 1e-5f, y.data(), rstd.data());
  for (auto _ : state) {
    cpu::rmsnorm_backward(dy.data(), x.data(), g.data(), rstd.data(), kRows, kDim, dx.data(),
                          dg.data());
    benchmark::DoNotOptimize(dx.data());
  }
  set_bytes(state, 3);
}
BENCHMARK(BM_RmsNormBackward);

void BM_RopeForward(benchmark::State& state) {
  // Queries of 2048 positions x 16 heads x 128 dims (4 Mi floats), rotated in place.
  const std::int64_t seq = 2048, heads = 16, head_dim = 128;
  std::vector<std::int32_t> positions(seq);
  for (std::int64_t s = 0; s < seq; ++s)
    positions[s] = static_cast<std::int32_t>(s);
  std::vector<float> table(static_cast<std::size_t>(seq * head_dim));
  cpu::rope_table(positions.data(), seq, head_dim, 500000.0, table.data());
  auto x = random_vector(kElems, 34);
  for (auto _ : state) {
    cpu::rope_forward(table.data(), 1, seq, heads, head_dim, x.data());
    benchmark::DoNotOptimize(x.data());
  }
  set_bytes(state, 2);
}
BENCHMARK(BM_RopeForward);

void BM_AdamStep(benchmark::State& state) {
  auto p = random_vector(kElems, 27), g = random_vector(kElems, 28);
  std::vector<float> m(kElems, 0.0f), v(kElems, 0.0f);
  const cpu::AdamConfig config;
  std::int64_t step = 0;
  for (auto _ : state) {
    cpu::adam_step(config, ++step, kElems, 1.0f, g.data(), p.data(), m.data(), v.data());
    benchmark::DoNotOptimize(p.data());
  }
  set_bytes(state, 7);  // read p, g, m, v; write p, m, v
}
BENCHMARK(BM_AdamStep);

void BM_UnscaleAndCheck(benchmark::State& state) {
  auto g = random_vector(kElems, 29);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cpu::unscale_and_check(g.data(), kElems, 1.0f));
  }
  set_bytes(state, 2);
}
BENCHMARK(BM_UnscaleAndCheck);

// Cross-entropy over GPT-2's vocabulary (50257) for 64 tokens: 12.9 MB of logits.
constexpr std::int64_t kVocab = 50257, kTokens = 64;

void BM_CrossEntropyForward(benchmark::State& state) {
  auto logits = random_vector(kTokens * kVocab, 30);
  std::vector<std::int32_t> targets(kTokens);
  cpu::fill_tokens(1, 2, 0, kTokens, kVocab, targets.data());
  std::vector<float> loss(kTokens), lse(kTokens);
  for (auto _ : state) {
    cpu::cross_entropy_forward(logits.data(), kTokens, kVocab, targets.data(), loss.data(),
                               lse.data());
    benchmark::DoNotOptimize(loss.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kTokens * kVocab * kF));
}
BENCHMARK(BM_CrossEntropyForward);

void BM_CrossEntropyBackward(benchmark::State& state) {
  auto logits = random_vector(kTokens * kVocab, 31);
  std::vector<std::int32_t> targets(kTokens);
  cpu::fill_tokens(1, 3, 0, kTokens, kVocab, targets.data());
  std::vector<float> loss(kTokens), lse(kTokens), dlogits(logits.size());
  cpu::cross_entropy_forward(logits.data(), kTokens, kVocab, targets.data(), loss.data(),
                             lse.data());
  for (auto _ : state) {
    cpu::cross_entropy_backward(logits.data(), kTokens, kVocab, 0, targets.data(), lse.data(),
                                1.0f / kTokens, dlogits.data());
    benchmark::DoNotOptimize(dlogits.data());
  }
  state.SetBytesProcessed(
      static_cast<std::int64_t>(state.iterations() * 2 * kTokens * kVocab * kF));
}
BENCHMARK(BM_CrossEntropyBackward);

void BM_EmbeddingForward(benchmark::State& state) {
  const std::int64_t vocab = 50257, dim = 768, tokens = 2048;
  auto weight = random_vector(vocab * dim, 32);
  std::vector<std::int32_t> ids(tokens);
  cpu::fill_tokens(1, 4, 0, tokens, vocab, ids.data());
  std::vector<float> out(static_cast<std::size_t>(tokens * dim));
  for (auto _ : state) {
    cpu::embedding_forward(ids.data(), tokens, weight.data(), 0, vocab, dim, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * tokens * dim * kF));
}
BENCHMARK(BM_EmbeddingForward);

void BM_EmbeddingBackward(benchmark::State& state) {
  const std::int64_t vocab = 50257, dim = 768, tokens = 2048;
  std::vector<float> dweight(static_cast<std::size_t>(vocab * dim), 0.0f);
  auto dout = random_vector(tokens * dim, 33);
  std::vector<std::int32_t> ids(tokens);
  cpu::fill_tokens(1, 5, 0, tokens, vocab, ids.data());
  for (auto _ : state) {
    cpu::embedding_backward(ids.data(), tokens, dout.data(), 0, vocab, dim, dweight.data());
    benchmark::DoNotOptimize(dweight.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 3 * tokens * dim * kF));
}
BENCHMARK(BM_EmbeddingBackward);

void BM_FillNormal(benchmark::State& state) {
  std::vector<float> w(1 << 20);
  for (auto _ : state) {
    cpu::fill_normal(1, 2, 0, static_cast<std::int64_t>(w.size()), 0.0f, 0.02f, w.data());
    benchmark::DoNotOptimize(w.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * w.size()));
}
BENCHMARK(BM_FillNormal);

}  // namespace

BENCHMARK_MAIN();
