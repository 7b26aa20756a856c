"""mixprec.optim.lr_scheduler: PyTorch 1.13's schedulers (the same formulas, applied in the
same order, so the learning rates are the same floats), and the CLI's warm-up schedules."""
import math
import warnings

from .. import _mixprec as _C

# PyTorch 1.13's warning for step(epoch=...), which ReduceLROnPlateau still takes.
_EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)


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


def _one_per_group(name, value):
    """PyTorch's _format_param for mixprec's one group: a scalar, or a list/tuple of one."""
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise ValueError(f"expected 1 values for {name}, got {len(value)}")
        return value[0]
    return value


def _phase(end_step, start_lr, end_lr, start_momentum, end_momentum):
    # PyTorch's layout of _schedule_phases (group keys by name), so state_dict()s move both ways.
    return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
            "start_momentum": start_momentum, "end_momentum": end_momentum}


class OneCycleLR(_LRScheduler):
    """PyTorch 1.13's 1cycle policy, stepped after every batch: from max_lr / div_factor up to
    max_lr over the first pct_start of total_steps (or epochs * steps_per_epoch), then down to
    max_lr / div_factor / final_div_factor; three_phase=True goes back to max_lr / div_factor
    first, as the paper does. anneal_strategy 'cos' or 'linear'. As PyTorch's, the
    total_steps-th step() (after the last batch) still sets an lr, past the end of the cycle,
    and one more is a ValueError. Like PyTorch it writes 'initial_lr', 'max_lr' and 'min_lr'
    into the group, so the optimizer's state_dict() carries them for a resume with last_epoch.

    cycle_momentum (PyTorch's default True) moves SGD's momentum or Adam's betas[0] inversely to
    the lr, between max_momentum and base_momentum. mixprec optimizers fix those at
    construction (only 'lr' may change), so cycle_momentum=True is taken only where it changes
    nothing: base_momentum == max_momentum == the optimizer's momentum (betas[0]). Otherwise
    construction raises a ValueError saying to pass cycle_momentum=False -- rather than
    silently giving another schedule than PyTorch's, or failing later at optimizer.step().
    verbose prints PyTorch's line for each step."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1, verbose=False):
        # PyTorch's checks and messages, in its order, so the first bad argument named is its.
        if total_steps is None and epochs is None and steps_per_epoch is None:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        else:
            if epochs <= 0 or not isinstance(epochs, int):
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if steps_per_epoch <= 0 or not isinstance(steps_per_epoch, int):
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must by one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")  # sic: PyTorch's "must by"
        # A name, not PyTorch's bound method anneal_func: the state_dict() stays picklable.
        self.anneal_strategy = anneal_strategy
        # The phase ends are PyTorch's expressions as written (2 * pct_start first): their
        # rounding is part of the learning rates.
        if three_phase:
            self._schedule_phases = [
                _phase(float(pct_start * self.total_steps) - 1,
                       "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(float(2 * pct_start * self.total_steps) - 2,
                       "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                _phase(self.total_steps - 1,
                       "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                _phase(float(pct_start * self.total_steps) - 1,
                       "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        max_lr = _one_per_group("max_lr", max_lr)

        group = optimizer.param_groups[0]
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "optimizer must support momentum with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            max_momentum = _one_per_group("max_momentum", max_momentum)
            base_momentum = _one_per_group("base_momentum", base_momentum)
            name = "betas[0]" if self.use_beta1 else "momentum"
            current = group["betas"][0] if self.use_beta1 else group["momentum"]
            # Checked before the group is written, so a refused scheduler leaves it as it was.
            if not max_momentum == base_momentum == current:
                raise ValueError(
                    f"OneCycleLR: cycle_momentum=True (PyTorch's default) sets the optimizer's "
                    f"{name} (here {current}) between max_momentum={max_momentum} and "
                    f"base_momentum={base_momentum} each step, but mixprec optimizers fix {name} "
                    f"at construction (only 'lr' may change): pass cycle_momentum=False")
        if last_epoch == -1:
            group["initial_lr"] = max_lr / div_factor
            group["max_lr"] = max_lr
            group["min_lr"] = group["initial_lr"] / final_div_factor
            if cycle_momentum:  # the optimizer's own value, as checked above
                if self.use_beta1:
                    group["betas"] = (max_momentum, *group["betas"][1:])
                else:
                    group["momentum"] = max_momentum
                group["max_momentum"] = max_momentum
                group["base_momentum"] = base_momentum
        self.verbose = verbose
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _annealing_cos(start, end, pct):
        cos_out = math.cos(math.pi * pct) + 1
        return end + (start - end) / 2.0 * cos_out

    @staticmethod
    def _annealing_linear(start, end, pct):
        return (end - start) * pct + start

    def get_lr(self):
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num + 1} times. The specified number of total "
                             f"steps is {self.total_steps}")
        anneal = self._annealing_cos if self.anneal_strategy == "cos" else self._annealing_linear
        group = self.optimizer.param_groups[0]
        start_step = 0
        for i, phase in enumerate(self._schedule_phases):
            end_step = phase["end_step"]
            if step_num <= end_step or i == len(self._schedule_phases) - 1:
                pct = (step_num - start_step) / (end_step - start_step)
                lr = anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                if self.cycle_momentum:  # PyTorch's write; the value is the fixed one
                    momentum = anneal(group[phase["start_momentum"]],
                                      group[phase["end_momentum"]], pct)
                    if self.use_beta1:
                        group["betas"] = (momentum, *group["betas"][1:])
                    else:
                        group["momentum"] = momentum
                return [lr]
            start_step = end_step

    def step(self):
        super().step()
        if self.verbose:
            print(f"Adjusting learning rate of group 0 to {self._last_lr[0]:.4e}.")

    def load_state_dict(self, state_dict):
        """Also takes PyTorch 1.13's state_dict(), whose 'anneal_func' (a bound method of its
        scheduler) is read as its strategy's name."""
        state = dict(state_dict)
        func = state.pop("anneal_func", None)
        if func is not None and "anneal_strategy" not in state:
            state["anneal_strategy"] = {"_annealing_cos": "cos",
                                        "_annealing_linear": "linear"}[func.__name__]
        super().load_state_dict(state)


