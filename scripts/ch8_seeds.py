"""Chapter 8's study of seeds: when does each training run have its phase change?

Usage (from the repository's root; about 5 CPU-minutes, on one core)::

    .venv/bin/python scripts/ch8_seeds.py            # print the table the chapter holds
    .venv/bin/python scripts/ch8_seeds.py --check    # ... and compare it with the chapter's
    .venv/bin/python scripts/ch8_seeds.py --perturb 1e-12   # ... with perturbed initial weights

It trains chapter 8's model (vocabulary 48, length 24, d_model 24, three heads per layer,
Adam with learning rate 1e-2 on fresh batches of 32 sequences) with
:func:`helpers.circuits.train_attention_only`, exactly as the chapter does, for
``STUDY_STEPS`` steps: with two layers from the initial seeds ``0, ..., TWO_LAYER_SEEDS -
1`` and with one layer from the initial seeds ``0, ..., ONE_LAYER_SEEDS - 1``. Seed ``s``
initialises the weights with ``numpy.random.default_rng(s)`` and draws the training
batches from ``numpy.random.default_rng(data_seed(s))``: seed 0 is the chapter's own run
(data seed 1), every other seed ``s`` uses data seed ``100 + s``. Every 25 steps it
evaluates the in-context loss on the chapter's evaluation batch, and records the first
step at which it is below half of ``log |V|`` (:func:`helpers.circuits.phase_change_step`):
the run's phase change, at the resolution of the evaluations.

It prints the table as the Python literal of the chapter's cell. ``--check`` compares it
with the literal in ``notebooks/08_induction_heads.ipynb`` and exits 1 if they differ.
``--perturb EPS`` adds ``EPS`` times standard normal noise (its own generator) to every
initial weight before training: the stored steps must not depend on the last bits of a
rounding (different processors round differently), so ``--perturb 1e-12 --check`` must
pass too.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

import nbformat
import numpy as np

from helpers.circuits import (
    init_attention_only_params,
    phase_change_step,
    repeated_token_batch,
    train_attention_only,
)

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "notebooks" / "08_induction_heads.ipynb"

# The chapter's task and model (its first code cells)
VOCAB, LENGTH, MIN_P, MAX_P = 48, 24, 3, 11
D_MODEL, HEADS = 24, 3
STUDY_STEPS = 2400
TWO_LAYER_SEEDS = 12
ONE_LAYER_SEEDS = 3
# The names the chapter's cell gives the table, in the order it lists them
NAMES = ("STUDY_STEPS", "TWO_LAYER_PHASE", "ONE_LAYER_PHASE")


def data_seed(seed: int) -> int:
    """The seed of the training batches of initial seed ``seed`` (0: the chapter's run)."""
    return 1 if seed == 0 else 100 + seed


def evaluation_batch() -> tuple[np.ndarray, np.ndarray]:
    """The chapter's fixed evaluation batch: 128 sequences from seed 2."""
    return repeated_token_batch(
        128, LENGTH, VOCAB, rng=np.random.default_rng(2), min_period=MIN_P, max_period=MAX_P
    )


def run(seed: int, layers: int, steps: int = STUDY_STEPS, perturb: float = 0.0) -> dict:
    """Train one run; return its history (see helpers.circuits.train_attention_only)."""
    params = init_attention_only_params(
        VOCAB, D_MODEL, HEADS, layers, LENGTH, rng=np.random.default_rng(seed)
    )
    if perturb:
        noise = np.random.default_rng(10_000 + seed)
        for w in params.values():
            w += perturb * noise.standard_normal(w.shape)
    e_tokens, e_pred = evaluation_batch()
    return train_attention_only(
        params,
        num_heads=HEADS,
        steps=steps,
        rng=np.random.default_rng(data_seed(seed)),
        eval_tokens=e_tokens,
        eval_predictable=e_pred,
        min_period=MIN_P,
        max_period=MAX_P,
    )


def phase_of(history: dict) -> int | None:
    return phase_change_step(history["step"], history["in_context"], np.log(VOCAB) / 2)


def study(
    steps: int = STUDY_STEPS,
    two: int = TWO_LAYER_SEEDS,
    one: int = ONE_LAYER_SEEDS,
    perturb: float = 0.0,
    log=None,
) -> dict:
    """The table: ``{"STUDY_STEPS": steps, "TWO_LAYER_PHASE": [step or None, ...], ...}``,
    one entry per initial seed 0, 1, 2, ..."""
    table: dict = {"STUDY_STEPS": steps, "TWO_LAYER_PHASE": [], "ONE_LAYER_PHASE": []}
    for layers, count, key in ((2, two, "TWO_LAYER_PHASE"), (1, one, "ONE_LAYER_PHASE")):
        for seed in range(count):
            start = time.perf_counter()
            history = run(seed, layers, steps, perturb)
            step = phase_of(history)
            table[key].append(step)
            if log:
                k = int(np.flatnonzero(history["step"] == step)[0]) if step is not None else -1
                margin = (
                    f" (in-context loss {history['in_context'][k - 1]:.3f} at step "
                    f"{history['step'][k - 1]}, {history['in_context'][k]:.3f} at {step})"
                    if k > 0
                    else ""
                )
                log(
                    f"{layers} layer(s), seed {seed}: phase change at {step}{margin}; "
                    f"in-context loss {history['in_context'][-1]:.3f} at step {steps} "
                    f"({time.perf_counter() - start:.0f} s)"
                )
    return table


def as_source(table: dict) -> str:
    """The table as the lines of the chapter's cell."""
    return "\n".join(f"{key} = {table[key]!r}" for key in NAMES)


def read_chapter(path: Path = CHAPTER) -> dict:
    """The table as the chapter's cell writes it (the assignments of NAMES in one cell)."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or "TWO_LAYER_PHASE = [" not in cell.source:
            continue
        found = {}
        for node in ast.parse(cell.source).body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in NAMES
            ):
                found[node.targets[0].id] = ast.literal_eval(node.value)
        missing = set(NAMES) - set(found)
        if missing:
            raise ValueError(f"{path.name}: the study's cell does not assign {sorted(missing)}")
        return found
    raise ValueError(f"{path.name} has no cell that assigns TWO_LAYER_PHASE")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the chapter's table")
    parser.add_argument("--perturb", type=float, default=0.0, help="noise on the initial weights")
    parser.add_argument("--steps", type=int, default=STUDY_STEPS)
    parser.add_argument("--two", type=int, default=TWO_LAYER_SEEDS, help="two-layer seeds")
    parser.add_argument("--one", type=int, default=ONE_LAYER_SEEDS, help="one-layer seeds")
    args = parser.parse_args(argv)
    table = study(args.steps, args.two, args.one, args.perturb, log=print)
    print()
    print(as_source(table))
    if args.check:
        chapter = read_chapter()
        if chapter != table:
            print(f"\nthe chapter's table differs:\n{as_source(chapter)}")
            return 1
        print("\nthe chapter's table is the same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
