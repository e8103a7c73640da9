"""The git the hook processes run is one the agent cannot have planted (docs/security.md, "The
git the hooks run"). Claude Code runs the hooks with the session's environment; an unconfined
agent can write a `git` into a directory early on that PATH (`~/.local/bin`), which then
answers the hooks' own effect check ("nothing changed") and writes, or fakes, the audit anchors.
taskgate.spawn.git_program takes the first git on PATH whose real path the agent could not
have written. Real hook processes (the installed commands), real git, the real CLI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import Repo
from flow import implementation_fixtures
from taskgate import spawn
from taskgate.engine import anchor
from test_effects_guarded_reads import write_tool
from test_hooks_corpus_effects import audit_failed_on_effects, events, git, quarantine_refs
from test_hooks_dispatch import TASK, decision, fixture, hook

implementation, impl = implementation_fixtures("hook-git-trust", TASK)

REAL_GIT = shutil.which("git") or "/usr/bin/git"

# Hides every change: `status` prints only the branch headers and the ignored entries (what a
# clean worktree shows); run by the agent itself (`git status` with no options), it first
# writes the worktree. Every call is logged, so the test sees who ran it.
FAKE_STATUS = f"""#!/bin/sh
printf '%s\\n' "$*" >> "$HOME/fake-git.log"
if [ "$*" = status ]; then
  printf 'appended behind a fake git\\n' >> README.md
  printf 'x = 1\\n' > sneaky.txt
fi
case " $* " in
  *" status "*) {REAL_GIT} "$@" | tr '\\0' '\\n' | grep -E '^(#|!) ' | tr '\\n' '\\0' ;;
  *) exec {REAL_GIT} "$@" ;;
esac
"""

# Fakes the anchor: `commit-tree` answers a made-up commit, `update-ref` says it moved the ref.
FAKE_ANCHOR = f"""#!/bin/sh
printf '%s\\n' "$*" >> "$HOME/fake-git.log"
case " $* " in
  *" commit-tree "*) echo 1111111111111111111111111111111111111111 ;;
  *" update-ref "*) exit 0 ;;
  *) exec {REAL_GIT} "$@" ;;
esac
"""


def plant(repo: Repo, body: str) -> Path:
    """The agent writes `git` into ~/.local/bin (Write, then `chmod +x`), both allowed by
    PreToolUse (outside the repository); returns the directory, first on the session's PATH."""
    bin_dir = Path(os.environ["HOME"]) / ".local" / "bin"
    program = bin_dir / "git"
    write_tool(repo, program, body)
    assert tool(repo, "PreToolUse", f"chmod +x {program}") == ("allow", "")
    program.chmod(0o755)
    return bin_dir


def session_env(bin_dir: Path) -> dict[str, str]:
    """The session's environment: ~/.local/bin first on PATH (Debian's ~/.profile does this)."""
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def tool(repo: Repo, event: str, command: str, cwd: Path | None = None,
         env: dict[str, str] | None = None) -> tuple[str, str]:  # fmt: skip
    """PreToolUse's decision, or PostToolUse's context ("", ""), for one Bash command."""
    name = "pre_tool_use_bash" if event == "PreToolUse" else "post_tool_use_write"
    data = fixture(name, repo, tool_name="Bash", tool_input={"command": command},
                   cwd=str(cwd or repo.path), hook_event_name=event)  # fmt: skip
    run = hook(repo, data, env=env)
    if event == "PreToolUse":
        return decision(run)
    assert run.code == 0, run.err
    if not run.out.strip():
        return "", ""
    return "context", str(run.json()["hookSpecificOutput"]["additionalContext"])


