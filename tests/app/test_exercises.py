"""The lessons' exercises: their tests fail on the starter code, naming each mistake, and pass on the reference.

Each exercise's tests run in a subprocess exactly as a student runs them (python -m pytest <folder>), with
BLOCKTRACE_SOLUTION pointing at another implementation where the test says so.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "tests" / "exercise_solutions"
ENV_VAR = "BLOCKTRACE_SOLUTION"

RESIDUAL = "lessons/transformer-block/exercise"
DECODER = "lessons/decoder-block/exercise"
TRAINING = "lessons/train-the-block/exercise"

MEAN_CENTRING = "your RMSNorm subtracts the mean"
IDENTITY_LOST = "the identity path is lost"
CENTRING_TESTS = {"test_constant_vector_survives", "test_vector_with_a_mean_matches_the_formula"}
REPLACEMENT_TESTS = {"test_zero_update_returns_the_input", "test_update_is_added_to_the_untouched_input",
                     "test_a_sequence_keeps_its_shape"}
DECODER_FUNCTIONS = ("rms_norm", "swiglu", "swiglu_param_count", "layer_norm", "gelu_mlp")
TRAINING_FUNCTIONS = ("warmup_lr", "clip_by_global_norm", "adam_step")


def run_exercise(folder: str, implementation: Path | None = None) -> subprocess.CompletedProcess:
    """The exercise's tests, run the way its README says, against the student file or `implementation`."""
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave no __pycache__ in the student's folder
    if implementation is not None:
        env[ENV_VAR] = str(implementation)
    return subprocess.run(
        [sys.executable, "-m", "pytest", folder, "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )


def failed_tests(result: subprocess.CompletedProcess) -> set[str]:
    return set(re.findall(r"^FAILED \S+::(\w+)", result.stdout, flags=re.MULTILINE))


def passed_count(result: subprocess.CompletedProcess) -> int:
    match = re.search(r"(\d+) passed", result.stdout)
    return int(match.group(1)) if match else 0


def loader_header(path: Path, name: str) -> str:
    """Source lines that load a module from a file path under `name`."""
    return (
        "import importlib.util\n"
        f"_spec = importlib.util.spec_from_file_location({name!r}, {str(path)!r})\n"
        f"{name} = importlib.util.module_from_spec(_spec)\n"
        f"_spec.loader.exec_module({name})\n"
    )


@pytest.fixture(scope="module")
def residual_starter() -> subprocess.CompletedProcess:
    return run_exercise(RESIDUAL)


@pytest.fixture(scope="module")
def decoder_starter() -> subprocess.CompletedProcess:
    return run_exercise(DECODER)


@pytest.fixture(scope="module")
def training_starter() -> subprocess.CompletedProcess:
    return run_exercise(TRAINING)


# --- transformer-block: RMSNorm and a residual sublayer ---------------------------------------------

def test_residual_starter_fails_and_names_both_mistakes(residual_starter):
    """On the starter code the tests fail, and the output names mean-centring and the lost identity path."""
    out = residual_starter.stdout
    assert residual_starter.returncode == 1, out + residual_starter.stderr
    assert MEAN_CENTRING in out
    assert IDENTITY_LOST in out
    assert failed_tests(residual_starter) == CENTRING_TESTS | REPLACEMENT_TESTS


def test_residual_starter_passes_the_checks_it_gets_right(residual_starter):
    """The starter's gain, eps, row-wise normalisation and pre-norm reading are right, so those tests pass."""
    assert passed_count(residual_starter) == 7, residual_starter.stdout


@pytest.mark.parametrize(("fixed", "still_failing", "named", "not_named"), [
    ("rms_norm", REPLACEMENT_TESTS, IDENTITY_LOST, MEAN_CENTRING),
    ("residual_sublayer", CENTRING_TESTS, MEAN_CENTRING, IDENTITY_LOST),
])
def test_each_residual_mistake_is_exposed_on_its_own(tmp_path, fixed, still_failing, named, not_named):
    """Fixing one of the two mistakes leaves exactly the tests (and the message) of the other."""
    starter = ROOT / RESIDUAL / "residual.py"
    reference = SOLUTIONS / "transformer_block.py"
    module = tmp_path / "half_fixed.py"
    if fixed == "rms_norm":  # the starter's residual_sublayer, calling the correct rms_norm
        body = "_starter.rms_norm = _reference.rms_norm\nrms_norm = _reference.rms_norm\n"
    else:  # the correct residual_sublayer, calling the starter's mean-centring rms_norm
        body = "_reference.rms_norm = _starter.rms_norm\nrms_norm = _starter.rms_norm\n"
    owner = "_starter" if fixed == "rms_norm" else "_reference"
    module.write_text(loader_header(starter, "_starter") + loader_header(reference, "_reference") + body
                      + f"residual_sublayer = {owner}.residual_sublayer\n", encoding="utf-8")
    result = run_exercise(RESIDUAL, module)
    assert failed_tests(result) == still_failing, result.stdout
    assert named in result.stdout
    assert not_named not in result.stdout


IN_PLACE = "residual_sublayer changed its input x in place"
IN_PLACE_TESTS = {"test_update_is_added_to_the_untouched_input", "test_residual_sublayer_leaves_its_input_alone",
                  "test_a_sequence_keeps_its_shape"}


def test_an_in_place_addition_is_named_and_misleads_no_other_test(tmp_path):
    """`x += update` changes the caller's x: each test that sees it says so, and no test's expectation moves."""
    module = tmp_path / "in_place.py"
    module.write_text(
        loader_header(SOLUTIONS / "transformer_block.py", "_reference")
        + "rms_norm = _reference.rms_norm\n"
        "def residual_sublayer(x, transform, gain, eps=1e-6):\n"
        "    x += transform(rms_norm(x, gain, eps))\n"
        "    return x\n",
        encoding="utf-8",
    )
    result = run_exercise(RESIDUAL, module)
    assert failed_tests(result) == IN_PLACE_TESTS, result.stdout
    assert result.stdout.count(IN_PLACE) >= len(IN_PLACE_TESTS), result.stdout
    assert "must return x + update" not in result.stdout


def test_residual_reference_solution_passes():
    """With BLOCKTRACE_SOLUTION at the reference solution, every test of the exercise passes."""
    result = run_exercise(RESIDUAL, SOLUTIONS / "transformer_block.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert passed_count(result) == 12


# --- decoder-block: norms and MLPs from scratch -------------------------------------------------------

def test_decoder_starter_fails_naming_each_function(decoder_starter):
    """Every function of the starter is still to write, and the output says so function by function."""
    out = decoder_starter.stdout
    assert decoder_starter.returncode == 1, out + decoder_starter.stderr
    for name in DECODER_FUNCTIONS:
        assert f"{name} is not written yet" in out
    assert passed_count(decoder_starter) == 0


MUTANTS = {
    "gate and value swapped": (
        "def swiglu(x, W, W_out):\n"
        "    value, gate = np.split(x @ W, 2, axis=-1)\n"
        "    return (gate * 0.5 * (1.0 + np.tanh(0.5 * gate)) * value) @ W_out\n",
        "gate and value are swapped",
        {"test_swiglu_matches_the_engine", "test_rmsnorm_swiglu_block_matches_the_engine"},
    ),
    "exact GELU": (
        "import math\n"
        "def gelu_mlp(x, W_in, b_in, W_out, b_out):\n"
        "    z = x @ W_in + b_in\n"
        "    return (z * 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))) @ W_out + b_out\n",
        "exact (erf) GELU", {"test_gelu_mlp_matches_the_engine", "test_layernorm_gelu_block_matches_the_engine"},
    ),
    "RMSNorm without eps": (
        "def rms_norm(x, gain, eps=1e-6):\n"
        "    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) * gain\n",
        "RMSNorm without eps divides by zero",
        {"test_rms_norm_of_a_zero_vector_is_finite", "test_rms_norm_matches_the_engine",
         "test_rmsnorm_swiglu_block_matches_the_engine"},
    ),
    "RMSNorm that centres": (
        "def rms_norm(x, gain, eps=1e-6):\n"
        "    return _reference.layer_norm(x, gain, 0.0 * gain, eps)\n",
        "subtracts the mean", {"test_rms_norm_matches_the_engine", "test_rms_norm_keeps_a_constant_vector",
                               "test_rmsnorm_swiglu_block_matches_the_engine"},
    ),
    "wrong parameter count": (
        "def swiglu_param_count(d):\n"
        "    return 8 * d * d\n",
        "count W [d, 4d] and W_out [2d, d]", {"test_swiglu_param_count"},
    ),
}


def run_with_mistake(tmp_path, exercise, solution: str, functions, code: str):
    """The exercise's tests against its reference solution with `code` (one planted mistake) in place of one of its
    functions."""
    module = tmp_path / "mutant.py"
    module.write_text(
        "import numpy as np\n" + loader_header(SOLUTIONS / solution, "_reference")
        + "".join(f"{name} = _reference.{name}\n" for name in functions) + code, encoding="utf-8")
    return run_exercise(exercise, module)


@pytest.mark.parametrize("mistake", list(MUTANTS))
def test_decoder_mistakes_are_named(tmp_path, mistake):
    """One planted mistake in an otherwise correct solution fails only its own tests, with a message naming it."""
    code, message, failing = MUTANTS[mistake]
    result = run_with_mistake(tmp_path, DECODER, "decoder_block.py", DECODER_FUNCTIONS, code)
    assert failed_tests(result) == failing, result.stdout
    assert message in result.stdout


def test_decoder_reference_solution_passes():
    """With BLOCKTRACE_SOLUTION at the reference solution, every test of the exercise passes."""
    result = run_exercise(DECODER, SOLUTIONS / "decoder_block.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert passed_count(result) == 11


# --- train-the-block: warm-up, clipping and Adam by hand ------------------------------------------------

def test_training_starter_fails_naming_each_function(training_starter):
    """Every function of the starter is still to write, and the output says so function by function."""
    out = training_starter.stdout
    assert training_starter.returncode == 1, out + training_starter.stderr
    for name in TRAINING_FUNCTIONS:
        assert f"{name} is not written yet" in out
    assert passed_count(training_starter) == 0


TRAINING_MUTANTS = {
    "warm-up from zero": (
        "def warmup_lr(base_lr, step, warmup_steps):\n"
        "    return base_lr * min(1.0, step / warmup_steps) if warmup_steps else base_lr\n",
        "so the factor is (step + 1) / warmup_steps",
        {"test_warmup_rises_linearly_to_the_base_rate", "test_warmup_reaches_the_full_rate_and_stays",
         "test_three_updates_of_a_race_match_the_engine"},
    ),
    "no warm-up divides by zero": (
        "def warmup_lr(base_lr, step, warmup_steps):\n"
        "    return base_lr * min(1.0, (step + 1) / warmup_steps)\n",
        "warmup_steps 0 means no warm-up", {"test_no_warmup_means_the_full_rate_from_step_0"},
    ),
    "each array clipped on its own": (
        "def clip_by_global_norm(grads, max_norm):\n"
        "    norm = _reference.clip_by_global_norm(grads, max_norm)[1]\n"
        "    return {k: g * min(1.0, max_norm / (np.linalg.norm(g) + 1e-6)) for k, g in grads.items()}, norm\n",
        "you clipped each array by its own norm",
        {"test_clip_matches_the_engine", "test_three_updates_of_a_race_match_the_engine"},
    ),
    "small gradients scaled up": (
        "def clip_by_global_norm(grads, max_norm):\n"
        "    norm = _reference.clip_by_global_norm(grads, max_norm)[1]\n"
        "    return {k: g * (max_norm / (norm + 1e-6)) for k, g in grads.items()}, norm\n",
        "never more than 1", {"test_clip_never_scales_a_small_gradient_up"},
    ),
    "clipping in place": (
        "def clip_by_global_norm(grads, max_norm):\n"
        "    clipped, norm = _reference.clip_by_global_norm(grads, max_norm)\n"
        "    for k in grads:\n"
        "        grads[k][...] = clipped[k]\n"
        "    return grads, norm\n",
        "clip_by_global_norm changed the gradient", {"test_clip_leaves_its_input_alone"},
    ),
    "Adam without bias correction": (
        "def adam_step(param, grad, m, v, t, lr, beta1=0.9, beta2=0.999, eps=1e-8):\n"
        "    m = beta1 * m + (1 - beta1) * grad\n"
        "    v = beta2 * v + (1 - beta2) * grad * grad\n"
        "    return param - lr * m / (np.sqrt(v) + eps), m, v\n",
        "without bias correction the first step is",
        {"test_first_adam_step_moves_every_weight_by_about_lr", "test_adam_matches_the_engine_over_five_steps",
         "test_adam_adds_eps_outside_the_root", "test_three_updates_of_a_race_match_the_engine"},
    ),
    "eps inside the root": (
        "def adam_step(param, grad, m, v, t, lr, beta1=0.9, beta2=0.999, eps=1e-8):\n"
        "    m = beta1 * m + (1 - beta1) * grad\n"
        "    v = beta2 * v + (1 - beta2) * grad * grad\n"
        "    return param - lr * (m / (1 - beta1**t)) / np.sqrt(v / (1 - beta2**t) + eps), m, v\n",
        "eps goes outside the square root",
        {"test_adam_matches_the_engine_over_five_steps", "test_adam_adds_eps_outside_the_root",
         "test_three_updates_of_a_race_match_the_engine"},
    ),
    "Adam in place": (
        "def adam_step(param, grad, m, v, t, lr, beta1=0.9, beta2=0.999, eps=1e-8):\n"
        "    new, m2, v2 = _reference.adam_step(param, grad, m, v, t, lr, beta1, beta2, eps)\n"
        "    m[...], v[...] = m2, v2\n"
        "    return new, m, v\n",
        "adam_step changed the m it was given in place", {"test_adam_leaves_its_inputs_alone"},
    ),
}


@pytest.mark.parametrize("mistake", list(TRAINING_MUTANTS))
def test_training_mistakes_are_named(tmp_path, mistake):
    """One planted mistake in an otherwise correct solution fails only its own tests, with a message naming it."""
    code, message, failing = TRAINING_MUTANTS[mistake]
    result = run_with_mistake(tmp_path, TRAINING, "train_the_block.py", TRAINING_FUNCTIONS, code)
    assert failed_tests(result) == failing, result.stdout
    assert message in result.stdout


def test_training_reference_solution_passes():
    """With BLOCKTRACE_SOLUTION at the reference solution, every test of the exercise passes."""
    result = run_exercise(TRAINING, SOLUTIONS / "train_the_block.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert passed_count(result) == 11


# --- the folders ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("folder", "student_file"), [(RESIDUAL, "residual.py"), (DECODER, "decoder.py"),
                                                     (TRAINING, "optimiser.py")])
def test_exercise_folder_holds_what_a_student_needs(folder, student_file):
    """Starter file, tests, conftest and a README giving the one command; no reference solution inside."""
    path = ROOT / folder
    names = {p.name for p in path.iterdir() if p.is_file()}
    assert {student_file, "conftest.py", "README.md"} <= names
    assert any(n.startswith("test_") and n.endswith(".py") for n in names)
    assert "blocktrace check" in (path / "README.md").read_text(encoding="utf-8")
    for reference in SOLUTIONS.glob("*.py"):
        assert reference.read_text(encoding="utf-8") not in {(path / n).read_text(encoding="utf-8") for n in names}


def test_main_suite_does_not_collect_the_exercises():
    """pyproject's testpaths stays ["tests"]: the starter's failing tests are never part of the main suite."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^testpaths = \["tests"\]$', text, flags=re.MULTILINE)
