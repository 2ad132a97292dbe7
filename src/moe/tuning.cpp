#include "moe/tuning.hpp"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.hpp"
#include "format/regular_file.hpp"

namespace qmoe {

namespace {

constexpr size_t kMaxTuneFileBytes = size_t{4} << 20;

nlohmann::json read_tune_file(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) return {{"version", 1}, {"entries", nlohmann::json::array()}};
  const std::string text = format::read_regular_file(path, kMaxTuneFileBytes);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  const auto bad = [&](const char* what) {
    fail("tune file {}: {}; delete it or run `qmoe tune` again", path.string(), what);
  };
  if (j.is_discarded()) bad("not valid JSON");
  if (!j.is_object() || !j.contains("entries") || !j["entries"].is_array())
    bad("expected an object with an \"entries\" array");
  for (const auto& e : j["entries"]) {
    if (!e.is_object() || !e.contains("device") || !e["device"].is_string() ||
        !e.contains("backend") || !e["backend"].is_string() || !e.contains("layer") ||
        !e["layer"].is_string() || !e.contains("from_tokens") ||
        !e["from_tokens"].is_number_integer())
      bad("each entry needs strings \"device\", \"backend\", \"layer\" and an integer "
          "\"from_tokens\"");
    if (e["from_tokens"].get<int64_t>() < 1) bad("from_tokens must be at least 1");
  }
  return j;
}

// Crossovers hold for both 16-bit activation dtypes: the key leaves the dtype out, so a MoE built
// without MoEConfig::activation_dtype finds what `qmoe tune` measured with one.
std::string key_of(const LayerDesc& layer) {
  LayerDesc key = layer;
  key.activation_dtype.reset();
  return key.to_string();
}

bool matches(const nlohmann::json& e, const std::string& device, const std::string& layer,
             const std::string& backend) {
  return e["device"] == device && e["layer"] == layer && e["backend"] == backend;
}

}  // namespace

std::filesystem::path tune_file_path() {
  if (const char* f = std::getenv("QMOE_TUNE_FILE"); f && *f) return f;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::filesystem::path(x) / "qmoe" / "tune.json";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".cache" / "qmoe" / "tune.json";
  return {};
}

std::optional<TunedCrossover> tuned_crossover(const std::string& device_name,
                                              const LayerDesc& layer, const std::string& backend) {
  const std::filesystem::path path = tune_file_path();
  if (path.empty()) return std::nullopt;
  const nlohmann::json j = read_tune_file(path);
  for (const auto& e : j["entries"])
    if (matches(e, device_name, key_of(layer), backend))
      return TunedCrossover{e["from_tokens"].get<int64_t>(), path.string()};
  return std::nullopt;
}

void apply_tuned_crossover(Selection& selection, const std::string& device_name,
                           const LayerDesc& layer) {
  if (selection.plan.size() != 2) return;
  PlanStep& large = selection.plan[1];
  const auto tuned = tuned_crossover(device_name, layer, large.backend);
  if (!tuned) return;
  large.from_tokens = tuned->from_tokens;
  large.why = fmt::format("from {} tokens, measured by `qmoe tune` on this device ({})",
                          large.from_tokens, tuned->file);
  selection.plan[0].why = fmt::format("below {} tokens", large.from_tokens);
}

void store_crossover(const std::filesystem::path& path, const std::string& device_name,
                     const LayerDesc& layer, const std::string& backend, int64_t from_tokens) {
  check(from_tokens >= 1, "store_crossover: from_tokens must be at least 1, got {}", from_tokens);
  nlohmann::json j = read_tune_file(path);
  auto& entries = j["entries"];
  const std::string key = key_of(layer);
  for (auto it = entries.begin(); it != entries.end();)
    it = matches(*it, device_name, key, backend) ? entries.erase(it) : it + 1;
  entries.push_back({{"device", device_name},
                     {"backend", backend},
                     {"layer", key},
                     {"from_tokens", from_tokens}});
  j["version"] = 1;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  check(out.good(), "tune file {}: could not write it", path.string());
}

}  // namespace qmoe
