#pragma once
// Everything a user of qmoe needs: checkpoints, types, the canonical experts, the reference
// quantizer and the MoE layer.
#include "qmoe/checkpoint.hpp"
#include "qmoe/config.hpp"
#include "qmoe/device.hpp"
#include "qmoe/distributed.hpp"
#include "qmoe/dtype.hpp"
#include "qmoe/error.hpp"
#include "qmoe/moe.hpp"
#include "qmoe/oracle.hpp"
#include "qmoe/quant.hpp"
#include "qmoe/quantize.hpp"
#include "qmoe/shard.hpp"
#include "qmoe/tensor.hpp"
#include "qmoe/threads.hpp"
