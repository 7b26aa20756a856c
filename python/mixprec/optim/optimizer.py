"""mixprec.optim.Optimizer: PyTorch 1.13's parameter groups, add_param_group, state_dict()
layout and zero_grad(), shared by the engine's optimizers (SGD, Adam, AdamW: one engine
object per group) and those composed in Python (RMSprop, Adagrad, ...)."""
import copy
import warnings
from itertools import chain

import numpy as np

from .. import _mixprec as _C
from .._mixprec import Tensor
from .._tensor import _zero_grads


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

# PyTorch's switches between implementations of the same numbers: kept in the groups (so
# state_dict()s move both ways), never read.
_IMPLEMENTATION_SWITCHES = ("foreach", "capturable", "differentiable", "fused")


def _check(condition, message):
    if not condition:
        raise ValueError(message)


def _as_mixprec(value, like):
    """A state tensor of a state_dict (mixprec, torch or NumPy) as a new mixprec tensor of the
    parameter `like`'s floating dtype (PyTorch's load_state_dict casts to it too)."""
    dt = np.float64 if like.dtype == _C.dtype.float64 else np.float32
    if isinstance(value, Tensor):
        value = value.detach().float().numpy() if value.dtype == _C.dtype.bfloat16 else value.detach().numpy()
    return _C.from_numpy(np.array(value, dtype=dt, copy=True, order="C"))


def _step_tensor(value):
    """PyTorch 1.13 keeps 'step' (and NAdam's mu_product) as a float32 0-dim tensor."""
    return _C._full([], float(value), _C.dtype.float32)


class Optimizer:
    """PyTorch 1.13's Optimizer: params is an iterable of tensors or of dicts (parameter
    groups), each group's options overriding `defaults`. Any group's options may change
    between steps; they take effect at the next step()."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        self._state = {}  # parameter -> its state (composed optimizers)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)
        self._carrier = None  # see _sync()

    # ---- parameter groups ------------------------------------------------------------

    def add_param_group(self, param_group):
        """PyTorch's checks and messages; the dict itself becomes the group (as PyTorch's)."""
        if not isinstance(param_group, dict):
            raise TypeError("param group must be a dict")  # PyTorch asserts
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but "
                            "the ordering of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + type(param).__module__ + "." + type(param).__name__)
            if not self.defaults.get("differentiable", None) and not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required optimization "
                                 "parameter " + name)
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error; "
                          "see github.com/pytorch/pytorch/issues/40967 for more information", stacklevel=3)
        taken = {id(p) for group in self.param_groups for p in group["params"]}
        if not taken.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)
        self._group_added(param_group)

    def _group_added(self, group):
        """Called after add_param_group appended `group`."""

    def _all_params(self):
        return [p for group in self.param_groups for p in group["params"]]

    # ---- stepping --------------------------------------------------------------------

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        self._step_groups()
        return loss

    def _step_groups(self):
        raise NotImplementedError

    def zero_grad(self, set_to_none=False):
        """PyTorch 1.13's default zeroes the gradients in place; set_to_none drops them."""
        _zero_grads(self._all_params(), set_to_none)

    # GradScaler (amp.py) protocol: _sync() is the engine object that the scaler unscales
    # (all gradients of all groups, one inf/NaN check) and steps; _scaled_step(engine) steps
    # through the scaler, skipping the update on inf/NaN for every group at once.
    def _sync(self):
        """The engine optimizer that holds every parameter: the group's own engine for one
        group of an engine optimizer (the scaler's fused step is then the update itself);
        otherwise a carrier over all parameters whose own step (lr 0, no state) changes
        nothing, after which _scaled_step runs the groups' real updates."""
        params = self._all_params()
        ids = [id(p) for p in params]
        if self._carrier is None or self._carrier[0] != ids:
            self._carrier = (ids, _C.optim.SGD(params, 0.0, 0.0, 0.0, 0.0, False, False))
        return self._carrier[1]

    def _scaled_step(self, scaler_engine):
        target = self._sync()
        if scaler_engine.step(target) and self._carrier is not None and target is self._carrier[1]:
            self._step_groups()

    # ---- state ---------------------------------------------------------------------------

    @property
    def state(self):
        """PyTorch's optimizer.state: parameter -> dict of its state (tensors shared)."""
        return self._state

    def _index_map(self):
        """PyTorch's numbering: position across all groups, in order."""
        mapping = {}
        for index, p in enumerate(self._all_params()):
            mapping.setdefault(id(p), index)
        return mapping

    def state_dict(self):
        """PyTorch's layout: {"state": {index: {...}}, "param_groups": [{options...,
        "params": [indices]}]}, indices counting across groups; the tensors share the
        optimizer's memory, as PyTorch's."""
        mapping = self._index_map()
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            groups.append(packed)
        params = {id(p): p for p in self._all_params()}
        state = {mapping[pid]: entry for pid, entry in
                 ((id(p), entry) for p, entry in self.state.items()) if pid in params}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """A state_dict() of this optimizer or of PyTorch's (tensors as torch tensors or NumPy
        arrays): values copied, cast to the parameters' dtype; the groups take the saved
        options (PyTorch's behaviour), keeping their parameters."""
        groups, saved_groups = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        per_param = {}
        for key, entry in state_dict["state"].items():
            if key in id_map:
                per_param[id(id_map[key])] = (id_map[key], entry)
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            new_group = {k: copy.deepcopy(v) for k, v in saved.items() if k != "params"}
            new_group["params"] = group["params"]
            new_groups.append(new_group)
        self._load_state(new_groups, per_param)

    def _load_state(self, new_groups, per_param):
        """Sets param_groups = new_groups and the state from per_param: id(param) ->
        (param, saved entry)."""
        raise NotImplementedError

    def __repr__(self):
        out = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            out += "\nParameter Group {0}\n".format(i)
            for key in sorted(group.keys()):
                if key != "params":
                    out += "    {0}: {1}\n".format(key, group[key])
        return out + ")"


