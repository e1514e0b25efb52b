"""What gpt-oss's browser shows the model: pages as numbered lines, with links it can open by number.

The formats follow the browser the model was trained with (the gpt-oss repository's simple browser):
each view starts with `[CURSOR] TITLE (URL)` and `**viewing lines [A - B] of LAST**`, then lines
`L{n}: text` wrapped at 80 columns; a link reads `【ID†TEXT】`, or `【ID†TEXT†DOMAIN】` when it leaves the
page's site; the model cites what it read as `【CURSOR†L{a}-L{b}】`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

WRAP_COLUMNS = 80
FIND_CONTEXT_LINES = 4  # lines shown per match of `find`
MAX_FIND_MATCHES = 50
KEPT_LINKS = 500  # links of a page kept for later responses (its first ones)

# The brackets the model reads as links and citations: page text gets look-alikes instead, so that a page
# cannot forge a link or a citation.
_BRACKETS = str.maketrans({"【": "〖", "】": "〗", "†": "‡"})


def plain_brackets(text: str) -> str:
    """Text the model reads from outside (a page, a file), its citation brackets made look-alikes."""
    return text.translate(_BRACKETS)


_MARKDOWN_LINK = re.compile(r"(!?)\[([^\[\]\n]{0,500})\]\(([^()\s]{1,2000})(?:\s+\"[^\"\n]*\")?\)")


@dataclass
class Page:
    """A page the model can look at: a fetched document, a list of search results, or matches of `find`.

    `sources`, for result lists, names the document each line came from (what a citation of that line
    points to), as (first line, url, title) in line order."""

    url: str
    title: str
    lines: list[str]
    links: dict[int, str] = field(default_factory=dict)
    sources: list[tuple[int, str, str]] | None = None
    kind: str = "page"  # page | search | find

    def source_of(self, line: int) -> tuple[str, str]:
        """The (url, title) a citation of `line` points to."""
        if not self.sources:
            return self.url, self.title
        chosen = self.sources[0]
        for source in self.sources:
            if source[0] > line:
                break
            chosen = source
        return chosen[1], chosen[2]

    def summary(self) -> dict[str, Any]:
        """What is kept of the page after its response (its text is not): enough to open its links and
        to resolve citations of it in a later response."""
        links = self.links if len(self.links) <= KEPT_LINKS else dict(list(self.links.items())[:KEPT_LINKS])
        return {"url": self.url, "title": self.title, "kind": self.kind, "links": links, "sources": self.sources}

    @classmethod
    def from_summary(cls, data: dict[str, Any]) -> "Page":
        sources = [tuple(source) for source in data["sources"]] if data.get("sources") else None
        links = {int(key): value for key, value in (data.get("links") or {}).items()}
        return cls(data["url"], data["title"], [], links, sources, data.get("kind", "page"))


def domain_of(url: str) -> str:
    return urlsplit(url).hostname or url


def _shown_domain(url: str) -> str:
    """A URL's host as the model reads it: a host may hold `【` and `†` (any page or search result can name
    such a URL), which would otherwise read as a link marker or a citation."""
    return domain_of(url).translate(_BRACKETS)


def wrap(text: str) -> list[str]:
    """Lines of at most 80 columns, broken after a space where there is one; empty lines are kept (they
    separate paragraphs)."""
    lines: list[str] = []
    for line in text.split("\n"):
        while len(line) > WRAP_COLUMNS:
            cut = line.rfind(" ", 0, WRAP_COLUMNS)
            cut = cut + 1 if cut > 0 else WRAP_COLUMNS
            lines.append(line[:cut])
            line = line[cut:]
        lines.append(line)
    return lines


def document_page(url: str, title: str, markdown: str) -> Page:
    """A fetched document, from its text with Markdown links: each link becomes `【ID†TEXT】` (with the
    target's domain when it leaves the page's site), numbered in order of appearance."""
    links: dict[int, str] = {}
    site = _shown_domain(url)

    def link(match: re.Match[str]) -> str:
        image, text, target = match.group(1), match.group(2), match.group(3)
        text = text.translate(_BRACKETS).strip()
        if image:
            return f"[image: {text}]" if text else ""
        absolute = urljoin(url, target)
        if urlsplit(absolute).scheme not in ("http", "https"):
            return text
        number = len(links)
        links[number] = absolute
        target_domain = _shown_domain(absolute)
        return f"【{number}†{text or target_domain}】" if target_domain == site else f"【{number}†{text or target_domain}†{target_domain}】"

    text = _MARKDOWN_LINK.sub(link, markdown.translate(_BRACKETS))
    return Page(url, title.translate(_BRACKETS) or url, wrap(text), links)


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str = ""


def results_page(query: str, results: list[SearchResult]) -> Page:
    """Search results as a page: one link per result, numbered from 0, and its snippet."""
    lines: list[str] = []
    links: dict[int, str] = {}
    sources: list[tuple[int, str, str]] = []
    for number, result in enumerate(results):
        title = result.title.translate(_BRACKETS).strip() or _shown_domain(result.url)
        sources.append((len(lines), result.url, title))
        links[number] = result.url
        head = f"* 【{number}†{title}†{_shown_domain(result.url)}】"
        snippet = " ".join(result.snippet.translate(_BRACKETS).split())
        lines += wrap(f"{head} {snippet}".rstrip())
    query = query.translate(_BRACKETS)
    if not results:
        lines = [f"No results for `{query}`."]
    return Page("", f"Search results for `{query}`", lines, links, sources, kind="search")


def find_page(page: Page, pattern: str) -> Page:
    """The lines of `page` that contain `pattern` (case-insensitive), each match with the lines after it,
    as a page whose links lead back to the match."""
    wanted = pattern.lower()
    lines: list[str] = []
    links: dict[int, str] = {}
    sources: list[tuple[int, str, str]] = []
    number, index = 0, 0
    while index < len(page.lines) and number < MAX_FIND_MATCHES:
        if wanted not in page.lines[index].lower():
            index += 1
            continue
        sources.append((len(lines), page.url, page.title))
        links[number] = page.url
        lines.append(f"# 【{number}†match at L{index}】")
        lines += page.lines[index : index + FIND_CONTEXT_LINES]
        lines.append("")
        number += 1
        index += FIND_CONTEXT_LINES
    if not number:
        lines = [f"No `find` results for pattern: `{pattern}`"]
    title = f"Find results for text: `{pattern}` in `{page.title}`"
    return Page(page.url, title, lines, links, sources, kind="find")


def view(page: Page, cursor: int, loc: int, num_lines: int, budget_chars: int) -> str:
    """The display of `page` from line `loc`: `num_lines` lines, or as many as fit `budget_chars` when the
    model did not say (about 4 characters a token)."""
    total = len(page.lines)
    if num_lines > 0:
        end = min(total, loc + num_lines)
    else:
        end, used = loc, 0
        while end < total and (end == loc or used + len(page.lines[end]) + 8 <= budget_chars):
            used += len(page.lines[end]) + 8
            end += 1
    body = "\n".join(f"L{number}: {page.lines[number]}" for number in range(loc, end))
    where = f" ({page.url})" if page.url else ""
    return f"[{cursor}] {page.title}{where}\n**viewing lines [{loc} - {end - 1}] of {total - 1}**\n\n{body}"
