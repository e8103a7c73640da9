"""The taskgate CLI: parse, call the engine, print. Exit codes at one boundary (DESIGN.md)."""

from __future__ import annotations

import os
import sys

# Only sys and os at import time: `taskgate hook EVENT` (issue 7) runs before every guarded
# Claude Code tool call and must not pay for argparse, typing or the command modules.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

    from taskgate.errors import TaskgateError

    Handler = Callable[[argparse.Namespace], int]

_PARSER_CLASS: type[argparse.ArgumentParser] | None = None


def _parser_class() -> type[argparse.ArgumentParser]:
    """argparse that raises instead of exiting, so usage errors pass the one error boundary."""
    global _PARSER_CLASS
    if _PARSER_CLASS is None:
        import argparse

        class _Formatter(argparse.HelpFormatter):
            """argparse's formatter without `import shutil` (and with it bz2, lzma, zlib) for
            the terminal width: every add_argument builds one (issue 18)."""

            def __init__(
                self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                width: int | None = None,
            ) -> None:  # fmt: skip
                if width is None:
                    width = _terminal_columns() - 2
                super().__init__(prog, indent_increment, max_help_position, width)

        class _Parser(argparse.ArgumentParser):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                kwargs.setdefault("formatter_class", _Formatter)
                super().__init__(*args, **kwargs)

            def error(self, message: str) -> Any:
                from taskgate.errors import UsageError

                raise UsageError(message, hint=f"see '{self.prog} --help'")

        _PARSER_CLASS = _Parser
    return _PARSER_CLASS


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns, without importing shutil."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns


# Each module registers its sub-commands with `register(add)`; heavy imports stay inside the
# handlers so that `taskgate --help` and fast paths load little. Issues add their module here.
COMMAND_MODULES = (
    "taskgate.cli.commands",
    "taskgate.cli.checkpoint_cmds",
    "taskgate.cli.audit_cmds",
    "taskgate.cli.git_cmds",
    "taskgate.cli.run_cmds",
    "taskgate.cli.spec_cmds",
    "taskgate.cli.hook_cmds",
    "taskgate.cli.violation_cmds",
    "taskgate.cli.serve_cmds",
    "taskgate.cli.store_cmds",
)


# The module that registers each command, so `taskgate transition` imports one command module
# instead of all of them (issue 18). A command missing here still works: every module is then
# imported as before. tests/test_cli_parser.py checks this table against the register calls
# (add a new command here with its module).
_CORE, _CKP, _AUDIT, _GIT, _RUN = (
    "taskgate.cli.commands",
    "taskgate.cli.checkpoint_cmds",
    "taskgate.cli.audit_cmds",
    "taskgate.cli.git_cmds",
    "taskgate.cli.run_cmds",
)
COMMAND_MODULE = {
    **dict.fromkeys(
        ("init", "todo", "start", "next", "classify", "transition", "status", "agent",
         "validate", "release"),
        _CORE,
    ),
    **dict.fromkeys(("present", "approve", "say", "request-changes", "abandon"), _CKP),
    **dict.fromkeys(("audit", "recover"), _AUDIT),
    **dict.fromkeys(("merge", "complete", "cleanup"), _GIT),
    **dict.fromkeys(("run", "demo"), _RUN),
    "spec": "taskgate.cli.spec_cmds",
    "hooks": "taskgate.cli.hook_cmds",
    "hook": "taskgate.cli.hook_cmds",
    "violations": "taskgate.cli.violation_cmds",
    "serve": "taskgate.cli.serve_cmds",
    "migrate": "taskgate.cli.store_cmds",
}  # fmt: skip


class _Sink:
    """Stands in for the parser (or registry) of a command that is not being run: its
    arguments are never built (issue 18: the CLI built ~150 arguments for every command)."""

    def __getattr__(self, name: str) -> Any:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self


_SINK = _Sink()


class Registry:
    """Adds sub-commands to the parser; passed to each command module's `register`. With
    `only`, just that command's parser is built; the others get a sink."""

    def __init__(self, sub: Any, only: str | None = None) -> None:
        self._sub = sub
        self._only = only
        self.built = False

    def __call__(self, name: str, handler: Handler, help_text: str, json_flag: bool = True) -> Any:
        """Add `taskgate NAME`; returns its parser for arguments."""
        if self._only is not None and name != self._only:
            return _SINK
        self.built = True
        cmd = self._sub.add_parser(name, help=help_text, description=help_text)
        cmd.set_defaults(handler=handler)
        if json_flag:
            cmd.add_argument("--json", action="store_true", help="machine-readable output")
        return cmd

    def group(self, name: str, help_text: str) -> Registry:
        """Add `taskgate NAME ACTION ...`; returns a registry for its actions."""
        if self._only is not None and name != self._only:
            return _SINK  # type: ignore[return-value]
        self.built = True
        parser = self._sub.add_parser(name, help=help_text, description=help_text)
        sub = parser.add_subparsers(
            dest=f"{name}_command", metavar="ACTION", parser_class=_parser_class()
        )

        def show_help(_: argparse.Namespace) -> int:
            from taskgate.errors import EXIT_USAGE

            parser.print_help()
            return EXIT_USAGE

        parser.set_defaults(handler=show_help)
        return Registry(sub)


