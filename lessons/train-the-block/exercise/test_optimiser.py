"""Tests for optimiser.py: the warm-up's rate, clipping by the global norm and one Adam step.

Each function is compared with the project's engine (blocktrace.explorables.engine.optim, which follows
PyTorch's rules), and the last test runs three whole updates of a race beside the engine's. Run, in this folder:

    blocktrace check
"""

from __future__ import annotations

import numpy as np

from blocktrace.explorables.engine.optim import Adam, clip_by_global_norm, warmup_lr

TOL = {"rtol": 1e-9, "atol": 1e-12}
SHAPES = {"attn.W_Q": (16, 16), "mlp.W_gate": (16, 32), "ln1.g": (16,)}  # a few of one floor's weights


def rng(seed: int = 42) -> np.random.Generator:
    return np.random.default_rng(seed)


def gradients(seed: int, size: float) -> dict[str, np.ndarray]:
    """Random gradients for the arrays of SHAPES, each entry of about `size`."""
    r = rng(seed)
    return {name: size * r.normal(size=shape) for name, shape in SHAPES.items()}


def global_norm(grads: dict[str, np.ndarray]) -> float:
    return float(np.sqrt(sum(np.sum(g * g) for g in grads.values())))


# --- warm-up ------------------------------------------------------------------------------------

def test_warmup_rises_linearly_to_the_base_rate(optimiser):
    """With 100 warm-up steps the rate climbs by base_lr / 100 a step, from step 0, then stays at base_lr."""
    got = [optimiser.warmup_lr(0.01, step, 100) for step in range(250)]
    assert got[0] != 0.0, ("step 0 must already take base_lr / warmup_steps: steps count from 0, so the factor is "
                           "(step + 1) / warmup_steps")
    np.testing.assert_allclose(got, [warmup_lr(0.01, step, 100) for step in range(250)], rtol=1e-12,
                               err_msg="warmup_lr differs from the engine's "
                                       "base_lr · min(1, (step + 1) / warmup_steps)")


def test_warmup_reaches_the_full_rate_and_stays(optimiser):
    """The last warm-up step (warmup_steps − 1) takes the full rate, and the rate never goes past it."""
    for step in (199, 200, 5000):
        got = optimiser.warmup_lr(0.003, step, 200)
        assert np.isclose(got, 0.003, rtol=1e-12), (f"at step {step} of a 200-step warm-up the rate is the full "
                                                    f"0.003, got {got}: min(1, (step + 1) / warmup_steps)")


def test_no_warmup_means_the_full_rate_from_step_0(optimiser):
    """warmup_steps 0 switches the warm-up off: base_lr at every step, and no division by zero."""
    try:
        got = [optimiser.warmup_lr(0.01, step, 0) for step in (0, 1, 500)]
    except ZeroDivisionError:
        raise AssertionError("warmup_steps 0 means no warm-up: return base_lr without dividing by it") from None
    assert got == [0.01, 0.01, 0.01], f"with no warm-up every step takes base_lr 0.01, got {got}"


# --- clipping by the global norm ---------------------------------------------------------------------

def test_clip_matches_the_engine(optimiser):
    """Gradients of global norm about 60 come back scaled by one factor to norm 1, with the norm before."""
    grads = gradients(0, 2.0)
    want, want_norm = clip_by_global_norm(grads, 1.0)  # before the call: an in-place change moves no expectation
    own_norms = {k: g * min(1.0, 1.0 / (np.linalg.norm(g) + 1e-6)) for k, g in grads.items()}
    got, norm = optimiser.clip_by_global_norm(grads, 1.0)
    assert np.isclose(norm, want_norm, rtol=1e-12), (
        f"return ‖g‖ before clipping, the 2-norm of every entry of every array together: {want_norm:.6f}, got {norm}")
    assert set(got) == set(grads), f"return the gradients under the names they came with, got {sorted(got)}"
    each_on_its_own = all(np.allclose(got[k], own_norms[k]) for k in grads)
    assert not each_on_its_own, ("you clipped each array by its own norm: scale them all by one factor, from the "
                                 "norm of all of them together (the global norm)")
    for name in grads:
        np.testing.assert_allclose(got[name], want[name], **TOL,
                                   err_msg=f"the clipped {name} differs from the engine's g · min(1, c / (‖g‖ + 1e-6))")


def test_clip_never_scales_a_small_gradient_up(optimiser):
    """Gradients already within max_norm stay exactly as they are: the factor is at most 1."""
    grads = gradients(1, 0.01)
    assert global_norm(grads) < 1.0
    got, _ = optimiser.clip_by_global_norm(grads, 1.0)
    for name, g in gradients(1, 0.01).items():  # drawn again: the same numbers, whatever the call did to its input
        np.testing.assert_allclose(got[name], g, **TOL,
                                   err_msg="a gradient already within max_norm stays as it is: the factor is "
                                           "min(1, max_norm / ‖g‖), never more than 1")


def test_clip_leaves_its_input_alone(optimiser):
    """The gradients given are not changed in place (the engine keeps them for the step's record)."""
    grads = gradients(2, 2.0)
    before = {k: g.copy() for k, g in grads.items()}
    optimiser.clip_by_global_norm(grads, 1.0)
    for name in grads:
        assert np.array_equal(grads[name], before[name]), (
            f"clip_by_global_norm changed the gradient {name} it was given: return new arrays")


# --- Adam ------------------------------------------------------------------------------------------

