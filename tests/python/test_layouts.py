"""qmoe.experts_from_layout reads the tensors of a GPTQ, AWQ, compressed-tensors or Quark layer
handed over as arrays exactly as the checkpoint reader reads them from the files."""
import numpy as np
import pytest

import qmoe
import reference

CASES = [
    ("gptq-int4-asym-desc_act-v1", "gptq", 1, 1),
    ("awq-int4-g32-bias", "awq", 1, 1),
    ("ct-int4-asym-actorder", "compressed-tensors", 1, 1),
    ("quark-library-mxfp4-w4a4", "quark", 1, 0),  # amd-quark's W4A4 export, one layer
]


@pytest.mark.parametrize("name,fmt,gptq_version,layer", CASES)
def test_arrays_read_like_the_checkpoint(data_dir, name, fmt, gptq_version, layer):
    ckpt = qmoe.Checkpoint(data_dir / name)
    prefix = f"model.layers.{layer}.mlp.experts."
    tensors = {
        key[len(prefix):]: np.ascontiguousarray(value)
        for key, value in reference.read_safetensors(data_dir / name / "model.safetensors").items()
        if key.startswith(prefix)
    }
    experts = qmoe.experts_from_layout(fmt, tensors, ckpt.layer_config(layer), ckpt.scheme,
                                       gptq_version)
    expected = ckpt.load_layer(layer)
    for got, want in ((experts.w13, expected.w13), (experts.w2, expected.w2)):
        np.testing.assert_array_equal(got.codes, want.codes)
        np.testing.assert_array_equal(got.scales, want.scales)
        np.testing.assert_array_equal(got.dequantize(), want.dequantize())
        if want.has_bias:
            np.testing.assert_array_equal(got.bias, want.bias)


def test_moe_from_layout_runs_like_the_checkpoint(data_dir):
    path = data_dir / "awq-int4-g32-bias"
    ckpt = qmoe.Checkpoint(path)
    prefix = "model.layers.0.mlp.experts."
    tensors = {k[len(prefix):]: v for k, v in reference.read_safetensors(path / "model.safetensors").items()
               if k.startswith(prefix)}
    moe = qmoe.MoE.from_layout("awq", tensors, ckpt.layer_config(0), ckpt.scheme, backend="cpu")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((5, 64), dtype=np.float32)
    logits = rng.standard_normal((5, 4), dtype=np.float32)
    np.testing.assert_array_equal(moe(x, logits), qmoe.MoE.from_checkpoint(path, 0, backend="cpu")(x, logits))


def test_quark_scheme_carries_its_activation_quantization(data_dir):
    # Quark's default activation scale rule, "even", as the export's config states it.
    scheme = qmoe.Checkpoint(data_dir / "quark-library-mxfp4-w4a4").scheme
    assert scheme.activation_quant == qmoe.ActivationQuant.mxfp4_even
    assert str(scheme) == "mxfp4 w4a4 (even scales)"
    floor = qmoe.QuantScheme(4, 32, kind=qmoe.WeightKind.mxfp4,
                             activation_quant=qmoe.ActivationQuant.mxfp4)
    assert str(floor) == "mxfp4 w4a4"
    floor.activation_quant = qmoe.ActivationQuant.mxfp4_even
    assert str(floor) == "mxfp4 w4a4 (even scales)"
    with pytest.raises(qmoe.Error, match="go with mxfp4 weights only"):
        qmoe.QuantScheme(4, 32, activation_quant=qmoe.ActivationQuant.mxfp4_even)


def test_a_scheme_of_the_wrong_kind_is_refused(data_dir):
    ckpt = qmoe.Checkpoint(data_dir / "awq-int4-g32-bias")
    with pytest.raises(qmoe.Error, match="does not go with format quark"):
        qmoe.experts_from_layout("quark", {}, ckpt.config, ckpt.scheme)


def test_a_missing_tensor_is_named(data_dir):
    ckpt = qmoe.Checkpoint(data_dir / "awq-int4-g32-bias")
    with pytest.raises(qmoe.Error, match="0.gate_proj"):
        qmoe.experts_from_layout("awq", {}, ckpt.config, ckpt.scheme)
