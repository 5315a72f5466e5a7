"""A student's text (exception names and messages, reprs, folder and notebook names), made safe.

Every such string is `bounded` before the grader keeps it, and made safe for where it is written:
`for_terminal` (no control character moves the cursor, retitles or clears the screen),
`for_csv_cell` (no formula for a spreadsheet), `for_html` (escaped). Every writer uses these.
"""
import html
import re

LIMIT = 2000   # characters of one string kept: a message with its input is a few hundred

# Written as visible escapes: C0 and C1 controls, DEL, and the characters that reorder or
# break lines (bidirectional overrides and isolates, line and paragraph separators).
_OTHERS = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_ANY_CONTROL = re.compile(f"[\x00-\x1f{_OTHERS}]")
_CONTROL_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f{_OTHERS}]")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_FORMULA_START = ("=", "+", "-", "@")   # a formula in a spreadsheet (OWASP's others, tab and CR, are escaped)


def bounded(text, limit=LIMIT):
    """At most `limit` characters, and encodable as UTF-8. A longer text keeps its start and its
    end (where an exception's message and line are, after its type's name), the cut said between."""
    text = text if isinstance(text, str) else str(text)
    if len(text) > limit:
        cut = f" … [{len(text):,} characters, cut] … "
        kept = max(0, limit - len(cut))
        text = text[:kept - kept // 4] + cut + text[len(text) - kept // 4:]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800"): writing it to a file would stop the run
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def shortened(text, limit):
    """At most `limit` characters for a field that shows a message's start (a grades.csv cell): cut
    at the last space before the limit, never inside a word, and ended by an ellipsis."""
    if len(text) <= limit:
        return text
    kept = text[:limit - 1]
    space = kept.rfind(" ")
    if space > limit // 2:  # a word longer than half the field (a path, a tensor's values) is cut inside
        kept = kept[:space]
    return kept.rstrip(" ,;:") + "…"


def visible(text, newlines=False):
    """Control characters written as escapes (`\\x1b`), so they show instead of acting."""
    pattern = _CONTROL_BUT_NEWLINE if newlines else _ANY_CONTROL
    return pattern.sub(_escape, bounded(text))


def _escape(match):
    char = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or (
        f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def for_terminal(text):
    """One line of a student's text, safe to print."""
    return visible(text)


def for_csv_cell(text):
    """A text cell of a CSV an instructor opens in a spreadsheet: no control character, and a
    cell that a spreadsheet would read as a formula starts with a quote. Plain numbers stay."""
    text = visible(text, newlines=True)   # a quoted CSV cell may hold a newline
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def for_html(text):
    """A student's text in a page: escaped, control characters visible, newlines kept."""
    return html.escape(visible(text, newlines=True))
