import json

from . import _qmoe


class Checkpoint(_qmoe.Checkpoint):
    """A model directory (config.json + *.safetensors) holding quantized MoE experts.

    format, model_type, scheme, config (the MoE config), layers (the MoE layers), layer_config(i),
    layer_bytes(i), load_layer(i) -> QuantizedExperts, inspect() -> dict.
    """

    def inspect(self) -> dict:
        """The report of `qmoe inspect --json`: shapes, bytes and findings per layer."""
        return json.loads(self._inspect_json())

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r}, format={self.format!r}, layers={self.layers})"
