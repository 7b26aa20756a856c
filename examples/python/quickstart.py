"""The README's "From Python" loop: a small MLP on synthetic data with autocast (bf16) and
dynamic loss scaling. Written as a PyTorch 1.13 user writes it; only the imports differ."""
import numpy as np

import mixprec
from mixprec import nn, optim
from mixprec.amp import GradScaler, autocast

mixprec.manual_seed(0)
rng = np.random.default_rng(0)
x = mixprec.from_numpy(rng.standard_normal((512, 20)).astype(np.float32))   # no copy
y = mixprec.from_numpy((x.numpy()[:, :5].sum(1) > 0).astype(np.int64))     # 2 classes

model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
opt = optim.AdamW(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
scaler = GradScaler()

for step in range(60):
    batch = slice(step % 8 * 64, step % 8 * 64 + 64)
    opt.zero_grad()
    with autocast(device_type="cpu", dtype=mixprec.bfloat16):
        loss = loss_fn(model(x[batch]), y[batch])   # linear in bf16, the loss in f32
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    scaler.step(opt)
    scaler.update()
    if step % 20 == 0:
        print(f"step {step:2d}  loss {loss.item():.4f}  scale {scaler.get_scale():.0f}")

with mixprec.no_grad():
    accuracy = (model(x).argmax(-1) == y).float().mean().item()
print(f"train accuracy {accuracy:.1%}")
assert accuracy > 0.9, "the quickstart loop did not learn"
