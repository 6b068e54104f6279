"""The NumPy Transformer-block engine: pure NumPy, no user-interface imports."""

from blocktrace.explorables.engine.config import BlockConfig, ConfigError
from blocktrace.explorables.engine.forward import Trace, block_keys, forward
from blocktrace.explorables.engine.params import init_params, position_vectors, word_embedding
from blocktrace.explorables.engine.presets import PRESETS, Preset, get_preset, run_preset
from blocktrace.explorables.engine.stages import BLOCK_KEYS, Stage

__all__ = [
    "BLOCK_KEYS", "PRESETS", "BlockConfig", "ConfigError", "Preset", "Stage", "Trace",
    "block_keys", "forward", "get_preset", "init_params", "position_vectors", "run_preset",
    "word_embedding",
]
