"""mixprec.load(checkpoint): a trained run back as a model; its predictions are `mixprec
predict`'s (the same library code, mixprec/infer/infer.h), bit for bit."""
import json
import pathlib
import subprocess

import numpy as np
import pytest

import mixprec
from helpers import cli_env, cli_path

SETTINGS = dict(model="cnn", precision="amp-bf16", epochs=1, batch_size=64, train_subset=128,
                test_subset=64, seed=3, threads=2, self_check=False)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("load") / "run"
    mixprec.train(SETTINGS, run_dir=str(run))
    return run


def cli_predict(run, inputs, *flags):
    out = subprocess.run([str(cli_path()), "predict", str(run), *map(str, inputs), "--json",
                          "--top-k", "10", *flags], check=True, capture_output=True, text=True,
                         env=cli_env())
    return json.loads(out.stdout)


@pytest.mark.parametrize("kind", ["unit_floats", "pixels"])
def test_probabilities_are_the_clis_bit_for_bit(run_dir, tmp_path, kind):
    gen = np.random.default_rng(1)
    if kind == "pixels":  # integer arrays are pixels 0..255, as predict reads them
        x = gen.integers(0, 256, size=(6, 1, 28, 28), dtype=np.uint8)
    else:  # float arrays are values in [0, 1] (ToTensor's output)
        x = gen.random((6, 1, 28, 28), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    cli = cli_predict(run_dir, [tmp_path / "x.npy"])
    model = mixprec.load(run_dir)
    probs = model.predict(x)
    assert probs.shape == (6, 10) and probs.dtype == np.float32
    assert cli["precision"] == model.precision == "amp-bf16"
    assert cli["checkpoint"] == model.path
    tops = model.predict(x, top_k=10)
    for i, record in enumerate(cli["predictions"]):
        assert len(record["top"]) == 10
        for entry in record["top"]:
            # The CLI prints each float32 probability as a double: the same value exactly.
            assert entry["probability"] == float(probs[i, entry["class"]])
        assert tops[i] == record["top"]  # same classes, names, order and probabilities


def test_a_checkpoint_file_and_single_samples(run_dir):
    checkpoint = sorted(run_dir.glob("step-*.safetensors"))[-1]
    model = mixprec.load(checkpoint)
    assert pathlib.Path(model.path) == checkpoint
    x = np.random.default_rng(2).random((3, 28, 28), dtype=np.float32)  # [N, H, W], one channel
    batch = model.predict(x)
    one = model.predict(x[0])  # an unbatched [H, W] sample gives one row
    assert one.shape == (10,)
    np.testing.assert_array_equal(one, batch[0])
    assert model.predict(x[0], top_k=2) == model.predict(x[:2], top_k=2)[0]
    assert model.class_names[0] == "T-shirt/top" and model.num_classes == 10
    assert model.input_shape == (1, 28, 28) and model.model_name == "cnn"


def test_calling_the_model_gives_the_logits_predict_uses(run_dir):
    model = mixprec.load(run_dir)
    assert not model.training
    x = np.random.default_rng(3).random((4, 1, 28, 28), dtype=np.float32)
    normalised = ((x.astype(np.float64) - model.mean[0]) / model.std[0]).astype(np.float32)
    logits = model(mixprec.tensor(normalised))
    assert logits.dtype == mixprec.float32 and logits.shape == (4, 10)
    assert not logits.requires_grad
    z = logits.numpy().astype(np.float64)
    softmax = np.exp(z - z.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    # predict normalises in its own arithmetic: equal up to f32 rounding of the input.
    np.testing.assert_allclose(softmax, model.predict(x), rtol=1e-5, atol=1e-6)


def test_another_precision(run_dir):
    model = mixprec.load(run_dir, precision="fp32")
    assert model.precision == "o2-fp32" or model.precision.endswith("fp32")
    with pytest.raises(ValueError, match="precision"):
        mixprec.load(run_dir, precision="fp8")


def test_train_mode_fine_tunes(run_dir):
    model = mixprec.load(run_dir, precision="fp32")
    model.train()
    x = mixprec.tensor(np.random.default_rng(4).standard_normal((2, 1, 28, 28)).astype(np.float32))
    loss = mixprec.nn.functional.cross_entropy(model(x), mixprec.tensor([1, 2]))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_a_missing_checkpoint_raises_the_engines_message(tmp_path):
    with pytest.raises(RuntimeError, match="no such file or directory") as info:
        mixprec.load(tmp_path / "nowhere")
    assert isinstance(info.value, mixprec.MixprecError)
    with pytest.raises(RuntimeError):
        mixprec.load(tmp_path)  # a directory without checkpoints


def test_a_corrupt_checkpoint_raises_the_engines_message(run_dir, tmp_path):
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x93NUMPY not a checkpoint at all" * 10)
    with pytest.raises(mixprec.MixprecError, match="garbage.safetensors"):
        mixprec.load(garbage)
    # A real checkpoint cut short, and one with a flipped byte in a tensor (its checksum).
    good = sorted(run_dir.glob("step-*.safetensors"))[-1].read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good[: len(good) // 2])
    with pytest.raises(mixprec.MixprecError, match="cut.safetensors"):
        mixprec.load(cut)
    flipped = bytearray(good)
    flipped[-100] ^= 0xFF
    bad = tmp_path / "flipped.safetensors"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(mixprec.MixprecError, match="flipped.safetensors"):
        mixprec.load(bad)


def test_bad_inputs_to_predict(run_dir):
    model = mixprec.load(run_dir)
    with pytest.raises(ValueError, match=r"shape \[2, 3, 28, 28\] do not fit model cnn"):
        model.predict(np.zeros((2, 3, 28, 28), np.float32))
    with pytest.raises(TypeError, match="dtype"):
        model.predict(np.array([["a"]]))
    with pytest.raises(ValueError, match="top_k"):
        model.predict(np.zeros((1, 28, 28), np.float32), top_k=0)
    with pytest.raises(ValueError, match="language model"):
        model.generate("hello")
