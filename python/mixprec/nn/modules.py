"""mixprec.nn's Module, Parameter and layers, with PyTorch's names, arguments and defaults.

Layers with parameters are made from the engine's own layers (mixprec._mixprec.nn), so they
are initialised as the C++ API and the CLI initialise them for the same seed, and run the
same ops as the engine's forward(). Their parameters are ordinary Parameters of the Python
module: replace, freeze or load them as in PyTorch.
"""
import itertools
import weakref
from collections import OrderedDict, namedtuple

import numpy as np

from .. import _mixprec as _C
from .._mixprec import Tensor, dtype
from .._tensor import _zero_grads, no_grad
from . import functional as F


class Parameter(Tensor):
    """A tensor a Module registers as its parameter when assigned as an attribute."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _C._empty([0], dtype.float32)
        # detach(): a new leaf over the same memory, as torch.nn.Parameter(data). A strided view
        # (data.t(), a stepped slice) becomes a dense copy: the engine's optimizers update a
        # parameter and its state linearly (docs/python.md).
        data = data.detach()
        super().__init__(data if data._is_dense() else data.contiguous())
        self.requires_grad = requires_grad

    @classmethod
    def _share(cls, tensor):
        """A Parameter that is the same tensor as `tensor` (not a detached copy): an engine
        module's parameter, whose gradient the engine's forward accumulates."""
        p = cls.__new__(cls)
        Tensor.__init__(p, tensor)
        return p

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)


_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class RemovableHandle:
    """torch.utils.hooks.RemovableHandle: remove() takes its hook out of the table it was put in
    (a no-op once done, or once the module is gone); also a context manager that removes it."""

    _next_id = itertools.count()

    def __init__(self, hooks_dict):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(RemovableHandle._next_id)

    def remove(self):
        hooks_dict = self.hooks_dict_ref()
        if hooks_dict is not None and self.id in hooks_dict:
            del hooks_dict[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


# torch.nn.modules.module's global hooks: run for every module, before the module's own.
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()


def register_module_forward_pre_hook(hook):
    """hook(module, input) before every module's forward (torch's global hook)."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook):
    """hook(module, input, output) after every module's forward (torch's global hook)."""
    handle = RemovableHandle(_global_forward_hooks)
    _global_forward_hooks[handle.id] = hook
    return handle


def _no_backward_hooks(name):
    """Why mixprec has no module backward hooks."""
    return NotImplementedError(
        f"{name} is not supported by mixprec: backward runs in the C++ engine, whose autograd "
        f"graph has no Python hooks (no Tensor.register_hook or autograd.Function), so nothing "
        f"can see or replace the gradients of a module's inputs and outputs while they are "
        f"computed. Read parameter gradients (.grad) after backward() instead, or use "
        f"register_forward_hook to record activations")


def _typename(obj):
    """torch.typename(obj) for error messages."""
    cls = type(obj)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