def _command_of(args: Sequence[str]) -> str | None:
    """The sub-command `args` run, when that is plain to see; None: build the whole parser."""
    tokens = iter(args)
    for token in tokens:
        if token in ("--repo", "--session"):
            next(tokens, None)
        elif token.startswith(("--repo=", "--session=")):
            continue
        elif token.startswith("-"):
            return None  # --help, --version, a typo: the full parser answers
        else:
            return token
    return None


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; with `only`, just that sub-command's arguments are built (the whole
    parser when no module registers it, so a typo gets the full usage)."""
    import importlib
    from pathlib import Path

    from taskgate import __version__

    parser_class = _parser_class()
    p = parser_class(prog="taskgate", description="The Task State Machine Protocol, enforced.")
    p.add_argument("--version", action="version", version=f"taskgate {__version__}")
    p.add_argument("--repo", type=Path, help="repository (default: the current directory)")
    p.add_argument(
        "--session",
        help="session id (default: $TASKGATE_SESSION, else $CLAUDE_CODE_SESSION_ID, else "
        "$CODEX_SESSION_ID)",
    )
    registry = Registry(
        p.add_subparsers(dest="command", metavar="COMMAND", parser_class=parser_class), only
    )
    modules = (COMMAND_MODULE[only],) if only in COMMAND_MODULE else COMMAND_MODULES
    for module in modules:
        importlib.import_module(module).register(registry)
    if only is not None and not registry.built:
        return _parser()
    return p


# Commands whose command line is read without argparse when it is plainly well formed (issue
# 18: argparse, gettext and locale are about 2 ms of a 30 ms transition): the handler's name in
# taskgate.cli.commands, the positionals, and the options taking one value with their defaults
# (every such command also has --json). Anything else -- help, "--", an abbreviation, a value
# or positional that starts with "-", a missing or extra argument -- goes to argparse.
# tests/test_cli_parser.py checks on generated command lines that whatever is read here is
# exactly the namespace argparse makes.
SIMPLE_COMMANDS: dict[str, tuple[str, tuple[str, ...], dict[str, str]]] = {
    "transition": ("cmd_transition", ("task", "state"), {"--reason": ""}),
}


_PLAIN_RUN = False  # a SIMPLE_COMMANDS command line was read by simple_args and run to its end


def simple_args(args: Sequence[str]) -> argparse.Namespace | None:
    """The namespace argparse would make of `args`, when a SIMPLE_COMMANDS command line is plain
    enough to read without it; None: ask argparse."""
    values: dict[str, Any] = {"repo": None, "session": None}
    i, n = 0, len(args)
    while i < n:
        token = args[i]
        if token in ("--repo", "--session"):
            if i + 1 >= n or args[i + 1].startswith("-"):
                return None
            values[token[2:]] = args[i + 1]
            i += 2
        elif token.startswith(("--repo=", "--session=")):
            key, _, value = token[2:].partition("=")
            values[key] = value
            i += 1
        else:
            break
    if i >= n or args[i] not in SIMPLE_COMMANDS:
        return None
    handler_name, positional, options = SIMPLE_COMMANDS[args[i]]
    values["command"] = args[i]
    values["json"] = False
    for option, default in options.items():
        values[option[2:].replace("-", "_")] = default
    found: list[str] = []
    i += 1
    while i < n:
        token = args[i]
        key, equals, value = token.partition("=")
        if token == "--json":
            values["json"] = True
        elif token in options:
            if i + 1 >= n or args[i + 1].startswith("-"):
                return None
            values[token[2:].replace("-", "_")] = args[i + 1]
            i += 1
        elif equals and key in options:
            values[key[2:].replace("-", "_")] = value
        elif token.startswith("-"):
            return None
        else:
            found.append(token)
        i += 1
    if len(found) != len(positional):
        return None
    values.update(zip(positional, found, strict=True))
    if values["repo"] is not None:
        from pathlib import Path

        values["repo"] = Path(values["repo"])
    from types import SimpleNamespace

    from taskgate.cli import commands

    values["handler"] = getattr(commands, handler_name)
    namespace: argparse.Namespace = SimpleNamespace(**values)  # type: ignore[assignment]
    return namespace


# True when main()'s command line, as parsed, is `taskgate [--repo X] [--session S] hook EVENT`
# (set on each call): a hook waits for a PostgreSQL store a hook's bound, not a command's
# (store/pg_wait.py in_hook reads it).
HOOK_INVOCATION = False


def main(argv: Sequence[str] | None = None, *, own_process: bool = False) -> int:
    """Run the CLI; returns the exit code (0 done, 1 refused, 2 usage, 3 foreign, 4 human,
    5 corrupted, 6 environment (docs/faults.md), 10 internal). `own_process`: the process
    ends with exit_with when this returns (the console script, `python -m taskgate`), so a
    plain command runs with the cyclic collector paused (_pause_gc)."""
    global HOOK_INVOCATION
    args_list = list(sys.argv[1:] if argv is None else argv)
    HOOK_INVOCATION = args_list[:1] == ["hook"]
    if HOOK_INVOCATION:  # issue 7 fast path: one hook event, no parser, no commands
        from taskgate.hooks.dispatch import run_hook

        return run_hook(args_list[1:])
    paused = own_process and _pause_gc()  # resumed at once unless the command line is plain
    from taskgate.errors import EXIT_INTERNAL, EXIT_USAGE, TaskgateError

    wants_json = "--json" in args_list
    plain = None
    try:
        if args_list[:1] == ["todo"]:  # issue 18: the same bytes without the engine, or None
            from taskgate.engine.todo_fast import output

            if (text := output(args_list[1:])) is not None:
                print(text)
                return 0
        from taskgate.cli.pathlib_import import import_pathlib

        import_pathlib()  # without urllib.parse (issue 18)
        plain = simple_args(args_list)
        if plain is None and paused:  # argparse, then any command: collected as usual
            _resume_gc()
        args = plain or _parser(_command_of(args_list)).parse_args(args_list)
        HOOK_INVOCATION = getattr(args, "command", None) == "hook"  # `--repo X hook EVENT`
        if not getattr(args, "handler", None):
            _parser().print_help()
            return EXIT_USAGE
        handler: Handler = args.handler
        result = handler(args)
        _plain_run(plain)
        return result
    except TaskgateError as exc:
        if (code := _door(exc, args_list)) is not None:  # issue 14: a confined agent's command
            return code
        _report(exc, wants_json)
        _plain_run(plain)  # a refused transition ends as fast as an accepted one
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted; the store holds the last committed step", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the one boundary for bugs: say so, never a silent pass
        from taskgate.errors import classify

        fault = classify(exc)  # disk full, read-only, permissions, locks: issue 16
        if fault is not None:
            if (code := _door(fault, args_list)) is not None:
                return code
            _report(fault, wants_json)
            return fault.exit_code
        if os.environ.get("TASKGATE_DEBUG"):
            raise
        print(f"taskgate: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("hint: rerun with TASKGATE_DEBUG=1 and report the traceback", file=sys.stderr)
        return EXIT_INTERNAL


def _pause_gc() -> bool:
    """Pause the cyclic garbage collector (True if this paused it) for a plain command
    (simple_args) in its own process, to its end: one short step whose modules and records
    live until the process ends, so collections would free next to nothing, yet they cost
    about 2.5 ms of a transition's CPU (issue 18; Mercurial pauses it around bulk work the
    same way). Resuming before the end would only collect then, at once (the allocations
    of the whole command are pending). Reference counting frees everything else at once, as
    always; files and the store are closed explicitly, never by the collector; a normal
    exit's finalization collects whatever it is."""
    import gc

    if not gc.isenabled():
        return False
    gc.disable()
    return True


