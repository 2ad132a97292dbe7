import numpy as np
import pytest

import qmoe
import reference

FIXTURES = [
    ("gptq-int4-asym-desc_act-v1", "gptq"),
    ("gptq-int8-g32-sym-v2-mixtral", "gptq"),
    ("awq-int4-g32-bias", "awq"),
    ("ct-int4-asym-actorder", "compressed-tensors"),
    ("ct-int8-channel-sym-sharded", "compressed-tensors"),
    ("gpt-oss-mxfp4-bias", "mxfp4"),
]


@pytest.mark.parametrize("name,fmt", FIXTURES)
def test_checkpoint_describes_the_fixture(data_dir, name, fmt):
    ckpt = qmoe.Checkpoint(data_dir / name)
    assert ckpt.format == fmt
    # tests/data/README.md: 4 experts, H 64, I 32, 2 MoE layers.
    assert ckpt.layers == [0, 1]
    assert (ckpt.config.num_experts, ckpt.config.hidden, ckpt.config.intermediate) == (4, 64, 32)
    experts = ckpt.load_layer(1)
    assert experts.w13.E == 4 and experts.w13.K == 64 and experts.w2.K == 32
    report = ckpt.inspect()
    assert report["format"] == fmt
    assert [layer["layer"] for layer in report["layers"]] == [0, 1]


def test_scheme_of_a_fixture(data_dir):
    scheme = qmoe.Checkpoint(data_dir / "gptq-int4-asym-desc_act-v1").scheme
    # tests/data/README.md: int4 g16 asym, desc_act.
    assert (scheme.bits, scheme.group_size, scheme.zero_points, scheme.act_order) == (4, 16, True, True)


@pytest.mark.parametrize("name", ["ct-library-int4-g32-sym", "ct-library-int4-g32-asym"])
def test_dequantized_weights_match_the_writing_library(data_dir, name):
    # reference/dequantized.safetensors holds compressed-tensors' own decompression.
    ckpt = qmoe.Checkpoint(data_dir / name)
    experts = ckpt.load_layer(0)
    w13, w2 = reference.stacked_reference_weights(
        data_dir / name / "reference" / "dequantized.safetensors", 0, ckpt.config.num_experts
    )
    np.testing.assert_array_equal(experts.w13.dequantize(), w13)
    np.testing.assert_array_equal(experts.w2.dequantize(), w2)


def test_missing_checkpoint_is_a_qmoe_error(tmp_path):
    with pytest.raises(qmoe.Error) as e:
        qmoe.Checkpoint(tmp_path / "nothing-here")
    assert isinstance(e.value, ValueError)
    assert "nothing-here" in str(e.value)
