"""mixprec.load(checkpoint): a trained model back from a checkpoint or a run directory, ready
to predict. Everything here goes through the library's inference (mixprec/infer/infer.h: the
checkpoint opened, the model built in its preset, the run's normalisation, the softmax in
f32, top-k named as the run named its classes), the code `mixprec predict` runs: for the same
inputs the probabilities are the CLI's, bit for bit."""
import json
import math
import numbers
import operator

import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor
from .nn.engine import EngineModule


class LoadedModel(EngineModule):
    """A checkpoint's model, in eval mode.

    model(x): logits (float32) for a normalised input batch, in the checkpoint's precision
    (inputs cast to its parameter dtype, autocast as its preset says), without autograd:
    what predict() runs before its softmax. After model.train() it is an ordinary engine
    module again (autograd, the parameters' own dtype), for fine-tuning.

    predict(inputs, top_k=None): class probabilities for raw inputs, normalised with the
    run's recorded statistics; see its docstring.
    """

    def __init__(self, predictor):
        object.__setattr__(self, "_predictor", predictor)
        super().__init__(predictor.model())
        spec = predictor.spec
        object.__setattr__(self, "model_name", spec["name"])
        object.__setattr__(self, "num_classes", spec["classes"])
        object.__setattr__(self, "input_shape", (spec["channels"], spec["height"], spec["width"]))
        self.eval()

    # What the checkpoint recorded.
    path = property(lambda self: self._predictor.path, doc="The checkpoint file read")
    precision = property(lambda self: self._predictor.precision, doc="The preset it runs in")
    class_names = property(lambda self: list(self._predictor.class_names),
                           doc="The run's class names ([] when it named none)")
    mean = property(lambda self: list(self._predictor.mean), doc="Input mean per channel")
    std = property(lambda self: list(self._predictor.std), doc="Input std per channel")

    def forward(self, input):
        if self.training:
            return super().forward(input)
        return self._predictor.run_model(input)

    def _samples(self, inputs):
        spec = self._predictor.spec
        if spec["language_model"] or spec["token_input"]:
            texts = [inputs] if isinstance(inputs, str) else list(inputs)
            if not texts or not all(isinstance(t, str) for t in texts):
                raise TypeError(f"predict(): model {spec['name']} takes text: a str or a list of str")
            body = json.dumps({"inputs": texts})
            return self._predictor.text_samples(body, len(texts)), len(texts), isinstance(inputs, str)
        if isinstance(inputs, Tensor):
            inputs = inputs.detach().float().numpy()
        a = np.asarray(inputs)
        if a.dtype.kind not in "fiub":
            raise TypeError(f"predict(): inputs of dtype {a.dtype}: expected numbers")
        if self._predictor.feature_names:  # a table model: rows of its features
            sample = (len(self._predictor.feature_names),)
        else:
            sample = self.input_shape
        c = sample[0]
        # [C, H, W] or [H, W] (one channel) per sample, optionally with a leading batch dim.
        if a.shape == tuple(sample) or (c == 1 and len(sample) == 3 and a.shape == tuple(sample[1:])):
            single = True
        elif a.ndim >= 1 and (a.shape[1:] == tuple(sample) or
                              (c == 1 and len(sample) == 3 and a.shape[1:] == tuple(sample[1:]))):
            single = False
        else:
            want = list(sample) if c != 1 or len(sample) != 3 else list(sample[1:])
            raise ValueError(f"predict(): inputs of shape {list(a.shape)} do not fit model "
                             f"{spec['name']}: expected {want} per sample, optionally with a "
                             f"leading batch dimension")
        n = 1 if single else a.shape[0]
        if a.dtype.kind in "iub" and not self._predictor.feature_names:
            values = a.astype(np.float64) / 255.0  # pixels, as predict reads integer arrays
        else:
            values = a.astype(np.float64)
        return values.astype(np.float32).reshape(n, -1), n, single

    def predict(self, inputs, top_k=None):
        """Class probabilities, as `mixprec predict` computes them.

        inputs: images as values in [0, 1] (what torchvision's ToTensor gives) or integer
        pixels 0..255, of shape [C, H, W] ([H, W] for one channel) or with a leading batch
        dimension; a table model's rows of its features; a text classifier's or a language
        model's text (a str or a list of str; a language model answers its next byte).
        Normalised with the run's recorded mean and std, run in the checkpoint's precision.

        Returns float32 probabilities [N, classes] ([classes] for one unbatched sample); with
        top_k=k, per sample a list of the k most probable classes, each
        {"class": index, "name": name, "probability": p}, as `mixprec predict --json` lists them.
        """
        samples, n, single = self._samples(inputs)
        probs = self._predictor.probabilities(samples, n)
        if top_k is None:
            return probs[0] if single else probs
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"predict(): top_k must be a positive integer, got {top_k!r}")
        tops = [self._predictor.top(row, top_k) for row in probs]
        return tops[0] if single else tops

    def generate(self, prompt="", *, max_tokens=200, temperature=0.8, top_k=40, seed=0):
        """A language model's text after prompt, as `mixprec generate CHECKPOINT --prompt P
        --max-tokens N --temperature T --top-k K --seed S` makes it (the library's
        generate_text): max_tokens bytes, each the most likely (temperature=0) or drawn from
        softmax(logits / temperature) over the top_k most likely (0: all 256) with a generator
        seeded by seed; the same arguments give the same text. prompt: a str (UTF-8) or bytes;
        "" starts from a new line, as the CLI's default. Returns the continuation only (the
        CLI prints the prompt first), decoded as UTF-8 with invalid bytes replaced.

        The settings are keyword-only, with the CLI's defaults and ranges; a value out of range
        raises ValueError, one of the wrong type TypeError, with the CLI's message for its flag.
        The precision is load()'s (the CLI's --precision), the threads set_num_threads()'s."""
        if isinstance(prompt, str):
            prompt = prompt.encode("utf-8")
        elif not isinstance(prompt, (bytes, bytearray)):
            raise TypeError(f"generate(): prompt: expected a str or bytes, got {type(prompt).__name__}")
        max_tokens = _integer("max_tokens", max_tokens, 1, 1_000_000, "in 1..1000000")
        top_k = _integer("top_k", top_k, 0, 256, "in 0..256")
        seed = _integer("seed", seed, 0, 2**64 - 1, f"from 0 to {2**64 - 1}")
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
            raise TypeError(f"generate(): temperature: expected a number >= 0, got {temperature!r}")
        if not math.isfinite(temperature):
            raise ValueError(f"generate(): temperature: expected a number >= 0, got {temperature!r}")
        if temperature < 0:
            raise ValueError(f"generate(): temperature: must be >= 0, got {temperature:g}")
        return self._predictor.generate(bytes(prompt), max_tokens, float(temperature), top_k,
                                        seed).decode("utf-8", errors="replace")

    def extra_repr(self):
        return f"{self.model_name}, precision={self.precision}, path={self.path}"


