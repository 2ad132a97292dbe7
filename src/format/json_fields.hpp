#pragma once
// Typed reads of config.json fields, shared by the MoE shape and the quantization methods. A key
// holding null counts as absent; a present key of the wrong type is an Error naming `file`.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace qmoe::format {

using ordered_json = nlohmann::ordered_json;

// The value of `key`, or null when it is missing or null.
const ordered_json* find_key(const ordered_json& j, std::string_view key);
// Without a fallback, a missing key is an Error.
int64_t get_int(const ordered_json& j, std::string_view key, std::string_view file,
                std::optional<int64_t> fallback = std::nullopt);
bool get_bool(const ordered_json& j, std::string_view key, std::string_view file, bool fallback);
std::string get_string(const ordered_json& j, std::string_view key, std::string_view file,
                       std::optional<std::string> fallback = std::nullopt);
std::string lower(std::string s);

}  // namespace qmoe::format
