"""Tokens of RocketMQ's SQL92 filter language (``SelectorParserTokenManager``).

How it works: one compiled regular expression with a named group per token class is tried at
the current position; the parser pulls tokens one at a time, so (as with JavaCC) text after the
point where the parser stops is never looked at, except the one token it peeks at.

Lexical rules, as in RocketMQ's ``SelectorParser.jj``:

* white space is exactly space, TAB, LF, CR and FF; ``-- ...`` comments need a line end
  (without one, ``--`` is two minus signs) and ``/* ... */`` comments do not nest;
* keywords (NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH ENDSWITH) are matched
  in any ASCII letter case and win over identifiers of the same length;
* identifiers are ``[A-Za-z_$][A-Za-z0-9_$]*`` (ASCII only; no dots);
* decimal literals are ``0`` or ``[1-9][0-9]*`` with an optional ``l``/``L`` suffix (``0L`` is
  ``0`` followed by the identifier ``L``); there are no hex or octal literals;
* floating literals are ``5.``, ``5.5``, ``.5``, ``5E10``, ``5.5e-3`` (no suffix);
* string literals are single-quoted, ``''`` stands for one quote, any other character
  (new lines too) is taken as is.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ariane.errors import FilterSyntaxError

__all__ = ["KEYWORDS", "Lexer", "Token", "TokenKind"]


class TokenKind(enum.Enum):
    """Token classes; keyword kinds are named after the keyword."""

    EOF = "end of expression"
    NOT = "NOT"
    AND = "AND"
    OR = "OR"
    BETWEEN = "BETWEEN"
    IN = "IN"
    TRUE = "TRUE"
    FALSE = "FALSE"
    NULL = "NULL"
    IS = "IS"
    CONTAINS = "CONTAINS"
    STARTSWITH = "STARTSWITH"
    ENDSWITH = "ENDSWITH"
    DECIMAL = "decimal literal"
    FLOAT = "floating-point literal"
    STRING = "string literal"
    ID = "identifier"
    EQ = "'='"
    NE = "'<>'"
    GT = "'>'"
    GE = "'>='"
    LT = "'<'"
    LE = "'<='"
    LPAREN = "'('"
    RPAREN = "')'"
    COMMA = "','"
    PLUS = "'+'"
    MINUS = "'-'"


KEYWORDS: dict[str, TokenKind] = {
    k.value: k
    for k in (
        TokenKind.NOT,
        TokenKind.AND,
        TokenKind.OR,
        TokenKind.BETWEEN,
        TokenKind.IN,
        TokenKind.TRUE,
        TokenKind.FALSE,
        TokenKind.NULL,
        TokenKind.IS,
        TokenKind.CONTAINS,
        TokenKind.STARTSWITH,
        TokenKind.ENDSWITH,
    )
}

_PUNCT: dict[str, TokenKind] = {
    "=": TokenKind.EQ,
    "<>": TokenKind.NE,
    ">": TokenKind.GT,
    ">=": TokenKind.GE,
    "<": TokenKind.LT,
    "<=": TokenKind.LE,
    "(": TokenKind.LPAREN,
    ")": TokenKind.RPAREN,
    ",": TokenKind.COMMA,
    "+": TokenKind.PLUS,
    "-": TokenKind.MINUS,
}

# Longest match wins as in JavaCC: alternatives are ordered so that the longer candidate at a
# position is tried first (a float before a decimal, '<>' and '<=' before '<', a line comment
# before '-'). Keywords are recognised from the identifier's text.
_TOKEN = re.compile(
    r"""
    (?P<skip>[ \t\n\r\f]++
      | --[^\n\r]*+(?:\r\n|\n|\r)
      | /\*[^*]*+\*++(?:[^/*][^*]*+\*++)*+/
    )
  | (?P<float>[0-9]++\.[0-9]*+(?:[eE][+-]?[0-9]++)?+
      | \.[0-9]++(?:[eE][+-]?[0-9]++)?+
      | [0-9]++[eE][+-]?[0-9]++)
  | (?P<decimal>0|[1-9][0-9]*+[lL]?+)
  | (?P<string>'(?:[^']++|'')*')
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*+)
  | (?P<punct><>|<=|>=|[=<>(),+-])
    """,
    re.VERBOSE | re.ASCII,
)


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its class, its text as written, and its 0-based start offset."""

    kind: TokenKind
    text: str
    pos: int


class Lexer:
    """Produces the tokens of ``text`` on demand.

    Args:
        text: the whole expression.
    """

    __slots__ = ("_pos", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def next_token(self) -> Token:
        """Return the next token, skipping white space and comments.

        Raises:
            FilterSyntaxError: the text at the current position is no token.
        """
        text = self._text
        while True:
            pos = self._pos
            if pos >= len(text):
                return Token(TokenKind.EOF, "", pos)
            m = _TOKEN.match(text, pos)
            if m is None:
                raise FilterSyntaxError(_lexical_error(text, pos), pos)
            self._pos = m.end()
            group = m.lastgroup
            if group == "skip":
                continue
            word = m.group()
            if group == "id":
                kind = KEYWORDS.get(word.upper(), TokenKind.ID)
            elif group == "punct":
                kind = _PUNCT[word]
            elif group == "decimal":
                kind = TokenKind.DECIMAL
            elif group == "float":
                kind = TokenKind.FLOAT
            else:
                kind = TokenKind.STRING
            return Token(kind, word, pos)


def _lexical_error(text: str, pos: int) -> str:
    c = text[pos]
    if c == "'":
        return "unterminated string literal"
    if text.startswith("/*", pos):
        return "unterminated comment"
    if c == "." and not text[pos + 1 : pos + 2].isdigit():
        return "'.' must be followed by a digit (identifiers cannot contain '.')"
    return f"unexpected character {c!r}"
