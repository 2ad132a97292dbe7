// One contract for routing input on every host backend (src/route/routing_contract.hpp): the same
// Error, word for word, for an expert id outside 0..E-1 or a non-finite weight or logit; repeated
// ids computed once per slot, as the reference does; M = 0 a no-op; non-contiguous or
// wrong-device tensors refused. cuda-mma keeps it under QMOE_CHECK_ROUTING=1
// (tests/cuda_mma/soak_gpu_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "sample/reference_moe.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

const std::vector<std::string> kBackends{"emulation", "cpu"};

class RoutingContract : public testing::Test {
 protected:
  test::MoECase c = test::make_case(
      {.E = 5, .H = 64, .I = 32, .M = 3, .top_k = 2, .scheme = test::scheme(4, 32), .seed = 3});

  // The message of the Error `backend` throws for routed input (ids, weights), "" if none.
  std::string routed_error(const std::string& backend, const std::vector<int32_t>& ids,
                           const std::vector<float>& weights) {
    const MoE moe(c.config, *c.experts, backend);
    Buffer id_buffer(DType::i32, {3, 2}), weight_buffer(DType::f32, {3, 2}),
        out(DType::f32, {3, 64});
    std::copy(ids.begin(), ids.end(), id_buffer.data_as<int32_t>());
    std::copy(weights.begin(), weights.end(), weight_buffer.data_as<float>());
    try {
      moe.forward_routed(c.hidden.view(), weight_buffer.view(), id_buffer.view(), out.view());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  // The same for router logits with one element replaced.
  std::string logits_error(const std::string& backend, float value) {
    const MoE moe(c.config, *c.experts, backend);
    Buffer logits = c.router_logits.clone(), out(DType::f32, {3, 64});
    logits.data_as<float>()[7] = value;
    try {
      moe.forward(c.hidden.view(), logits.view(), out.view());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(RoutingContract, BadIdsAndWeightsGiveTheSameErrorEverywhere) {
  const std::vector<float> ok_weights{0.5f, 0.5f, 0.3f, 0.7f, 0.9f, 0.1f};
  const std::vector<int32_t> ok_ids{0, 1, 2, 3, 4, 0};
  struct Bad {
    std::vector<int32_t> ids;
    std::vector<float> weights;
    std::string message;
  };
  const Bad cases[] = {
      {{0, 1, 2, 5, 4, 0}, ok_weights, "topk_ids[1, 1] = 5 is not an expert id (valid: 0..4)"},
      {{0, 1, 2, 3, -1, 0}, ok_weights, "topk_ids[2, 0] = -1 is not an expert id (valid: 0..4)"},
      {ok_ids, {0.5f, NAN, 0.3f, 0.7f, 0.9f, 0.1f}, "topk_weights[0, 1] is nan"},
      {ok_ids, {0.5f, 0.5f, 0.3f, 0.7f, INFINITY, 0.1f}, "topk_weights[2, 0] is inf"},
  };
  for (const Bad& bad : cases) {
    for (const std::string& backend : kBackends) {
      const std::string message = routed_error(backend, bad.ids, bad.weights);
      EXPECT_NE(message.find(bad.message), std::string::npos) << backend << ": " << message;
    }
  }
  for (const std::string& backend : kBackends)
    EXPECT_EQ(routed_error(backend, ok_ids, ok_weights), "") << backend;
}

TEST_F(RoutingContract, NonFiniteLogitsGiveTheSameErrorEverywhere) {
  for (const std::string& backend : kBackends) {
    EXPECT_NE(logits_error(backend, NAN).find("router_logits[1, 2] is nan"), std::string::npos)
        << backend;
    EXPECT_NE(logits_error(backend, -INFINITY).find("router_logits[1, 2] is -inf"),
              std::string::npos)
        << backend;
  }
}

// A repeated id counts once per slot: the reference's sum, on every backend.
TEST_F(RoutingContract, RepeatedIdsCountOncePerSlot) {
  sample::ReferenceRouting routing{.top_k = 2, .ids = {3, 3, 1, 1, 0, 2}, .weights = {}};
  routing.weights = {0.25, 0.5, 1.0, 1.0, 0.75, 0.125};
  const Buffer truth = sample::reference_forward(c.config, *c.experts, c.hidden, routing);
  Buffer ids(DType::i32, {3, 2}), weights(DType::f32, {3, 2});
  for (int i = 0; i < 6; ++i) {
    ids.data_as<int32_t>()[i] = routing.ids[i];
    weights.data_as<float>()[i] = float(routing.weights[i]);
  }
  for (const std::string& backend : kBackends) {
    const MoE moe(c.config, *c.experts, backend);
    Buffer out(DType::f32, {3, 64});
    moe.forward_routed(c.hidden.view(), weights.view(), ids.view(), out.view());
    EXPECT_LT(test::relative_error(out, truth), 1e-5) << backend;
  }
}

TEST_F(RoutingContract, NoTokensIsANoOp) {
  for (const std::string& backend : kBackends) {
    const MoE moe(c.config, *c.experts, backend);
    Buffer hidden(DType::f32, {0, 64}), logits(DType::f32, {0, 5}), out(DType::f32, {0, 64});
    Buffer weights(DType::f32, {0, 2}), ids(DType::i32, {0, 2});
    EXPECT_NO_THROW(moe.forward(hidden.view(), logits.view(), out.view())) << backend;
    EXPECT_NO_THROW(moe.forward_routed(hidden.view(), weights.view(), ids.view(), out.view()))
        << backend;
  }
}

TEST_F(RoutingContract, StridedOrForeignTensorsAreRefused) {
  const int64_t shape[] = {3, 2}, every_other_row[] = {4, 1};
  for (const std::string& backend : kBackends) {
    const MoE moe(c.config, *c.experts, backend);
    Buffer wide_ids(DType::i32, {6, 2}), out(DType::f32, {3, 64});
    const TensorView strided(wide_ids.data(), DType::i32, shape, every_other_row);
    try {
      moe.forward_routed(c.hidden.view(), c.topk_weights.view(), strided, out.view());
      ADD_FAILURE() << backend << ": strided ids accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("topk_ids must be contiguous"), std::string::npos)
          << e.what();
    }
    const TensorView on_gpu(c.topk_weights.data(), DType::f32, {3, 2}, Device{DeviceKind::cuda, 0});
    try {
      moe.forward_routed(c.hidden.view(), on_gpu, c.topk_ids.view(), out.view());
      ADD_FAILURE() << backend << ": weights on cuda:0 accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("topk_weights is on cuda:0 but the MoE runs on cpu"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace qmoe