class _EngineOptimizer(Optimizer):
    """One engine optimizer (mixprec._mixprec.optim.*) per parameter group: each group gets
    the engine's bit-exact update. The engine takes 'lr' at every step; its other options
    are fixed at construction, so a group whose options changed gets a new engine object
    with the state carried over (a copy of the state tensors)."""

    _engine_options = ()  # the group keys the engine is built from, besides 'lr'

    def _make_engine(self, params, group):
        raise NotImplementedError

    def _group_added(self, group):
        self._engines.append(None)
        self._engine(len(self._engines) - 1)  # the engine's own checks fail now, not at step()

    def __init__(self, params, defaults):
        self._engines = []  # per group: (param ids, options, engine), made at the first use
        super().__init__(params, defaults)

    def _options(self, group):
        return {k: (tuple(group[k]) if isinstance(group[k], list) else group[k])
                for k in self._engine_options}

    def _engine(self, index, carry=None, step_count=None):
        """The engine of group `index`, made anew if its parameters or options changed (or
        when `carry` gives the state to load: id(param) -> {name: tensor})."""
        group = self.param_groups[index]
        ids = [id(p) for p in group["params"]]
        options = self._options(group)
        cached = self._engines[index]
        if cached is None or cached[0] != ids or cached[1] != options or carry is not None:
            if carry is None and cached is not None:
                carry = {cached[0][k]: entry for k, entry in self._engine_state(cached[2]).items()}
                step_count = cached[2].step_count
            engine = self._make_engine(group["params"], group)
            if carry:
                flat = {f"{name}.{k}": value for k, p in enumerate(group["params"])
                        for name, value in carry.get(id(p), {}).items()}
                engine.load_state_tensors(flat)
            engine.step_count = step_count or 0
            self._engines[index] = cached = (ids, options, engine)
        cached[2].lr = float(group["lr"])
        return cached[2]

    @staticmethod
    def _engine_state(engine):
        """position in the engine's parameters -> {state name: tensor}."""
        out = {}
        for key, t in engine.state_tensors().items():
            name, k = key.rsplit(".", 1)
            out.setdefault(int(k), {})[name] = t
        return out

    def _sync(self):
        if len(self.param_groups) == 1:
            self._carrier = None
            return self._engine(0)
        return super()._sync()

    def _step_groups(self):
        for index, group in enumerate(self.param_groups):
            # PyTorch counts an Adam step per parameter that has a gradient; the engine counts
            # per group: a group without any gradient is not stepped (nor counted).
            if any(p.grad is not None for p in group["params"]):
                self._engine(index).step()

    def _step_entry(self, engine):
        return {}

    @property
    def state(self):
        out = {}
        for index, group in enumerate(self.param_groups):
            engine = self._engine(index)
            for k, entry in self._engine_state(engine).items():
                out[group["params"][k]] = dict(entry, **self._step_entry(engine))
        return out

    def _load_state(self, new_groups, per_param):
        self.param_groups[:] = new_groups
        for index, group in enumerate(new_groups):
            carry, steps = {}, set()
            for p in group["params"]:
                if id(p) not in per_param:
                    continue
                for name, value in per_param[id(p)][1].items():
                    if name == "step":
                        steps.add(int(float(value)))
                    elif value is not None:
                        carry.setdefault(id(p), {})[name] = _as_mixprec(value, p)
            if len(steps) > 1:
                raise ValueError(f"mixprec's {type(self).__name__} counts steps once per parameter "
                                 f"group; group {index}'s state has several step counts {sorted(steps)}")
            self._engine(index, carry=carry, step_count=steps.pop() if steps else 0)

