"""Tests for residual.py: RMSNorm and a residual sublayer.

Each test looks for one mistake and its message names it. Run, in this folder:

    blocktrace check
"""

from __future__ import annotations

import numpy as np

EPS = 1e-6
ONES = np.ones(4)
X = np.array([1.5, -0.5, 0.25, 2.0])  # the explorable's default token vector; tests work on copies
X.flags.writeable = False

MEAN_CENTRING = (
    "your RMSNorm subtracts the mean (mean-centring, as LayerNorm does). RMSNorm only divides by the root "
    "mean square, so a constant vector such as [2, 2, 2, 2] must come out as [1, 1, 1, 1], not as zeros."
)
IDENTITY_LOST = (
    "the identity path is lost: residual_sublayer returned the sublayer's update on its own, so the block "
    "replaces x instead of adding to it. Return x + update."
)
IN_PLACE = (
    "residual_sublayer changed its input x in place (for example with x += update): the caller's x is "
    "needed unchanged, so build a new array and return x + update."
)
NORMALISED_STREAM = (
    "the update was added to the normalised view of x: the sublayer reads RMSNorm(x), but the addition "
    "must use the untouched x."
)


def token() -> np.ndarray:
    """A fresh, writable copy of X: one test's mistake cannot change what the next test expects."""
    return X.copy()


def sublayer(block, x: np.ndarray, transform, gain: np.ndarray = ONES) -> np.ndarray:
    """residual_sublayer on x, failing with IN_PLACE first if the call changed x."""
    before = x.copy()
    out = block.residual_sublayer(x, transform, gain, EPS)
    if not np.array_equal(x, before):
        raise AssertionError(f"{IN_PLACE} x was {before} before the call and {x} after it.")
    return out


def zero_update(n: np.ndarray) -> np.ndarray:
    return np.zeros_like(n)


def half_update(n: np.ndarray) -> np.ndarray:
    return 0.5 * n + 0.25


# --- rms_norm ------------------------------------------------------------------------------------

def test_constant_vector_survives(block):
    """A constant non-zero vector exposes mean-centring: RMSNorm keeps it, LayerNorm would zero it."""
    out = block.rms_norm(np.full(4, 2.0), ONES, EPS)
    all_zero = bool(np.allclose(out, 0.0))
    assert not all_zero, f"{MEAN_CENTRING} Got {out}."
    assert np.allclose(out, 1.0, atol=1e-5), f"RMSNorm([2, 2, 2, 2]) with unit gain should be [1, 1, 1, 1]; got {out}."


def test_vector_with_a_mean_matches_the_formula(block):
    """[1, 2, 3, 4] has mean square 7.5, so RMSNorm divides it by √7.5 and keeps every sign."""
    x = np.array([1.0, 2.0, 3.0, 4.0])
    out = block.rms_norm(x, ONES, EPS)
    expected = x / np.sqrt(7.5 + EPS)
    if np.allclose(np.mean(out), 0.0, atol=1e-9):
        raise AssertionError(f"{MEAN_CENTRING} RMSNorm([1, 2, 3, 4]) has mean 0 in your version: {out}.")
    np.testing.assert_allclose(out, expected, rtol=1e-9, err_msg="RMSNorm([1, 2, 3, 4]) should be [1, 2, 3, 4] / √7.5")


def test_rms_is_one_with_unit_gain(block):
    """With unit gain every row comes out with root mean square 1 (up to eps)."""
    x = np.random.default_rng(0).normal(3.0, 2.0, size=(5, 8))
    out = block.rms_norm(x, np.ones(8), EPS)
    rms = np.sqrt(np.mean(out**2, axis=-1))
    np.testing.assert_allclose(rms, 1.0, atol=1e-6,
                               err_msg="with unit gain each row's RMS must be 1: divide by √(mean(x²) + eps)")


def test_each_row_is_normalised_on_its_own(block):
    """Rows are tokens: each is divided by its own RMS (the last axis), not by one number for the whole array."""
    x = np.array([[1.0, -1.0, 1.0, -1.0], [30.0, -30.0, 30.0, -30.0]])
    out = block.rms_norm(x, ONES, EPS)
    np.testing.assert_allclose(out, [[1.0, -1.0, 1.0, -1.0]] * 2, rtol=1e-5,
                               err_msg="normalise over the last axis of each row (axis=-1, keepdims=True)")


