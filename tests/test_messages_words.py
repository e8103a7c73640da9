"""protocol/messages.py matches R-INT-03's keywords with str methods (`_Words`,
`_ends_with_question`) so that a prompt judged outside a checkpoint does not import `re`
(issue 18, fifth pass). The regexes they stand for are kept here as the oracle: every match,
every search from every position, and every verdict of the classifier must be the same."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from taskgate.protocol import messages
from taskgate.protocol.messages import Checkpoint, classify_message, judge
from taskgate.protocol.states import State

# The regexes as they were before the fifth pass (name in messages.py -> source).
ORACLE = {
    "_RESUMPTION_RE": r"\b(?:continue|resume|proceed|carry\s+on|go\s+on)\b",
    "_AUDIT_RE": r"/audit-session\b|\baudit\b",
    "_QUESTION_RE": r"\b(?:what|how|why|explain|clarify)\b",
    "_STATUS_RE": r"\b(?:status|progress)\b",
}
ORACLE_SEQUENCES = {
    "_KEEP_GOING": (r"\bkeep\b", r"\bgoing\b"),
    "_WHERE_ARE_WE": (r"\bwhere\b", r"\bare\b", r"\bwe\b"),
}
ENDS_WITH_QUESTION = r"\?[^\w]*$"

# Pieces a message is made of: the keywords, their near misses, and the characters where
# `\b`, `\w` and `\s` are subtle (underscore, digits that are not decimal, combining marks,
# letters outside ASCII, Unicode spaces str.split and `\s` both know).
WORDS = [
    "continue", "resume", "proceed", "carry", "on", "go", "keep", "going", "where", "are",
    "we", "audit", "/audit-session", "/audit-sessions", "audit-session", "what", "how", "why",
    "explain", "clarify", "status", "progress", "whatever", "goon", "reaudit", "we're",
    "carry  on", "go\ton", "go\xa0on", "carry\u2003on", "go_on", "are?", "?",
]  # fmt: skip
GLUE = [
    " ", "  ", "\t", "\n", "\xa0", "\u2028", "\u3000", "_", "-", "/", "'", "?", "!", "?!",
    "? ", "?)", "\"", "1", "\u00b2", "\u2167", "\u0663", "\u0301", "\u00e9", "\u00df",
    "\u0130", "x", "A", "\U0001f44d", "\U0001f914", ".", ",", "",
]  # fmt: skip
pieces = st.one_of(
    st.sampled_from(WORDS), st.sampled_from(GLUE), st.text(max_size=3), st.characters()
)
texts = st.lists(pieces, max_size=14).map("".join)


def _spans(pattern: re.Pattern[str], text: str) -> Iterator[tuple[int, tuple[int, int] | None]]:
    for pos in range(len(text) + 1):
        found = pattern.search(text, pos)
        yield pos, None if found is None else found.span()


@settings(max_examples=1500, deadline=None)
@given(texts)
@example("carry on, go on and proceed")
@example("/audit-session now; audit-sessions /audit-sessions")
@example("keep_going what_ status2 ²status Ⅷprogress")
@example("where are we? we're where")
@example("go\u2003on carry\n\non é what")
def test_the_word_matchers_find_what_their_regexes_find(text: str) -> None:
    for name, source in ORACLE.items():
        words = getattr(messages, name)
        regex = re.compile(source)
        assert words.hits(text) == tuple(m.group(0) for m in regex.finditer(text)), name
        for pos, span in _spans(regex, text):
            assert words.span(text, pos) == span, (name, pos)
    for name, sources in ORACLE_SEQUENCES.items():
        for words, source in zip(getattr(messages, name), sources, strict=True):
            for pos, span in _spans(re.compile(source), text):
                assert words.span(text, pos) == span, (name, source, pos)
    assert messages._ends_with_question(text) == bool(re.search(ENDS_WITH_QUESTION, text))


class _Regex:
    """A regex with _Words' `span`, as `_in_order` used `search(text, pos)` before."""

    def __init__(self, source: str) -> None:
        self._regex = re.compile(source)

    def span(self, text: str, pos: int) -> tuple[int, int] | None:
        found = self._regex.search(text, pos)
        return None if found is None else found.span()


