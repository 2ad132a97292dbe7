#include "oracle/select.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"
#include "oracle/build_check.hpp"
#include "oracle/checks.hpp"
#include "oracle/forward_cost.hpp"
#include "oracle/priority.hpp"

namespace qmoe {

namespace {

struct Evaluated {
  const BackendDescriptor* backend;
  std::optional<std::string> reason;  // nullopt: every check passes
};

void validate_layer(const LayerDesc& l) {
  check(l.num_experts > 0 && l.hidden > 0 && l.intermediate > 0,
        "layer: experts ({}), hidden ({}) and intermediate ({}) must be positive", l.num_experts,
        l.hidden, l.intermediate);
  check(l.top_k >= 1 && l.top_k <= l.num_experts, "layer: top-k {} must be in 1..{} (experts)",
        l.top_k, l.num_experts);
  const auto check_scheme = [](const QuantScheme& s, int64_t K, const char* what) {
    try {
      validate(s);
    } catch (const Error& e) {
      fail("layer {}: {}", what, e.what());
    }
    check(s.group_size == kChannelwise || K % s.group_size == 0,
          "layer {}: group size {} does not divide K = {} (valid: a divisor of K, or -1)", what,
          s.group_size, K);
  };
  check_scheme(l.w13_scheme, l.hidden, "w13");
  check_scheme(l.w2_scheme, l.w2_full_k > 0 ? l.w2_full_k : l.intermediate, "w2");
}

std::string names(const std::vector<std::string>& list, std::string_view if_empty) {
  std::string text;
  for (const std::string& n : list) text += fmt::format("{}{}", text.empty() ? "" : ", ", n);
  return text.empty() ? std::string(if_empty) : text;
}

std::string no_backend_message(const std::vector<Evaluated>& all, const LayerDesc& layer,
                               const DeviceDesc& device) {
  std::string reasons;
  const BackendDescriptor* opt_in = nullptr;
  for (const Evaluated& e : all) {
    if (e.backend->device != device.kind) continue;
    if (!e.reason) {
      opt_in = e.backend;
      continue;
    }
    reasons += fmt::format("\n  {}: {}", e.backend->name, *e.reason);
  }
  const std::string way_out =
      opt_in ? fmt::format(
                   "\nThe slow reference runs it: ask for backend '{}' explicitly (--backend {} "
                   "on the command line).",
                   opt_in->name, opt_in->name)
             : std::string("\nChange the layer or the device as the reasons above say.");
  return fmt::format("no backend can run this layer ({}) on {}:{}{}", layer.to_string(),
                     device.to_string(), reasons, way_out);
}

std::string platform_name(DeviceKind k) { return k == DeviceKind::cpu ? "CPU" : "CUDA"; }

}  // namespace

Selection evaluate_among(const std::vector<const BackendDescriptor*>& order, const LayerDesc& layer,
                         const DeviceDesc& device, std::string_view preference,
                         const BuildGap& build_gap) {
  validate_layer(layer);
  const bool automatic = preference == "auto";
  std::vector<Evaluated> all;
  for (const BackendDescriptor* b : order) {
    std::optional<std::string> reason = first_failed_check(*b, layer, device);
    if (!reason) reason = build_gap(*b, device);
    all.push_back({b, std::move(reason)});
  }
  std::vector<std::string> compatible, known;
  for (const Evaluated& e : all) {
    known.emplace_back(e.backend->name);
    if (!e.reason) compatible.emplace_back(e.backend->name);
  }

  const Evaluated* chosen = nullptr;
  Selection s;
  if (automatic) {
    for (const Evaluated& e : all) {
      if (!e.reason && !e.backend->opt_in_only) {
        chosen = &e;
        break;
      }
    }
    if (!chosen) s.error = no_backend_message(all, layer, device);
  } else {
    for (const Evaluated& e : all)
      if (e.backend->name == preference) chosen = &e;
    check(chosen != nullptr, "unknown backend '{}' (known: {}, or auto)", preference,
          names(known, "none"));
    if (chosen->reason) {
      s.error = fmt::format(
          "backend '{}' cannot run this layer ({}) on {}: {}. Backends that "
          "would: {}",
          preference, layer.to_string(), device.to_string(), *chosen->reason,
          names(compatible, "none"));
      chosen = nullptr;
    }
  }

  if (chosen) {
    s.backend = std::string(chosen->backend->name);
    s.verdicts.push_back({s.backend, std::string(chosen->backend->summary), true, true, "",
                          chosen->backend->activation_formats});
    if (chosen->backend->prepared_bytes) {
      const PreparedBytes bytes = chosen->backend->prepared_bytes(layer);
      s.weight_bytes = bytes.total;
      s.padding_bytes = bytes.padding;
    }
  }
  const Evaluated* partner = nullptr;
  const Evaluated* slower_partner = nullptr;  // compatible, but never modelled faster
  int64_t from = 0;
  if (automatic && chosen) {
    for (const Evaluated& e : all)
      if (&e != chosen && !e.reason && e.backend->large_batch_partner) {
        from = modelled_crossover_tokens(*chosen->backend, *e.backend, layer);
        (from > 0 ? partner : slower_partner) = &e;
        break;
      }
  }
  if (partner) {
    const double rows = double(from) * layer.top_k / double(layer.num_experts);
    s.plan.push_back({s.backend, 1, fmt::format("below {} tokens", from)});
    s.plan.push_back(
        {std::string(partner->backend->name), from,
         fmt::format("from {} tokens ({:.1f} rows per expert at top-{} of {} experts), where "
                     "its cost model is faster",
                     from, rows, layer.top_k, layer.num_experts)});
    if (partner->backend->prepared_bytes) {
      const PreparedBytes own = partner->backend->prepared_bytes(layer);
      const int64_t shared =
          chosen->backend->prepared_bytes
              ? std::min(own.shared_int4_codes,
                         chosen->backend->prepared_bytes(layer).shared_int4_codes)
              : 0;
      s.plan.back().weight_bytes = own.total - shared;
      s.plan.back().shared_bytes = shared;
    }
  }
  for (const Evaluated& e : all) {
    if (&e == chosen) continue;
    Verdict v{std::string(e.backend->name), std::string(e.backend->summary), false, !e.reason,
              e.reason.value_or(""),        e.backend->activation_formats};
    if (!e.reason && !automatic) {
      v.reason = fmt::format("compatible, but '{}' was asked for", preference);
    } else if (!e.reason && e.backend->opt_in_only) {
      v.reason = "compatible, but the slow reference is used only when asked for by name";
    } else if (&e == partner) {
      v.reason = fmt::format("compatible: runs batches of {} tokens and more (the plan)",
                             s.plan.back().from_tokens);
    } else if (&e == slower_partner) {
      v.reason = fmt::format(
          "compatible, but its cost model does not stay faster than '{}' at any batch size up to "
          "{} rows per expert",
          s.backend, kCrossoverScanRowsPerExpert);
    } else if (!e.reason) {
      v.reason = fmt::format("compatible, but '{}' comes first in the {} priority order", s.backend,
                             platform_name(device.kind));
    }
    s.verdicts.push_back(std::move(v));
  }
  return s;
}

Selection select_among(const std::vector<const BackendDescriptor*>& order, const LayerDesc& layer,
                       const DeviceDesc& device, std::string_view preference,
                       const BuildGap& build_gap) {
  Selection s = evaluate_among(order, layer, device, preference, build_gap);
  if (!s.error.empty()) throw Error(s.error);
  return s;
}

Selection evaluate(const LayerDesc& layer, const DeviceDesc& device, std::string_view preference) {
  return evaluate_among(descriptors_for(device.kind), layer, device, preference, build_gap);
}

Selection select(const LayerDesc& layer, const DeviceDesc& device, std::string_view preference) {
  return select_among(descriptors_for(device.kind), layer, device, preference, build_gap);
}

bool prepares_large_step_unasked(const Selection& s) {
  return s.plan.size() == 2 &&
         (s.weight_bytes == 0 ||
          double(s.plan[1].weight_bytes) <= kLargeBatchExtraRatio * double(s.weight_bytes));
}

int64_t default_weight_bytes(const Selection& s) {
  return s.weight_bytes + (prepares_large_step_unasked(s) ? s.plan[1].weight_bytes : 0);
}

std::vector<std::string> known_backends() {
  std::vector<std::string> list;
  for (const BackendDescriptor* b : all_descriptors()) list.emplace_back(b->name);
  return list;
}

}  // namespace qmoe
