"""mixprec.nn: torch.nn's Module system and layers."""
from .modules import Module, Parameter
from .containers import ParameterDict, ParameterList  # noqa: F401
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layers
from .rnn import *  # noqa: F401,F403
from .rnn import __all__ as _rnn
from .activations import *  # noqa: F401,F403
from .shape_layers import *  # noqa: F401,F403
from .norm_layers import *  # noqa: F401,F403
from .pair_layers import *  # noqa: F401,F403
from .dropout_layers import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403
from . import activations as _a, shape_layers as _s, norm_layers as _n, pair_layers as _p, dropout_layers as _d, losses as _l
from .engine import EngineModule, TransformerEncoder, TransformerEncoderLayer, from_file, model, model_names
from .attention import MultiheadAttention
from . import functional, init, utils

__all__ = ["Module", "Parameter", "functional", "init", "utils", "EngineModule", "TransformerEncoder", "TransformerEncoderLayer",
           "from_file", "model", "model_names", "MultiheadAttention"] + _layers + _rnn + _a.__all__ + _s.__all__ + _n.__all__ + _p.__all__ + _d.__all__ + _l.__all__
