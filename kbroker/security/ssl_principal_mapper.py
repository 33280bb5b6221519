"""SslPrincipalMapper: ``ssl.principal.mapping.rules`` turns a client certificate's subject into
the name of its principal, with Kafka's rule syntax and semantics.

The rules are a comma-separated list, tried in order; the first that applies gives the name:

- ``DEFAULT`` applies to every subject and keeps it as it is (the whole distinguished name);
- ``RULE:pattern/replacement/`` applies when the regular expression matches the whole subject,
  and gives the subject with every match replaced (``$1`` names a group); a trailing ``L`` or
  ``U`` (``RULE:pattern/replacement/L``) lower- or upper-cases the result.

``/`` and ``\\`` are escaped with a backslash inside a pattern or replacement. A subject no rule
applies to is an authentication failure (Kafka's ``NoMatchingRule``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RULES = "DEFAULT"

# One rule: DEFAULT, or RULE:<pattern>/<replacement>/<L|U|nothing>, or anything else (an error).
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(Exception):
    """No rule applies to a certificate's subject: the connection cannot be given a principal."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if self.pattern.fullmatch(subject) is None:
            return None
        name = self.pattern.sub(_python_replacement(self.replacement, self.pattern.groups), subject)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name


class SslPrincipalMapper:
    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        """Parse ``rules`` (ValueError, with Kafka's message, for an invalid one)."""
        texts = _split(DEFAULT_RULES if rules is None else rules)
        self.rules = [rule for rule in map(_parse, texts) if rule is not None]

    def name(self, subject: str) -> str:
        """The principal name of a certificate subject (Kafka's RFC 2253 form)."""
        for rule in self.rules:
            name = rule.apply(subject)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {subject}")


def _split(rules: str) -> list[str]:
    return [match.group(1) for match in _SPLITTER.finditer(rules.strip())]


def _parse(text: str) -> _Rule | None:
    """A rule, or None for an empty one (ignored, as Kafka ignores it)."""
    match = _PARSER.match(text)
    if match is None:
        raise ValueError(f"Invalid rule: {text}")
    if match.end() != len(text):
        raise ValueError(f"Invalid rule: `{text}`, unmatched substring: `{text[match.end():]}`")
    if match.group(1) is not None:
        return _Rule(None)
    if match.group(2) is not None:
        try:
            pattern = re.compile(match.group(2))
        except re.error as exc:
            raise ValueError(f"Invalid rule: {text}: {exc}") from None
        return _Rule(pattern, match.group(4), match.group(6))
    return None  # an empty rule (a lazy match of nothing; anything longer is unmatched above)


def _python_replacement(replacement: str, groups: int) -> str:
    """A Java replacement string (``$n`` group references, backslash escapes) for ``re.sub``.

    As in Kafka, ``$n`` beyond the pattern's groups drops trailing digits until it names a group
    (``$12`` with one group is ``$1`` then ``2``), and is a literal ``$n`` when none is left."""
    out = []
    i = 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        reference = _BACK_REFERENCE.match(replacement, i) if ch == "$" else None
        if reference is not None:
            digits = reference.group(1)
            while len(digits) > 1 and int(digits) > groups:
                digits = digits[:-1]
            if int(digits) <= groups:
                out.append(f"\\g<{int(digits)}>")
                i += 1 + len(digits)
                continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)