CASES = [(None, Checkpoint.NONE), (None, Checkpoint.PLAN), (None, Checkpoint.CHANGES)]
STATES = list(State)


def _verdicts(text: str) -> list[object]:
    out: list[object] = [classify_message(text, state=s, checkpoint=c) for s, c in CASES]
    for state in STATES:
        out.append(judge(text, state=state, checkpoint=Checkpoint.NONE))
    out.append(judge(text, state=State.SYNTHESIS, checkpoint=Checkpoint.PLAN))
    out.append(judge(text, state=State.AWAITING_USER_APPROVAL, checkpoint=Checkpoint.CHANGES))
    return out


MESSAGES = st.one_of(
    texts,
    st.lists(
        st.sampled_from(
            [*WORDS, "lgtm", "yes", "approved", "no", "not yet", "but", "fix", "rename the",
             "please add", "ok", "another task", "in the meantime", "question", "merge",
             "please use tabs", "we should", "a typo", "is wrong", "instead of", "it crashes",
             "doesn't work", "fails on", "bug in", "don't touch", "needs tests", "rather than",
             "regressed", "can you", "make it", "keep", "is off", "i'd like to", "let's",
             "do not break", "should be", "lacks", "misses", "is confusing", "fine."]
        ),
        max_size=8,
    ).map(" ".join),
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(MESSAGES)
@example("Keep going?")
@example("Please FIX it")
@example("It Doesn\u2019t Work")
@example("where are we")
@example("please run /audit-session")
def test_every_verdict_is_the_regex_versions(text: str) -> None:
    assert _verdicts(text) == _with_oracle(text)


def _with_oracle(text: str) -> list[object]:
    """The verdicts of messages.py with the regexes back in place of the word matchers."""
    with pytest.MonkeyPatch.context() as mp:
        for name, source in ORACLE.items():
            mp.setattr(messages, name, messages._compile(source))
        for name, sources in ORACLE_SEQUENCES.items():
            mp.setattr(messages, name, tuple(_Regex(s) for s in sources))
        mp.setattr(
            messages, "_ends_with_question", lambda t: bool(re.search(ENDS_WITH_QUESTION, t))
        )
        mp.setattr(messages, "_may_request", lambda t: True)
        return _verdicts(text)


def test_the_oracle_is_the_regex_version() -> None:
    """The oracle really swaps the matchers (else the comparison above proves nothing)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(messages, "_QUESTION_RE", messages._compile(r"\bnothing-matches-this\b"))
        verdict = classify_message("what now", state=None, checkpoint=Checkpoint.NONE)
    assert verdict.kind != "QUESTION"
    assert classify_message("what now", state=None, checkpoint=Checkpoint.NONE).kind == "QUESTION"


def test_the_classifier_constants_are_message_kind_values() -> None:
    """messages._K, the plain values the prompt hook judges with, names exactly MessageKind's
    members: a value added to one and not the other fails here, not in a user's prompt."""
    constants = {k: v for k, v in vars(messages._K).items() if not k.startswith("_")}
    assert constants == {m.name: m.value for m in messages.MessageKind}


def test_message_kind_is_the_str_enum_it_was() -> None:
    """MessageKind is built by taskgate.enum_lite (no `enum` on the prompt hook's path): the
    enum.StrEnum of the same names and values, in the same order, and MappingProxyType the
    one of `types`."""
    import enum
    import json
    import types

    lite = messages.MessageKind
    names = ["APPROVAL", "CHANGE_REQUEST", "RESUMPTION", "QUESTION", "AUDIT", "STATUS_REQUEST",
             "UNRELATED_WORK", "OTHER", "AMBIGUOUS"]  # fmt: skip
    real = enum.StrEnum("MessageKind", [(n, n) for n in names])  # type: ignore[misc]
    assert [(m.name, m.value) for m in lite] == [(m.name, m.value) for m in real]
    for member in lite:
        assert repr(member) == repr(real(member.value)) and str(member) == member.value
        assert lite(member.value) is member and lite[member.name] is member
        assert f"{member}" == member.value and json.dumps(member) == json.dumps(member.value)
    assert messages.MappingProxyType is types.MappingProxyType


@settings(max_examples=300, deadline=None)
@given(MESSAGES)
@example("Rename login to sign_in please")
@example("lgtm")
def test_judge_plain_is_judge_with_str_values(text: str) -> None:
    """The prompt hook's `judge_plain` (no enum class created) gives `judge`'s verdict."""
    pending = {State.SYNTHESIS: Checkpoint.PLAN, State.AWAITING_USER_APPROVAL: Checkpoint.CHANGES}
    for state in STATES:
        for checkpoint in {Checkpoint.NONE, pending.get(state, Checkpoint.NONE)}:
            verdict, answered, unpresented = judge(text, state=state, checkpoint=checkpoint)
            assert type(verdict.kind) is messages.MessageKind and type(answered) is Checkpoint
            plain = messages.judge_plain(text, state=state.value, checkpoint=checkpoint.value)
            assert plain == (
                verdict.kind.value,
                verdict.reason,
                verdict.response,
                answered.value,
                unpresented,
            )
            assert all(type(v) in (str, bool) for v in plain)


def test_the_lazy_names_are_the_enums() -> None:
    from taskgate.protocol.message_kind import MessageKind

    assert messages.MessageKind is MessageKind and messages.Checkpoint is Checkpoint
    assert messages.State is State
    assert dict(messages.WAITS_FOR) == {
        State.SYNTHESIS: Checkpoint.PLAN,
        State.AWAITING_USER_APPROVAL: Checkpoint.CHANGES,
    }
    assert all(type(k) is State and type(v) is Checkpoint for k, v in messages.WAITS_FOR.items())
    assert messages.AT_WORK == (State.IMPLEMENTATION, State.VALIDATION, State.REVIEW)
    assert all(type(s) is State for s in messages.AT_WORK)
    assert messages.is_approval("LGTM", Checkpoint.PLAN) is True
    verdict = classify_message("what now", state=None, checkpoint=Checkpoint.NONE)
    assert verdict.kind is MessageKind.QUESTION and verdict.keeps_state


def test_the_request_words_are_words() -> None:
    """_EDIT_VERB's alternatives taken apart are plain lowercase words (else `in` would test
    a regex's text)."""
    assert all(w.isalpha() and w.islower() for w in messages._REQUEST_WORDS)
    assert "implement" in messages._REQUEST_WORDS and "rename" in messages._REQUEST_WORDS


# A change request at the change review for each of _REQUEST_WORDS beyond the edit verbs,
# holding no other of them: dropping any word from the list changes its verdict mid-work.
ONLY = {
    "need": "needs tests", "should": "should be async", "typo": "a typo here",
    "wrong": "this is wrong", "broken": "it is broken", "missing": "this is missing",
    "off": "the count is off", "fail": "it fails on linux", "bad": "it looks bad",
    "confusing": "it is confusing", "unclear": "this is unclear", "instead": "instead of that",
    "rather": "rather than that", "crash": "it crashes", "break": "it breaks",
    "misses": "it misses it", "lacks": "it lacks tests", "regress": "it regressed",
    "work": "it doesn't work", "compile": "it doesn't compile", "build": "it does not build",
    "pass": "it does not pass", "bug": "a bug in it", "touch": "don't touch it",
}  # fmt: skip


@pytest.mark.parametrize("state", [State.IMPLEMENTATION, State.VALIDATION, State.REVIEW])
def test_every_request_word_is_needed(state: State) -> None:
    verbs = messages._EDIT_VERB[3:-1].split("|")
    assert set(messages._REQUEST_WORDS) == {*verbs, *ONLY}
    samples = [*ONLY.items(), *((verb, f"please {verb} it") for verb in verbs)]
    for word, text in samples:
        norm = messages._normalize(text)
        held = [w for w in messages._REQUEST_WORDS if w in norm]
        assert word in held and (word in verbs or held == [word]), (word, held)
        verdict, _, _ = judge(text, state=state, checkpoint=Checkpoint.NONE)
        assert verdict.kind == "CHANGE_REQUEST", (word, text)
