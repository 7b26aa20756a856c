#!/usr/bin/python3
"""gen_optim.py: PyTorch reference bits for tests/golden/optim_golden_test.cpp.

Optimizers: torch.optim.SGD / Adam / AdamW with foreach=False (the single-tensor path, the
default on CPU), float32, one thread, in 13 configurations (momentum, dampening, nesterov,
weight decay, amsgrad, maximize, PyTorch's defaults and odd values). Every configuration
starts from the same two parameters and sees the same 5 gradients:
  a [519]  = 32 * 16 + 7: ATen's AVX2 loops take 16 floats (two vectors) per iteration, so
             the last 7 go through the kernels' scalar tail
  b [3, 5] = 15 elements: all scalar tail
Values span zero, f32 subnormals, tiny and large magnitudes of both signs, so rounding
corners are hit. The C++ test compares every element's bits.

GradScaler: torch 1.13 has no CPU kernel for torch._amp_update_scale_ (the call fails with
"Could not run 'aten::_amp_update_scale_' with arguments from the 'CPU' backend"), so the
scale sequence is computed with torch ops exactly as 1.13's CUDA kernel
(aten/src/ATen/native/cuda/AmpKernels.cu, amp_update_scale_cuda_kernel) does it: the f32
scale times the double factor in double, rounded to f32 once (`static_cast<float>(
current_scale * growth_factor)`, kept only if finite; the backoff product assigned to the
float scale), growth after growth_interval clean steps, tracker reset on overflow. PyTorch
2.x's CPU kernel (AmpGradScalerKernels.cpp) has the same arithmetic.

The script also re-derives every optimizer result with an independent numpy model of the
formula mixprec implements (src/optim/update_formula.inc: f32 ops, libm fmaf where ATen
fuses) and fails if a single bit differs, and it checks that each golden sequence differs
from the naive formulas (no FMA / f32 factors), so the test can fail.

Tensors (float32 unless noted; <c> = config name, <t> = a or b, k = 1..5):
  p0.<t>                 initial parameters
  grad<k>.<t>            gradient fed to step k
  <c>.step<k>.<t>        parameters after step k
  <c>.<state>.<t>        state after step 5: momentum_buffer | exp_avg, exp_avg_sq, max_exp_avg_sq
  scaler.<s>.found_inf   (int32) 1 where update() saw an overflow, per update
  scaler.<s>.scale       the scale after each update()
Metadata: configs / scaler_configs (comma lists) and config.<c> / scaler.<s> strings
"key=value ..." with Python's repr of each float (round-trips exactly through strtod).

Run with Debian's interpreter (it has torch): /usr/bin/python3 tests/golden/gen_optim.py
"""
import ctypes
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True  # no __pycache__ beside the committed scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import write_and_verify  # noqa: E402

SEED = 0
STEPS = 5
SHAPES = {"a": (519,), "b": (3, 5)}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "optim_golden.safetensors")

# name -> (optimizer, options); every float deliberately not a short binary fraction.
CONFIGS = {
    "sgd": ("sgd", dict(lr=0.07)),
    "sgd_wd": ("sgd", dict(lr=0.07, weight_decay=0.013)),
    "sgd_momentum": ("sgd", dict(lr=0.07, momentum=0.83)),
    "sgd_momentum_dampening_wd": ("sgd", dict(lr=0.07, momentum=0.83, dampening=0.21, weight_decay=0.013)),
    "sgd_nesterov_wd": ("sgd", dict(lr=0.07, momentum=0.9, nesterov=True, weight_decay=0.013)),
    "sgd_maximize_momentum": ("sgd", dict(lr=0.03, momentum=0.7, maximize=True, weight_decay=0.013)),
    "adam_defaults": ("adam", dict(lr=1e-3)),
    "adam": ("adam", dict(lr=0.0123, betas=(0.87, 0.9973), eps=1e-7)),
    "adam_wd": ("adam", dict(lr=0.0123, betas=(0.87, 0.9973), eps=1e-7, weight_decay=0.031)),
    "adam_amsgrad_wd": ("adam", dict(lr=0.0123, betas=(0.87, 0.9973), eps=1e-7, weight_decay=0.031, amsgrad=True)),
    "adam_maximize": ("adam", dict(lr=0.0123, betas=(0.9, 0.999), eps=1e-8, maximize=True)),
    "adamw_defaults": ("adamw", dict(lr=1e-3)),
    "adamw_amsgrad": ("adamw", dict(lr=0.0123, betas=(0.87, 0.9973), eps=1e-7, weight_decay=0.031, amsgrad=True)),
}

