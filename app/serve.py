"""`blocktrace serve`: placeholder until the server lands."""

from __future__ import annotations

import argparse


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=5006)
    parser.add_argument("--address", default="127.0.0.1")


def run_serve(args: argparse.Namespace) -> int:
    raise SystemExit("error: the server is not built yet")
