"""Classify a user message at a checkpoint or during an interruption (RULES §9-§10, pure)."""

from __future__ import annotations

# No dataclasses and no typing at run time (issue 18): every prompt of a session holding a task
# imports this module in the hook process, and those two cost about 12 ms of a 7 ms start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Iterator
    from types import MappingProxyType
    from typing import Any

    from taskgate.protocol.message_kind import MessageKind as MessageKind
    from taskgate.protocol.states import Checkpoint as Checkpoint
    from taskgate.protocol.states import State

    WAITS_FOR: MappingProxyType[State, Checkpoint]
    AT_WORK: tuple[State, ...]
else:
    # types.MappingProxyType itself (the class of a class's __dict__), without importing
    # `types` for it: 0.2 ms of the prompt hook (issue 18).
    MappingProxyType = type(type.__dict__)


class _LazyPattern:
    """A regex compiled on its first use: the hooks import this module on every prompt and
    most prompts need few of its patterns (issue 18)."""

    __slots__ = ("_compiled", "_source")

    def __init__(self, pattern: str, flags: int) -> None:
        self._source = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> object:
        if self._compiled is None:
            import re  # here only: a prompt judged outside a checkpoint needs none (_Words)

            self._compiled = re.compile(*self._source)
        return getattr(self._compiled, name)


def _is_word(ch: str) -> bool:
    """`\\w` of a str pattern: `_` or what str.isalnum calls alphanumeric (sre's
    SRE_UNI_IS_WORD is Py_UNICODE_ISALNUM or '_', the same test)."""
    return ch == "_" or ch.isalnum()


class _Words:
    """A regex of the form `\\b(?:w1|w2\\s+w3|...)\\b` matched with str methods: literal
    words, `\\s+` between the words of one alternative, `\\b` at either end where the
    source has one. What R-INT-03's keywords need, so a prompt judged outside a checkpoint
    does not import `re` (with its parser and compiler about 1.5 ms of a hook: issue 18).
    tests/test_messages_words.py compares it with the regex it stands for (kept there)."""

    __slots__ = ("_alts", "_firsts")

    def __init__(self, *alternatives: tuple[bool, tuple[str, ...], bool]) -> None:
        # (a \b before?, the words, a \b after?); alternatives tried in this order.
        self._alts = alternatives
        self._firsts = tuple(sorted({words[0] for _, words, _ in alternatives}))

    def _at(self, text: str, start: int) -> int:
        """The end of the first alternative matching at `start`, else -1."""
        for before, words, after in self._alts:
            # (at 0 a word's first letter is a boundary: the alternatives begin with one)
            if before and start > 0 and _is_word(text[start - 1]) == _is_word(text[start]):
                continue
            if not text.startswith(words[0], start):
                continue
            end = start + len(words[0])
            for word in words[1:]:
                gap = end
                while gap < len(text) and text[gap].isspace():
                    gap += 1
                if gap == end or not text.startswith(word, gap):
                    end = -1
                    break
                end = gap + len(word)
            if end < 0:
                continue
            if after and (end < len(text) and _is_word(text[end])) == _is_word(text[end - 1]):
                continue
            return end
        return -1

    def _scan(self, text: str, pos: int) -> Iterator[tuple[int, int]]:
        """The matches at or after `pos`, left to right, as (start, end): re's finditer.
        The next place of each alternative's first word is kept, so a long message is read
        once per word (`\\b` sees the character before `pos`, as re's does)."""
        firsts = self._firsts
        nexts = [text.find(word, pos) for word in firsts]
        while True:
            start = min((i for i in nexts if i >= 0), default=-1)
            if start < 0:
                return
            end = self._at(text, start)
            if end >= 0:
                yield start, end
                pos = end
            else:
                pos = start + 1
            for k, i in enumerate(nexts):
                if 0 <= i < pos:
                    nexts[k] = text.find(firsts[k], pos)

    def span(self, text: str, pos: int) -> tuple[int, int] | None:
        """The leftmost match at or after `pos`, as re's search(text, pos).span() gives it."""
        return next(self._scan(text, pos), None)

    def hits(self, text: str) -> tuple[str, ...]:
        """Every match's text, left to right, as re's finditer gives them."""
        return tuple(text[start:end] for start, end in self._scan(text, 0))


