"""git/repo.rev_parse_many answers what rev_parse answers for each ref, in one process
(issue 18: cleanup's preservation check asked git once per pseudo-ref of every worktree)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from taskgate.git import repo as gitrepo


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_same_answers_as_one_rev_parse_per_ref(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "f").write_text("1\n")
    _git(repo, "add", "f")
    _git(repo, "commit", "-qm", "one")
    (repo / "f").write_text("2\n")
    _git(repo, "commit", "-qam", "two")
    tree = _git(repo, "rev-parse", "HEAD^{tree}")
    _git(repo, "tag", "treetag", tree)  # resolves, but not to a commit
    _git(repo, "tag", "-a", "-m", "annotated", "v1", "HEAD~1")  # peels to a commit
    first = _git(repo, "rev-parse", "HEAD~1")
    (repo / ".git" / "MERGE_HEAD").write_text(first + "\n")
    refs = ["HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "refs/heads/main",
            "refs/heads/nosuch", "treetag", "v1", "HEAD~1", "main..x", tree]  # fmt: skip
    assert gitrepo.rev_parse_many(repo, refs) == [gitrepo.rev_parse(repo, r) for r in refs]
    assert gitrepo.rev_parse_many(repo, ["MERGE_HEAD", "treetag"]) == [first, None]
    assert gitrepo.rev_parse_many(repo, []) == []
    assert gitrepo.rev_parse_many(repo, ["HEAD", "a b\nc"]) == [
        gitrepo.rev_parse(repo, "HEAD"),
        None,
    ]
