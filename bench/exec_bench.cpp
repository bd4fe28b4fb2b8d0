// The executor's speed on the cpu backend against the libraries it is built on (run under mpirun;
// bench/README.md has the exact commands and the numbers). Three measurements:
//
//   allreduce  busbw of the executor's all-reduce (Communicator::all_reduce + Backend::wait on the
//              world group) against a bare MPI_Allreduce on the same ranks and buffer, nccl-tests
//              style: in place, fp32, `--warmup` untimed then `--iters` timed iterations, busbw =
//              bytes / time x 2(n-1)/n, the median over iterations of the slowest rank's time.
//              Target: >= 95% at 64 MiB.
//   gemm       rank 0 alone: CpuDevice::gemm (the executor's GEMM) against cblas_sgemm on the same
//              operands, on the GEMM shapes the runner issues for the overhead plan below (forward,
//              input-gradient and weight-gradient products of its layers, LM head). Target: >= 90%.
//   overhead   rank 0 alone: a one-rank training step of a small GPT plan through the Runner; per
//              step, (step wall time - sum of the op times) / sum of the op times. Target: < 2%.
//
// Usage: mpirun -n 2 build/bin/bench_exec [--mib 64] [--iters 20] [--warmup 5] [--steps 10]
//        [--only allreduce|gemm|overhead]
// Prints a table and one JSON line per measurement (prefix "json: ").
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "planner/core/catalog.hpp"
#include "planner/core/lowering.hpp"
#include "planner/exec/backend.hpp"
#include "planner/exec/cpu_device.hpp"
#include "planner/exec/mpi_world.hpp"
#include "planner/exec/runner.hpp"

