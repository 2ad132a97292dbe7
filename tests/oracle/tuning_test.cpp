// The tune file (src/moe/tuning.hpp): what `qmoe tune` stores is what a later MoE on the same
// device and layer reads, whatever its activation dtype; other devices, layers and backends are
// untouched; a damaged file is an error naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "layers.hpp"
#include "moe/tuning.hpp"
#include "qmoe/error.hpp"
#include "support/expect_error.hpp"

namespace qmoe {
namespace {

using test::base_layer;

class TuneFile : public testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("qmoe_tuning_test_" + std::to_string(getpid())) / "tune.json";
    std::filesystem::remove_all(path_.parent_path());
    setenv("QMOE_TUNE_FILE", path_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("QMOE_TUNE_FILE");
    std::filesystem::remove_all(path_.parent_path());
  }
  std::filesystem::path path_;
};

TEST_F(TuneFile, StoredCrossoverIsReadBackForTheSameDeviceAndLayerOnly) {
  const LayerDesc layer = base_layer();
  EXPECT_FALSE(tuned_crossover("NVIDIA H200", layer, "cuda-wgmma"));  // no file yet
  store_crossover(path_, "NVIDIA H200", layer, "cuda-wgmma", 640);
  store_crossover(path_, "NVIDIA H100", layer, "cuda-wgmma", 900);
  const auto got = tuned_crossover("NVIDIA H200", layer, "cuda-wgmma");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->from_tokens, 640);
  EXPECT_EQ(got->file, path_.string());
  LayerDesc other_dtype = layer;
  other_dtype.activation_dtype = DType::f16;
  EXPECT_EQ(tuned_crossover("NVIDIA H200", other_dtype, "cuda-wgmma")->from_tokens, 640);
  LayerDesc other_shape = layer;
  other_shape.hidden = 4096;
  EXPECT_FALSE(tuned_crossover("NVIDIA H200", other_shape, "cuda-wgmma"));
  EXPECT_FALSE(tuned_crossover("NVIDIA H200", layer, "cuda-mma"));
  store_crossover(path_, "NVIDIA H200", layer, "cuda-wgmma", 700);  // replaces, not adds
  EXPECT_EQ(tuned_crossover("NVIDIA H200", layer, "cuda-wgmma")->from_tokens, 700);
  EXPECT_EQ(tuned_crossover("NVIDIA H100", layer, "cuda-wgmma")->from_tokens, 900);
}

TEST_F(TuneFile, PlanTakesTheTunedCrossover) {
  Selection s;
  s.plan = {{"cuda-mma", 1, "below 512 tokens"}, {"cuda-wgmma", 512, "from 512 tokens"}};
  apply_tuned_crossover(s, "NVIDIA H200", base_layer());
  EXPECT_EQ(s.plan[1].from_tokens, 512);  // nothing stored yet
  store_crossover(path_, "NVIDIA H200", base_layer(), "cuda-wgmma", 96);
  apply_tuned_crossover(s, "NVIDIA H200", base_layer());
  EXPECT_EQ(s.plan[1].from_tokens, 96);
  EXPECT_EQ(s.plan[0].why, "below 96 tokens");
  EXPECT_NE(s.plan[1].why.find(path_.string()), std::string::npos);
}

TEST_F(TuneFile, DamagedFileIsAnErrorNamingIt) {
  std::filesystem::create_directories(path_.parent_path());
  for (const char* text : {"not json", "[1, 2]", R"({"entries": [{"device": 1}]})",
                           R"({"entries": [{"device": "d", "backend": "b", "layer": "l",
                               "from_tokens": 0}]})"}) {
    std::ofstream(path_) << text;
    test::expect_error([&] { tuned_crossover("d", base_layer(), "b"); }, path_.string());
  }
}

}  // namespace
}  // namespace qmoe
