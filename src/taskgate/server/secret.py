"""The dashboard's secret: a 0600 file outside the repository, under the user's state dir.

Only the person's terminal sees the URL with the token (`taskgate serve` prints it); the
browser exchanges it for a cookie. The file lives outside the repository and outside
`.taskgate/`, where an agent's sandbox does not mount it (docs/dashboard.md, issue 14 masks
`state_root()` in its sandbox). Every location is injectable (STYLE.md 9): tests pass
`--state-dir`, the default honours `XDG_STATE_HOME`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from taskgate.errors import UsageError
from taskgate.fsutil import atomic_write

TOKEN_BYTES = 32
STATE_ENV = "TASKGATE_STATE_DIR"


def state_root(override: Path | None = None, env: dict[str, str] | None = None) -> Path:
    """`--state-dir`, else $TASKGATE_STATE_DIR, else $XDG_STATE_HOME/taskgate, else
    ~/.local/state/taskgate."""
    environ = os.environ if env is None else env
    if override is not None:
        return override
    if environ.get(STATE_ENV):
        return Path(environ[STATE_ENV])
    xdg = environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path(environ.get("HOME") or Path.home()) / ".local" / "state"
    return base / "taskgate"


def server_dir(root: Path, common_dir: Path) -> Path:
    """This repository's directory under the state root (0700), keyed by its git dir."""
    key = hashlib.sha256(str(common_dir.resolve()).encode("utf-8")).hexdigest()[:16]
    path = root / "serve" / key
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    for p in (root, root / "serve", path):
        _private_dir(p)
    return path


def _private_dir(path: Path) -> None:
    st = path.stat()
    if st.st_uid != os.getuid():
        raise UsageError(
            f"{path} belongs to another user",
            hint="pass --state-dir with a directory of your own",
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        path.chmod(0o700)


def load_or_create(path: Path, *, rotate: bool = False) -> str:
    """The token in `path`; a new one when absent, unreadable, loose (not 0600) or `rotate`."""
    if not rotate:
        try:
            st = path.lstat()
            if (
                stat.S_ISREG(st.st_mode)
                and st.st_uid == os.getuid()
                and not stat.S_IMODE(st.st_mode) & 0o077
            ):
                token = path.read_text(encoding="ascii").strip()
                if len(token) >= 32 and token.isascii():
                    return token
        except (OSError, UnicodeDecodeError):
            pass
    token = secrets.token_urlsafe(TOKEN_BYTES)
    old = os.umask(0o077)
    try:
        atomic_write(path, token + "\n")
    finally:
        os.umask(old)
    path.chmod(0o600)
    return token


def matches(given: str, token: str) -> bool:
    """Constant-time comparison of a presented token."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))
