#pragma once
// EXPECT that `f` throws qmoe::Error whose message contains `fragment` (the part of the message a
// user acts on), and show the message when it does not.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "qmoe/error.hpp"

namespace qmoe::test {

inline void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace qmoe::test