def _ends_with_question(text: str) -> bool:
    """re.search(r"\\?[^\\w]*$", text): a "?" with no word character after it."""
    last = len(text) - 1
    while last >= 0 and not _is_word(text[last]):
        last -= 1
    return "?" in text[last + 1 :]


def _compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    lazy: Any = _LazyPattern(pattern, flags)
    return lazy  # type: ignore[no-any-return]


class _K:
    """MessageKind's values as plain str constants: the classifier's own currency, so that the
    prompt hook (hooks/prompt.py through `judge_plain`) creates no enum class (issue 18);
    `classify_message` and `judge` hand out MessageKind members (protocol/message_kind.py)."""

    APPROVAL = "APPROVAL"
    CHANGE_REQUEST = "CHANGE_REQUEST"
    RESUMPTION = "RESUMPTION"
    QUESTION = "QUESTION"
    AUDIT = "AUDIT"
    STATUS_REQUEST = "STATUS_REQUEST"
    UNRELATED_WORK = "UNRELATED_WORK"
    OTHER = "OTHER"
    AMBIGUOUS = "AMBIGUOUS"


# Checkpoint's and State's values the classifier reads (protocol/states.py; the enums' members
# are str subclasses equal to and hashed as their values, so callers may pass either).
_NONE, _PLAN, _CHANGES = "NONE", "PLAN", "CHANGES"


def __getattr__(name: str) -> object:
    """MessageKind, Checkpoint, State, WAITS_FOR and AT_WORK, on first use (PEP 562): the
    prompt hook's path needs none of them."""
    if name not in ("MessageKind", "Checkpoint", "State", "WAITS_FOR", "AT_WORK"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from taskgate.protocol.states import Checkpoint, State

    if name == "MessageKind":
        from taskgate.protocol.message_kind import MessageKind

        value: object = MessageKind
    elif name == "Checkpoint":
        value = Checkpoint
    elif name == "State":
        value = State
    elif name == "WAITS_FOR":
        value = MappingProxyType({State(k): Checkpoint(v) for k, v in _WAITS_FOR.items()})
    else:
        value = tuple(State(k) for k in _AT_WORK)
    globals()[name] = value
    return value


class MessageClass:
    """The verdict on one message: its kind, why, the words that decided it, and the reply.
    Immutable, compared and hashed by value (what a frozen dataclass gave, without importing
    dataclasses)."""

    __slots__ = ("feedback", "kind", "matched", "reason", "response")
    kind: MessageKind
    reason: str
    matched: tuple[str, ...]
    response: str
    feedback: str

    def __init__(
        self,
        kind: MessageKind,
        reason: str,
        matched: tuple[str, ...],
        response: str,
        feedback: str = "",
    ) -> None:
        for name, value in (("kind", kind), ("reason", reason), ("matched", matched),
                            ("response", response), ("feedback", feedback)):  # fmt: skip
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[object, ...]:
        return (self.kind, self.reason, self.matched, self.response, self.feedback)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: MessageClass is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: MessageClass is immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, MessageClass)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"MessageClass(kind={self.kind!r}, reason={self.reason!r}, matched={self.matched!r}, "
            f"response={self.response!r}, feedback={self.feedback!r})"
        )

    @property
    def keeps_state(self) -> bool:
        """False only for the kinds allowed to move the state; others get R-INT-02's check."""
        return self.kind not in (_K.APPROVAL, _K.CHANGE_REQUEST)


# The state each checkpoint waits in (R-CKP-01); a mismatch is a caller bug, not user input.
_CHECKPOINT_STATE = MappingProxyType({_PLAN: "SYNTHESIS", _CHANGES: "AWAITING_USER_APPROVAL"})
_WHAT = MappingProxyType({_PLAN: "plan", _CHANGES: "changes"})
_NEXT = MappingProxyType({_PLAN: "implementation", _CHANGES: "finalization"})
_LABEL = MappingProxyType(
    {
        _K.AUDIT: "Audit requested",
        _K.QUESTION: "Question noted",
        _K.STATUS_REQUEST: "Status requested",
    }
)