def _integer(name, value, low, high, expected):
    """value as an int in low..high: a TypeError for a non-integer (a float, a bool, a str), a
    ValueError out of range, in the words of the CLI's check of the same flag (`--top-k:
    expected an integer in 0..256, got 300`)."""
    message = f"generate(): {name}: expected an integer {expected}, got {value!r}"
    if isinstance(value, bool):
        raise TypeError(message)
    try:
        value = operator.index(value)  # an int or a NumPy integer; not 2.0
    except TypeError:
        raise TypeError(message) from None
    if not low <= value <= high:
        raise ValueError(message)
    return value


def load(checkpoint, precision=None, map_location=None, weights_only=False):
    """What mixprec.save wrote (a pickle: a state_dict, tensors, any object; map_location
    must name the CPU or be None, as on a machine without a GPU), or the model a checkpoint
    holds (a .safetensors checkpoint, a run directory: its last
    checkpoint, or a plain safetensors file of weights), ready for model(x) and
    model.predict(...). precision: an inference precision (`fp32`, `bf16`, `fp16`: the weights
    cast once; or any training preset name) instead of the checkpoint's own. A missing or
    corrupt checkpoint raises the engine's error (mixprec.NotFoundError, a
    FileNotFoundError, or mixprec.MixprecError) with its message."""
    import os
    from ._functions import load_pickle
    from ._tensor import _check_device
    if map_location is not None and not callable(map_location) and not isinstance(map_location, dict):
        _check_device(map_location)
    if hasattr(checkpoint, "read"):
        return load_pickle(checkpoint)
    path = os.fspath(checkpoint)
    if os.path.isfile(path):
        with open(path, "rb") as f:
            if f.read(1) == b"\x80":  # a pickle (protocol 2 and later): mixprec.save's
                if precision is not None:
                    raise ValueError(f"{path} holds a pickled object (mixprec.save), not a checkpoint: "
                                     "precision applies to checkpoints only")
                return load_pickle(path)
    return LoadedModel(_C.infer.Predictor.open(path, precision or ""))
