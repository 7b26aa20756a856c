"""mixprec.debug: what precision a model trains in, and which tensors overflowed."""
from collections import OrderedDict


class PrecisionDebugger:
    """Lists a model's parameters by dtype and reports the GradScaler's overflows by name.

        debugger = PrecisionDebugger(model, scaler)
        print(debugger.track_precision())     # {"float32": ["fc.weight", ...], "bfloat16": [...]}
        ... scaler.update()
        report = debugger.detect_overflow()   # None, or the step's overflowed gradients

    The names come from the engine's own check of every gradient (no other AMP library says
    which tensor overflowed): the scaler is told the model's parameter names here.
    """

    def __init__(self, model, scaler=None):
        self.model = model
        self.scaler = scaler
        if scaler is not None:
            scaler.name_parameters(model.named_parameters())
        self._reported_skips = 0 if scaler is None else scaler.skipped_steps()

    def track_precision(self):
        """Parameter names grouped by dtype name ("float32", "bfloat16", ...), in model order."""
        by_dtype = OrderedDict()
        for name, p in self.model.named_parameters():
            by_dtype.setdefault(str(p.dtype).replace("mixprec.", ""), []).append(name)
        return dict(by_dtype)

    def detect_overflow(self, scaler=None):
        """After scaler.update(): None when the last step was applied, else a dict with the
        scale now in effect and, per overflowed parameter, its count of non-finite gradient
        elements and the flat index of the first one."""
        scaler = scaler or self.scaler
        if scaler is None:
            raise ValueError("detect_overflow needs the GradScaler (pass it here or to the constructor)")
        if scaler is not self.scaler:
            scaler.name_parameters(self.model.named_parameters())
            self.scaler = scaler
        skipped = scaler.skipped_steps()
        if skipped == self._reported_skips:
            return None
        self._reported_skips = skipped
        return {"scale": scaler.get_scale(),
                "tensors": {g.name: {"nonfinite": g.count, "first_index": g.first_index}
                            for g in scaler.last_nonfinite()}}
