"""mixprec.optim.lr_scheduler: PyTorch's formulas (checked bit for bit against torch in
test_torch_side_by_side.py) and the CLI's warm-up schedule against its documented formula."""
import math

import pytest

import mixprec
from mixprec.optim import lr_scheduler


def make_optimizer(lr=1.0):
    return mixprec.optim.SGD([mixprec.nn.Parameter(mixprec.tensor([0.0]))], lr=lr)


def trajectory(scheduler, steps):
    out = []
    for _ in range(steps):
        out.append(scheduler.optimizer.param_groups[0]["lr"])
        scheduler.step()
    return out


def test_step_lr_by_hand():
    s = lr_scheduler.StepLR(make_optimizer(1.0), step_size=2, gamma=0.5)
    assert trajectory(s, 6) == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    assert s.get_last_lr() == [0.125]


def test_warmup_cosine_follows_the_documented_formula():
    lr, total, warm, min_lr = 0.1, 10, 3, 0.01
    s = lr_scheduler.WarmupSchedule(make_optimizer(lr), "cosine", total_steps=total,
                                    warmup_steps=warm, min_lr=min_lr)
    expected = []
    for step in range(1, total + 1):
        if step <= warm:
            expected.append(lr * step / warm)
        else:
            p = (step - warm - 1) / (total - warm - 1)
            expected.append(min_lr + (lr - min_lr) * (1 + math.cos(math.pi * p)) / 2)
    assert trajectory(s, total) == pytest.approx(expected, rel=1e-12)


def test_scheduler_changes_the_steps_taken():
    opt = make_optimizer(1.0)
    p = opt.param_groups[0]["params"][0]
    s = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        p.grad = mixprec.tensor([1.0])
        opt.step()
        s.step()
    assert p.item() == -(1.0 + 0.5 + 0.25)


def test_bad_schedule_name():
    with pytest.raises(ValueError, match="schedule"):
        lr_scheduler.WarmupSchedule(make_optimizer(), "exponential")
