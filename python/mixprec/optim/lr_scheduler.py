"""mixprec.optim.lr_scheduler: PyTorch 1.13's schedulers (the same formulas, applied in the
same order, so the learning rates are the same floats), and the CLI's warm-up schedules."""
import math

from .. import _mixprec as _C


class _LRScheduler:
    """Sets optimizer.param_groups[0]['lr'] each step(); get_last_lr() as PyTorch's."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        group = optimizer.param_groups[0]
        if last_epoch == -1:
            group.setdefault("initial_lr", group["lr"])
        elif "initial_lr" not in group:
            raise KeyError("param 'initial_lr' is not specified in param_groups[0] when resuming an optimizer")
        self.base_lrs = [group["initial_lr"]]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        return self._last_lr

    def step(self):
        self.last_epoch += 1
        lr = self.get_lr()[0]
        self.optimizer.param_groups[0]["lr"] = lr
        self._last_lr = [lr]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambda")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    @property
    def _lr(self):
        return self.optimizer.param_groups[0]["lr"]


class LambdaLR(_LRScheduler):
    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.base_lrs[0] * self.lr_lambda(self.last_epoch)]


class StepLR(_LRScheduler):
    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [self._lr]
        return [self._lr * self.gamma]


class MultiStepLR(_LRScheduler):
    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return [self._lr]
        return [self._lr * self.gamma ** self.milestones.count(self.last_epoch)]


class ExponentialLR(_LRScheduler):
    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [self._lr]
        return [self._lr * self.gamma]


class LinearLR(_LRScheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [self._lr * self.start_factor]
        if self.last_epoch > self.total_iters:
            return [self._lr]
        return [self._lr * (1.0 + (self.end_factor - self.start_factor) /
                            (self.total_iters * self.start_factor + (self.last_epoch - 1) *
                             (self.end_factor - self.start_factor)))]


class CosineAnnealingLR(_LRScheduler):
    def __init__(self, optimizer, T_max, eta_min=0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        base, lr = self.base_lrs[0], self._lr
        if self.last_epoch == 0:
            return [lr]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [lr + (base - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max)) /
                (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max)) *
                (lr - self.eta_min) + self.eta_min]


class WarmupSchedule(_LRScheduler):
    """The CLI's --lr-schedule (constant, cosine, linear) with --warmup-steps and --min-lr:
    the engine's formula (train::lr_at), so a Python loop follows the CLI's learning rates.
    Call step() after each applied optimizer step; step k sets the lr of step k + 1."""

    def __init__(self, optimizer, schedule="cosine", total_steps=1, warmup_steps=0, min_lr=0.0,
                 last_epoch=-1):
        if schedule not in ("constant", "cosine", "linear"):
            raise ValueError(f"schedule must be 'constant', 'cosine' or 'linear', got {schedule!r}")
        self.schedule, self.total_steps = schedule, int(total_steps)
        self.warmup_steps, self.min_lr = int(warmup_steps), float(min_lr)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [_C.lr_at(self.base_lrs[0], self.schedule, self.warmup_steps, self.min_lr,
                         self.last_epoch + 1, self.total_steps)]