# D-CKP-1 "Ambiguous Message Handling", verbatim apart from the filled-in brackets (R-CKP-09).
_CLARIFICATION = (
    "I'm currently waiting for your approval of {what}. To confirm:\n"
    " - If you approve: Please say 'yes, approved' or 'proceed with {next}'\n"
    " - If you need changes: Please specify what to modify\n"
    " - If you want me to continue waiting: I will wait for your review"
)

# R-CKP-16, worded after seed 002 "Scenario 4: User Requests Unrelated Work".
_UNRELATED = (
    "I'm currently waiting for your approval of the {what}. Due to task protocol isolation "
    "requirements, I cannot start other work until this task completes. Would you like me to:\n"
    " 1. Continue waiting for your review approval, OR\n"
    " 2. Abandon the current task and start the new work (will lose checkpoint progress)"
)

# R-CKP-08 keyword set (C-25) plus a few common sign-offs; whole words, matched on casefolded text.
# Deliberately absent: "ok", "sure", "yeah", "sounds good", emoji - they only acknowledge.
_APPROVAL_RE = _compile(
    r"\b(?:yes|approved?|proceed|looks?\s+(?:good|great)|lgtm|sgtm|go\s+ahead|merge\s+it"
    r"|ship\s+it|go\s+for\s+it|good\s+to\s+go)\b"
)
# "merge" alone is a sign-off only as a bare command; "merge conflicts look bad" is not one.
_BARE_MERGE_RE = _compile(r"^(?:please\s+)?merge(?:\s+(?:this|now|away))?(?:\s+please)?$")


# D-INT-2 regexes, made case-insensitive and whole-word (C-26), in R-INT-03 order.
# "carry on" / "go on" say the same as "continue" (D-INT-1); resuming never moves the state.
# Matched with str methods (_Words), not `re`: R-INT-03's keyword regexes, which are all a prompt
# outside a checkpoint needs (issue 18); the regex each stands for is in its comment.
def _whole(*alternatives: str) -> _Words:
    return _Words(*((True, tuple(a.split()), True) for a in alternatives))


# \b(?:continue|resume|proceed|carry\s+on|go\s+on)\b
_RESUMPTION_RE = _whole("continue", "resume", "proceed", "carry on", "go on")
# /audit-session\b|\baudit\b
_AUDIT_RE = _Words((False, ("/audit-session",), True), (True, ("audit",), True))
# \b(?:what|how|why|explain|clarify)\b
_QUESTION_RE = _whole("what", "how", "why", "explain", "clarify")
# \b(?:status|progress)\b
_STATUS_RE = _whole("status", "progress")
# D-INT-2's "keep.*going" and "where.*are.*we" as whole words in order: one regex with two
# ".*" backtracks cubically on a long pasted message. \bkeep\b, \bgoing\b; \bwhere\b, ...
_KEEP_GOING = (_whole("keep"), _whole("going"))
_WHERE_ARE_WE = (_whole("where"), _whole("are"), _whole("we"))
# R-INT-05: "?" at the end, allowing trailing "!", quotes, brackets or emoji after it:
# \?[^\w]*$ (_ends_with_question).

