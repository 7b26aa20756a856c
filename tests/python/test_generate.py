"""model.generate(...) of a language model loaded with mixprec.load(run_dir): exactly the text
`mixprec generate` prints for the same run, prompt, seed and sampling flags (both run the
library's infer::generate_text), and bad settings raise ValueError/TypeError with the CLI's
message for the same flag."""
import subprocess

import numpy as np
import pytest

import mixprec
from helpers import cli_env, cli_path

# The byte-level corpus of tests/e2e/language_model_test.sh (verse-like lines, 60 KB).
WORDS = ("and the lord said unto moses in the beginning god created heaven earth light was good "
         "day night").split()


def corpus():
    lines = []
    for i in range(1200):
        n = 6 + i % 7
        words = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n))
        lines.append(f"Ge{i // 31 + 1}:{i % 31 + 1} " + words.capitalize() + ".")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    # amp-bf16: generation runs under the checkpoint's autocast, the path the CLI takes too.
    tmp = tmp_path_factory.mktemp("generate")
    (tmp / "corpus.txt").write_text(corpus())
    mixprec.train(dict(model="gpt-tiny", dataset="text", data_dir=str(tmp / "corpus.txt"),
                       precision="amp-bf16", batch_size=8, test_subset=16, max_steps=20, seed=5,
                       threads=2, self_check=False), run_dir=str(tmp / "run"))
    return tmp / "run"


def cli_generate(run, *flags):
    out = subprocess.run([str(cli_path()), "generate", str(run), *map(str, flags)],
                         capture_output=True, env=cli_env())
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout


def cli_flag_error(run, flag, value):
    """The CLI's complaint about one bad flag: `--top-k: expected ...` without the flag."""
    out = subprocess.run([str(cli_path()), "generate", str(run), flag, str(value)],
                         capture_output=True, text=True, env=cli_env())
    assert out.returncode == 2, out.stderr
    line = out.stderr.splitlines()[0]
    return line.split(f"{flag}: ", 1)[1].replace("'", "")


PROMPT = "And the lord"
# (CLI flags, generate's keyword arguments): greedy, sampled with seeds, all 256 bytes, a
# prompt longer than gpt-tiny's context of 128 bytes (the sliding window), the CLI's defaults
# for everything but the length (200 bytes take a while on a loaded machine).
CASES = {
    "greedy": (["--prompt", PROMPT, "--max-tokens", 60, "--temperature", 0],
               dict(prompt=PROMPT, max_tokens=60, temperature=0)),
    "sampled_seed_7": (["--prompt", PROMPT, "--max-tokens", 40, "--temperature", 0.9, "--top-k", 20,
                        "--seed", 7],
                       dict(prompt=PROMPT, max_tokens=40, temperature=0.9, top_k=20, seed=7)),
    "sampled_all_bytes": (["--prompt", PROMPT, "--max-tokens", 40, "--temperature", 1.5,
                           "--top-k", 0, "--seed", 123456789012345],
                          dict(prompt=PROMPT, max_tokens=40, temperature=1.5, top_k=0,
                               seed=123456789012345)),
    "long_prompt": (["--prompt", corpus()[:150], "--max-tokens", 40, "--seed", 3],
                    dict(prompt=corpus()[:150], max_tokens=40, seed=3)),
    "defaults": (["--max-tokens", 30], dict(max_tokens=30)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generate_is_the_clis_text(run_dir, case):
    flags, kwargs = CASES[case]
    model = mixprec.load(run_dir)
    text = model.generate(**kwargs)
    want = cli_generate(run_dir, *flags)
    prompt = kwargs.get("prompt", "")
    # The CLI prints the prompt, then each byte it makes, then a new line.
    assert want.startswith(prompt.encode()) and want.endswith(b"\n")
    continuation = want[len(prompt.encode()):-1]
    assert len(continuation) == kwargs.get("max_tokens", 200)
    assert text == continuation.decode("utf-8", errors="replace")


def test_seeds_and_temperatures_change_the_text(run_dir):
    model = mixprec.load(run_dir)
    a = model.generate(PROMPT, max_tokens=60, seed=7)
    assert a == model.generate(PROMPT, max_tokens=60, seed=7)  # the same arguments, the same text
    assert a != model.generate(PROMPT, max_tokens=60, seed=8)
    greedy = model.generate(PROMPT, max_tokens=60, temperature=0, seed=1)
    assert greedy == model.generate(PROMPT, max_tokens=60, temperature=0, seed=2)  # no draw at T=0
    # top_k=1 keeps only the most likely byte: greedy whatever the temperature and seed.
    assert model.generate(PROMPT, max_tokens=60, temperature=5.0, top_k=1, seed=9) == greedy
    # bytes and NumPy scalars are taken as the CLI takes its flags' text.
    assert model.generate(PROMPT.encode(), max_tokens=np.int64(60), temperature=np.float32(0)) == greedy


def test_another_precision_is_the_clis_precision_flag(run_dir):
    model = mixprec.load(run_dir, precision="fp32")
    want = cli_generate(run_dir, "--prompt", PROMPT, "--max-tokens", 40, "--seed", 11,
                        "--precision", "fp32")
    assert model.generate(PROMPT, max_tokens=40, seed=11) == want[len(PROMPT):-1].decode(
        "utf-8", errors="replace")


# (argument, bad value, the CLI's flag, its value there, the exception).
BAD = [
    ("top_k", 300, "--top-k", 300, ValueError),
    ("top_k", -1, "--top-k", -1, ValueError),
    ("top_k", 1.0, "--top-k", "1.0", TypeError),
    ("max_tokens", 0, "--max-tokens", 0, ValueError),
    ("max_tokens", 1_000_001, "--max-tokens", 1_000_001, ValueError),
    ("max_tokens", 2.5, "--max-tokens", "2.5", TypeError),
    ("seed", -3, "--seed", -3, ValueError),
    ("seed", 1.5, "--seed", "1.5", TypeError),
    ("temperature", -1, "--temperature", -1, ValueError),
    ("temperature", -0.5, "--temperature", -0.5, ValueError),
    ("temperature", float("nan"), "--temperature", "nan", ValueError),
    ("temperature", float("inf"), "--temperature", "inf", ValueError),
]


@pytest.mark.parametrize("name, value, flag, cli_value, error", BAD,
                         ids=[f"{b[0]}={b[1]!r}" for b in BAD])
def test_bad_settings_raise_the_clis_message(run_dir, name, value, flag, cli_value, error):
    model = mixprec.load(run_dir)
    with pytest.raises(error) as info:
        model.generate(PROMPT, **{name: value})
    message = str(info.value).replace("'", "")
    assert f"{name}: " + cli_flag_error(run_dir, flag, cli_value) in message


def test_bad_types_raise_type_error(run_dir):
    model = mixprec.load(run_dir)
    with pytest.raises(TypeError, match="top_k: expected an integer in 0..256, got True"):
        model.generate(PROMPT, top_k=True)
    with pytest.raises(TypeError, match="temperature: expected a number >= 0, got 'hot'"):
        model.generate(PROMPT, temperature="hot")
    with pytest.raises(TypeError, match="prompt: expected a str or bytes, got int"):
        model.generate(3)
    with pytest.raises(TypeError):  # settings are keyword-only, as the CLI's are named flags
        model.generate(PROMPT, 20)