# name -> (init_scale, growth_factor, backoff_factor, growth_interval, found_inf per update)
SCALER_CONFIGS = {
    "odd_factors": (65536.0, 1.7, 0.3, 2, [0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]),
    "every_step": (3.0, 1.0001, 0.999, 1, [0] * 12 + [1] * 6 + [0] * 12),
    "near_max": (1e38, 1.9, 0.7, 1, [0, 0, 1, 0, 0, 0, 1, 1, 0, 0]),  # growth to inf is refused
    "to_subnormal": (1e-36, 1.3, 0.17, 3, [1] * 7 + [0] * 9),  # the scale becomes subnormal
}


def fmt(v):
    return repr(bool(v)).lower() if isinstance(v, bool) else repr(float(v)) if isinstance(v, float) else str(v)


def config_string(kind, opts):
    full = {"optimizer": kind}
    if kind == "sgd":
        full.update(lr=opts["lr"], momentum=opts.get("momentum", 0.0), dampening=opts.get("dampening", 0.0),
                    weight_decay=opts.get("weight_decay", 0.0), nesterov=opts.get("nesterov", False),
                    maximize=opts.get("maximize", False))
    else:
        betas = opts.get("betas", (0.9, 0.999))
        full.update(lr=opts["lr"], beta1=betas[0], beta2=betas[1], eps=opts.get("eps", 1e-8),
                    weight_decay=opts.get("weight_decay", 0.01 if kind == "adamw" else 0.0),
                    amsgrad=opts.get("amsgrad", False), maximize=opts.get("maximize", False))
    return " ".join(f"{k}={fmt(v)}" for k, v in full.items()), full


def mixed_values(gen, shape, lo, hi):
    """Normal values scaled by 10**U(lo, hi), with exact zeros, subnormals and signed tiny ones."""
    n = int(np.prod(shape))
    x = torch.randn(n, generator=gen, dtype=torch.float64)
    x *= torch.pow(10.0, torch.empty(n, dtype=torch.float64).uniform_(lo, hi, generator=gen))
    idx = torch.randperm(n, generator=gen)
    x[idx[0::23]] = 0.0
    x[idx[1::29]] = torch.tensor([3e-41, -1e-39, 7e-45, -4e-40], dtype=torch.float64).repeat(n)[: len(idx[1::29])]
    x[idx[2::31]] *= 1e-30
    return x.to(torch.float32).reshape(shape)


def run_torch(kind, opts, p0, grads):
    params = {t: p0[t].clone().requires_grad_(True) for t in SHAPES}
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind]
    opt = cls([params["a"], params["b"]], foreach=False, **opts)
    steps = []
    for k in range(STEPS):
        for t in SHAPES:
            params[t].grad = grads[k][t].clone()
        opt.step()
        steps.append({t: params[t].detach().clone() for t in SHAPES})
    state = {}
    for t in SHAPES:
        for name, value in opt.state[params[t]].items():
            if name != "step" and value is not None:
                state.setdefault(name, {})[t] = value.detach().clone()
    return steps, state


# ---- the independent model: numpy f32 ops, libm fmaf where ATen fuses ---------------------
_libm = ctypes.CDLL("libm.so.6")
_libm.fmaf.restype = ctypes.c_float
_libm.fmaf.argtypes = [ctypes.c_float] * 3


def fma(a, b, c):
    a, b, c = np.broadcast_arrays(np.float32(a), np.float32(b), np.float32(c))
    out = [_libm.fmaf(float(x), float(y), float(z)) for x, y, z in zip(a.ravel(), b.ravel(), c.ravel())]
    return np.array(out, dtype=np.float32).reshape(a.shape)


