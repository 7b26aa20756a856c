"""mixprec.debug.PrecisionDebugger: dtypes by parameter, overflows by name."""
import mixprec
import mixprec.nn as nn
from mixprec.amp import GradScaler
from mixprec.debug import PrecisionDebugger


def test_track_precision_groups_parameter_names_by_dtype():
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    model[0].bfloat16()
    debugger = PrecisionDebugger(model)
    assert debugger.track_precision() == {"bfloat16": ["0.weight", "0.bias"],
                                          "float32": ["1.weight", "1.bias", "2.weight", "2.bias"]}


def test_detect_overflow_names_the_tensors_and_stays_quiet_otherwise():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    opt = mixprec.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler(init_scale=1024.0)
    debugger = PrecisionDebugger(model, scaler)

    def step(x):
        opt.zero_grad(set_to_none=True)
        scaler.scale(model(mixprec.tensor(x)).sum()).backward()
        scaler.step(opt)
        scaler.update()

    step([[1.0, 2.0]])
    assert debugger.detect_overflow() is None
    # The second input is huge: its products overflow float32 in the first layer's weight
    # gradient (x * upstream * scale); the last layer's gradients stay finite.
    step([[1.0, 3e38]])
    report = debugger.detect_overflow()
    assert report["scale"] == 512.0
    assert "0.weight" in report["tensors"] and "2.bias" not in report["tensors"]
    assert report["tensors"]["0.weight"]["nonfinite"] >= 1
    assert debugger.detect_overflow() is None  # reported once
