#include "format/json_fields.hpp"

#include <algorithm>
#include <cctype>

#include "core/check.hpp"

namespace qmoe::format {

const ordered_json* find_key(const ordered_json& j, std::string_view key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

int64_t get_int(const ordered_json& j, std::string_view key, std::string_view file,
                std::optional<int64_t> fallback) {
  const ordered_json* v = find_key(j, key);
  if (!v) {
    check(fallback.has_value(), "{}: missing integer '{}'", file, key);
    return *fallback;
  }
  check(v->is_number_integer(), "{}: '{}' must be an integer, got {}", file, key, v->dump());
  return v->get<int64_t>();
}

bool get_bool(const ordered_json& j, std::string_view key, std::string_view file, bool fallback) {
  const ordered_json* v = find_key(j, key);
  if (!v) return fallback;
  check(v->is_boolean(), "{}: '{}' must be true or false, got {}", file, key, v->dump());
  return v->get<bool>();
}

std::string get_string(const ordered_json& j, std::string_view key, std::string_view file,
                       std::optional<std::string> fallback) {
  const ordered_json* v = find_key(j, key);
  if (!v) {
    check(fallback.has_value(), "{}: missing string '{}'", file, key);
    return *fallback;
  }
  check(v->is_string(), "{}: '{}' must be a string, got {}", file, key, v->dump());
  return v->get<std::string>();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace qmoe::format