# Words that show the person is still asking, even without a "?" ("LGTM, one question: ...").
# "No questions, LGTM" holds no question (its "no" still blocks approval: AMBIGUOUS).
_QUESTION_HINT_RE = _compile(r"(?<!\bno )\b(?:questions?|wonder|wondering|curious)\b")
# Any negation anywhere blocks approval (R-CKP-08); a false approval costs more than a re-ask.
_NEGATION_RE = _compile(
    r"\b(?:not|no|never|nope|nah|neither|nor|cannot|\w+n't|dont|doesnt|isnt|cant|wont)\b"
    r"|\b(?:hold\s+(?:on|off|up)|wait|stop|reject(?:ed)?|disapproved?|declined?|veto(?:ed)?)\b"
    r"|👎"
)
# An explicit "no" / "not yet": reported as declined rather than asked about again.
_DECLINE_RE = _compile(
    r"^(?:no(?!\s+(?:problem|worries|objections?|issues?|concerns?|complaints?|comments?|questions?)\b)"
    r"|nope|nah|not\s+yet|not\s+now|hold\s+(?:on|off|up)|wait|stop|reject|decline"
    r"|disapprove|thumbs\s+down)\b"
    r"|\bnot\s+yet\b|\bhold\s+off\b|\b(?:rejected|disapproved?|declined|veto(?:ed)?)\b"
    r"|\b(?:not|never|don't|dont|do\s+not|doesn't|does\s+not|isn't|is\s+not|can't|cannot|won't)"
    r"\s+(?:\w+\s+){0,2}?(?:approved?|approving|proceed|merge|ship|go\s+ahead|ready|good|lgtm"
    r"|happy|convinced)\b"
)
# Contrast, condition or hedging next to an approval word means "not unconditionally yes".
_HEDGE_RE = _compile(
    r"\b(?:but|however|though|although|except|unless|if|once|when|after|before|until"
    r"|otherwise|maybe|perhaps|probably|hmm+|guess|suppose|almost|mostly|assuming)\b"
)
# Acknowledgements that say nothing about approval (R-CKP-08 "continue, okay, ok" alone).
_ACK = (
    r"(?:ok(?:ay)?|k+|sure|fine|alright|all\s+right|cool|yeah|yep|yup|sounds\s+good|got\s+it"
    r"|noted|continue|do\s+it|let's\s+do\s+it|let's\s+go)"
)
# One token per space: "(?:k+\s*)+" would backtrack exponentially on "kkkk...x".
_ACK_ONLY_RE = _compile(rf"^{_ACK}(?:\s{_ACK})*$")
# Approval-like words outside the R-CKP-08 set: the person probably approves, so ask them to
# say it in the documented words (D-CKP-1 clarification) instead of guessing either way.
_SOFT_APPROVAL_RE = _compile(
    r"\blooks?\s+(?:fine|ok(?:ay)?|alright|solid|right)\b|\ball\s+good\b|\bworks\s+for\s+me\b"
    r"|\b(?:fine|ok(?:ay)?|good)\s+(?:by|with|for)\s+me\b|\bhappy\s+with\b|\bmerge\b"
    r"|\bsign(?:ed)?\s+off\b|\bship\s+(?:this|them)\b|\bthumbs\s+up\b"
)
# Option 1 of R-CKP-16: keep waiting; not a resumption, so it must not loop into AMBIGUOUS.
_KEEP_WAITING_RE = _compile(r"\b(?:continue|keep)\s+(?:on\s+)?waiting\b")
_THUMBS_DOWN = "👎"

# R-CKP-16: explicit markers only, so "update the README" stays a change request.
_UNRELATED_RE = _compile(
    r"\b(?:another|different|other|next|new|separate|unrelated)\s+(?:task|ticket|project)s?\b"
    r"|\bsomething\s+else\b|\bin\s+the\s+meantime\b|\bmeanwhile\b"
    r"|\b(?:start|begin|switch\s+to|move\s+on\s+to|jump\s+to|pick\s+up|work\s+on)\s+(?:on\s+)?"
    r"(?:the\s+|a\s+)?(?:[\w/#-]+\s+){0,2}?(?:task|ticket|issue)\b"
    r"|\b(?:while|whilst)\s+(?:i|you)(?:'m|\s+am)?\s+(?:review|reviewing|wait|waiting|look"
    r"|looking|test|testing|check|checking)\b"
)

