"""What a syntax error is, said as the writer would say it (issue 13).

LALR reports the first token it cannot take and the terminals it could have
taken there. That is exact, and often not what is wrong: a misspelled
keyword is read as a name (`stagee srv : fifo;` said "expected 'pull'", the
one item that starts with a name), a missing `;` after an expression that
ends in a name is found on the next line (`set t0 = now` then `run srv (1);`
said "expected 'in', found 'srv'": `now run` could begin an aggregate), a
missing `}` at the next item, lines later. ``diagnose`` replays the tokens up
to the error with lark's interactive parser, keeping the parser's state
before each of the last few tokens and the braces still open, and recognises
these cases, in this order:

1. an unclosed block: braces are open and the error is at an item written
   at the margin (or the end of the file): the innermost `{` still open is
   named, at its place;
2. a missing `;`: a `;` could have ended the statement before a line break
   within the last few tokens: the error is put at the end of that
   statement;
3. an unknown item or statement: the token before the error is a name read
   where an item or a statement begins: the nearest keyword is suggested;
4. a hold's clauses out of order: the order is given;
5. a word near a keyword the parser expected: that keyword is suggested.

Anything else keeps the parser's own "expected …, found …".
"""

from __future__ import annotations

import difflib
import re
from collections import deque

import lark

from ..errors import ProgramError, Span

#: The words that begin an item (seed 002 §2, item), the ones that begin a
#: statement (stmt and serving), and a hold's clauses in their order.
ITEM_WORDS = ("let", "use", "def", "pool", "stage", "workload", "session", "server", "queue", "run", "share",
              "gauge")
HOLD_CLAUSES = ("reserve", "reuse", "content", "at", "cache", "lease")
HOLD_ORDER = ("hold POOL (n) [reserve (r)], POOL (n) … [reuse (e)] [content (K : L, …)] "
              "[at admission (NAME = e, …)] { … } [cache (e)] [lease POOL (t)]")
#: How many tokens back a missing `;` is looked for.
LOOKBACK = 4


def diagnose(text: str, file: str, error: lark.exceptions.UnexpectedToken, parser: lark.Lark,
             spellings: dict[str, str], expected: set[str]) -> ProgramError | None:
    """A ProgramError that says what is wrong, or None for the parser's own message."""
    token = error.token
    at_end = token.type == "$END"
    history, braces = replay(text, parser, None if at_end else token.start_pos)
    words = {name: spelling[1:-1] for name, spelling in spellings.items()
             if spelling.startswith("'") and spelling[1:-1].isidentifier()}
    return (find_unclosed_block(text, file, token, braces)
            or find_missing_semicolon(file, token, history)
            or find_unknown_word(file, token, history, words)
            or find_clause_out_of_order(text, file, token)
            or find_near_keyword(file, token, expected, words)
            or find_split_word(file, token, history, words))


def replay(text: str, parser: lark.Lark, stop: int | None):
    """The last tokens before ``stop`` (each with the parser's state before it
    was read) and the `{` tokens still open there."""
    interactive = parser.parse_interactive(text)
    history: deque = deque(maxlen=LOOKBACK + 1)
    braces: list = []
    try:
        for token in interactive.iter_parse():  # each token is yielded before it is fed
            if stop is not None and token.start_pos >= stop:
                break
            history.append((token, interactive.copy(deepcopy_values=False)))
            if token.value == "{":
                braces.append(token)
            elif token.value == "}" and braces:
                braces.pop()
    except (lark.exceptions.UnexpectedInput, lark.exceptions.UnexpectedEOF):
        pass  # the contextual lexer stops at the error token itself
    return list(history), braces


def token_span(file: str, token) -> Span:
    return Span(file, token.line, token.column, token.end_column)


def accepted(state) -> set[str]:
    try:
        return set(state.accepts())
    except Exception:  # noqa: BLE001 - no diagnosis rather than a crash while reporting one
        return set()


def find_unclosed_block(text: str, file: str, token, braces: list) -> ProgramError | None:
    """1. Braces open, and the error at the end of the file or on a line that
    begins at the margin with an item's word: a `}` is missing."""
    if not braces:
        return None
    if token.type != "$END":
        if braces[-1].line >= token.line:  # the open block is on the error's line: not an item after it
            return None
        line = text.splitlines()[token.line - 1] if token.line - 1 < len(text.splitlines()) else ""
        first = line.split()[0] if line.split() else ""
        if not (line[:1].isalpha() and first.rstrip("{(;") in ITEM_WORDS):
            return None
        where = f"before line {token.line}"
    else:
        where = "before the end of the file"
    brace = braces[-1]
    others = [b.line for b in braces[:-1]]
    also = ""
    if others:
        lines = ", ".join(str(n) for n in others)
        also = f" (the `{{` of line{'s' if len(others) > 1 else ''} {lines} {'are' if len(others) > 1 else 'is'} open too)"
    return ProgramError(f"this `{{` (line {brace.line}) is never closed: a `}}` is missing {where}{also}",
                        token_span(file, brace))