def test_first_adam_step_moves_every_weight_by_about_lr(optimiser):
    """At t = 1, m̂ = g and v̂ = g², so each weight moves by lr · |g| / (|g| + eps) ≈ lr against its gradient,
    whether the gradient is 0.1 or 1000: the size of the first step is the learning rate itself."""
    r = rng(3)
    param = r.normal(size=(4, 8))
    grad = np.sign(r.normal(size=(4, 8))) * 10.0 ** r.uniform(-1, 3, size=(4, 8))
    zeros = np.zeros_like(param)
    new, _, _ = optimiser.adam_step(param, grad, zeros, zeros, 1, 0.01)
    moved = np.abs(np.asarray(new) - param)
    no_correction = (1 - 0.9) / np.sqrt(1 - 0.999)
    assert not np.isclose(moved.mean() / 0.01, no_correction, rtol=1e-2), (
        "without bias correction the first step is (1 − β1) / √(1 − β2) ≈ 3.16 times lr: divide m by 1 − β1ᵗ and v "
        "by 1 − β2ᵗ")
    assert np.all(np.sign(np.asarray(new) - param) == -np.sign(grad)), "Adam steps against the gradient: θ − lr · …"
    np.testing.assert_allclose(moved, 0.01, rtol=1e-4,
                               err_msg="on its first step (t = 1) Adam moves every weight by about lr, whatever the "
                                       "size of its gradient")


def test_adam_matches_the_engine_over_five_steps(optimiser):
    """Five steps on one array with changing gradients: θ, m and v equal the engine's after every step."""
    r = rng(4)
    engine, theirs = Adam(), {"w": r.normal(size=(6, 5))}
    param, m, v = theirs["w"].copy(), np.zeros((6, 5)), np.zeros((6, 5))
    for t in range(1, 6):
        grad = r.normal(size=(6, 5))
        theirs = engine.step(theirs, {"w": grad}, 0.01)
        param, m, v = optimiser.adam_step(param, grad, m, v, t, 0.01)
        state = engine.state_dict()["w"]
        np.testing.assert_allclose(m, state["exp_avg"], **TOL,
                                   err_msg=f"after step {t}, m differs from the engine's β1 · m + (1 − β1) · g")
        np.testing.assert_allclose(v, state["exp_avg_sq"], **TOL,
                                   err_msg=f"after step {t}, v differs from the engine's β2 · v + (1 − β2) · g²")
        np.testing.assert_allclose(param, theirs["w"], **TOL,
                                   err_msg=f"after step {t}, θ differs from the engine's θ − lr · m̂ / (√v̂ + eps)")


def test_adam_adds_eps_outside_the_root(optimiser):
    """A gradient of 1e-9 on the first step moves its weight by lr · 1e-9 / (1e-9 + 1e-8) = lr / 11."""
    param, grad, zeros = np.zeros(3), np.full(3, 1e-9), np.zeros(3)
    new, _, _ = optimiser.adam_step(param, grad, zeros, zeros, 1, 0.01)
    inside = 0.01 * 1e-9 / np.sqrt(1e-18 + 1e-8)
    assert not np.allclose(-np.asarray(new), inside, rtol=1e-3), (
        "eps goes outside the square root, √v̂ + eps, as in PyTorch and the engine, not √(v̂ + eps)")
    np.testing.assert_allclose(-np.asarray(new), 0.01 / 11, rtol=1e-9,
                               err_msg="with a gradient of 1e-9 the first step is lr · 1e-9 / (1e-9 + 1e-8) = lr / 11")


def test_adam_leaves_its_inputs_alone(optimiser):
    """θ, g, m and v given to adam_step are not changed in place: the caller still holds the old ones."""
    r = rng(5)
    given = {"θ": r.normal(size=(3, 4)), "g": r.normal(size=(3, 4)), "m": 0.1 * r.normal(size=(3, 4)),
             "v": 0.01 * r.uniform(size=(3, 4))}
    before = {k: a.copy() for k, a in given.items()}
    optimiser.adam_step(given["θ"], given["g"], given["m"], given["v"], 3, 0.01)
    for name, array in given.items():
        assert np.array_equal(array, before[name]), (
            f"adam_step changed the {name} it was given in place: return new arrays")


# --- whole updates ------------------------------------------------------------------------------------

def test_three_updates_of_a_race_match_the_engine(optimiser):
    """A race's update three times over: clip at 1, the rate of a 100-step warm-up at steps 0, 1 and 2, then Adam
    on every array; the weights equal the engine's after each update."""
    r = rng(6)
    engine = Adam()
    theirs = {name: r.normal(size=shape) for name, shape in SHAPES.items()}
    mine = {name: p.copy() for name, p in theirs.items()}
    m = {name: np.zeros(shape) for name, shape in SHAPES.items()}
    v = {name: np.zeros(shape) for name, shape in SHAPES.items()}
    for step in range(3):
        grads = gradients(10 + step, 1.0)
        clipped, _ = clip_by_global_norm(grads, 1.0)
        theirs = engine.step(theirs, clipped, warmup_lr(0.01, step, 100))
        my_grads, _ = optimiser.clip_by_global_norm(grads, 1.0)
        lr = optimiser.warmup_lr(0.01, step, 100)
        for name in SHAPES:
            mine[name], m[name], v[name] = optimiser.adam_step(mine[name], my_grads[name], m[name], v[name],
                                                               step + 1, lr)
        for name in SHAPES:
            np.testing.assert_allclose(mine[name], theirs[name], **TOL,
                                       err_msg=f"after update {step + 1}, {name} differs from the engine's: clip, "
                                               "then the warm-up's rate, then Adam with t = step + 1")
