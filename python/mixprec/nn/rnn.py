"""The recurrent layers RNN, LSTM and GRU and their cells, with PyTorch 1.13's arguments,
parameter names and shapes, gate order, initialisation, input and state shapes, and error
messages (torch/nn/modules/rnn.py and aten/src/ATen/native/RNN.cpp).

They are composed of the engine's differentiable ops (matmul, add, mul, sigmoid, tanh, relu,
narrow, stack, cat), so autograd runs back through time by itself. Inside, a step works on
columns: a state is [hidden, batch] and the gates of a step are [gates * hidden, batch], so
that each gate is a block of rows, which the engine's narrow takes with one contiguous copy
(a block of columns would cost a transpose, a narrow and a transpose back).

Speed: the input projection W_ih x + b of a whole sequence is one (batched) matmul before the
loop; the loop over time then does only the hidden projection W_hh h and the elementwise gate
arithmetic, whose ops are few and small. That is what makes a Python loop over time fast
enough (see docs/python.md for the measured ratio to PyTorch).

Under autocast the dtypes follow PyTorch 1.13's CPU autocast: the projections run in the
autocast dtype (PyTorch's linear is in its lower-precision list), the gate arithmetic in the
dtypes that type promotion gives. So RNN gives bfloat16 outputs and states, while LSTM's and
GRU's states become float32 through their float32 initial states (c and h enter an
elementwise op with the bfloat16 gates), as in PyTorch.
"""
import math
import numbers
import warnings

from .. import _mixprec as _C
from .._mixprec import Tensor, dtype as _dtype
from .._tensor import _check_device
from . import init
from .modules import Module, Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ---- the steps (column layout: states [H, B], gates [G * H, B]) ------------------------

def _with_bias(projection, bias):
    """projection [G, ...cols] + bias [G] as a column. The bias takes the projection's dtype:
    under autocast the matmul gives the autocast dtype, and PyTorch's linear casts its bias
    with its operands (a float32 bias would otherwise promote the gates to float32)."""
    if bias is None:
        return projection
    if bias.dtype != projection.dtype:
        bias = bias.to(projection.dtype)
    return projection + bias.reshape(bias.shape[0], 1)


def _input_projection(weight, columns, *biases):
    """W x + biases for every step at once: columns [T, I, B] (or [I, B]) -> [T, G, B]."""
    out = _C.matmul(weight, columns)
    for bias in biases:
        out = _with_bias(out, bias)
    return out


def _steps(seq):
    """seq [T, ...] as a list of T tensors [...]. With autograd the list is made by halving,
    not by T narrows of the whole: the backward of each narrow writes a zero tensor of its
    source's size, so T narrows of seq would cost O(T^2) in the backward, halving
    O(T log T). Without autograd each step is a view."""
    T = seq.shape[0]
    if not (seq.requires_grad and _C.is_grad_enabled()):
        return [seq[t] for t in range(T)]
    if T == 1:
        return [seq.reshape(*seq.shape[1:])]
    half = T // 2
    return _steps(seq.narrow(0, 0, half)) + _steps(seq.narrow(0, half, T - half))


def _rnn_step(x_proj, h, w_hh, activation):
    """h' = act(W_ih x + b_ih + b_hh + W_hh h); x_proj holds both biases."""
    return activation(x_proj + _C.matmul(w_hh, h))


def _lstm_step(x_proj, h, c, w_hh, w_hr, hidden):
    """PyTorch's LSTM cell, gates i, f, g, o; x_proj holds both biases. The sigmoid runs over
    all four gates at once (one op instead of three; the g rows it also computes are
    dropped): the loop's cost is mostly the count of ops. With w_hr the output h is
    projected (proj_size)."""
    gates = x_proj + _C.matmul(w_hh, h)
    gated = _C.sigmoid(gates)
    i = gated.narrow(0, 0, hidden)
    f = gated.narrow(0, hidden, hidden)
    g = _C.tanh(gates.narrow(0, 2 * hidden, hidden))
    o = gated.narrow(0, 3 * hidden, hidden)
    c = f * c + i * g
    h = o * _C.tanh(c)
    if w_hr is not None:
        h = _C.matmul(w_hr, h)
    return h, c