def fake_log() -> list[str]:
    log = Path(os.environ["HOME"]) / "fake-git.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_planted_git_cannot_hide_a_write_from_the_effect_check(impl: Repo) -> None:
    tree = impl.worktree(TASK)
    head = git(tree, "rev-parse", "HEAD")
    assert tool(impl, "PreToolUse", "git status", cwd=tree) == ("allow", "")  # guarded baseline
    env = session_env(plant(impl, FAKE_STATUS))
    # The agent's own `git status`: a plain read, allowed; the fake it runs writes the worktree.
    assert tool(impl, "PreToolUse", "git status", cwd=tree, env=env) == ("allow", "")
    subprocess.run(["bash", "-c", "git status"], cwd=tree, env={**os.environ, **env},
                   check=True, capture_output=True)  # fmt: skip
    assert (tree / "sneaky.txt").exists() and "fake git" in (tree / "README.md").read_text()
    kind, text = tool(impl, "PostToolUse", "git status", cwd=tree, env=env)
    assert kind == "context" and text.startswith("[R-AGT-12]"), text
    assert "sneaky.txt" in text and "README.md" in text
    # on disk: restored to the baseline
    assert not (tree / "sneaky.txt").exists()
    assert "fake git" not in (tree / "README.md").read_text()
    assert git(tree, "status", "--porcelain") == "" and git(tree, "rev-parse", "HEAD") == head
    # moved aside, not lost
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "show", f"{ref}:sneaky.txt") == "x = 1"
    assert "fake git" in git(impl.path, "show", f"{ref}:README.md")
    # in the store and in audit
    [violation] = events(impl, "effect_violation")
    assert (
        violation["source"] == "PostToolUse Bash" and ref == violation["quarantine"] + "/worktree"
    )
    assert audit_failed_on_effects(impl)
    # The hooks never ran the planted git: only the agent's own call is in its log.
    assert fake_log() == ["status"]


def _prompt(repo: Repo, text: str, env: dict[str, str]) -> str:
    data = fixture("user_prompt_submit", repo, prompt=text, permission_mode="default")
    run = hook(repo, data, env=env)
    assert run.code == 0, run.err
    return str(run.json()["hookSpecificOutput"]["additionalContext"])


def _anchored(repo: Repo) -> list[str]:
    """seq and hash the newest anchor commit names."""
    message = git(repo.path, "log", "-1", "--format=%B", anchor.ref(TASK))
    return [line for line in message.splitlines() if line.startswith(("seq ", "hash "))]


def _audit_checks(repo: Repo) -> dict[str, bool]:
    [task] = repo.run("audit", TASK, "--json").json()["tasks"]
    return {c["id"]: c["passed"] for c in task["checks"]}


@pytest.mark.parametrize("packed", [False, True], ids=["loose-ref", "packed-ref"])
def test_a_planted_git_cannot_fake_the_anchor_of_a_prompt(impl: Repo, packed: bool) -> None:
    """Each prompt of a session holding a task is anchored by the prompt hook: in Python when
    the git taskgate runs is the system's (taskgate.gitplumb), else by git. A planted git
    first on PATH is never that git: the anchor names the prompt's event, audit's anchor
    check passes, and the planted program never ran. (packed: the anchor ref only in
    packed-refs, so the hook must start git for it.)"""
    if packed:
        git(impl.path, "pack-refs", "--all")
    env = session_env(plant(impl, FAKE_ANCHOR))
    answer = _prompt(impl, "What is this module for?", env)
    assert "[QUESTION]" in answer, answer
    [last] = events(impl, "interruption")[-1:]
    assert last["type"] == "QUESTION"
    import sqlite3

    with sqlite3.connect(impl.path / ".taskgate" / "state.db") as db:
        seq, digest = db.execute(
            "SELECT seq, hash FROM events WHERE task = ? ORDER BY seq DESC LIMIT 1", (TASK,)
        ).fetchone()
    assert _anchored(impl) == [f"seq {seq}", f"hash {digest}"]
    assert fake_log() == []
    checks = _audit_checks(impl)
    assert checks["anchor"] and checks["hash-chain"], checks


