// Runner: executes one rank's step program (core/lowering.hpp) with real training numerics.
//
// The runner lowers the plan for its own rank (lower(plan, {ranks = {rank}})) and interprets the
// ops in program order, so it runs exactly the program the simulator times: same op ids, same
// schedule. Each op's (role, phase, layer, micro-batch, slot) says what it computes; its descriptor
// gives the shapes, which the runner checks against its own buffers (a mismatch is an internal
// error naming the op, never a silent divergence). How roles map to kernels and communication is
// documented at the top of runner.cpp.
//
// Execution: ops are issued in program order on the device streams of their descriptors.
// Communication is started, not waited for; an op first orders itself after the communication ops
// it depends on (Backend::stream_wait), and after communication still running on the gradient or
// parameter buffers it touches (hazards the program leaves implicit, e.g. the next micro-batch's
// weight gradients accumulating into a bucket that a ZeRO-2 reduce-scatter still reads). Every wait
// is bounded by RunnerOptions::timeout_s.
//
// Numerics: mean token cross-entropy over the global batch (each micro-batch's loss gradient scaled
// by 1 / (global_batch_size x seq_length)); gradients summed over data-parallel ranks; global-norm
// clipping; Adam / AdamW / SGD with momentum (OptimizerOptions).
//
// Precision: the plan's training precision, which the device must support. fp32 (and tf32) keep
// everything in fp32. bf16 and fp16 are Megatron-LM's mixed precision: activations, their
// gradients, the model weights the kernels read and the tensor-, sequence-, context- and
// pipeline-parallel messages in 16 bits; weight gradients accumulate in fp32 main grads (the
// lowering's fp32_grads, so data-parallel reductions are fp32); fp32 master weights and optimizer
// state (with ZeRO >= 1 only this rank's shard), from which the 16-bit weights are refreshed after
// each update and, with ZeRO, all-gathered. fp16 adds dynamic loss scaling (LossScaleOptions).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "planner/core/lowering.hpp"
#include "planner/core/plan.hpp"
#include "planner/core/program.hpp"
#include "planner/core/status.hpp"
#include "planner/exec/backend.hpp"
#include "planner/exec/model_state.hpp"

namespace planner::exec {

struct OptimizerOptions {
  double lr = 1e-3;    // constant learning rate
  double beta1 = 0.9;  // Adam moments (Megatron-LM's GPT recipes use 0.9 / 0.95)
  double beta2 = 0.95;
  double eps = 1e-8;
  // Weight decay on weights and embeddings (never on biases and norm parameters, as Megatron-LM's
  // parameter groups); < 0: 0.01 for adamw (PyTorch's AdamW default), 0 for adam and sgd.
  double weight_decay = -1;
  double momentum = 0.9;   // sgd
  double clip_grad = 1.0;  // global gradient-norm clipping (Megatron-LM's default); 0: off
};

// fp16 dynamic loss scaling (kernels/cpu/loss_scale.hpp, torch.cuda.amp.GradScaler's rule and
// defaults): the loss gradient is multiplied by the scale; before the update the fp32 main grads
// are unscaled and checked; a step with inf or NaN anywhere is skipped on every rank and halves
// the scale, growth_interval good steps in a row double it. bf16 and fp32 do not scale.
struct LossScaleOptions {
  float initial_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int growth_interval = 2000;
};

struct RunnerOptions {
  OptimizerOptions optimizer;
  LossScaleOptions loss_scale;
  double timeout_s = 60;             // bound of every wait
  std::int64_t bucket_elements = 0;  // data-parallel bucket size; 0: the lowering's default
};

// One executed op of a step on this rank.
struct OpSample {
  std::uint32_t index = 0;  // in the rank's program
  double start_s = 0;       // since the start of the step
  double wall_s = 0;        // computation: kernel time; communication: start to observed completion
};

struct StepStats {
  std::int64_t step = 0;
  double wall_s = 0;             // this rank's step time
  double loss_sum = 0;           // sum of token losses this rank accounts for (nats)
  std::int64_t loss_tokens = 0;  // tokens in loss_sum (last stage, tp rank 0; else 0)
  std::int64_t peak_memory = 0;  // device bytes in use at the step's peak
  std::vector<OpSample> ops;     // every op of the program, in program order
  // fp16 loss scaling: the scale this step's backward used, and whether its update was skipped
  // (inf or NaN in some gradient; the same on every rank). 0 and false without scaling.
  float loss_scale = 0;
  bool skipped = false;
};

// The options the runner lowers the plan with (its `ranks` left empty): a prediction of the same
// run must lower with them too, or its op ids and ops will not match the measured ones.
// `precision`: the plan's training precision (fp16 keeps the gradient-norm all-reduce).
LowerOptions runner_lower_options(const RunnerOptions& options, Precision precision);

// Ok when the executor implements everything the plan uses; otherwise kInvalidInput listing what it
// does not run yet (GeGLU, squared ReLU, ALiBi, multi-head latent attention, Mamba-2, local
// attention, MTP, parameter servers, offloading, ZeRO >= 1 with tied embeddings on several
// pipeline stages, and for mixture-of-experts models expert tensor parallelism, token dropping,
// FP8 dispatch, Qwen2-MoE's shared-expert gate and ZeRO-3), at the plan's JSON pointers.
Status check_runnable(const Plan& plan);

class Runner {
 public:
  // Lowers and checks the plan for this rank, creates the communicators of its groups (collective:
  // every rank of the backend's world must call it) and initialises the model. Fails with
  // kInvalidInput for what the executor does not run (see check_executable in exec_plan.hpp).
  static Result<std::unique_ptr<Runner>> create(const Plan& plan, Backend& backend,
                                                const RunnerOptions& options);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Runs training step `step` (0-based: it selects the data) and returns this rank's statistics.
  // After an error the runner is unusable (communication may still be in flight).
  Result<StepStats> run_step(std::int64_t step);

  // This rank's lowered program (one RankProgram).
  const StepProgram& program() const;
  const RankProgram& rank_program() const;
  // Parameters, gradients and optimizer state (for checkpoints).
  ModelState& state();

  struct Impl;

 private:
  explicit Runner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace planner::exec
