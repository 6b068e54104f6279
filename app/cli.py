"""The `blocktrace` command: `trace` prints a block's intermediates, `serve` runs the classroom app, `check`
runs a downloaded exercise's tests and reports them, `warm` computes the lesson's races ahead of class."""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections.abc import Sequence

__all__ = ["main"]

# A student's laptop may have blocktrace (installed from the teacher's server without dependencies) but no NumPy.
NO_NUMPY = ("error: blocktrace needs NumPy, and this Python does not have it. With the internet, install it with\n"
            "    python -m pip install numpy\n"
            "In a classroom without the internet, ask your teacher, or do the exercise on the lesson page instead "
            "(it needs no Python).\n")
# What `serve` and `lti` import first, which such a laptop's blocktrace has none of.
SERVER_MODULES = {"serve": ("panel", "sqlalchemy", "pylti1p3"), "lti": ("pylti1p3", "jwcrypto"), "warm": ("panel",)}


def installed_version() -> str:
    """The installed distribution's version (pyproject.toml's, as pip recorded it)."""
    from blocktrace.app.tuning import installed

    return installed("blocktrace") or "unknown (not installed)"  # a checkout that was never installed


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage problem as one `error: …` line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


def _finite(text: str) -> float:
    try:
        value = float(text.replace("\u2212", "-"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _on_off(text: str) -> bool:
    if text.lower() in ("on", "true", "yes", "1"):
        return True
    if text.lower() in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    from blocktrace.explorables.engine import PRESETS  # NumPy: after main() has looked for it

    parser = _Parser(prog="blocktrace", description="Trace what happens inside a Transformer block.")
    parser.add_argument("--version", action="version", version=f"blocktrace {installed_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    t = sub.add_parser("trace", help="print every intermediate of one forward pass",
                       description="Print every intermediate of one forward pass, stage by stage.")
    t.add_argument("--preset", default="single-token", choices=list(PRESETS),
                   help="starting point (default: single-token)")
    source = t.add_mutually_exclusive_group()
    source.add_argument("--input", metavar='"v1, v2, …"', help="one token vector (positions off unless asked)")
    source.add_argument("--tokens", metavar='"words …"', help="a phrase; each word gets a fixed embedding")
    t.add_argument("--reverse", action="store_true", help="reverse the phrase before tracing")
    t.add_argument("--attention-scale", type=_finite, metavar="S", help="multiply the attention update by S")
    t.add_argument("--mlp-scale", type=_finite, metavar="S", help="multiply the MLP update by S")
    t.add_argument("--residual", choices=["add", "replace"], help="add updates (correct) or replace (broken)")
    t.add_argument("--norm", choices=["rmsnorm", "layernorm"])
    t.add_argument("--placement", choices=["pre", "post"])
    t.add_argument("--mlp", choices=["swiglu", "gelu", "relu"])
    t.add_argument("--positions", type=_on_off, metavar="on|off")
    t.add_argument("--causal", type=_on_off, metavar="on|off")
    t.add_argument("--layers", type=int, metavar="N", help="blocks to stack")
    t.add_argument("--heads", type=int, metavar="H", help="attention heads (must divide the width)")
    t.add_argument("--d-model", type=int, metavar="D", help="width of the residual stream")
    t.add_argument("--d-mlp", type=int, metavar="M", help="MLP hidden width")
    t.add_argument("--eps", type=_finite, metavar="E", help="added inside the norms' square roots")
    t.add_argument("--seed", type=int, metavar="N", help="seed for parameters and word embeddings")
    out = t.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the JSON export (same as --format json)")
    out.add_argument("--format", choices=["table", "csv", "json"], default="table")
    t.add_argument("--detail", action="store_true", help="also show queries, keys, values and scores in the table")

    c = sub.add_parser("check", help="run an exercise's tests here and send the result to your teacher",
                       description="Run the tests of an exercise downloaded from a lesson page (no pytest "
                                   "needed) and send the result to the teacher's server.")
    c.add_argument("folder", nargs="?", default=".", help="the unzipped exercise folder (default: this one)")

    from blocktrace.app.serve import add_serve_arguments  # the server's flags live beside the server

    s = sub.add_parser("serve", help="serve the explorables and lessons",
                       description="Serve the explorables and lessons to a browser or a classroom.")
    add_serve_arguments(s)

    from blocktrace.app.lti.command import add_lti_arguments
    from blocktrace.app.serve import DATA_DIR_NAME

    lti = sub.add_parser("lti", help="register blocktrace with a school's LMS (LTI 1.3)",
                         description="Register LMS platforms, print what an LMS admin pastes, rotate the key.")
    add_lti_arguments(lti, DATA_DIR_NAME)

    from blocktrace.app.warm_command import add_warm_arguments

    w = sub.add_parser("warm", help="compute the lesson's races ahead of class, so each is instant",
                       description="Compute the train-the-block lesson's races and keep them in the data folder: "
                                   "the first student to play each gets it at once. Races already kept are quick.")
    add_warm_arguments(w, DATA_DIR_NAME)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if importlib.util.find_spec("numpy") is None:
        sys.stderr.write(NO_NUMPY)
        return 2
    args = build_parser().parse_args(argv)
    missing = [name for name in SERVER_MODULES.get(args.command, ()) if importlib.util.find_spec(name) is None]
    if missing:
        sys.stderr.write(f"error: `blocktrace {args.command}` needs {', '.join(missing)}, which this Python does not "
                         "have: this blocktrace was installed without its dependencies, for `blocktrace check` only. "
                         "Install blocktrace with its dependencies to run the server (see its README).\n")
        return 2
    if args.command == "trace":
        from blocktrace.app.trace_command import run_trace
        from blocktrace.explorables.engine import ConfigError

        try:
            sys.stdout.write(run_trace(args))
        except ConfigError as err:
            sys.stderr.write(f"error: {err}\n")
            return 2
        return 0
    if args.command == "check":
        from blocktrace.app.exercises.check_command import run_check

        return run_check(args.folder)
    if args.command == "lti":
        from blocktrace.app.lti.command import run_lti
        from blocktrace.app.serve import DATA_DIR_NAME

        return run_lti(args, DATA_DIR_NAME)
    if args.command == "warm":
        from blocktrace.app.serve import DATA_DIR_NAME
        from blocktrace.app.warm_command import run_warm

        return run_warm(args, DATA_DIR_NAME)
    from blocktrace.app.serve import run_serve

    return run_serve(args)


if __name__ == "__main__":
    raise SystemExit(main())
