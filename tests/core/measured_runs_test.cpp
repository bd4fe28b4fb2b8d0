// Measured runs in vTrain's CSV format: the reference copy reads into records in vTrain's setting,
// and bad rows are errors naming the file, the line and the column.
#include "planner/core/measured_runs.hpp"

#include <gtest/gtest.h>

#include <string>

namespace planner {
namespace {

const std::string kVtrain =
    std::string(PLANNER_TEST_DATA_DIR) + "/reference/vtrain_calibration.csv";
const std::string kHeader =
    "GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
    "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n";

TEST(MeasuredRuns, VtrainReferenceReads) {
  auto runs = load_measured_runs_file(kVtrain);
  ASSERT_TRUE(runs) << runs.status().message();
  ASSERT_EQ(runs->size(), 720u);
  const PublishedRun& r = runs->front();  // 8,8,2,2048,16,20,1024,4,1,2,160.6027
  EXPECT_EQ(r.id, "L20-h2048-g8-b8-mb2-tp4-dp1-pp2");
  EXPECT_EQ(r.hardware.num_gpus, 8);
  EXPECT_EQ(r.hardware.gpus_per_node, 8);
  EXPECT_EQ(r.parallel.tp, 4);
  EXPECT_EQ(r.parallel.dp, 1);
  EXPECT_EQ(r.parallel.pp, 2);
  EXPECT_EQ(r.parallel.micro_batch, 2);
  EXPECT_EQ(r.parallel.global_batch, 8);
  EXPECT_EQ(r.parallel.recompute, Recompute::kFull);
  EXPECT_EQ(r.model.ffn_hidden, 8192);
  EXPECT_EQ(r.model.vocab, 50257);
  EXPECT_DOUBLE_EQ(*r.measured.step_time_s, 0.1606027);
  EXPECT_EQ(r.stack, SoftwareStack::kMegatronDeepSpeed);
  EXPECT_EQ(r.overlap.grad_reduce, false);
  EXPECT_NE(r.source.find("VIA-Research/vTrain@f8dda84"), std::string::npos) << r.source;
  EXPECT_EQ(source_key(r), "VIA-Research/vTrain/data/ground_truth_single.csv");
}

TEST(MeasuredRuns, ColumnsInAnyOrder) {
  auto runs = parse_vtrain_csv(
      "iteration time (ms), GPUs,global batch,micro batch,hidden size,attention heads,"
      "# layers,sequence length,tensor parallelism,data parallelism,pipeline parallelism\r\n"
      "100.5,2,4,1,1024,16,12,1024,2,1,1\r\n",
      "v.csv");
  ASSERT_TRUE(runs) << runs.status().message();
  EXPECT_DOUBLE_EQ(*runs->at(0).measured.step_time_s, 0.1005);
  EXPECT_EQ(runs->at(0).source, "v.csv");  // no "# Source:" line
}

// Rows beyond one node (vTrain's multi-node sweeps) are whole nodes of 8 joined by the network a
// "# Network:" line states, else by vTrain's multi-node cluster's 4 x 200 Gb/s InfiniBand HDR.
TEST(MeasuredRuns, MultiNodeRowsStateTheirNetwork) {
  const std::string rows =
      kHeader + "16,16,1,1024,16,12,1024,8,2,1,10\n8,8,1,1024,16,12,1024,8,1,1,9\n";
  auto runs = parse_vtrain_csv(rows, "multi.csv");
  ASSERT_TRUE(runs) << runs.status().message();
  const PublishedHardware& two = runs->at(0).hardware;
  EXPECT_EQ(two.num_gpus, 16);
  EXPECT_EQ(two.gpus_per_node, 8);
  EXPECT_EQ(two.nics_per_node, 4);
  EXPECT_EQ(two.nic_Gbps, 200.0);
  EXPECT_EQ(two.nic_kind, "ib-hdr");
  EXPECT_NE(two.inter_node.find("800 Gb/s"), std::string::npos) << two.inter_node;
  const PublishedHardware& one = runs->at(1).hardware;  // one node: no network
  EXPECT_FALSE(one.nics_per_node);
  EXPECT_FALSE(one.states_numbers());

  auto stated = parse_vtrain_csv("# Network: 8 x 400 Gb/s ib-ndr\n" + rows, "multi.csv");
  ASSERT_TRUE(stated) << stated.status().message();
  EXPECT_EQ(stated->at(0).hardware.nics_per_node, 8);
  EXPECT_EQ(stated->at(0).hardware.nic_Gbps, 400.0);
  EXPECT_EQ(stated->at(0).hardware.nic_kind, "ib-ndr");
  EXPECT_EQ(stated->at(0).hardware.inter_node,
            "8 x 400 Gb/s per node (ib-ndr) (the file's \"# Network:\" line)");
}

TEST(MeasuredRuns, BadRowsNameLineAndColumn) {
  const std::pair<std::string, std::string> cases[] = {
      {kHeader + "8,8,2,2048,16,20,1024,4,1,x,160\n", "line 2: column \"pipeline parallelism\""},
      {kHeader + "8,8,2,2048,16,20,1024,4,1,2,-3\n", "line 2: column \"iteration time (ms)\""},
      {kHeader + "8,8,2,2048,16,20,1024,4,1,1,160\n", "line 2: GPUs (8) is not tp x dp x pp"},
      {kHeader + "8,6,2,2048,16,20,1024,2,2,2,160\n", "not a multiple of data parallelism"},
      {kHeader + "8,8,2,2048\n", "line 2: expected 11 values, got 4"},
      {kHeader + "12,12,1,1024,16,12,1024,4,3,1,10\n",
       "GPUs (12) beyond one node is not whole nodes of 8"},
      {"# Network: fast\n" + kHeader + "8,8,2,2048,16,20,1024,4,1,2,160\n",
       "line 1: \"# Network:\" expected NICS x GBPS Gb/s [KIND] per node"},
      {kHeader + "8,8,2,2048,16,20,1024,4,1,2,160\n8,8,2,2048,16,20,1024,4,1,2,170\n",
       "line 3: the same configuration as line 2"},
      {"GPUs,global batch,speed\n", "unknown column \"speed\""},
      {"# only a comment\n", "no header row"},
      {kHeader, "no measured configurations"},
  };
  for (const auto& [text, where] : cases) {
    auto runs = parse_vtrain_csv(text, "bad.csv");
    ASSERT_FALSE(runs) << text;
    EXPECT_EQ(runs.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(runs.status().message().find("bad.csv"), std::string::npos);
    EXPECT_NE(runs.status().message().find(where), std::string::npos) << where << "\n"
                                                                      << runs.status().message();
  }
}

}  // namespace
}  // namespace planner
