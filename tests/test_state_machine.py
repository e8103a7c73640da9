"""Hypothesis drives random sequences of CLI operations and checks the invariants after each:
the state is valid, transition_log is a chain of table rows ending in the state, a refused
command changes nothing, and the views equal the store."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from conftest import git, make_repo
from flow import PASSING_BUILD, PLAN, REPORT
from taskgate.cli.main import main
from taskgate.protocol import transitions
from taskgate.protocol.states import State

TASKS = ("add-login", "fix-typo")
SESSIONS = ("s1", "s2")
AGENTS = ("architect", "quality", "style", "build", "test", "security")


class ProtocolMachine(RuleBasedStateMachine):
    """Random CLI-level operations against one repository."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="tg-sm-"))
        self.repo = make_repo(self.tmp / "repo", config=PASSING_BUILD)
        self.cwd = Path.cwd()

    def teardown(self) -> None:
        os.chdir(self.cwd)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------------

    def cli(self, session: str, *argv: str, cwd: Path | None = None) -> int:
        os.chdir(cwd or self.repo.path)
        os.environ["TASKGATE_SESSION"] = session
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                return main(list(argv))
        finally:
            os.environ.pop("TASKGATE_SESSION", None)
            os.chdir(self.cwd)

    def rows(self) -> dict[str, tuple[str, int, list[tuple[str, str]]]]:
        db = sqlite3.connect(self.repo.path / ".taskgate" / "state.db")
        try:
            result = {}
            for name, state, seq in db.execute("SELECT name, state, seq FROM tasks"):
                log = db.execute(
                    "SELECT source, target FROM transitions WHERE task = ? ORDER BY idx", (name,)
                ).fetchall()
                result[name] = (state, seq, log)
            return result
        finally:
            db.close()

    def owner_cli(self, task: str, *argv: str, cwd: Path | None = None) -> None:
        """Run as the owner when the task is owned; compare the store when refused."""
        before = self.rows()
        owner = self._owner(task) or "s1"
        code = self.cli(owner, *argv, cwd=cwd)
        if code != 0:
            assert self.rows() == before, (argv, code)  # R-TRN-08: a refusal changes nothing

    def _owner(self, task: str) -> str | None:
        path = self.repo.task_dir(task) / "task.json"
        if not path.exists():
            return None
        return str(json.loads(path.read_text())["session_id"])

    # -- rules ---------------------------------------------------------------------------------

    @rule(task=st.sampled_from(TASKS), session=st.sampled_from(SESSIONS))
    def start(self, task: str, session: str) -> None:
        before = self.rows()
        code = self.cli(session, "start", task)
        if code != 0:
            assert self.rows() == before
        assert code in (0, 1, 3, 4)

    @rule(task=st.sampled_from(TASKS), low=st.booleans())
    def classify(self, task: str, low: bool) -> None:
        extra = ("--risk-level", "LOW") if low else ()
        self.owner_cli(task, "classify", task, *extra, cwd=self.repo.worktree(task)
                       if self.repo.worktree(task).exists() else None)  # fmt: skip

    @rule(
        task=st.sampled_from(TASKS),
        to=st.sampled_from(list(State)),
        reason=st.sampled_from(["", "User requested changes", "critical agent addition: x"]),
    )
    def transition(self, task: str, to: State, reason: str) -> None:
        wt = self.repo.worktree(task)
        self.owner_cli(task, "transition", task, to.value, "--reason", reason,
                       cwd=wt if wt.exists() else None)  # fmt: skip

    @rule(task=st.sampled_from(TASKS), agent=st.sampled_from(AGENTS),
          status=st.sampled_from(["WORKING", "COMPLETE", "ERROR"]), done=st.booleans())  # fmt: skip
    def agent_set(self, task: str, agent: str, status: str, done: bool) -> None:
        self.owner_cli(task, "agent", "set", task, agent, status,
                       "--done" if done else "--work-remaining")  # fmt: skip

    @rule(task=st.sampled_from(TASKS), agent=st.sampled_from(AGENTS),
          size=st.sampled_from([0, 99, 100, 400]))  # fmt: skip
    def write_report(self, task: str, agent: str, size: int) -> None:
        if self.repo.task_dir(task).exists():
            text = (REPORT * 3)[:size]
            (self.repo.task_dir(task) / f"{task}-{agent}-requirements.md").write_text(text)

    @rule(task=st.sampled_from(TASKS), edit=st.booleans())
    def write_plan(self, task: str, edit: bool) -> None:
        task_md = self.repo.task_dir(task) / "task.md"
        if task_md.exists():
            text = task_md.read_text()
            task_md.write_text(text + ("\n- tweak\n" if edit and PLAN in text else PLAN))

    @rule(task=st.sampled_from(TASKS), kind=st.sampled_from(["plan", "changes"]))
    def present_and_approve(self, task: str, kind: str) -> None:
        self.owner_cli(task, "present", task)
        self.owner_cli(task, "approve", task, kind)

    @rule(task=st.sampled_from(TASKS))
    def commit(self, task: str) -> None:
        wt = self.repo.worktree(task)
        if (wt / ".git").exists():
            (wt / "work.txt").write_text(os.urandom(4).hex())
            git(wt, "add", "work.txt")
            git(wt, "commit", "-q", "-m", "[agent:quality] work")

    @rule(task=st.sampled_from(TASKS))
    def validate(self, task: str) -> None:
        self.owner_cli(task, "validate", task)

    @rule(task=st.sampled_from(TASKS), agent=st.sampled_from(AGENTS),
          decision=st.sampled_from(["APPROVED", "REJECTED"]))  # fmt: skip
    def verdict(self, task: str, agent: str, decision: str) -> None:
        self.owner_cli(task, "agent", "verdict", task, agent, decision, "--reason", "r")

    @rule(task=st.sampled_from(TASKS))
    def satisfy_and_advance_a(self, task: str) -> None:
        """Weighted twice: progress through the protocol is the interesting part."""
        self.satisfy_and_advance(task)

    @rule(task=st.sampled_from(TASKS))
    def satisfy_and_advance(self, task: str) -> None:
        """Do what the current state's gate needs, then take the next forward step."""
        rows = self.rows()
        if task not in rows:
            self.start(task, "s1")
            return
        if self._owner(task) is None:
            return
        state = rows[task][0]
        status = json.loads((self.repo.task_dir(task) / "task.json").read_text())
        agents = status["required_agents"]
        wt = self.repo.worktree(task)
        if state == "REQUIREMENTS":
            for agent in agents:
                self.write_report(task, agent, 400)
                self.owner_cli(task, "agent", "set", task, agent, "COMPLETE")
        elif state == "SYNTHESIS":
            self.write_plan(task, edit=False)
            self.commit(task)
            self.present_and_approve(task, "plan")
        elif state == "IMPLEMENTATION":
            self.commit(task)
            for agent in agents:
                self.owner_cli(task, "agent", "set", task, agent, "COMPLETE", "--done")
        elif state == "VALIDATION":
            self.validate(task)
        elif state == "REVIEW":
            for agent in agents:
                self.owner_cli(task, "agent", "verdict", task, agent, "APPROVED")
        elif state == "AWAITING_USER_APPROVAL":
            self.present_and_approve(task, "changes")
        path = [p for p in _path(self, task)]
        if state in path and path.index(state) + 1 < len(path):
            nxt = path[path.index(state) + 1]
            if state == "INIT":
                self.classify(task, low=False)
            else:
                self.owner_cli(task, "transition", task, nxt, cwd=wt if wt.exists() else None)
        self.deepest = max(getattr(self, "deepest", 0), len(self.rows()[task][2]))

    @rule(task=st.sampled_from(TASKS), dice=st.integers(0, 9))
    def release(self, task: str, dice: int) -> None:
        if dice == 0:  # rare: a human's override
            self.cli("human", "release", task, "--force", "--reason", "test")

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def store_is_consistent(self) -> None:
        for name, (state, seq, log) in self.rows().items():
            assert state in {s.value for s in State}  # R-TRN-01
            if log:
                assert log[0][0] == "INIT"
                assert log[-1][1] == state  # R-TRN-04/05
            else:
                assert state == "INIT"
            for (_, to), (frm, _) in itertools.pairwise(log):
                assert to == frm
            for frm, to in log:
                assert transitions.lookup(State(frm), State(to)) is not None  # R-TRN-03
            reached = [to for _, to in log]
            if "IMPLEMENTATION" in reached:  # R-TRN-13: never skipped
                first = reached.index("IMPLEMENTATION")
                assert reached[:first][:3] == ["CLASSIFIED", "REQUIREMENTS", "SYNTHESIS"]
            view = json.loads((self.repo.task_dir(name) / "task.json").read_text())
            assert view["state"] == state and view["_seq"] == seq  # views equal the store
            assert len(view["transition_log"]) == len(log)


def _path(machine: ProtocolMachine, task: str) -> list[str]:
    out = io.StringIO()
    os.chdir(machine.repo.path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main(["status", task, "--json"])
    finally:
        os.chdir(machine.cwd)
    return list(json.loads(out.getvalue())["path"]) if out.getvalue() else []


ProtocolMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("TASKGATE_SM_EXAMPLES", "30")),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestProtocolMachine = ProtocolMachine.TestCase
