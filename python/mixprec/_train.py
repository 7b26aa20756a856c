"""mixprec.train(**config): the CLI's `mixprec train` from Python."""
import difflib

from . import _mixprec as _C


def train(config=None, *, on_step=None, **settings):
    """Runs what `mixprec train` runs and returns its summary (losses per step, evaluations,
    accuracy, skipped steps, final loss scale, the last checkpoint, ...).

    Settings are config.json's keys (`mixprec train --help` lists them with their flags), given
    as a dict, as keyword arguments, or both (keywords win):

        mixprec.train(model="cnn", precision="amp-bf16", epochs=2, run_dir="runs/py")

    A run with run_dir writes what the CLI writes there (config.json, metrics.jsonl,
    checkpoints) and resumes with resume=run_dir. on_step, if given, is called after every
    step with a dict (step, total_steps, epoch, loss, lr, scale, skipped, images_per_second);
    an exception it raises stops the run and is raised here. Ctrl-C stops the run as the CLI
    does (with a checkpoint when there is a run directory) and raises KeyboardInterrupt.
    """
    merged = dict(config or {})
    merged.update(settings)
    keys = _C._train_keys()
    for key in merged:
        if key not in keys:
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"mixprec.train(): unknown setting '{key}'{hint}; the settings are "
                             f"config.json's keys, as `mixprec train --help` lists them")
    return _C._train(merged, on_step)