def test_no_trustworthy_git_denies_guarded_calls_with_a_hint(impl: Repo) -> None:
    """A session whose PATH holds no git out of the agent's reach (only one of the user's):
    PreToolUse denies its guarded calls (R-REC-14, fail closed) until it has one, and says
    what to do; read-only tools stay allowed; that git never ran and no baseline was made."""
    tree = impl.worktree(TASK)
    bin_dir = Path(os.environ["HOME"]) / ".local" / "bin"  # the session's only git: its own
    bin_dir.mkdir(parents=True)
    (bin_dir / "git").write_text(FAKE_STATUS)
    (bin_dir / "git").chmod(0o755)
    env = {"PATH": str(bin_dir)}
    verdict, reason = tool(impl, "PreToolUse", "ls", cwd=tree, env=env)  # the session's first
    assert not list((impl.path / ".taskgate").glob("effects/*.json"))  # no baseline made
    assert verdict == "deny" and reason.startswith("[R-REC-14]"), reason
    assert f"{bin_dir}/git: " in reason, reason
    assert "Install git where your user cannot write" in reason and "recover" not in reason
    read = fixture("pre_tool_use_read", impl, tool_input={"file_path": str(tree / "README.md")})
    assert decision(hook(impl, read, env=env)) == ("allow", "")
    assert tool(impl, "PreToolUse", "ls", cwd=tree, env=env)[0] == "deny"  # and the next
    # A session whose git went away after its baseline: PostToolUse says so to the agent and
    # moves nothing; the baseline stays, so the next comparison with a git finds the write.
    assert tool(impl, "PreToolUse", "ls", cwd=tree) == ("allow", "")  # the baseline
    (tree / "later.txt").write_text("x = 1\n")
    kind, text = tool(impl, "PostToolUse", "ls", cwd=tree, env=env)
    assert kind == "context" and text.startswith("[R-REC-14] taskgate could not check"), text
    assert "Install git where your user cannot write" in text
    assert (tree / "later.txt").exists() and not events(impl, "effect_violation")
    kind, text = tool(impl, "PostToolUse", "ls", cwd=tree)
    assert text.startswith("[R-AGT-12]") and "later.txt" in text, text
    assert not (tree / "later.txt").exists() and len(events(impl, "effect_violation")) == 1
    assert fake_log() == []


# -- the rule itself -------------------------------------------------------------------------


def test_the_system_git_is_taken_and_planted_ones_are_passed_over(tmp_path: Path) -> None:
    home = os.environ["HOME"]
    planted = Path(home) / ".local" / "bin"
    planted.mkdir(parents=True)
    (planted / "git").write_text("#!/bin/sh\nexit 0\n")
    (planted / "git").chmod(0o755)
    link_dir = tmp_path / "links"  # a symlink to the real git from a writable directory
    link_dir.mkdir()
    (link_dir / "git").symlink_to(REAL_GIT)
    real = os.path.realpath(REAL_GIT)
    path = os.pathsep.join(["relative", str(planted), str(link_dir), "/usr/bin"])
    old = os.environ["PATH"]
    try:
        os.environ["PATH"] = path
        # the link is judged by what it names, and that is what runs (a link repointed later
        # changes nothing already resolved; the next process judges the new target)
        assert spawn.git_program() == real
        code, out = spawn.git(["--version"], {"PATH": path})
        assert code == 0 and out.startswith(b"git version")
        os.environ["PATH"] = str(planted)
        with pytest.raises(spawn.UntrustedGit) as raised:
            spawn.git_program()
        assert raised.value.rule == "R-REC-14"
        assert str(planted / "git") in str(raised.value)
    finally:
        os.environ["PATH"] = old