# Verbs that ask for an edit (R-INT-11 "rename X", "fix Y"; R-CKP-15 plan changes).
_EDIT_VERB = (
    r"(?:rename|fix|change|add|remove|delete|drop|update|refactor|move|replace|rewrite|revert"
    r"|split|extract|simplify|use|make|adjust|tweak|modify|include|document|reword|revise|edit"
    r"|correct|amend|restore|undo|squash|reorder|format|shorten|expand|cover|handle|avoid"
    r"|convert|improve|clean|inline|bump|raise|lower|increase|decrease|reduce|limit|mention"
    r"|keep|leave|return|accept|reject|validate|check|throw|support|allow|ensure|implement)"
)
# A clause opening with an edit verb is an imperative, unless the verb is really a noun
# ("Change looks good", "Use of X is fine") or has no object ("Update: LGTM").
_IMPERATIVE_RE = _compile(
    rf"^(?:(?:please|pls|kindly|also|and|then|just|so|now|ok|okay|first|maybe|only|instead)\s+)*"
    rf"{_EDIT_VERB}(?=\s+\w)"
    r"(?!\s+(?:looks?|is|are|was|were|seems?|of|sounds?|makes|works?|lgtm|approved|going|on"
    r"|waiting|up)\b)"
)
# Polite forms stay requests even when they end in "?" ("Can you add error handling details?").
_POLITE_REQUEST_RE = _compile(
    rf"\b(?:please|pls|kindly)\s+(?:also\s+|just\s+|now\s+)?{_EDIT_VERB}\b"
    rf"|\b(?:can|could|would|will)\s+(?:you|we)\s+(?:please\s+)?(?:also\s+|just\s+|maybe\s+)?"
    rf"{_EDIT_VERB}\b"
)
_REQUEST_RE = _compile(
    rf"\b(?:you|we)\s+(?:should|must|need\s+to|have\s+to|ought\s+to)\s+(?:also\s+|still\s+)?"
    rf"{_EDIT_VERB}\b"
    rf"|\b(?:i'd|i\s+would|i)\s+(?:like|want|prefer)\s+(?:you\s+|us\s+)?to\s+(?:also\s+)?"
    rf"{_EDIT_VERB}\b"
    rf"|\blet's\s+(?:also\s+|just\s+)?{_EDIT_VERB}\b"
    r"|\bneeds?\s+(?:to\s+be|more|an?|some|tests?|docs?)\b"
    r"|\bshould\s+(?:be|use|have|return|raise|accept)\b"
    r"|\btypos?\b|\b(?:is|are|looks?|seems?)\s+(?:wrong|broken|missing|incorrect|off|failing|bad"
    r"|confusing|unclear)\b"
    r"|\binstead\s+of\b|\brather\s+than\b"
    # Problem reports ask for a fix as surely as "fix Y" does (R-INT-11).
    r"|\b(?:crash(?:es|ed)?|breaks|misses|lacks|regress(?:es|ed)?)\b"
    r"|\b(?:doesn't|does\s+not|don't|do\s+not)\s+(?:work|compile|build|pass)\b"
    r"|\b(?:fails?|failed|failing)\s+(?:on|when|for|with|if|in|the)\b|\bbug\s+in\b"
    r"|\b(?:don't|do\s+not|never)\s+(?:change|touch|rename|remove|break|add)\b"
)
_WH_START_RE = _compile(r"\W*(?:what|how|why|when|where|which|who)\b")
_SENTENCE_SPLIT_RE = _compile(r"(?<=[.!?;\n])\s+")
_CLAUSE_SPLIT_RE = _compile(
    r"[,;:.!?()\"\n]+|\s[-–—]+\s|\b(?:but|and|then|also|though|however|otherwise|plus)\b"
)
_NON_WORD_RE = _compile(r"[^\w\s']+")


def clarification_text(checkpoint: str) -> str:
    """The D-CKP-1 clarification for an AMBIGUOUS message at a pending checkpoint (R-CKP-09)."""
    if checkpoint == _NONE:
        raise ValueError("no checkpoint is pending, so there is no approval to clarify (R-CKP-09)")
    return _CLARIFICATION.format(what=_WHAT[checkpoint], next=_NEXT[checkpoint])


def is_approval(text: str, checkpoint: Checkpoint) -> bool:
    """True only if `text` approves the pending checkpoint (R-CKP-06/07/08)."""
    return _classify(text, None, checkpoint)[0] == _K.APPROVAL


def classify_message(text: str, *, state: State | None, checkpoint: Checkpoint) -> MessageClass:
    """Classify a user message per RULES §9-§10 with resolutions C-25, C-26 and C-68."""
    return _message_class(_classify(text, state, checkpoint))


_Verdict = tuple[str, str, tuple[str, ...], str, str]  # kind, reason, matched, response, feedback


def _message_class(verdict: _Verdict) -> MessageClass:
    from taskgate.protocol.message_kind import MessageKind

    kind, reason, matched, response, feedback = verdict
    return MessageClass(MessageKind(kind), reason, matched, response, feedback)


