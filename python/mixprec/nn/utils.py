"""mixprec.nn.utils: gradient clipping (by the global norm, by value)."""
from .. import _mixprec as _C
from .._mixprec import Tensor


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients so that their global L2 norm is at most max_norm; returns the norm
    before clipping as a 0-d tensor (PyTorch's clip_grad_norm_). A non-finite norm leaves the
    gradients as they are (the GradScaler skips that step anyway)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = [p for p in parameters if p.grad is not None]
    if float(norm_type) != 2.0:
        raise NotImplementedError("mixprec's clip_grad_norm_ computes the L2 norm only (norm_type=2.0)")
    total = _C.nn.clip_grad_norm_(params, float(max_norm)) if params else 0.0
    if error_if_nonfinite and not (total == total and abs(total) != float("inf")):
        raise RuntimeError(f"The total norm of order {float(norm_type)} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable this "
                           "error and scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    return _C._full([], total, _C.dtype.float32)


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient into [-clip_value, clip_value] in place (PyTorch's)."""
    from .._functions import clamp
    from .._tensor import no_grad
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    clip_value = float(clip_value)
    with no_grad():
        for p in parameters:
            if p.grad is not None:
                p.grad.copy_(clamp(p.grad, -clip_value, clip_value))