def f32(x):
    return np.float32(x)


def run_model(full, p0, grads):
    """Returns the parameters after each step, following update_formula.inc."""
    p = {t: p0[t].numpy().astype(np.float32).ravel() for t in SHAPES}
    st = {t: {} for t in SHAPES}
    out = []
    with np.errstate(all="ignore"):
        for k in range(STEPS):
            for t in SHAPES:
                g = grads[k][t].numpy().astype(np.float32).ravel()
                if full["maximize"]:
                    g = -g
                s = st[t]
                if full["optimizer"] == "sgd":
                    if full["weight_decay"] != 0:
                        g = fma(p[t], f32(full["weight_decay"]), g)
                    if full["momentum"] != 0:
                        if "buf" not in s:
                            s["buf"] = g.copy()
                        else:
                            s["buf"] = fma(g, f32(1 - full["dampening"]), s["buf"] * f32(full["momentum"]))
                        g = fma(s["buf"], f32(full["momentum"]), g) if full["nesterov"] else s["buf"]
                    p[t] = fma(g, f32(-full["lr"]), p[t])
                else:
                    lr, b1, b2, wd = full["lr"], full["beta1"], full["beta2"], full["weight_decay"]
                    step = float(k + 1)
                    if full["optimizer"] == "adamw":
                        p[t] = p[t] * f32(1 - lr * wd)
                    elif wd != 0:
                        g = fma(p[t], f32(wd), g)
                    m = s.get("m", np.zeros_like(g))
                    v = s.get("v", np.zeros_like(g))
                    s["m"] = m = fma(g, f32(1 - b1), m * f32(b1))
                    s["v"] = v = fma(f32(1 - b2) * g, g, v * f32(b2))
                    second = v
                    if full["amsgrad"]:
                        s["vmax"] = second = np.maximum(s.get("vmax", np.zeros_like(g)), v)
                    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
                    denom = np.sqrt(second) / f32(bc2 ** 0.5) + f32(full["eps"])
                    p[t] = (f32(-(lr / bc1)) * m) / denom + p[t]
            out.append({t: p[t].copy() for t in SHAPES})
    return out


def naive_model(full, p0, grads):
    """The pre-fix formula (no FMA, 1 - beta in f32): the golden bits must differ from it."""
    p = {t: p0[t].numpy().astype(np.float32).ravel() for t in SHAPES}
    st = {t: {} for t in SHAPES}
    with np.errstate(all="ignore"):
        for k in range(STEPS):
            for t in SHAPES:
                g = grads[k][t].numpy().astype(np.float32).ravel()
                g = -g if full["maximize"] else g
                s = st[t]
                if full["optimizer"] == "sgd":
                    g = g + f32(full["weight_decay"]) * p[t] if full["weight_decay"] else g
                    if full["momentum"]:
                        mom = f32(full["momentum"])
                        s["buf"] = g.copy() if "buf" not in s else s["buf"] * mom + (f32(1) - f32(full["dampening"])) * g
                        g = g + mom * s["buf"] if full["nesterov"] else s["buf"]
                    p[t] = p[t] + f32(-full["lr"]) * g
                else:
                    b1, b2 = f32(full["beta1"]), f32(full["beta2"])
                    s["m"] = m = s.get("m", np.zeros_like(g)) * b1 + (f32(1) - b1) * g
                    s["v"] = v = s.get("v", np.zeros_like(g)) * b2 + (f32(1) - b2) * (g * g)
                    bc1 = 1 - full["beta1"] ** (k + 1)
                    denom = np.sqrt(v) / f32((1 - full["beta2"] ** (k + 1)) ** 0.5) + f32(full["eps"])
                    p[t] = p[t] + f32(-(full["lr"] / bc1)) * (m / denom)
    return p


def scaler_sequence(init, growth, backoff, interval, found):
    """1.13's amp_update_scale_cuda_kernel with torch ops: f32 scale * double factor in
    double, one rounding to f32."""
    scale = torch.tensor(init, dtype=torch.float32)
    tracker, out = 0, []
    for inf in found:
        if inf:
            scale = (scale.double() * backoff).float()
            tracker = 0
        else:
            tracker += 1
            if tracker == interval:
                grown = (scale.double() * growth).float()
                if torch.isfinite(grown):
                    scale = grown
                tracker = 0
        out.append(scale.item())
    return torch.tensor(out, dtype=torch.float32)