def _gru_step(x_proj, h, w_hh, b_hh, hidden):
    """PyTorch's GRU cell, gates r, z, n, with n = tanh(W_in x + b_in + r * (W_hn h + b_hn)):
    b_hh stays in the hidden projection (x_proj holds b_ih only). h' = (h - n) * z + n is
    PyTorch's own form, which also gives its dtype under autocast (float32 with a float32 h)."""
    h_proj = _with_bias(_C.matmul(w_hh, h), b_hh)
    rz = _C.sigmoid(x_proj.narrow(0, 0, 2 * hidden) + h_proj.narrow(0, 0, 2 * hidden))
    r, z = rz.narrow(0, 0, hidden), rz.narrow(0, hidden, hidden)
    n = _C.tanh(x_proj.narrow(0, 2 * hidden, hidden) + r * h_proj.narrow(0, 2 * hidden, hidden))
    return (h - n) * z + n


# ---- layers ---------------------------------------------------------------------------

def _check_size(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
    return int(value)


def _is_packed(input):
    return hasattr(input, "batch_sizes") and hasattr(input, "data") and not isinstance(input, Tensor)


def _refuse_packed(input, name):
    if _is_packed(input):
        raise NotImplementedError(f"mixprec's {name} does not take a PackedSequence "
                                  "(nn.utils.rnn.pack_padded_sequence): pass the padded tensor itself")
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: input must be a mixprec.Tensor, got {type(input).__name__}")


def _new_parameter(shape, dtype, stdv):
    p = Parameter(_C._empty(list(shape), dtype))
    init.uniform_(p, -stdv, stdv)
    return p


class RNNBase(Module):
    """The layers' shared parameters, checks and loop; mode is 'RNN_TANH', 'RNN_RELU', 'LSTM'
    or 'GRU' (PyTorch's)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        _check_device(device)
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + str(mode))
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        input_size = _check_size(input_size, "input_size")
        hidden_size = _check_size(hidden_size, "hidden_size")
        num_layers = _check_size(num_layers, "num_layers")
        proj_size = _check_size(proj_size, "proj_size")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bool(bias), bool(batch_first), float(dropout)
        self.bidirectional, self.proj_size = bool(bidirectional), proj_size

        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        directions = 2 if bidirectional else 1
        stdv = 1.0 / math.sqrt(hidden_size)
        dtype = dtype or _dtype.float32
        self._flat_weights_names, self._all_weights = [], []
        # PyTorch's names and registration order (layer by layer, forward then reverse), so
        # parameters() and state_dict() line up with a torch model's.
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                names = [name + suffix for name, _ in shapes]
                for name, (_, shape) in zip(names, shapes):
                    setattr(self, name, _new_parameter(shape, dtype, stdv))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    def flatten_parameters(self):
        """A no-op, as PyTorch's on CPUs (it repacks weights for cuDNN)."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ---- forward ----
    def _layer_params(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda name: getattr(self, name + suffix, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _check_input(self, input):
        if input.ndim != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {input.ndim}")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")
        if input.shape[0 if not self.batch_first else 1] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")

    def _expected_state(self, batch, size):
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    @staticmethod
    def _check_state(state, expected, msg):
        if tuple(state.shape) != expected:
            raise RuntimeError(msg.format(expected, list(state.shape)))

    def _prepare(self, input):
        """(input as [T, B, I] or [B, T, I], is_batched) after PyTorch's checks."""
        _refuse_packed(input, type(self).__name__)
        is_batched = input.ndim == 3
        if not is_batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
        self._check_input(input)
        return input, is_batched

    @staticmethod
    def _to_columns(state):
        """[L * D, B, H] -> the L * D states [H, B]."""
        return _steps(state.transpose(1, 2)) if state.shape[0] > 1 else [state[0].transpose(0, 1)]

    def _run(self, input, states):
        """The layers over input [T, B, I] (or [B, T, I] when batch_first), from the initial
        states (one list per state kind, each [L * D] of [H, B]); returns output and the
        final states, each stacked as [L * D, B, H]."""
        seq = input.permute(1, 2, 0) if self.batch_first else input.transpose(1, 2)  # [T, I, B]
        directions = 2 if self.bidirectional else 1
        hidden = self.hidden_size
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_params(layer, direction)
                k = layer * directions + direction
                state = [s[k] for s in states]
                # The input projection of every step in one matmul (the reason a loop over
                # time in Python is fast enough); the loop adds the hidden projection.
                if self.mode == "GRU":
                    x_proj = _steps(_input_projection(w_ih, seq, b_ih))
                else:
                    x_proj = _steps(_input_projection(w_ih, seq, b_ih, b_hh))
                order = range(len(x_proj) - 1, -1, -1) if direction else range(len(x_proj))
                out = [None] * len(x_proj)
                for t in order:
                    if self.mode == "LSTM":
                        state = list(_lstm_step(x_proj[t], state[0], state[1], w_hh, w_hr, hidden))
                    elif self.mode == "GRU":
                        state = [_gru_step(x_proj[t], state[0], w_hh, b_hh, hidden)]
                    else:
                        act = _C.tanh if self.mode == "RNN_TANH" else _C.relu
                        state = [_rnn_step(x_proj[t], state[0], w_hh, act)]
                    out[t] = state[0]
                outputs.append(_C.stack(out, 0))  # [T, H, B]
                for final, s in zip(finals, state):
                    final.append(s)
            seq = outputs[0] if directions == 1 else _C.cat(outputs, 1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                # The engine's dropout takes p < 1; p = 1 drops everything, as PyTorch's.
                seq = seq * 0.0 if self.dropout == 1.0 else _C.dropout(seq, self.dropout, True)
        output = seq.permute(2, 0, 1) if self.batch_first else seq.transpose(1, 2)
        return output, [_C.stack(final, 0).transpose(1, 2) for final in finals]

    def _zeros(self, input, size):
        batch = input.shape[0 if self.batch_first else 1]
        count = self.num_layers * (2 if self.bidirectional else 1)
        return [_C._zeros([size, batch], input.dtype) for _ in range(count)]


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh) (or relu)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.__dict__["nonlinearity"] = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        input, is_batched = self._prepare(input)
        if hx is not None:
            if is_batched and hx.ndim != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.ndim}-D tensor")
            if not is_batched:
                if hx.ndim != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.ndim}-D tensor")
                hx = hx.unsqueeze(1)
            batch = input.shape[0 if self.batch_first else 1]
            self._check_state(hx, self._expected_state(batch, self.hidden_size), "Expected hidden size {}, got {}")
            h0 = self._to_columns(hx)
        else:
            h0 = self._zeros(input, self.hidden_size)
        output, (h_n,) = self._run(input, [h0])
        if not is_batched:
            output, h_n = output.squeeze(0 if self.batch_first else 1), h_n.squeeze(1)
        return output, h_n


