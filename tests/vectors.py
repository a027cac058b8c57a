"""The captured packets of the real OpenMQ clients (``third_party/openmq/vectors``), for every
vector-driven test.

Those tests must fail, never skip or pass with nothing to check, when the vectors are
missing or empty: a parametrized test over an empty glob would otherwise be skipped
("got empty parameter set") and a table built from it would check nothing.  So:

* :func:`vector` / :func:`vector_text` read one file, failing the test with a message
  naming the file and the directory when it is not there;
* :func:`vector_files` lists files for ``parametrize`` and module-level tables; it never
  returns an empty list: without vectors it returns one placeholder, which fails the
  test that gets it (see ``pytest_runtest_setup`` in ``tests/conftest.py``);
* modules whose tables come from the vectors set ``pytestmark = NEEDS_VECTORS``: each of
  their tests fails when the vectors are missing or empty.

``IMQ_TEST_VECTORS`` names another directory (the helper's own test points it at an
empty one).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker.stock_paths import VECTORS

__all__ = [
    "NEEDS_VECTORS",
    "VECTORS",
    "missing_reason",
    "one_vector",
    "placeholder_reason",
    "read_all",
    "vector",
    "vector_files",
    "vector_names",
    "vector_text",
]


# Marks a module (``pytestmark = NEEDS_VECTORS``) or a parameter that needs the vectors.
NEEDS_VECTORS = pytest.mark.needs_vectors


def missing_reason(directory: Path | None = None) -> str | None:
    """Why the vectors cannot be used (missing or empty directory), or None."""
    directory = VECTORS if directory is None else directory
    if not directory.is_dir():
        return (
            f"the captured client packets are missing: {directory} is not a directory "
            "(the vector-driven tests need the repository's third_party/openmq/vectors, or "
            "IMQ_TEST_VECTORS naming a copy)"
        )
    if not any(directory.rglob("*.hex")):
        return f"the captured client packets are missing: {directory} holds no *.hex file"
    return None


def _path(rel: str) -> Path:
    reason = missing_reason()
    if reason:
        pytest.fail(reason, pytrace=False)
    path = VECTORS / rel
    if not path.is_file():
        pytest.fail(f"vector {rel} is missing from {VECTORS}", pytrace=False)
    return path


def vector_text(rel: str) -> str:
    """The text of ``third_party/openmq/vectors/<rel>``; fails the test when it is not there."""
    return _path(rel).read_text()


def vector(rel: str) -> bytes:
    """The packet bytes of the hex file ``third_party/openmq/vectors/<rel>``."""
    return bytes.fromhex(vector_text(rel).strip())


class MissingVector(type(Path())):  # type: ignore[misc]
    """The placeholder :func:`vector_files` returns when no file matches: reading it
    fails the test with the reason."""

    reason = ""

    def read_text(self, *args: object, **kwargs: object) -> str:
        pytest.fail(self.reason, pytrace=False)

    def read_bytes(self) -> bytes:
        pytest.fail(self.reason, pytrace=False)


def vector_files(
    pattern: str, under: str = "", where: Callable[[Path], bool] | None = None
) -> list[Path]:
    """Sorted files under ``third_party/openmq/vectors/<under>`` matching the glob ``pattern``
    (``**/`` to recurse) and ``where``, or one :class:`MissingVector` placeholder when
    there are none."""
    base = VECTORS / under if under else VECTORS
    files = sorted(base.glob(pattern)) if base.is_dir() else []
    if where is not None:
        files = [p for p in files if where(p)]
    if files:
        return files
    placeholder = MissingVector(base / MISSING_NAME)
    placeholder.reason = missing_reason() or (
        f"no vector matches {pattern} in {base} (the captured client packets are incomplete)"
    )
    return [placeholder]


def one_vector(pattern: str, under: str = "") -> Path:
    """The first file under ``third_party/openmq/vectors/<under>`` matching ``pattern``; fails the
    test when there is none."""
    (first, *_) = files = vector_files(pattern, under)
    if isinstance(first, MissingVector):
        pytest.fail(first.reason, pytrace=False)
    return files[0]


MISSING_NAME = "<no vectors>"


def vector_names(
    pattern: str, under: str = "", where: Callable[[Path], bool] | None = None
) -> list[str]:
    """Like :func:`vector_files`, as paths relative to the vectors directory (the
    placeholder is :data:`MISSING_NAME`)."""
    files = vector_files(pattern, under, where)
    if isinstance(files[0], MissingVector):
        return [MISSING_NAME]
    return [p.relative_to(VECTORS).as_posix() for p in files]


def placeholder_reason(value: object) -> str | None:
    """The failure a test given ``value`` as a parameter must report, if ``value`` is the
    placeholder of :func:`vector_files` / :func:`vector_names`."""
    if isinstance(value, MissingVector):
        return value.reason
    if isinstance(value, str) and value == MISSING_NAME:
        return missing_reason() or "no vector matches the test's pattern in " + str(VECTORS)
    return None


def read_all(files: list[Path]) -> list[bytes]:
    """The packet bytes of ``files`` (nothing for the placeholder: the module's tests
    fail on it through ``NEEDS_VECTORS``)."""
    return [bytes.fromhex(p.read_text().strip()) for p in files if not isinstance(p, MissingVector)]
