"""`taskgate serve`: the long-lived server (dashboard now; HTTP hooks and the agent door later).

Nothing of the web stack is imported until the handler runs: `taskgate status` and the hook
path never load Starlette, uvicorn or Jinja2 (tests/test_server.py checks it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from taskgate.errors import EXIT_OK, UsageError


def _agent_marker() -> str | None:
    from taskgate.cli.checkpoint_cmds import agent_marker

    return agent_marker()


def _may_show_secret() -> bool:
    """The login URL carries the secret: only a person's terminal may see it."""
    return sys.stdout.isatty() and _agent_marker() is None


def _repo(args: argparse.Namespace) -> Path:
    start = args.repo if args.repo else Path.cwd()
    if not start.exists():
        raise UsageError(f"--repo {start} does not exist")
    return Path(start)


def cmd_serve(args: argparse.Namespace) -> int:
    """`taskgate serve [--host H] [--port N] [--open] [--allow-remote] [--url]`."""
    from taskgate.server import run

    if args.url:
        return _print_url(args)
    warning = run.check_bind(args.host, args.allow_remote)
    if args.allow_host and not args.allow_remote:
        raise UsageError(
            "--allow-host is for a dashboard reached from other machines",
            hint="pass it together with --allow-remote and a non-loopback --host",
        )
    options = run.ServeOptions(
        repo=_repo(args),
        host=args.host,
        port=args.port,
        allow_remote=args.allow_remote,
        state_dir=args.state_dir,
        new_secret=args.new_secret,
        extra_hosts=tuple(args.allow_host),
        unix_socket=args.socket,
    )

    def announce(base: str, token: str) -> None:
        if warning:
            print(warning, file=sys.stderr)
        print(f"taskgate serve: dashboard at {base}/")
        url = run.login_url(base, token)
        if _may_show_secret():
            print(f"  open this URL (it logs your browser in; keep it to yourself):\n  {url}")
        else:
            print(
                "  the login URL carries a secret and is shown only in a person's terminal:\n"
                "  run 'taskgate serve --url' in your own terminal"
            )
        print(f"  HTTP hooks: POST {base}/hooks/EVENT (docs/dashboard.md)")
        print("  Ctrl-C stops the server.", flush=True)
        if args.open:
            import webbrowser

            webbrowser.open(url)

    run.serve(options, announce=announce)
    return EXIT_OK


def _print_url(args: argparse.Namespace) -> int:
    from taskgate.engine.workspace import find_workspace
    from taskgate.server import run, secret

    if not _may_show_secret():
        raise UsageError(
            "the login URL is shown only in a person's terminal (stdout is not a TTY or an "
            "agent runs this command)",
            hint="run 'taskgate serve --url' yourself, in your own terminal",
        )
    ws = find_workspace(_repo(args))
    directory = secret.server_dir(secret.state_root(args.state_dir), ws.common_dir)
    info = run.read_info(directory)
    if not info.get("url"):
        raise UsageError(
            "no taskgate server is running for this repository",
            hint="start one with 'taskgate serve'",
        )
    token = secret.load_or_create(directory / "secret")
    print(run.login_url(str(info["url"]), token))
    return EXIT_OK


def register(add: Any) -> None:
    """The server's command."""
    s = add(
        "serve", cmd_serve, "the long-lived server: the dashboard in your browser", json_flag=False
    )
    s.add_argument(
        "--host",
        default=os.environ.get("TASKGATE_SERVE_HOST", "127.0.0.1"),
        help="address to listen on (default 127.0.0.1; others need --allow-remote)",
    )
    s.add_argument("--port", type=int, default=7457, help="TCP port (default 7457; 0: any free)")
    s.add_argument("--open", action="store_true", help="open the dashboard in your browser")
    s.add_argument(
        "--allow-remote", action="store_true", help="allow a non-loopback --host (prints a warning)"
    )
    s.add_argument(
        "--socket",
        type=Path,
        default=None,
        metavar="PATH",
        help="also listen on this Unix socket (0600; for scripts: curl --unix-socket)",
    )
    s.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="with --allow-remote: a name or address the browser uses to reach this machine "
        "(the Host check refuses any other; repeatable)",
    )
    s.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="where the secret and server files live (default "
        "$XDG_STATE_HOME/taskgate, else ~/.local/state/taskgate)",
    )
    s.add_argument(
        "--new-secret",
        action="store_true",
        help="rotate the secret: old login URLs and sessions stop working",
    )
    s.add_argument(
        "--url",
        action="store_true",
        help="print the login URL of the running server (in your own terminal)",
    )