def find_missing_semicolon(file: str, token, history: list) -> ProgramError | None:
    """2. A line break within the last few tokens where `;` could have ended
    the statement: the `;` is missing there."""
    following = [token] + [t for t, _ in reversed(history)]
    states = [state for _, state in reversed(history)]
    # boundary k: between following[k + 1] (earlier) and following[k] (later); the state before following[k]
    for k in range(min(LOOKBACK, len(history))):
        later, earlier = following[k], following[k + 1]
        state_before_later = states[k - 1] if k > 0 else None
        closes = k == 0 and later.value == "}"  # `run srv (1) }`: the block ends, the statement had no `;`
        if later.type == "$END" or (later.line <= earlier.end_line and not closes):
            continue
        if state_before_later is None:
            # the state before the error token: the one after `earlier` was fed, rebuilt from the snapshot
            state_before_later = states[0].copy(deepcopy_values=False)
            try:
                state_before_later.feed_token(earlier)
            except Exception:  # noqa: BLE001
                continue
        if "SEMICOLON" in accepted(state_before_later):
            then = "the block ends" if closes else f"the next line begins with `{later.value}`"
            return ProgramError(f"missing `;` at the end of this statement ({then})",
                                Span(file, earlier.end_line, earlier.end_column, earlier.end_column + 1))
    return None


def find_unknown_word(file: str, token, history: list, words: dict[str, str]) -> ProgramError | None:
    """3. The token before the error is a name where an item or a statement
    begins (the parser took it for `NAME pull …` or a call `NAME(…)`)."""
    if not history:
        return None
    previous, state = history[-1]
    if previous.type != "NAME":
        return None
    names = accepted(state)
    if {"STAGE", "POOL"} <= names:
        kind, starts = "item", [w for w in ITEM_WORDS]
    elif {"SET", "OBSERVE"} <= names:
        kind, starts = "statement", sorted(words[n] for n in names if n in words)
    else:
        return None
    if previous.value in starts:
        return None
    near = difflib.get_close_matches(previous.value, starts, n=1, cutoff=0.6)
    if near:
        return ProgramError(f"unknown {kind} `{previous.value}` (did you mean `{near[0]}`?)",
                            token_span(file, previous))
    if kind == "item":
        listed = ", ".join(ITEM_WORDS)
        return ProgramError(f"unknown item `{previous.value}`: an item begins with {listed}, or is "
                            "`QUEUE pull QUEUE …;`", token_span(file, previous))
    return ProgramError(f"unknown statement `{previous.value}`: a statement begins with a keyword ({', '.join(starts)}) "
                        "or calls a def or a queue's entry, `NAME(…);`", token_span(file, previous))


def find_clause_out_of_order(text: str, file: str, token) -> ProgramError | None:
    """4. A hold's clause where the parser no longer takes it: the statement
    it is in (the text since the last `;`, `{` or `}`) is a hold."""
    if token.type == "$END" or token.value not in HOLD_CLAUSES:
        return None
    start = max(text.rfind(mark, 0, token.start_pos) for mark in ";{}") + 1
    if not re.search(r"\bhold\b", text[start:token.start_pos]):
        return None
    clause = "at admission" if token.value == "at" else token.value
    return ProgramError(f"`{clause}` is out of place: a hold's clauses go in the order {HOLD_ORDER}",
                        token_span(file, token))


def find_split_word(file: str, token, history: list, words: dict[str, str]) -> ProgramError | None:
    """5'. A word the lexer split into a keyword and the rest (`fifoo` read
    as `fifo` then `o`): the whole word, and the keyword it is near."""
    if token.type == "$END" or not history:
        return None
    previous, state = history[-1]
    if previous.end_pos != token.start_pos or not (str(previous.value) + str(token.value)).isidentifier():
        return None
    word = str(previous.value) + str(token.value)
    near = difflib.get_close_matches(word, sorted(words[n] for n in accepted(state) if n in words), n=1,
                                     cutoff=0.6)
    if not near:
        return None
    return ProgramError(f"unknown word `{word}` (did you mean `{near[0]}`?)",
                        Span(file, previous.line, previous.column, token.end_column))


def find_near_keyword(file: str, token, expected: set[str], words: dict[str, str]) -> ProgramError | None:
    """5. The token is a word near a keyword the parser would take there."""
    if token.type == "$END" or not str(token.value).isidentifier():
        return None
    near = difflib.get_close_matches(str(token.value), sorted(words[n] for n in expected if n in words), n=1,
                                     cutoff=0.6)
    if not near or near[0] == token.value:
        return None
    return ProgramError(f"unknown word `{token.value}` (did you mean `{near[0]}`?)", token_span(file, token))
