"""mixprec.nn: torch.nn's Module system and layers."""
from .modules import Module, Parameter
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layers
from .engine import EngineModule, TransformerEncoder, TransformerEncoderLayer, from_file, model, model_names
from . import functional, init, utils

__all__ = ["Module", "Parameter", "functional", "init", "utils", "EngineModule", "TransformerEncoder", "TransformerEncoderLayer",
           "from_file", "model", "model_names"] + _layers