def test_gain_multiplies_each_coordinate(block):
    """The learned gain scales coordinate i by gain_i; a negative gain flips that coordinate's sign."""
    gain = np.array([1.0, 2.0, -1.0, 0.5])
    out = block.rms_norm(token(), gain, EPS)
    plain = block.rms_norm(token(), ONES, EPS)
    np.testing.assert_allclose(out, gain * plain, rtol=1e-12,
                               err_msg="the gain must multiply the normalised vector coordinate by coordinate")


def test_eps_keeps_a_zero_vector_finite(block):
    """eps inside the square root keeps a zero vector from dividing by zero."""
    with np.errstate(all="ignore"):
        out = block.rms_norm(np.zeros(4), ONES, EPS)
    assert np.all(np.isfinite(out)), f"add eps inside the square root: RMSNorm of a zero vector gave {out}"
    np.testing.assert_allclose(out, 0.0, atol=1e-12)


def test_rms_norm_leaves_its_input_alone(block):
    """rms_norm returns a new array; the caller's x is not changed."""
    x = token()
    block.rms_norm(x, ONES, EPS)
    np.testing.assert_array_equal(x, X, err_msg="rms_norm changed its input x in place")


# --- residual_sublayer ---------------------------------------------------------------------------

def test_zero_update_returns_the_input(block):
    """A zero update exposes replacement: adding zero keeps x, replacing with zero erases it."""
    out = sublayer(block, token(), zero_update)
    if np.allclose(out, 0.0):
        raise AssertionError(f"{IDENTITY_LOST} With a zero update you returned {out} instead of x = {X}.")
    if np.allclose(out, block.rms_norm(token(), ONES, EPS)):
        raise AssertionError(f"{NORMALISED_STREAM} With a zero update you returned RMSNorm(x) = {out}.")
    np.testing.assert_allclose(out, X, rtol=1e-12, err_msg="a zero update must return x unchanged")


def test_update_is_added_to_the_untouched_input(block):
    """The output is x plus the update computed from the normalised view."""
    update = half_update(block.rms_norm(token(), ONES, EPS))
    out = sublayer(block, token(), half_update)
    if np.allclose(out, update):
        raise AssertionError(f"{IDENTITY_LOST} You returned the update {out}; expected x + update = {X + update}.")
    np.testing.assert_allclose(out, X + update, rtol=1e-12, err_msg="residual_sublayer must return x + update")


def test_transform_reads_the_normalised_view(block):
    """Pre-norm: the sublayer reads RMSNorm(x), with the gain applied, not the raw x."""
    seen = []

    def spy(n: np.ndarray) -> np.ndarray:
        seen.append(n.copy())
        return np.zeros_like(n)

    gain = np.array([1.0, 2.0, 0.5, 1.0])
    sublayer(block, token(), spy, gain)
    assert len(seen) == 1, f"call transform exactly once; it was called {len(seen)} times"
    np.testing.assert_allclose(seen[0], block.rms_norm(token(), gain, EPS), rtol=1e-12,
                               err_msg="transform must receive rms_norm(x, gain, eps), the normalised view")


def test_residual_sublayer_leaves_its_input_alone(block):
    """x is saved for the addition, so the sublayer must not change it in place."""
    x = token()
    block.residual_sublayer(x, half_update, ONES, EPS)
    if not np.array_equal(x, X):
        raise AssertionError(f"{IN_PLACE} x was {X} before the call and {x} after it.")


def test_a_sequence_keeps_its_shape(block):
    """For a [T, d] sequence the output is [T, d], each row its own input plus its own update."""
    x = np.random.default_rng(1).normal(size=(3, 4))

    def mix(n: np.ndarray) -> np.ndarray:  # like attention, the update of a row may read other rows
        return 0.1 * n[::-1]

    out = sublayer(block, x, mix)
    assert out.shape == x.shape, f"the output must keep the input's shape {x.shape}; got {out.shape}"
    if np.allclose(out, mix(block.rms_norm(x, ONES, EPS))):
        raise AssertionError(IDENTITY_LOST)
    np.testing.assert_allclose(out, x + mix(block.rms_norm(x, ONES, EPS)), rtol=1e-12)
