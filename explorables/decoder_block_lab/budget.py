"""What one configuration of the lab costs the server, estimated before anything is computed.

A change of the lab's sizes recomputes two things (state.py): the block's trace, twice (the clean
input and the corrupted one, plus SwiGLU's split check), at width d; and the depth panel's four
stacks of `blocks` blocks, forward and backward, at width min(d, DEPTH_MAX_D). Their work is counted
in multiply-adds:

    one block on n = B·T rows = n·(4d² + m·d·d_mlp) + 2·B·T²·d     (m = 2 for GELU, 3 for SwiGLU)
    a change                  = 2 blocks at d  +  4 · blocks · 3 blocks at min(d, 64)  (backward ≈ 2 forwards)
                                + BLOCK_OVERHEAD per block the depth panel runs (NumPy's per-call cost,
                                  which is all there is at the lesson's d = 8)

and memory in float64 numbers: the weights of the block at d and of the 48-block depth stack (both
kept while the session lives), plus the traces' intermediates.

The budget (MAX_WORK, MAX_FLOATS) lets every configuration a lesson asks for run (the lessons' largest
is d = 512 with GELU at B = 1, T = 4, 48 blocks: about 0.34 G multiply-adds and 5.5 M numbers) and
refuses the ones that made one session cost seconds, such as B = 4, T = 8, d = 512, expansion 8, GELU,
48 blocks (2.0 G multiply-adds, 9.2 M numbers). benchmarks/get_flood.py prints what a change at the
edge of the budget takes on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEPTH_MAX_D", "DEPTH_STACK", "MAX_FLOATS", "Cost", "cost"]

DEPTH_MAX_D = 64  # the depth panel's width: wider stacks of 48 blocks take seconds
DEPTH_STACK = 48  # blocks whose weights the depth panel keeps (its curves extend, never redraw)
VARIANTS = 4  # (pre, post) x (add, replace): the depth panel draws all four
BLOCK_OVERHEAD = 1_000_000  # multiply-add equivalent of one block's forward and backward calls at tiny width
MAX_WORK = 400_000_000  # multiply-adds (with overhead) of one change
MAX_FLOATS = 9_000_000  # float64 numbers one configuration holds: 72 MB


@dataclass(frozen=True)
class Cost:
    work: int  # multiply-adds of one change, BLOCK_OVERHEAD included
    floats: int  # numbers held for this configuration

    @property
    def megabytes(self) -> float:
        return self.floats * 8 / 1e6

    def within(self) -> bool:
        return self.work <= MAX_WORK and self.floats <= MAX_FLOATS

    def refusal(self) -> str:
        """Why this configuration is refused, in the words shown next to the controls ('' if it is not)."""
        if self.within():
            return ""
        over = []
        if self.work > MAX_WORK:
            over.append(f"{self.work / 1e9:.2f} billion multiply-adds per change (the limit is "
                        f"{MAX_WORK / 1e9:.2f})")
        if self.floats > MAX_FLOATS:
            over.append(f"{self.megabytes:.0f} MB of weights and activations (the limit is "
                        f"{MAX_FLOATS * 8 / 1e6:.0f} MB)")
        return ("These sizes would cost the class server " + " and ".join(over) +
                ". Try a smaller B, T, d, expansion or number of blocks.")


def mlp_width(d: int, expansion: int, mlp: str) -> int:
    """d_mlp as the lab builds it: SwiGLU splits e·d into gate and value, GELU keeps all of it."""
    return expansion * d // 2 if mlp == "swiglu" else expansion * d


def block_weights(d: int, d_mlp: int, mlp: str) -> int:
    """Numbers in one block's weights: four d x d attention matrices and the MLP's two or three."""
    return 4 * d * d + (3 if mlp == "swiglu" else 2) * d * d_mlp + 4 * d  # + norm gains and biases


def block_work(B: int, T: int, d: int, d_mlp: int, mlp: str) -> int:
    """Multiply-adds of one block's forward pass on B·T rows."""
    matrices = 3 if mlp == "swiglu" else 2
    return B * T * (4 * d * d + matrices * d * d_mlp) + 2 * B * T * T * d


def block_activations(B: int, T: int, d: int, d_mlp: int, heads: int) -> int:
    """Numbers in one block's trace: a dozen [B, T, d] tensors, three [B, T, d_mlp], two score tensors."""
    return B * T * (12 * d + 3 * d_mlp) + 2 * B * heads * T * T


def cost(B: int, T: int, d: int, heads: int, expansion: int, mlp: str, blocks: int) -> Cost:
    """The estimated work of one change to these sizes, and the memory they hold."""
    d_mlp = mlp_width(d, expansion, mlp)
    depth_d = min(d, DEPTH_MAX_D)
    depth_mlp = mlp_width(depth_d, expansion, mlp)
    trace = 2 * block_work(B, T, d, d_mlp, mlp)
    if mlp == "swiglu":  # the split check runs the MLP once more
        trace += B * T * 3 * d * d_mlp
    depth = VARIANTS * blocks * (3 * block_work(B, T, depth_d, depth_mlp, mlp) + BLOCK_OVERHEAD)
    floats = (block_weights(d, d_mlp, mlp) + DEPTH_STACK * block_weights(depth_d, depth_mlp, mlp)
              + 2 * block_activations(B, T, d, d_mlp, heads)
              + 3 * blocks * block_activations(B, T, depth_d, depth_mlp, heads))  # one stack's, while it runs
    return Cost(work=trace + depth, floats=floats)
