"""`blocktrace serve`: the explorables and lessons for one browser or a whole classroom."""

from __future__ import annotations

import argparse
import logging
import sys


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=5006, help="port to listen on (default 5006)")
    parser.add_argument("--address", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 for a classroom LAN)")
    parser.add_argument("--allow-websocket-origin", action="append", default=[], metavar="HOST[:PORT]",
                        help="a host students' browsers use to reach this server, or a page embedding it; "
                             "repeat for several")
    parser.add_argument("--num-procs", type=int, default=1, metavar="N",
                        help="worker processes sharing the port (default 1)")


def websocket_origins(args: argparse.Namespace) -> list[str]:
    """Origins the server accepts: the local names for its own port, plus any given."""
    origins = [f"localhost:{args.port}", f"127.0.0.1:{args.port}"]
    if args.address not in ("127.0.0.1", "localhost", "0.0.0.0", "::"):
        origins.append(f"{args.address}:{args.port}")
    return origins + list(args.allow_websocket_origin)


def run_serve(args: argparse.Namespace) -> int:
    import panel as pn

    from .server import routes, server_kwargs

    if not 1 <= args.port <= 65535 and args.port != 0:
        sys.stderr.write(f"error: port must be between 1 and 65535, got {args.port}\n")
        return 2
    if args.num_procs < 1:
        sys.stderr.write("error: --num-procs must be at least 1\n")
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    print(f"blocktrace: serving on http://{args.address}:{args.port}/  (Ctrl-C to stop)", flush=True)
    pn.serve(
        routes(),
        port=args.port,
        address=args.address,
        websocket_origin=websocket_origins(args),
        num_procs=args.num_procs,
        show=False,
        start=True,
        **server_kwargs(),
    )
    return 0