namespace {

using planner::exec::Backend;
using planner::exec::Clock;
using planner::exec::Deadline;

struct Args {
  double mib = 64;
  int iters = 20;
  int warmup = 5;
  int steps = 10;
  std::string only;
};

// Generous: a wait in a benchmark only bounds a hang.
constexpr double kTimeoutSeconds = 600;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : (n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void fail(const planner::Status& st, const char* what) {
  if (st.is_ok()) return;
  std::fprintf(stderr, "bench_exec: %s: %s\n", what, st.message().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// The slowest rank's time of each iteration (an all-reduce completes when its last rank does).
double slowest(double t) {
  double max = 0;
  MPI_Allreduce(&t, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

void bench_allreduce(const Args& args, planner::exec::World& world) {
  planner::exec::BackendOptions bo;
  auto backend = planner::exec::make_backend("cpu", world, bo);
  fail(backend.status(), "cpu backend");
  Backend& be = **backend;
  const auto count = static_cast<std::int64_t>(args.mib * 1024 * 1024 / sizeof(float));
  const std::int64_t bytes = count * static_cast<std::int64_t>(sizeof(float));
  auto mem = be.device().allocate(bytes, "all-reduce buffer");
  fail(mem.status(), "allocate");
  auto* buf = static_cast<float*>(*mem);
  std::fill(buf, buf + count, 1.0f);
  const int n = world.size();
  const double factor = 2.0 * (n - 1) / n;

  std::vector<double> bare;
  std::vector<double> exec;
  // Alternate the two so that drifts in the machine's load affect both alike.
  for (int i = 0; i < args.warmup + args.iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = Clock::now();
    MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double t_bare = slowest(seconds_since(t0));

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = Clock::now();
    auto ticket = be.world_communicator().all_reduce(buf, count, planner::exec::DType::kFloat32,
                                                     planner::exec::ReduceOp::kSum, "bench");
    fail(ticket.status(), "all_reduce");
    fail(be.wait(*ticket, Deadline::after(kTimeoutSeconds)), "wait");
    const double t_exec = slowest(seconds_since(t0));
    fail(be.release_tickets(), "release");
    if (i >= args.warmup) {
      bare.push_back(t_bare);
      exec.push_back(t_exec);
    }
    // Keep the values finite: n^(2 iterations) grows fast.
    std::fill(buf, buf + count, 1.0f);
  }
  be.device().deallocate(buf, bytes);
  const double bare_bus = static_cast<double>(bytes) / median(bare) * factor / 1e9;
  const double exec_bus = static_cast<double>(bytes) / median(exec) * factor / 1e9;
  if (world.rank() == 0) {
    std::printf("all-reduce %.0f MiB fp32 on %d ranks (median of %d, slowest rank)\n", args.mib, n,
                args.iters);
    std::printf("  %-28s %10s %12s\n", "", "time ms", "busbw GB/s");
    std::printf("  %-28s %10.3f %12.3f\n", "MPI_Allreduce (bare)", median(bare) * 1e3, bare_bus);
    std::printf("  %-28s %10.3f %12.3f\n", "executor all_reduce + wait", median(exec) * 1e3,
                exec_bus);
    std::printf("  executor / bare busbw: %.1f %% (target >= 95 %%)\n\n",
                100 * exec_bus / bare_bus);
    std::printf(
        "json: {\"bench\":\"allreduce\",\"ranks\":%d,\"bytes\":%lld,\"bare_busbw_GBps\":%.4f,"
        "\"exec_busbw_GBps\":%.4f,\"ratio\":%.4f}\n\n",
        n, static_cast<long long>(bytes), bare_bus, exec_bus, exec_bus / bare_bus);
  }
}

// A small GPT plan on the cpu-host pseudo-GPU, one rank: big enough that GEMMs dominate a step.
planner::Plan overhead_plan() {
  planner::ModelSpec m;
  m.name = "gpt-bench";
  m.num_layers = 4;
  m.hidden = 512;
  m.heads = 8;
  m.kv_heads = 8;
  m.head_dim = 64;
  m.ffn_hidden = 2048;
  m.mlp = planner::MlpKind::kGelu;
  m.norm = planner::NormKind::kLayerNorm;
  m.position_embedding = planner::PositionEmbedding::kLearned;
  m.vocab = 8192;
  m.max_seq_len = 256;
  m.bias = true;
  planner::Plan p;
  p.name = "gpt-bench 1 rank";
  p.model = m;
  p.gpu = *planner::builtin_catalog().find_gpu("cpu-host");
  p.cluster.nodes = 1;
  p.cluster.gpus_per_node = 1;
  p.cluster.gpu = "cpu-host";
  p.training.global_batch_size = 4;
  p.training.seq_length = 256;
  p.training.precision = planner::Precision::kFp32;
  p.training.optimizer = planner::Optimizer::kAdam;
  p.training.seed = 1;
  return p;
}

void bench_gemm(const Args& args) {
  const planner::Plan plan = overhead_plan();
  auto program = planner::lower(plan, planner::exec::runner_lower_options({}));
  fail(program.status(), "lower");
  // The distinct GEMM shapes of the step (transposes as the runner issues them per op kind:
  // forward Y = X W^T, input gradient dX = dY W, weight gradient dW += dY^T X).
  struct Shape {
    planner::exec::Transpose ta, tb;
    std::int64_t m, n, k;
    float beta;
    std::string name;
  };
  std::vector<Shape> shapes;
  for (const planner::Op& op : program->ranks()[0].ops()) {
    const planner::OpDesc& d = program->desc(op);
    if (d.kind != planner::OpKind::kGemm) continue;
    const planner::Phase ph = op.id.phase();
    using planner::exec::Transpose;
    Shape s{Transpose::kNo,
            Transpose::kYes,
            d.m,
            d.n,
            d.k,
            0.0f,
            std::string(planner::to_string(op.id.role()))};
    if (ph == planner::Phase::kBackwardInput) {
      s.tb = Transpose::kNo;
      s.name += " dx";
    } else if (ph == planner::Phase::kBackwardWeight) {
      s.ta = Transpose::kYes;
      s.tb = Transpose::kNo;
      s.beta = 1.0f;
      s.name += " dw";
    } else if (ph != planner::Phase::kForward) {
      continue;
    } else {
      s.name += " fwd";
    }
    const bool seen = std::any_of(shapes.begin(), shapes.end(), [&](const Shape& o) {
      return o.ta == s.ta && o.tb == s.tb && o.m == s.m && o.n == s.n && o.k == s.k;
    });
    if (!seen) shapes.push_back(s);
  }
  planner::exec::CpuDevice dev(0, 1);
  std::printf("GEMMs of %s (1 OpenBLAS thread, median of %d calls, GFLOP/s)\n", plan.name.c_str(),
              args.iters);
  std::printf("  %-22s %6s %6s %6s %10s %10s %8s\n", "op", "m", "n", "k", "executor", "OpenBLAS",
              "ratio");
  double worst = 1e9;
  std::string json = "[";
  for (const Shape& s : shapes) {
    // Operand layouts as the runner's: A is m x k (or k x m transposed), B is n x k (or k x n).
    const std::int64_t lda = s.ta == planner::exec::Transpose::kNo ? s.k : s.m;
    const std::int64_t ldb = s.tb == planner::exec::Transpose::kYes ? s.k : s.n;
    std::vector<float> a(static_cast<std::size_t>(s.m * s.k), 0.5f);
    std::vector<float> b(static_cast<std::size_t>(s.n * s.k), 0.25f);
    std::vector<float> c(static_cast<std::size_t>(s.m * s.n), 0.0f);
    std::vector<double> t_exec;
    std::vector<double> t_blas;
    for (int i = 0; i < args.warmup + args.iters; ++i) {
      auto t0 = Clock::now();
      dev.gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, s.beta, c.data(),
               s.n);
      const double te = seconds_since(t0);
      t0 = Clock::now();
      cblas_sgemm(CblasRowMajor, s.ta == planner::exec::Transpose::kYes ? CblasTrans : CblasNoTrans,
                  s.tb == planner::exec::Transpose::kYes ? CblasTrans : CblasNoTrans,
                  static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.0f,
                  a.data(), static_cast<int>(lda), b.data(), static_cast<int>(ldb), s.beta,
                  c.data(), static_cast<int>(s.n));
      const double tb = seconds_since(t0);
      if (i >= args.warmup) {
        t_exec.push_back(te);
        t_blas.push_back(tb);
      }
    }
    const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
    const double ge = flops / median(t_exec) / 1e9;
    const double gb = flops / median(t_blas) / 1e9;
    worst = std::min(worst, ge / gb);
    std::printf("  %-22s %6lld %6lld %6lld %10.2f %10.2f %7.1f%%\n", s.name.c_str(),
                static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), ge, gb, 100 * ge / gb);
    json += std::string(json.size() > 1 ? "," : "") + "{\"op\":\"" + s.name +
            "\",\"m\":" + std::to_string(s.m) + ",\"n\":" + std::to_string(s.n) +
            ",\"k\":" + std::to_string(s.k) + ",\"exec_gflops\":" + std::to_string(ge) +
            ",\"openblas_gflops\":" + std::to_string(gb) + "}";
  }
  std::printf("  worst executor / OpenBLAS: %.1f %% (target >= 90 %%)\n\n", 100 * worst);
  std::printf("json: {\"bench\":\"gemm\",\"worst_ratio\":%.4f,\"shapes\":%s]}\n\n", worst,
              json.c_str());
}

void bench_overhead(const Args& args, planner::exec::World& world) {
  const planner::Plan plan = overhead_plan();
  planner::exec::BackendOptions bo;
  bo.blas_threads = 1;
  auto backend = planner::exec::make_backend("cpu", world, bo);
  fail(backend.status(), "cpu backend");
  auto runner = planner::exec::Runner::create(plan, **backend, {});
  fail(runner.status(), "runner");
  std::vector<double> overhead;
  std::vector<double> walls;
  std::vector<double> sums;
  for (int step = 0; step < args.warmup + args.steps; ++step) {
    auto stats = (*runner)->run_step(step);
    fail(stats.status(), "step");
    double sum = 0;
    for (const planner::exec::OpSample& s : stats->ops)
      sum += s.wall_s;
    if (step >= args.warmup) {
      overhead.push_back((stats->wall_s - sum) / sum);
      walls.push_back(stats->wall_s);
      sums.push_back(sum);
    }
  }
  const double med = median(overhead);
  std::printf("executor overhead, %s (%zu ops per step, median of %d steps)\n", plan.name.c_str(),
              (*runner)->rank_program().size(), args.steps);
  std::printf("  step %.3f ms, sum of op times %.3f ms: overhead %.2f %% (target < 2 %%)\n\n",
              median(walls) * 1e3, median(sums) * 1e3, 100 * med);
  std::printf(
      "json: {\"bench\":\"overhead\",\"ops\":%zu,\"step_ms\":%.4f,\"op_sum_ms\":%.4f,"
      "\"overhead\":%.5f}\n\n",
      (*runner)->rank_program().size(), median(walls) * 1e3, median(sums) * 1e3, med);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const char* v = argv[i + 1];
    if (key == "--mib") {
      args.mib = std::atof(v);
    } else if (key == "--iters") {
      args.iters = std::atoi(v);
    } else if (key == "--warmup") {
      args.warmup = std::atoi(v);
    } else if (key == "--steps") {
      args.steps = std::atoi(v);
    } else if (key == "--only") {
      args.only = v;
    } else {
      std::fprintf(stderr, "bench_exec: unknown option %s\n", key.c_str());
      return 2;
    }
  }
  auto world = planner::exec::MpiWorld::init(&argc, &argv);
  if (!world) {
    std::fprintf(stderr, "bench_exec: %s\n", world.status().message().c_str());
    return 1;
  }
  if (args.only.empty() || args.only == "allreduce") bench_allreduce(args, **world);
  auto solo = (*world)->split((*world)->rank() == 0 ? 0 : -1);
  fail(solo.status(), "split");
  if (*solo) {
    if (args.only.empty() || args.only == "gemm") bench_gemm(args);
    if (args.only.empty() || args.only == "overhead") bench_overhead(args, **solo);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}