def _classify(text: str, state: str | None, checkpoint: str) -> _Verdict:
    """classify_message's verdict with plain str values (its kind a MessageKind value)."""
    expected = _CHECKPOINT_STATE.get(checkpoint)
    if expected is not None and state is not None and state != expected:
        raise ValueError(f"checkpoint {checkpoint} is pending only in {expected}, not {state}")
    norm = _normalize(text)
    if checkpoint == _NONE:
        kind, reason, matched = _interruption_kind(norm)
        return _build(kind, reason, matched, text, state, checkpoint)
    kind, reason, matched = _checkpoint_kind(norm)
    return _build(kind, reason, matched, text, state, checkpoint)


def _normalize(text: str) -> str:
    # Case-insensitive (C-26); typographic apostrophes so "don’t" negates like "don't".
    folded = text.casefold().replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(folded.split())


def _words(norm: str) -> str:
    # Punctuation and emoji dropped: "Approved!" and "approved" read the same.
    return " ".join(_NON_WORD_RE.sub(" ", norm).split())


def _hits(pattern: _Words | re.Pattern[str], text: str) -> tuple[str, ...]:
    if isinstance(pattern, _Words):
        return pattern.hits(text)
    return tuple(m.group(0) for m in pattern.finditer(text))


def _in_order(text: str, patterns: tuple[_Words, ...]) -> tuple[str, ...]:
    # Leftmost match of each word after the previous one: linear, and finds any ordered match.
    start, pos = -1, 0
    for pattern in patterns:
        found = pattern.span(text, pos)
        if found is None:
            return ()
        if start < 0:
            start = found[0]
        pos = found[1]
    return (text[start:pos],)


def _resumption_hits(norm: str) -> tuple[str, ...]:
    return _hits(_RESUMPTION_RE, norm) + _in_order(norm, _KEEP_GOING)


def _interruption_kind(norm: str) -> tuple[str, str, tuple[str, ...]]:
    """R-INT-03 order, with R-INT-05: a resumption word in a message ending in "?" asks."""
    if not norm:
        return _K.OTHER, "empty message", ()
    if hits := _resumption_hits(norm):
        if _ends_with_question(norm):
            return _K.QUESTION, "resumption word but ends in '?' (R-INT-05)", (*hits, "?")
        return _K.RESUMPTION, "resumption keyword (R-INT-03)", hits
    if hits := _hits(_AUDIT_RE, norm):
        return _K.AUDIT, "audit keyword (R-INT-03)", hits
    if hits := _hits(_QUESTION_RE, norm):
        return _K.QUESTION, "question keyword (R-INT-03)", hits
    if hits := _hits(_STATUS_RE, norm) + _in_order(norm, _WHERE_ARE_WE):
        return _K.STATUS_REQUEST, "status keyword (R-INT-03)", hits
    # "Will this work with existing code?" is OTHER in R-INT-04, so a bare "?" decides nothing.
    return _K.OTHER, "no interruption keyword (R-INT-03)", ()


def _is_request_sentence(sentence: str) -> bool:
    # "Should we add tests?" asks; only polite forms stay requests when they end in "?",
    # and "How will you handle errors?" stays a question despite its "will you handle".
    if "?" in sentence:
        return not _WH_START_RE.match(sentence) and bool(_POLITE_REQUEST_RE.search(sentence))
    if _POLITE_REQUEST_RE.search(sentence) or _REQUEST_RE.search(sentence):
        return True
    clauses = (c.strip() for c in _CLAUSE_SPLIT_RE.split(sentence))
    return any(_IMPERATIVE_RE.search(c) for c in clauses if c)


