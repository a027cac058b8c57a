"""docs/developers/architecture.md against the tree: every module of broker/ and portal/ is
named in its layout, the paths docstrings and comments cite exist, and a module over 700
lines is one the document lists under "Long modules" (a list that only shrinks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs/developers/architecture.md"
MAX_LINES = 700


def _modules(*tops: str) -> list[Path]:
    found = []
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts or path.name == "__init__.py":
                continue
            found.append(rel)
    return found


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _layout_blocks(layout: str) -> dict[str, str]:
    """Each entry of the layout block ("    broker/core/   ...") and its text, continuation
    lines included."""
    blocks: dict[str, str] = {}
    current = None
    for line in layout.splitlines():
        m = re.match(r"^    (\S+?/|\S+\.py)(?:\s|$)", line)
        if m:
            current = m.group(1)
            blocks[current] = line[4 + len(current) :] + "\n"
        elif current and line.startswith("    "):
            blocks[current] += line + "\n"
    return blocks


def _named(rel: str, doc: str, blocks: dict[str, str]) -> bool:
    def mentions(text: str, name: str) -> bool:
        return re.search(r"(?<![\w/])" + re.escape(name) + r"\b", text) is not None

    parts = rel.split("/")
    if mentions(doc, rel) or mentions(doc, "/".join(parts[1:])):
        return True
    for i in range(len(parts) - 1, 0, -1):
        entry = "/".join(parts[:i]) + "/"
        if entry in blocks:
            text = blocks[entry]
            if mentions(text, "/".join(parts[i:])):
                return True
            # a subpackage listed by its modules' names: "views/ (... broker, cluster ...)"
            sub = parts[i] + "/"
            return i < len(parts) - 1 and sub in text and mentions(text, Path(rel).stem)
    return False


def test_every_module_is_named_in_the_layout():
    doc = DOC.read_text()
    blocks = _layout_blocks(_section(doc, "Layout"))
    missing = [
        str(p) for p in _modules("broker", "portal") if not _named(p.as_posix(), doc, blocks)
    ]
    assert not missing, f"modules architecture.md's layout does not name: {missing}"


_CITED = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w-]+\.(?:py|md|json|java|html))\b")


def test_cited_paths_exist():
    """A path in broker/, portal/ or openmq_client/ source (docstring or comment) names a
    file of the repository: from the root, templates/, docs/ or a folder above the citing
    module (``server/admin_service/x.py`` from broker/)."""
    stale = []
    for rel in _modules("broker", "portal", "openmq_client"):
        path = ROOT / rel
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for m in _CITED.finditer(line):
                cited = m.group(1)
                bases = [ROOT, ROOT / "templates", ROOT / "docs", *path.parents]
                if not any((base / cited).exists() for base in bases):
                    stale.append(f"{rel}:{number}: {cited}")
    assert not stale, f"paths cited that are not in the repository: {stale}"


def test_no_new_module_over_the_limit():
    listed = set(re.findall(r"^- `([\w/]+\.py)`", _section(DOC.read_text(), "Long modules"), re.M))
    over = {
        p.as_posix()
        for p in _modules("broker", "portal")
        if len((ROOT / p).read_text().splitlines()) > MAX_LINES
    }
    assert over <= listed, f"over {MAX_LINES} lines and not under Long modules: {over - listed}"
    back = listed - over
    assert not back, f"no longer over {MAX_LINES} lines (or gone): take out of Long modules: {back}"