class LSTM(RNNBase):
    """LSTM with gates i, f, g, o (PyTorch's order); proj_size > 0 projects h by weight_hr."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        input, is_batched = self._prepare(input)
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTM: hx must be a tuple (h_0, c_0)")
            h, c = hx
            if is_batched and (h.ndim != 3 or c.ndim != 3):
                raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got "
                                   f"({h.ndim}-D, {c.ndim}-D) tensors")
            if not is_batched:
                if h.ndim != 2 or c.ndim != 2:
                    raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got "
                                       f"({h.ndim}-D, {c.ndim}-D) tensors")
                h, c = h.unsqueeze(1), c.unsqueeze(1)
            batch = input.shape[0 if self.batch_first else 1]
            self._check_state(h, self._expected_state(batch, real_hidden), "Expected hidden[0] size {}, got {}")
            self._check_state(c, self._expected_state(batch, self.hidden_size), "Expected hidden[1] size {}, got {}")
            states = [self._to_columns(h), self._to_columns(c)]
        else:
            states = [self._zeros(input, real_hidden), self._zeros(input, self.hidden_size)]
        output, (h_n, c_n) = self._run(input, states)
        if not is_batched:
            output, h_n, c_n = output.squeeze(0 if self.batch_first else 1), h_n.squeeze(1), c_n.squeeze(1)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """GRU with gates r, z, n (PyTorch's order and its n = tanh(W_in x + b_in + r (W_hn h + b_hn)))."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    forward = RNN.forward


# ---- cells ----------------------------------------------------------------------------

class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        _check_device(device)
        self.input_size = _check_size(input_size, "input_size")
        self.hidden_size = _check_size(hidden_size, "hidden_size")
        self.bias = bool(bias)
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        dtype = dtype or _dtype.float32
        self.weight_ih = _new_parameter((num_chunks * self.hidden_size, self.input_size), dtype, stdv)
        self.weight_hh = _new_parameter((num_chunks * self.hidden_size, self.hidden_size), dtype, stdv)
        if bias:
            self.bias_ih = _new_parameter((num_chunks * self.hidden_size,), dtype, stdv)
            self.bias_hh = _new_parameter((num_chunks * self.hidden_size,), dtype, stdv)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, input, states):
        """input as [B, I] and the given states as [B, H] (None where not given), after
        PyTorch's checks (aten's check_rnn_cell_forward_input / _hidden)."""
        _refuse_packed(input, type(self).__name__)
        if input.ndim not in (1, 2):
            raise AssertionError(f"{type(self).__name__}: Expected input to be 1-D or 2-D but received "
                                 f"{input.ndim}-D tensor")
        is_batched = input.ndim == 2
        if not is_batched:
            input = input.unsqueeze(0)
            states = [None if s is None else s.unsqueeze(0) for s in states]
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {self.input_size}")
        for s in states:
            if s is None:
                continue
            # PyTorch labels both of LSTMCell's states hidden0.
            if s.shape[0] != input.shape[0]:
                raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden0 batch size {s.shape[0]}")
            if s.ndim != 2 or s.shape[1] != self.hidden_size:
                got = s.shape[1] if s.ndim > 1 else "none"
                raise RuntimeError(f"hidden0 has inconsistent hidden_size: got {got}, expected {self.hidden_size}")
        return input, states, is_batched

    def _columns(self, input, state):
        """input [B, I] -> [I, B] and state [B, H] (zeros of input's dtype for None) -> [H, B]."""
        x = input.transpose(0, 1)
        if state is None:
            return x, _C._zeros([self.hidden_size, input.shape[0]], input.dtype)
        return x, state.transpose(0, 1)

    @staticmethod
    def _rows(state, is_batched):
        return state.transpose(0, 1) if is_batched else state.reshape(state.shape[0])


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, (hx,), is_batched = self._prepare(input, [hx])
        if self.nonlinearity == "tanh":
            act = _C.tanh
        elif self.nonlinearity == "relu":
            act = _C.relu
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        x, h = self._columns(input, hx)
        h = _rnn_step(_input_projection(self.weight_ih, x, self.bias_ih, self.bias_hh), h, self.weight_hh, act)
        return self._rows(h, is_batched)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError("LSTMCell: hx must be a tuple (h_0, c_0)")
        input, (h, c), is_batched = self._prepare(input, [None, None] if hx is None else list(hx))
        x, h = self._columns(input, h)
        c = self._columns(input, c)[1]
        x_proj = _input_projection(self.weight_ih, x, self.bias_ih, self.bias_hh)
        h, c = _lstm_step(x_proj, h, c, self.weight_hh, None, self.hidden_size)
        return self._rows(h, is_batched), self._rows(c, is_batched)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, (hx,), is_batched = self._prepare(input, [hx])
        x, h = self._columns(input, hx)
        h = _gru_step(_input_projection(self.weight_ih, x, self.bias_ih), h, self.weight_hh, self.bias_hh,
                      self.hidden_size)
        return self._rows(h, is_batched)
