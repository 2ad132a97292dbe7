// Untrusted model directories: only regular files are read (a FIFO cannot hang qmoe, a link to a
// device cannot grow memory), JSON files are size-limited and absurd sizes are clear errors.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "cli/checkpoint_edit.hpp"
#include "qmoe/config.hpp"
#include "support/run_cli.hpp"

namespace qmoe::test {
namespace {

class Hygiene : public testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(run_cli("sample " + ckpt_.string()).status, 0); }

  // Replaces `file` of the checkpoint by what `make` creates at its path.
  template <class Make>
  void replace(const std::string& file, Make make) {
    std::filesystem::remove(ckpt_ / file);
    make((ckpt_ / file).string());
  }

  void expect_refused(const std::string& message) {
    const CliRun r = run_cli("inspect " + ckpt_.string(), 20);
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find("qmoe: error: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << "expected '" << message << "' in\n"
                                                      << r.out;
  }

  TempDir dir_{"hygiene"};
  std::filesystem::path ckpt_ = dir_.path() / "c";
};

TEST_F(Hygiene, FifoAsConfigIsRefusedNotWaitedOn) {
  replace("config.json", [](const std::string& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0); });
  expect_refused("config.json: is a FIFO; qmoe reads regular files only");
}

TEST_F(Hygiene, ConfigLinkedToADeviceIsRefused) {
  replace("config.json",
          [](const std::string& p) { std::filesystem::create_symlink("/dev/zero", p); });
  expect_refused("config.json: is a character device");
}

TEST_F(Hygiene, DirectoryNamedConfigIsRefused) {
  replace("config.json", [](const std::string& p) { std::filesystem::create_directory(p); });
  expect_refused("config.json: is a directory");
}

TEST_F(Hygiene, FifoAsSafetensorsIsRefusedByName) {
  replace("model.safetensors",
          [](const std::string& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0); });
  expect_refused("model.safetensors: is a FIFO");
}

TEST_F(Hygiene, SafetensorsLinkedToADeviceIsRefused) {
  replace("model.safetensors",
          [](const std::string& p) { std::filesystem::create_symlink("/dev/zero", p); });
  expect_refused("model.safetensors: is a character device");
}

TEST_F(Hygiene, TruncatedSafetensorsIsNamedWithItsDirectory) {
  std::filesystem::resize_file(ckpt_ / "model.safetensors", 100000);
  expect_refused((ckpt_ / "model.safetensors").string() + ": tensor '");
}

TEST_F(Hygiene, OversizedConfigIsRefusedBeforeReading) {
  std::filesystem::resize_file(ckpt_ / "config.json", (64u << 20) + 1);  // sparse
  expect_refused("bytes, more than the 67108864 accepted");
}

TEST_F(Hygiene, OversizedIndexIsRefusedBeforeReading) {
  const std::filesystem::path index = ckpt_ / "model.safetensors.index.json";
  { std::ofstream(index) << "{}"; }
  std::filesystem::resize_file(index, (64u << 20) + 1);
  expect_refused("model.safetensors.index.json: 67108865 bytes");
}

TEST_F(Hygiene, AbsurdSizesAreClearErrors) {
  set_config(ckpt_, "num_experts", int64_t{1} << 40);
  expect_refused("implausibly large");
  set_config(ckpt_, "num_experts", 8);
  set_config(ckpt_, "hidden_size", int64_t{1} << 33);
  expect_refused("implausibly large");
  set_config(ckpt_, "hidden_size", 512);
  set_config(ckpt_, "num_hidden_layers", int64_t{1} << 40);
  expect_refused("num_hidden_layers must be in 1..");
  const CliRun r = run_cli("explain --experts 1099511627776 --hidden 64 --intermediate 64");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("implausibly large"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qmoe::test
