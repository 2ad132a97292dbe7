// Writes the checkpoint fixtures of fixture_spec.hpp into a directory (normally tests/data):
//   cmake --build build --target qmoe_make_fixtures && build/tests/data/qmoe_make_fixtures
//   tests/data
// Each fixture directory is replaced. Run by hand when a fixture is added or the writers change.
#include <fmt/format.h>

#include <filesystem>
#include <vector>

#include "data/fixture_spec.hpp"
#include "qmoe/error.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    for (const auto& spec : qmoe::fixtures::fixture_specs()) {
      const std::filesystem::path dir = std::filesystem::path(argv[1]) / spec.dir;
      std::filesystem::remove_all(dir);
      std::vector<qmoe::QuantizedExperts> layers;
      for (int l = 0; l < spec.layers; ++l)
        layers.push_back(qmoe::fixtures::fixture_experts(spec, l));
      qmoe::write_checkpoint(dir, qmoe::fixtures::fixture_config(spec), layers, spec.options);
      fmt::print("wrote {}\n", dir.string());
    }
  } catch (const qmoe::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
