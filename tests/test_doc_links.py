"""Every Markdown link in the user-facing documents points at something that exists.

Relative targets must name a file or folder in the repository; ``#anchor`` fragments
(in the same file or another ``.md``) must match a heading under GitHub's slug rules.
External http(s) and mailto links are not fetched: the fast tier reaches no network.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent


def _documents() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "bench" / "README.md", ROOT / "bench" / "HISTORY.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "deploy").rglob("*.md"))
    files.append(ROOT / "third_party" / "openmq" / "README.md")
    return [f for f in files if f.is_file()]


_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their 1-based numbers."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if line.startswith("    ") or line.startswith("\t"):
            continue  # an indented code block (or a continuation; links there are rare)
        out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's source text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"(\*{1,3})(\S.*?\S|\S)\1", r"\2", text)  # emphasis markers
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # punctuation goes; letters, digits, _ and - stay
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub makes for the file: headings (duplicates get -1, -2...)."""
    seen: Counter[str] = Counter()
    found: set[str] = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        for name in _HTML_ANCHOR.findall(line):
            found.add(name)
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        name = base if seen[base] == 0 else f"{base}-{seen[base]}"
        seen[base] += 1
        found.add(name)
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) for every inline link, image and reference definition."""
    out: list[tuple[int, str]] = []
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        bare = _INLINE_CODE.sub("", line)
        out += [(number, t) for t in _LINK.findall(bare)]
        m = _REF_DEF.match(bare)
        if m:
            out.append((number, m.group(1)))
    return out


def broken_links(path: Path) -> list[str]:
    """A line per broken link in the file: where, the target and why."""
    problems: list[str] = []
    cache: dict[Path, set[str]] = {}
    rel = path.relative_to(ROOT)
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http(s), mailto...: not fetched
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / unquote(file_part)).resolve() if file_part else path
        where = f"{rel}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
            continue
        if not fragment:
            continue
        if dest.suffix != ".md":
            continue  # GitHub anchors into other files (line numbers...) are not checked
        if dest not in cache:
            cache[dest] = anchors(dest)
        if unquote(fragment) not in cache[dest]:
            problems.append(f"{where}: no heading with that anchor")
    return problems


def test_slug_follows_github_rules() -> None:
    assert slug("A backlog bigger than memory (paging)") == "a-backlog-bigger-than-memory-paging"
    assert slug("The database store's tables (`manage.py imqdbmgr`)") == (
        "the-database-stores-tables-managepy-imqdbmgr"
    )
    assert slug("imq.log.syslog_* and **more**") == "imqlogsyslog_-and-more"
    assert slug("[The portal](x.md) — pages") == "the-portal--pages"


def test_duplicate_headings_are_numbered(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text("# Setup\n\n## Setup\n\n```\n# Setup\n```\n\n## Setup\n", encoding="utf-8")
    assert anchors(doc) == {"setup", "setup-1", "setup-2"}


def test_links_skip_code(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text("see [a](a.md) and `[b](b.md)`\n\n```\n[c](c.md)\n```\n", encoding="utf-8")
    assert [t for _, t in links(doc)] == ["a.md"]


@pytest.mark.parametrize("doc", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(doc: Path) -> None:
    assert broken_links(doc) == []