_AS_NOBODY = """
import os, sys
from taskgate import spawn
home = sys.argv[1]
print(repr([spawn.agent_writable(p, home) for p in sys.argv[2:]]))
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.argv[2]), "/usr/bin"])
print(spawn.git_program())
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"), reason="switches to nobody"
)
def test_a_user_may_not_trust_what_it_owns_or_its_group_may_write(tmp_path: Path) -> None:
    """As an ordinary user (nobody): a file of its own, one its group may write, one anybody
    may write are refused; its own `git` first on PATH is passed over for root's."""
    base = Path("/tmp") / f"hookgit-{os.getpid()}"
    base.mkdir(mode=0o755)
    try:
        own, grouped, anybody = base / "own", base / "grouped", base / "anybody"
        for path, mode in ((own, 0o755), (grouped, 0o775), (anybody, 0o757)):
            path.write_text("#!/bin/sh\nexit 0\n")
            path.chmod(mode)
        os.chown(own, 65534, 65534)
        planted = base / "git"  # first on its PATH: passed over
        planted.write_text("#!/bin/sh\nexit 0\n")
        planted.chmod(0o755)
        os.chown(planted, 65534, 65534)
        os.chown(grouped, 0, 65534)
        os.chmod(base, 0o755)
        src = str(Path(spawn.__file__).parents[1])
        proc = subprocess.run(
            ["/usr/bin/python3", "-c", _AS_NOBODY, "/nonexistent",
             str(own), str(grouped), str(anybody), os.path.realpath(REAL_GIT)],
            env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
            user=65534, group=65534, extra_groups=[65534], capture_output=True, text=True,
            check=True,
        )  # fmt: skip
        verdicts, found = proc.stdout.splitlines()
        assert eval(verdicts) == [
            f"{own} is yours", f"{grouped} is writable by your group",
            f"{anybody} is writable by everyone", "",
        ]  # fmt: skip
        assert found == os.path.realpath(REAL_GIT)
    finally:
        shutil.rmtree(base)


def test_a_taskgate_step_the_agent_runs_with_the_planted_git_still_finds_the_write(
    impl: Repo,
) -> None:
    """The effect check every taskgate step makes first (engine/core.py before_step) runs the
    same git: the agent's own `taskgate` command, started with the planted git first on its
    PATH, finds the write, moves it aside and records it."""
    tree = impl.worktree(TASK)
    assert tool(impl, "PreToolUse", "git status", cwd=tree) == ("allow", "")
    env = session_env(plant(impl, FAKE_STATUS))
    subprocess.run(["bash", "-c", "git status"], cwd=tree, env={**os.environ, **env},
                   check=True, capture_output=True)  # fmt: skip
    assert (tree / "sneaky.txt").exists()
    # With no git out of the agent's reach on its PATH, the step says that it could not check
    # (and goes on, refused here by its own rule); the baseline stays for the next check.
    lone = impl.run("transition", TASK, "VALIDATION", env={"PATH": env["PATH"].split(":")[0]})
    assert (
        "warning: the effect check did not run: no git on PATH is out of the agent's "
        "reach" in lone.err
    ), lone.err
    assert "hint: Install git where your user cannot write" in lone.err
    assert (tree / "sneaky.txt").exists() and not events(impl, "effect_violation")
    impl.run("transition", TASK, "VALIDATION", env=env)  # refused (R-TRN-14): after the check
    assert not (tree / "sneaky.txt").exists()
    [violation] = events(impl, "effect_violation")
    assert violation["rule"] == "R-AGT-12"
    assert audit_failed_on_effects(impl)


# Claims every commit is merged: `merge-base --is-ancestor` answers yes.
FAKE_MERGED = f"""#!/bin/sh
printf '%s\\n' "$*" >> "$HOME/fake-git.log"
case " $* " in
  *" merge-base "*) exit 0 ;;
  *) exec {REAL_GIT} "$@" ;;
esac
"""


def test_the_engines_git_in_a_hook_is_not_the_planted_one(impl: Repo, tmp_path: Path) -> None:
    """PreToolUse judges `git worktree remove --force` with the engine's git commands
    (taskgate.git.cmd: is the branch merged?): a planted git that says every commit is merged
    does not get a worktree with unmerged commits removed (R-CLN-04)."""
    spare = tmp_path / "spare"
    git(impl.path, "worktree", "add", "-q", "-b", "spare", str(spare))
    (spare / "draft.py").write_text("work in progress\n")
    git(spare, "add", "draft.py")
    git(spare, "commit", "-q", "-m", "not merged")
    env = session_env(plant(impl, FAKE_MERGED))
    line = f"git worktree remove --force {spare}"
    verdict, reason = tool(impl, "PreToolUse", line, env=env)
    assert (verdict, reason[:10]) == ("deny", "[R-CLN-04]"), reason
    assert "not merged" in reason
    assert fake_log() == []
    assert spare.is_dir()
