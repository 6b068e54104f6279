"""`blocktrace lti …`: what an LMS admin and the server's owner do once, before the first launch.

    blocktrace lti add-platform --issuer URL --client-id ID --deployment-id ID [--deployment-id ID …] \\
        --auth-login-url URL --auth-token-url URL --jwks-url URL
    blocktrace lti platforms                       # what is registered
    blocktrace lti remove-platform --issuer URL --client-id ID
    blocktrace lti config --url https://blocktrace.example.edu   # what to paste into the LMS
    blocktrace lti rotate-key                      # a new signing key; the previous one stays published

Each reads and writes the data dir of `blocktrace serve` (--data-dir, default ./blocktrace-data); a running
server sees a new platform at its next launch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["add_lti_arguments", "run_lti"]


def add_lti_arguments(parser: argparse.ArgumentParser, data_dir_default: str) -> None:
    parser.add_argument("--data-dir", default=None, metavar="DIR",
                        help=f"the data dir of `blocktrace serve` (default ./{data_dir_default})")
    sub = parser.add_subparsers(dest="lti_command", required=True, metavar="COMMAND")
    add = sub.add_parser("add-platform", help="register an LMS (replaces its registration with the same client id)")
    add.add_argument("--issuer", required=True, help="the LMS's issuer (iss), e.g. https://canvas.instructure.com")
    add.add_argument("--client-id", required=True, help="the client id the LMS gave blocktrace")
    add.add_argument("--deployment-id", required=True, action="append", dest="deployment_ids", metavar="ID",
                     help="a deployment id the LMS launches with (repeat for several)")
    add.add_argument("--auth-login-url", required=True, metavar="URL", help="the LMS's OIDC authorisation endpoint")
    add.add_argument("--auth-token-url", required=True, metavar="URL", help="the LMS's OAuth2 token endpoint")
    add.add_argument("--jwks-url", required=True, metavar="URL", help="the LMS's public key set (JWKS)")
    add.add_argument("--lms-origin", action="append", default=[], dest="lms_origins", metavar="URL",
                     help="where the LMS's course pages are, e.g. https://school.instructure.com, so they may frame "
                          "blocktrace (repeat for several; default: the issuer's and the login URL's)")
    sub.add_parser("platforms", help="list the registered LMSs")
    remove = sub.add_parser("remove-platform", help="forget an LMS's registration")
    remove.add_argument("--issuer", required=True)
    remove.add_argument("--client-id", required=True)
    config = sub.add_parser("config", help="print the URLs and the Canvas JSON an LMS admin pastes")
    config.add_argument("--url", required=True, metavar="URL",
                        help="the address students reach this server at, e.g. https://blocktrace.example.edu")
    config.add_argument("--canvas-json", action="store_true", help="print only Canvas's JSON configuration")
    sub.add_parser("rotate-key", help="make a new signing key (the previous one stays in the JWKS)")


def run_lti(args: argparse.Namespace, data_dir_default: str) -> int:
    data_dir = Path(args.data_dir or data_dir_default).resolve()
    try:
        return _run(args, data_dir)
    except ValueError as error:
        sys.stderr.write(f"error: {error}\n")
        return 2


def _run(args: argparse.Namespace, data_dir: Path) -> int:
    # Here, not at the top: `blocktrace check` builds this command's parser too, on a laptop that may have
    # blocktrace without the server's libraries (installed from the teacher's server with --no-deps).
    from blocktrace.app.lti import platforms, tool_keys
    from blocktrace.app.lti.handlers import canvas_config, tool_urls

    out = sys.stdout.write
    if args.lti_command == "add-platform":
        platform = platforms.Platform(args.issuer, args.client_id, tuple(args.deployment_ids), args.auth_login_url,
                                      args.auth_token_url, args.jwks_url, tuple(args.lms_origins))
        new = platforms.add(data_dir, platform)
        tool_keys.load_or_create(data_dir)
        out(f"{'Registered' if new else 'Updated'} {platform.issuer} (client id {platform.client_id}, "
            f"{len(platform.deployment_ids)} deployment id(s)) in {data_dir}.\n")
    elif args.lti_command == "platforms":
        found = platforms.load(data_dir)
        if not found:
            out(f"No LMS is registered in {data_dir}. Add one with `blocktrace lti add-platform`.\n")
        for p in found:
            out(f"{p.issuer}  client id {p.client_id}  deployments {', '.join(p.deployment_ids)}\n"
                f"    login {p.auth_login_url}\n    token {p.auth_token_url}\n    keys  {p.key_set_url}\n")
    elif args.lti_command == "remove-platform":
        if not platforms.remove(data_dir, args.issuer, args.client_id):
            sys.stderr.write(f"error: no registration of {args.issuer} with client id {args.client_id}\n")
            return 2
        out(f"Removed {args.issuer} (client id {args.client_id}).\n")
    elif args.lti_command == "config":
        base = platforms.check_url("--url", args.url).rstrip("/")
        if args.canvas_json:
            out(json.dumps(canvas_config(base), indent=1) + "\n")
            return 0
        urls = tool_urls(base)
        keys = tool_keys.load_or_create(data_dir)
        out("Paste these into the LMS's registration of blocktrace (an LTI 1.3 tool):\n"
            f"  OIDC login initiation URL   {urls['login']}\n"
            f"  Redirect (launch) URL       {urls['launch']}\n"
            f"  Target link URI             {urls['launch']}\n"
            f"  Deep linking URL            {urls['deep_linking']}\n"
            f"  Public keyset (JWKS) URL    {urls['jwks']}   (key id {keys.kid})\n"
            f"  Canvas JSON configuration   {urls['canvas']}   (or `blocktrace lti config --url {base} "
            "--canvas-json`)\n"
            "Then register the LMS here with `blocktrace lti add-platform` and the values it gives you.\n")
    elif args.lti_command == "rotate-key":
        keys = tool_keys.rotate(data_dir)
        out(f"New signing key {keys.kid}; the JWKS keeps {len(keys.keys) - 1} earlier key(s).\n")
    return 0