def _checkpoint_kind(norm: str) -> tuple[str, str, tuple[str, ...]]:
    """At a pending checkpoint approval detection runs first (R-CKP-17, C-26)."""
    words = _words(norm)
    if not words:
        if _THUMBS_DOWN in norm:
            return _K.OTHER, "declined / not yet (thumbs down)", (_THUMBS_DOWN,)
        if norm and not norm.isascii():
            # An emoji reaction (even 👍) acknowledges as often as it approves: ask.
            return _K.AMBIGUOUS, "emoji only (R-CKP-08: ask, never assume)", (norm,)
        return _interruption_kind(norm)
    if hits := _hits(_UNRELATED_RE, norm):
        return _K.UNRELATED_WORK, "unrelated work during a checkpoint (R-CKP-16)", hits

    sentences = [s for s in _SENTENCE_SPLIT_RE.split(norm) if s.strip()]
    requests = [s for s in sentences if _is_request_sentence(s)]
    asking = [s for s in sentences if s not in requests]
    question_words = tuple(
        w for s in asking for w in (*_hits(_QUESTION_RE, s), *_hits(_QUESTION_HINT_RE, s))
    )
    question_mark = any("?" in s for s in asking)
    approvals = _hits(_APPROVAL_RE, norm) or _hits(_BARE_MERGE_RE, words)
    # What keeps approval words from approving; only read when there are some (its regexes
    # are compiled on first use: most messages hold no approval word, issue 18).
    blockers: tuple[str, ...] = ()
    if approvals:
        blockers = (
            *(("?",) if "?" in norm else ()),
            *_hits(_QUESTION_RE, norm),
            *_hits(_QUESTION_HINT_RE, norm),
            *_hits(_NEGATION_RE, norm),
            *_hits(_HEDGE_RE, norm),
            *_hits(_AUDIT_RE, norm),
            *(("change request",) if requests else ()),
        )
    if approvals and not blockers:
        reason = "approval keyword at a pending checkpoint (R-CKP-08)"
        return _K.APPROVAL, reason, approvals

    # A question inside means the person is not done deciding (seed 002 Scenario 2).
    if question_words or (
        question_mark and (approvals or _resumption_hits(norm) or _ACK_ONLY_RE.match(words))
    ):
        reason = "question at a checkpoint: never an approval (C-26)"
        return _K.QUESTION, reason, question_words or ("?",)
    if requests:
        hits = tuple(requests)
        return _K.CHANGE_REQUEST, "change request at a checkpoint (R-INT-11)", hits
    if hits := _hits(_DECLINE_RE, words) or ((_THUMBS_DOWN,) if _THUMBS_DOWN in norm else ()):
        return _K.OTHER, "declined / not yet (R-CKP-08 negation)", hits
    if hits := _hits(_KEEP_WAITING_RE, norm):
        return _K.OTHER, "keep waiting (R-CKP-16 option 1)", hits
    if approvals:
        if hits := _hits(_AUDIT_RE, norm):
            return _K.AUDIT, "audit requested; audits never approve (R-CKP-05)", hits
        reason = "approval word with a negation, condition or hedge (R-CKP-08)"
        return _K.AMBIGUOUS, reason, approvals + blockers
    if _ACK_ONLY_RE.match(words):
        return _K.AMBIGUOUS, "acknowledgement alone (R-CKP-06/07)", (words,)
    if hits := _hits(_SOFT_APPROVAL_RE, norm):
        return _K.AMBIGUOUS, "approval-like words outside R-CKP-08: ask", hits
    kind, reason, matched = _interruption_kind(norm)
    if kind == _K.RESUMPTION:
        reason = "resumption without approval keyword at a checkpoint (R-CKP-08, R-CKP-17)"
        return _K.AMBIGUOUS, reason, matched
    return kind, reason, matched


def _build(
    kind: str,
    reason: str,
    matched: tuple[str, ...],
    text: str,
    state: str | None,
    checkpoint: str,
) -> _Verdict:
    feedback = text.strip() if kind == _K.CHANGE_REQUEST else ""
    response = _response(kind, reason, feedback, state, checkpoint)
    return kind, reason, matched, response, feedback


def _response(kind: str, reason: str, feedback: str, state: str | None, checkpoint: str) -> str:
    what = _WHAT.get(checkpoint, "")
    if kind == _K.AMBIGUOUS:
        return clarification_text(checkpoint)
    if kind == _K.UNRELATED_WORK:
        return _UNRELATED.format(what=what)
    if kind == _K.APPROVAL:
        return f"Approval of the {what} received; next: {_NEXT[checkpoint]}."
    if kind == _K.CHANGE_REQUEST:
        if checkpoint == _PLAN:
            # R-CKP-15: revise task.md and present again; the state stays SYNTHESIS.
            head = "Plan change requested: the plan will be revised and presented again"
        else:
            head = "Change requested: the task goes back for rework (R-INT-11)"
        return f"{head}.\nFeedback: {feedback}"
    if kind == _K.RESUMPTION:
        where = f"{state}" if state is not None else "the preserved state"
        return f"Resuming {where} (R-INT-07)."
    # R-INT-06: everything else does no task work and leaves the state as it was.
    remains = f"state remains: {state}" if state is not None else "state remains unchanged"
    waiting = f"; still waiting for your approval of the {what}" if what else ""
    label = _LABEL.get(kind, "Not approved" if reason.startswith("declined") else "No action taken")
    return f"{label}: {remains}{waiting} (R-INT-06)."


