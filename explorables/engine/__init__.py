"""The NumPy Transformer-block engine: pure NumPy, no user-interface imports."""

from .config import BlockConfig, ConfigError
from .forward import Trace, block_keys, forward
from .params import init_params, position_vectors, word_embedding
from .presets import PRESETS, Preset, get_preset, run_preset
from .stages import BLOCK_KEYS, Stage

__all__ = [
    "BLOCK_KEYS", "PRESETS", "BlockConfig", "ConfigError", "Preset", "Stage", "Trace",
    "block_keys", "forward", "get_preset", "init_params", "position_vectors", "run_preset",
    "word_embedding",
]