class ReduceLROnPlateau:
    """PyTorch 1.13's: step(metrics) after each validation. A metric better than the best so far
    (mode 'min' or 'max', by threshold, 'rel' or 'abs') resets the count of bad epochs; more than
    patience bad epochs in a row set lr = max(lr * factor, min_lr), unless that lowers it by eps
    or less, and the next cooldown epochs count no bad epochs. As in PyTorch 1.13 it is no
    _LRScheduler (no get_lr(), no last_epoch argument, lr reduced in place rather than computed
    from base_lrs). get_last_lr() is an addition: PyTorch 1.13 keeps only the _last_lr attribute,
    set by step(); here it is also the optimizer's lr before the first step(), as in later
    PyTorch versions. metrics may be a number or a one-element tensor."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8, verbose=False):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != 1:
                raise ValueError(f"expected 1 min_lrs, got {len(min_lr)}")
            self.min_lrs = list(min_lr)
        else:
            self.min_lrs = [min_lr]
        # PyTorch's attribute names, so its state_dict() loads here and ours there.
        self.patience = patience
        self.verbose = verbose
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.best = None
        self.num_bad_epochs = None
        self.mode_worse = None
        self.eps = eps
        self.last_epoch = 0
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()
        self._last_lr = [optimizer.param_groups[0]["lr"]]

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_DEPRECATION_WARNING, UserWarning)
        self.last_epoch = epoch

        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in the cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [self.optimizer.param_groups[0]["lr"]]

    def _reduce_lr(self, epoch):
        group = self.optimizer.param_groups[0]
        old_lr = float(group["lr"])
        new_lr = max(old_lr * self.factor, self.min_lrs[0])
        if old_lr - new_lr > self.eps:
            group["lr"] = new_lr
            if self.verbose:
                epoch_str = ("%.2f" if isinstance(epoch, float) else "%.5d") % epoch
                print(f"Epoch {epoch_str}: reducing learning rate of group 0 to {new_lr:.4e}.")

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        # PyTorch's comparisons as written: best * (1 - threshold), not best - best * threshold.
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def get_last_lr(self):
        return self._last_lr

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold,
                             threshold_mode=self.threshold_mode)