# A person's message in context (engine/conversation.record_human_message and the prompt hook's
# path without the engine, hooks/prompt.py, both judge with this one function).
_WAITS_FOR = MappingProxyType({"SYNTHESIS": _PLAN, "AWAITING_USER_APPROVAL": _CHANGES})
_AT_WORK = ("IMPLEMENTATION", "VALIDATION", "REVIEW")


# Words without one of which no sentence is a change request (issue 18, fifth pass): every
# alternative of _POLITE_REQUEST_RE and _IMPERATIVE_RE, and of _REQUEST_RE's first three, ends
# in an edit verb; each other alternative of _REQUEST_RE holds one of the rest literally
# ("incorrect" holds the verb "correct"). A message holding none of them (as a substring of
# its normalized text) is no change request at the change review, so mid-work words without
# them are judged without `re` (tests/test_messages_words.py compares the verdicts with and
# without this check).
_REQUEST_WORDS = (
    *_EDIT_VERB[3:-1].split("|"),
    "need", "should", "typo", "wrong", "broken", "missing", "off", "fail", "bad",
    "confusing", "unclear", "instead", "rather", "crash", "break", "misses", "lacks", "regress",
    "work", "compile", "build", "pass", "bug", "touch",
)  # fmt: skip


def _may_request(text: str) -> bool:
    """False only when `text` cannot be a change request at the change review."""
    norm = _normalize(text)
    return any(word in norm for word in _REQUEST_WORDS)


def judge(
    text: str, *, state: State, checkpoint: Checkpoint
) -> tuple[MessageClass, Checkpoint, bool]:
    """The verdict on a person's message about a task in `state`, `checkpoint` being the one
    presented and pending (Checkpoint.NONE when none is): (verdict, the checkpoint it answers,
    True when it would approve a checkpoint not presented since it last changed: R-CKP-04
    holds that back, the caller says so)."""
    from taskgate.protocol.states import Checkpoint

    verdict, answered, unpresented = _judge(text, state, checkpoint)
    return _message_class(verdict), Checkpoint(answered), unpresented


def judge_plain(text: str, *, state: str, checkpoint: str) -> tuple[str, str, str, str, bool]:
    """`judge` with plain str values, for the prompt hook (no enum class is created): (the
    verdict's kind, reason and response, the checkpoint it answers, unpresented)."""
    verdict, answered, unpresented = _judge(text, state, checkpoint)
    return verdict[0], verdict[1], verdict[3], str(answered), unpresented


def _judge(text: str, state: str, checkpoint: str) -> tuple[_Verdict, str, bool]:
    verdict = _classify(text, state, checkpoint)
    waiting = _WAITS_FOR.get(state)
    if state in _AT_WORK and verdict[0] != _K.RESUMPTION and _may_request(text):
        # Mid-work words are judged like words at the change review (issue 17): a change
        # request reaches the agents now instead of being logged as an interruption.
        early = _classify(text, None, _CHANGES)
        if early[0] == _K.CHANGE_REQUEST:
            verdict = early
    unpresented = False
    if checkpoint == _NONE and waiting is not None:
        # R-CKP-04 holds back approvals only: a change request needs no presentation to
        # count (R-INT-11), e.g. the person read the diff before the agent presented it.
        early = _classify(text, state, waiting)
        if early[0] == _K.CHANGE_REQUEST:
            verdict, checkpoint = early, waiting
        elif early[0] == _K.APPROVAL:
            unpresented = True
    return verdict, checkpoint, unpresented


def unpresented_note(kind: str, task: str) -> str:
    """Why words that would approve the `kind` checkpoint ("plan", "changes") did not: it was
    not presented since it last changed (R-CKP-04; `judge` says when)."""
    return (
        f"not counted as an approval: the {kind} has not been presented "
        f"since it last changed (R-CKP-04); run 'taskgate present {task}' first"
    )
