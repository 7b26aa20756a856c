"""mixprec.train(**config): the CLI's run from Python, the same losses as the CLI's."""
import json
import pathlib
import subprocess

import pytest

import mixprec
from helpers import cli_env, cli_path

SETTINGS = dict(model="cnn", precision="amp-bf16", epochs=1, batch_size=64, train_subset=256,
                test_subset=256, seed=3, threads=2, self_check=False)


def test_train_writes_a_run_and_reports_it(tmp_path):
    steps = []
    summary = mixprec.train(SETTINGS, run_dir=str(tmp_path / "run"), on_step=steps.append)
    assert summary["steps"] == 4 and len(summary["losses"]) == 4
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert [s["loss"] for s in steps] == summary["losses"]
    assert summary["precision"] == "amp-bf16" and summary["final_scale"] == 1.0  # bf16: no scaler
    assert 0.0 <= summary["final_accuracy"] <= 1.0 and len(summary["evals"]) == 1
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["model"] == "cnn" and saved["batch_size"] == 64
    assert pathlib.Path(summary["last_checkpoint"]).exists()


def test_losses_are_the_clis(tmp_path):
    ours = mixprec.train(SETTINGS)["losses"]
    flags = []
    for key, value in SETTINGS.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags += [] if value else ["--no-" + key.replace("_", "-")]
        else:
            flags += [flag, str(value)]
    run = tmp_path / "cli"
    subprocess.run([str(cli_path()), "train", *flags, "--run-dir", str(run)], check=True,
                   capture_output=True, env=cli_env())
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    cli = [r["loss"] for r in records if "loss" in r and r.get("type", "step") == "step"]
    assert cli == ours


def test_workers_run_as_the_clis(tmp_path):
    # --workers 2: two threads of this process as data-parallel ranks; on_step comes from rank 0
    # (the calling thread), and the losses are the CLI's --workers 2 run's, bit for bit.
    settings = dict(SETTINGS, threads=1, workers=2)
    steps = []
    ours = mixprec.train(settings, on_step=steps.append)["losses"]
    assert [s["loss"] for s in steps] == ours and len(ours) == 4
    run = tmp_path / "cli"
    subprocess.run([str(cli_path()), "train", "--model", "cnn", "--precision", "amp-bf16", "--epochs", "1",
                    "--batch-size", "64", "--train-subset", "256", "--test-subset", "256", "--seed", "3",
                    "--threads", "1", "--no-self-check", "--workers", "2", "--run-dir", str(run)],
                   check=True, capture_output=True, env=cli_env())
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in records if "loss" in r and r.get("type", "step") == "step"] == ours
    with pytest.raises(ValueError, match="must divide evenly over --workers 3"):
        mixprec.train(dict(SETTINGS, workers=3))


def test_the_default_chooses_workers_beside_busy_processes(tmp_path, monkeypatch):
    # workers=0 (the default) with neither threads nor OMP_NUM_THREADS: beside other processes'
    # load (MIXPREC_THREADS_OTHERS_BUSY stands in for it) the run trains as one worker per
    # usable core with sync_bn, records both, and is the explicit workers=N, sync_bn=True run.
    import os
    cores = len(os.sched_getaffinity(0))
    if not 2 <= cores <= 8:
        pytest.skip(f"workers are chosen on 2 to 8 usable cores, this process has {cores}")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("MIXPREC_THREADS_OTHERS_BUSY", "99")
    monkeypatch.setenv("MIXPREC_CGROUP_ROOT", str(tmp_path / "no-cgroup"))  # no CPU quota
    chosen = mixprec.train(dict(SETTINGS, threads=0), run_dir=str(tmp_path / "run"))
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["workers"] == cores and saved["sync_bn"] is True
    explicit = mixprec.train(dict(SETTINGS, threads=0, workers=cores, sync_bn=True))
    assert chosen["losses"] == explicit["losses"]
    monkeypatch.setenv("MIXPREC_THREADS_OTHERS_BUSY", "0")
    mixprec.train(dict(SETTINGS, threads=0), run_dir=str(tmp_path / "quiet"))
    assert json.loads((tmp_path / "quiet" / "config.json").read_text())["workers"] == 1


def test_errors_name_the_setting():
    with pytest.raises(ValueError, match="did you mean .batch_size."):
        mixprec.train(batch_sise=64)
    with pytest.raises(ValueError, match="precision"):
        mixprec.train(precision="fp8", epochs=1)


def test_an_exception_in_on_step_stops_the_run():
    def fail(step):
        raise KeyError("stop here")
    with pytest.raises(KeyError, match="stop here"):
        mixprec.train(SETTINGS, on_step=fail)


def test_amp_fp16_scales_the_loss():
    summary = mixprec.train(SETTINGS, precision="amp-fp16", init_scale=1024.0)
    assert summary["precision"] == "amp-fp16" and summary["final_scale"] == 1024.0