def _resume_gc() -> None:
    """Enable the collector _pause_gc paused."""
    import gc

    gc.enable()


def _plain_run(plain: object) -> None:
    """The command line was read by simple_args and the command ran to its end (exit_with)."""
    global _PLAIN_RUN
    _PLAIN_RUN = plain is not None


def _door(exc: TaskgateError, args_list: list[str]) -> int | None:
    """Through the agent door when the store is read-only to this confined process."""
    from taskgate.cli.door_client import forward_if_confined

    return forward_if_confined(exc, args_list)


def _report(exc: TaskgateError, wants_json: bool) -> None:
    import json

    if wants_json:
        print(json.dumps(exc.to_json(), indent=2, sort_keys=True))
        return
    print(f"taskgate: {exc.message}", file=sys.stderr)
    for violation in getattr(exc, "violations", ()):
        print(f"  {violation.render()}", file=sys.stderr)
    if exc.hint:
        print(f"hint: {exc.hint}", file=sys.stderr)


def exit_with(code: int) -> NoReturn:
    """End the process with `code`. After a plain command (simple_args) that left nothing for
    the interpreter's finalization to do -- no atexit callback, no other thread, no profiler or
    tracer -- its output is flushed and the process ends at once: tearing ~120 modules down
    is about 3 ms of a transition (issue 18). What the command wrote is already where it goes:
    the store committed (synchronous=FULL) and the views were written and closed before the
    handler returned; the same holds for a normal exit, which flushes nothing more."""
    if _PLAIN_RUN and _nothing_left_to_finalize():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # the normal exit reports it
        else:
            os._exit(code)
    sys.exit(code)


def _nothing_left_to_finalize() -> bool:
    atexit = sys.modules.get("atexit")
    if atexit is not None or sys.implementation.name != "cpython":
        # Registering a callback imports atexit; where nothing did, none is registered and
        # importing it only to ask is 0.1 ms of a transition (issue 18, fifth pass)
        import atexit

        callbacks = getattr(atexit, "_ncallbacks", None)  # CPython; elsewhere: exit normally
        if callbacks is None or callbacks() != 0:
            return False
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return False
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def entry() -> None:
    """Console-script entry point."""
    exit_with(main(own_process=True))