def naive_scaler(init, growth, backoff, interval, found):
    scale, tracker, out = np.float32(init), 0, []
    with np.errstate(all="ignore"):
        for inf in found:
            if inf:
                scale, tracker = scale * np.float32(backoff), 0
            else:
                tracker += 1
                if tracker == interval:
                    grown = scale * np.float32(growth)
                    scale = grown if np.isfinite(grown) else scale
                    tracker = 0
            out.append(scale)
    return np.array(out, dtype=np.float32)


def bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    p0 = {t: mixed_values(gen, s, -6, 3) for t, s in SHAPES.items()}
    grads = [{t: mixed_values(gen, s, -8, 3) for t, s in SHAPES.items()} for _ in range(STEPS)]

    tensors = {f"p0.{t}": p0[t] for t in SHAPES}
    for k in range(STEPS):
        for t in SHAPES:
            tensors[f"grad{k + 1}.{t}"] = grads[k][t]
    metadata = {"generator": "tests/golden/gen_optim.py", "torch": torch.__version__, "seed": str(SEED),
                "steps": str(STEPS), "configs": ",".join(CONFIGS), "scaler_configs": ",".join(SCALER_CONFIGS),
                "cpu_capability": torch.backends.cpu.get_cpu_capability()
                if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability")
                else torch.__config__.show().split("CPU capability usage: ")[-1].split("\n")[0]}

    for name, (kind, opts) in CONFIGS.items():
        text, full = config_string(kind, opts)
        metadata[f"config.{name}"] = text
        steps, state = run_torch(kind, opts, p0, grads)
        model = run_model(full, p0, grads)
        for k in range(STEPS):
            for t in SHAPES:
                tensors[f"{name}.step{k + 1}.{t}"] = steps[k][t]
                got, want = bits(steps[k][t].numpy().ravel()), bits(model[k][t])
                bad = np.nonzero(got != want)[0]
                assert len(bad) == 0, (f"{name} step {k + 1} {t}: the model differs from torch at {len(bad)} "
                                       f"elements, first {bad[0]}: torch {got[bad[0]]:08x} model {want[bad[0]]:08x}")
        for sname, per in state.items():
            for t in SHAPES:
                tensors[f"{name}.{sname}.{t}"] = per[t]
        naive = naive_model(full, p0, grads)
        differ = sum(int(np.sum(bits(steps[-1][t].numpy().ravel()) != bits(naive[t]))) for t in SHAPES)
        assert differ > 0, f"{name}: the naive formula gives torch's bits; the config tests nothing new"
        print(f"{name:28s} {text}\n{'':28s} model == torch bit for bit; naive formula differs in {differ} "
              f"of {sum(int(np.prod(s)) for s in SHAPES.values())} final elements")

    for name, (init, growth, backoff, interval, found) in SCALER_CONFIGS.items():
        metadata[f"scaler.{name}"] = (f"init_scale={fmt(init)} growth_factor={fmt(growth)} "
                                      f"backoff_factor={fmt(backoff)} growth_interval={interval}")
        seq = scaler_sequence(init, growth, backoff, interval, found)
        tensors[f"scaler.{name}.found_inf"] = torch.tensor(found, dtype=torch.int32)
        tensors[f"scaler.{name}.scale"] = seq
        differ = int(np.sum(bits(seq.numpy()) != bits(naive_scaler(init, growth, backoff, interval, found))))
        print(f"scaler {name:20s} {metadata[f'scaler.{name}']}: f32-factor formula differs at {differ} of "
              f"{len(found)} updates; final scale {seq[-1].item()!r}")
        assert differ > 0 or name not in ("odd_factors", "every_step"), name

    write_and_verify(OUT, tensors, metadata)
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes, {len(tensors)} tensors)")


if __name__ == "__main__":
    main()