class Module:
    """Base class of every layer and model; subclass it and write forward()."""

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())

    # ---- attribute registration (PyTorch's rules) ----
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign to a Module before Module.__init__() call")
        if isinstance(value, (Parameter, Module)):
            # Out of the other tables; a name already in its own table keeps its place there
            # (torch's: the order of named_parameters() and state_dict() does not change).
            own = self._parameters if isinstance(value, Parameter) else self._modules
            for table in (self._parameters, self._buffers, self._modules):
                if table is not own:
                    table.pop(name, None)
            self.__dict__.pop(name, None)
            own[name] = value
        elif name in self._parameters:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(mixprec.nn.Parameter or None expected)")
            self._parameters[name] = None
        elif name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(mixprec.Tensor or None expected)")
            self._buffers[name] = value
        elif name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                f"(mixprec.nn.Module or None expected)")
            self._modules[name] = None
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        for table in ("_parameters", "_buffers", "_modules"):
            d = self.__dict__.get(table)
            if d is not None and name in d:
                return d[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            f"(mixprec.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(mixprec.Tensor or None required)")
        self._buffers[name] = tensor

    def add_module(self, name, module):
        """Registers module (or None) as the child `name`, with torch's checks."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    def register_module(self, name, module):
        """Alias for add_module."""
        self.add_module(name, module)

    def _get_name(self):
        return type(self).__name__

    def get_submodule(self, target):
        """The submodule at the dotted path target ("" is this module)."""
        if target == "":
            return self
        module = self
        for item in target.split("."):
            if not hasattr(module, item):
                raise AttributeError(module._get_name() + " has no attribute `" + item + "`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return module

    def get_parameter(self, target):
        """The Parameter at the dotted path target."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer at the dotted path target."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        buffer = getattr(module, name)
        if name not in module._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return buffer

    # ---- calling ----
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        # A module made before hooks existed (an old pickle) or without Module.__init__ has no tables.
        pre_hooks = self.__dict__.get("_forward_pre_hooks")
        hooks = self.__dict__.get("_forward_hooks")
        if not (pre_hooks or hooks or _global_forward_pre_hooks or _global_forward_hooks):
            return self.forward(*args, **kwargs)
        # torch's order and rules: global hooks first; a pre-hook's non-None result replaces the
        # positional inputs (a non-tuple as a 1-tuple); a forward hook's non-None result
        # replaces the output; keyword arguments go to forward only.
        for hook in (*_global_forward_pre_hooks.values(), *(pre_hooks or {}).values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in (*_global_forward_hooks.values(), *(hooks or {}).values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    # ---- hooks ----
    def _hook_table(self, name):
        table = self.__dict__.get(name)
        if table is None:
            table = OrderedDict()
            object.__setattr__(self, name, table)
        return table

    def _add_hook(self, name, hook):
        table = self._hook_table(name)
        handle = RemovableHandle(table)
        table[handle.id] = hook
        return handle

    def register_forward_pre_hook(self, hook):
        """hook(module, input) -> None or a new input (a tuple, or one value), before forward
        runs; input is the tuple of positional arguments. Returns a handle: handle.remove()."""
        return self._add_hook("_forward_pre_hooks", hook)

    def register_forward_hook(self, hook):
        """hook(module, input, output) -> None or a new output, after forward runs. Returns a
        handle: handle.remove()."""
        return self._add_hook("_forward_hooks", hook)

    def register_full_backward_hook(self, hook):
        raise _no_backward_hooks("register_full_backward_hook")

    def register_backward_hook(self, hook):
        raise _no_backward_hooks("register_backward_hook")

    # ---- traversal ----
    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, table, prefix, recurse):
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, t in getattr(module, table).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield module_prefix + ("." if module_prefix else "") + name, t

    def named_parameters(self, prefix="", recurse=True):
        yield from self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes ----
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m._set_training(mode)
        return self

    def _set_training(self, mode):
        object.__setattr__(self, "training", mode)

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=False):
        _zero_grads(self.parameters(), set_to_none)

    # ---- dtypes ----
    def to(self, *args, **kwargs):
        target = kwargs.get("dtype")
        for a in args:
            if isinstance(a, dtype):
                target = a
            elif a is not None and str(a) != "cpu":
                raise RuntimeError(f"mixprec runs on CPUs only: got device {a!r}; write 'cpu'")
        if target is None:
            return self
        if not target.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={target!r}")
        for m in self.modules():
            m._convert(target)
        return self

    def _convert(self, target):
        """This module's own floating parameters and buffers to `target` (not its children's)."""
        for name, p in self._parameters.items():
            if p is not None and p.dtype.is_floating_point and p.dtype != target:
                self._parameters[name] = Parameter(p.detach()._to_dtype(target), p.requires_grad)
        for name, b in self._buffers.items():
            if b is not None and b.dtype.is_floating_point and b.dtype != target:
                self._buffers[name] = b._to_dtype(target)

    def float(self):
        return self.to(dtype.float32)

    def half(self):
        return self.to(dtype.float16)

    def bfloat16(self):
        return self.to(dtype.bfloat16)

    def double(self):
        return self.to(dtype.float64)

    def type(self, dst_type):
        """Every parameter and buffer as dst_type (a dtype, or a name such as 'torch.FloatTensor'
        or 'mixprec.float64'), integer ones included, as torch's Module.type. A module whose
        tensors are the engine's own (EngineModule) converts its floating ones only."""
        target = _dtype_named(dst_type)
        for m in self.modules():
            if type(m)._convert is not Module._convert:
                if not target.is_floating_point:
                    raise TypeError(f"{type(m).__name__} holds the engine's own tensors: its type() "
                                    f"takes floating point dtypes only, but got {target!r}")
                m._convert(target)
                continue
            for name, p in m._parameters.items():
                if p is not None and p.dtype != target:
                    if p.requires_grad and not target.is_floating_point:
                        raise RuntimeError("data set to a tensor that requires gradients must be floating point "
                                           "or complex dtype")
                    m._parameters[name] = Parameter(p.detach()._to_dtype(target), p.requires_grad)
            for name, b in m._buffers.items():
                if b is not None and b.dtype != target:
                    m._buffers[name] = b._to_dtype(target)
        return self

    def apply(self, fn):
        """fn(m) for every submodule, children first, then this module (torch's order);
        returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def cuda(self, device=None):
        from .._tensor import _check_device
        _check_device("cuda")  # mixprec runs on CPUs: the error says what to write instead

    def cpu(self):
        return self

    # ---- state ----
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Parameters and buffers by PyTorch's dotted names, as tensors sharing their memory."""
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(out, prefix + name + ".", keep_vars)
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies values in place (each may be a mixprec Tensor or anything np.asarray takes:
        a NumPy array, or a torch tensor's .numpy())."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        sources = {}
        for name, target in own.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            source = value if isinstance(value, Tensor) else _C.from_numpy(np.array(value, copy=True, order="C"))
            if tuple(source.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {name}: copying a param with shape "
                              f"{tuple(source.shape)} from checkpoint, the shape in current model is "
                              f"{tuple(target.shape)}.")
            sources[name] = source
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" +
                               "\n\t".join(errors))
        with no_grad():
            for name, source in sources.items():
                own[name].copy_(source)
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing ----
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        main = f"{type(self).__name__}({self.extra_repr()}"
        if lines:
            return main + "\n  " + "\n  ".join(lines) + "\n)"
        return main + ")"


# Module.type's names: torch's legacy tensor type names, and dtypes by name.
_TYPE_NAMES = {"FloatTensor": dtype.float32, "DoubleTensor": dtype.float64, "HalfTensor": dtype.float16,
               "BFloat16Tensor": dtype.bfloat16, "LongTensor": dtype.int64, "IntTensor": dtype.int32,
               "ByteTensor": dtype.uint8}


def _dtype_named(dst_type):
    if isinstance(dst_type, dtype):
        return dst_type
    if isinstance(dst_type, str):
        name = dst_type.rpartition(".")[2]
        if name in _TYPE_NAMES:
            return _TYPE_NAMES[name]
        if isinstance(getattr(dtype, name, None), dtype):
            return getattr(dtype, name)
    raise ValueError(f"invalid type: {dst_type!r}")


def _adopt(module, engine_layer, names):
    """Registers the engine layer's tensors as the module's parameters under PyTorch's names."""
    tensors = dict(engine_layer.named_parameters())
    for name in names:
        if name in tensors:
            module.register_parameter(name, Parameter(tensors[name]))
        else:
            module.register_parameter(name, None)
