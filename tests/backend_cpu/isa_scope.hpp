#pragma once
// Forces the cpu backend's SIMD variant (QMOE_CPU_ISA) for the lifetime of the object.
#include <cstdlib>
#include <optional>
#include <string>

namespace qmoe::test {

class IsaScope {
 public:
  explicit IsaScope(const std::string& isa) {
    if (const char* old = std::getenv("QMOE_CPU_ISA")) old_ = old;
    setenv("QMOE_CPU_ISA", isa.c_str(), 1);
  }
  ~IsaScope() {
    if (old_)
      setenv("QMOE_CPU_ISA", old_->c_str(), 1);
    else
      unsetenv("QMOE_CPU_ISA");
  }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  std::optional<std::string> old_;
};

}  // namespace qmoe::test
