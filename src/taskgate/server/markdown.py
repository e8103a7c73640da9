"""A small, safe Markdown renderer for task.md and requirement reports.

Safe by construction: every character of the input is HTML-escaped; the renderer only adds
its own fixed tags (headings, paragraphs, lists, tables, code, emphasis, links to http(s)
only). Raw HTML in the input is shown as text, never interpreted. Covers what taskgate's
plans and reports use; anything else reads as plain text.
"""

from __future__ import annotations

import re
from html import escape

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)[ \t]*([\w+.-]*)")
_ITEM = re.compile(r"^([ \t]*)([-*+]|\d{1,9}[.)])[ \t]+(.*)$")
_RULE = re.compile(r"^[ \t]*([-*_])([ \t]*\1){2,}[ \t]*$")
_TABLE_SEP = re.compile(r"^[ \t]*\|?[ \t]*:?-{1,}:?[ \t]*(\|[ \t]*:?-{1,}:?[ \t]*)*\|?[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s()]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)([^*]+?)(?<=\S)\*(?![*\w])")
_CHECKBOX = re.compile(r"^\[([ xX])\][ \t]+")


def inline(text: str) -> str:
    """Inline markup of one line: code spans, links, bold, italic; everything escaped."""
    out: list[str] = []
    pos = 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_emphasis(text[pos : match.start()]))
        out.append(f"<code>{escape(match.group(2).strip())}</code>")
        pos = match.end()
    out.append(_emphasis(text[pos:]))
    return "".join(out)


def _emphasis(raw: str) -> str:
    parts: list[str] = []
    pos = 0
    for match in _LINK.finditer(raw):
        parts.append(_bold_italic(escape(raw[pos : match.start()])))
        url = escape(match.group(2), quote=True)
        label = _bold_italic(escape(match.group(1)))
        parts.append(f'<a href="{url}" rel="noopener noreferrer" target="_blank">{label}</a>')
        pos = match.end()
    parts.append(_bold_italic(escape(raw[pos:])))
    return "".join(parts)


def _bold_italic(escaped: str) -> str:
    escaped = _BOLD.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", escaped)
    return _ITALIC.sub(r"<em>\1</em>", escaped)


def _cells(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def render(text: str) -> str:
    """Markdown to HTML (escaped); unknown constructs come out as paragraphs of text."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    para: list[str] = []
    i = 0

    def flush() -> None:
        if para:
            out.append(f"<p>{'<br>'.join(inline(p) for p in para)}</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker, lang = fence.group(1), fence.group(2)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(marker):
                body.append(lines[i])
                i += 1
            cls = f' class="lang-{escape(lang, quote=True)}"' if lang else ""
            out.append(f"<pre><code{cls}>{escape(chr(10).join(body))}</code></pre>")
            i += 1
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
            i += 1
            continue
        if _RULE.match(line):
            flush()
            out.append("<hr>")
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            flush()
            i = _table(lines, i, out)
            continue
        if line.lstrip().startswith(">"):
            flush()
            quoted: list[str] = []
            while i < len(lines) and lines[i].lstrip().startswith(">"):
                quoted.append(lines[i].lstrip()[1:].removeprefix(" "))
                i += 1
            out.append(f"<blockquote>{render(chr(10).join(quoted))}</blockquote>")
            continue
        if _ITEM.match(line):
            flush()
            i = _list(lines, i, out)
            continue
        para.append(line.strip())
        i += 1
    flush()
    return "\n".join(out)


def _table(lines: list[str], i: int, out: list[str]) -> int:
    head = _cells(lines[i])
    rows: list[list[str]] = []
    i += 2
    while i < len(lines) and "|" in lines[i] and lines[i].strip():
        rows.append(_cells(lines[i]))
        i += 1
    html = ["<table><thead><tr>", *(f"<th>{inline(c)}</th>" for c in head), "</tr></thead>"]
    html.append("<tbody>")
    for row in rows:
        cells = (row + [""] * len(head))[: max(len(head), 1)]
        html.append("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in cells) + "</tr>")
    html.append("</tbody></table>")
    out.append("".join(html))
    return i


def _list(lines: list[str], i: int, out: list[str]) -> int:
    first = _ITEM.match(lines[i])
    assert first is not None
    ordered = first.group(2)[0].isdigit()
    tag = "ol" if ordered else "ul"
    items: list[str] = []
    while i < len(lines):
        match = _ITEM.match(lines[i])
        if match is None:
            if lines[i].startswith((" ", "\t")) and lines[i].strip() and items:
                items[-1] += " " + lines[i].strip()  # a continuation line
                i += 1
                continue
            break
        depth = len(match.group(1).expandtabs(4)) // 2
        items.append(("\u2003" * depth) + match.group(3))
        i += 1
    html = [f"<{tag}>"]
    for item in items:
        indent = len(item) - len(item.lstrip("\u2003"))
        body = item.lstrip("\u2003")
        box = _CHECKBOX.match(body)
        prefix = ""
        if box:
            checked = box.group(1) != " "
            prefix = f'<span class="box">{"&#9745;" if checked else "&#9744;"}</span> '
            body = body[box.end() :]
        style = f' class="depth{min(indent, 4)}"' if indent else ""
        html.append(f"<li{style}>{prefix}{inline(body)}</li>")
    html.append(f"</{tag}>")
    out.append("".join(html))
    return i
