"""Extra modules by distribution: what allowing a third-party module lets a child read.

Allowing a module (``Sandbox(extra_modules=...)``) allows the installed *distribution* that
provides it and that distribution's dependency closure, because a package reads its own data,
its bundled shared libraries (``numpy.libs/``), its metadata (``*.dist-info``, read by
``importlib.metadata.version()``) and imports its dependencies. For each distribution of the
closure the read set is built from the top-level entries of its ``RECORD`` (the installer's
list of every file it wrote):

- a top-level directory is granted whole (``numpy/``, ``numpy.libs/``, ``numpy-2.x.dist-info/``),
  except a namespace package (an identifier-named directory whose ``__init__.py`` the
  distribution does not own, such as ``mpl_toolkits/``): it may only be listed, and the rule is
  applied again to its entries, so another distribution's part of the namespace stays out;
- a top-level file is granted alone (``six.py``, ``pylab.py``); files under a top-level
  ``__pycache__/`` are granted one by one;
- entries leaving the installation directory (``../../bin/f2py``: scripts) are ignored.

An editable install (its ``direct_url.json`` says ``dir_info.editable``) has no files of its
own in ``RECORD`` beyond a ``.pth`` file: the import roots inside its source directory that its
``.pth`` files name (``src/``) are granted and become importable instead; when no ``.pth``
names a directory (an import-hook editable install), the whole source directory is granted.

``Requires-Dist`` markers are evaluated with ``packaging`` against the running interpreter
(never over-approximated), with the extras each requirement asked for: a requirement whose
marker is false is not followed, one whose marker is true but which is not installed is a
start-up error. A distribution without ``RECORD`` (Debian's ``python3-*`` packages install
``.egg-info`` metadata) is a start-up error too: its files cannot be known.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import pathlib
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import cast

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

__all__ = ["DistributionError", "Grants", "distributions_of", "resolve"]


class DistributionError(ValueError):
    """An extra module's distribution cannot be allowed (named, with what to do)."""


@dataclass(frozen=True)
class Grants:
    """What a set of extra modules grants a child.

    Attributes:
        distributions: ``(name, version)`` of every distribution of the closure, sorted.
        read_roots: Real paths (directories and files) the child may read.
        list_roots: Real directories the child may list but not read (installation
            directories and namespace packages).
        sys_path: Entries appended to the child's ``sys.path``, in order.
        native: Whether a distribution of the closure ships native extension modules (then the
            Python-level layers are no barrier: only the kernel layers confine the code).
    """

    distributions: tuple[tuple[str, str], ...]
    read_roots: tuple[str, ...]
    list_roots: tuple[str, ...]
    sys_path: tuple[str, ...]
    native: bool = False


#: Endings of native extension modules and bundled shared libraries in a ``RECORD``.
_NATIVE_SUFFIXES = (".so", ".pyd", ".dylib")


def distributions_of(top_level: str) -> list[importlib.metadata.Distribution]:
    """The installed distributions that provide the top-level module ``top_level``.

    Args:
        top_level: A top-level import name (``"numpy"``, ``"mpl_toolkits"``).

    Returns:
        The distributions (several for a namespace package), or ``[]`` when no distribution
        provides it (a module outside any distribution, such as one on ``sys.path`` by hand).
    """
    found: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions():
        name = str(canonicalize_name(dist.metadata["Name"] or ""))
        if name not in found and top_level in _top_levels(dist):
            found[name] = dist
    return list(found.values())


def _top_levels(dist: importlib.metadata.Distribution) -> set[str]:
    """The top-level import names ``dist`` provides.

    Those of its ``top_level.txt`` (egg-info and setuptools wheels) and those its file list
    shows (3.10's ``packages_distributions`` reads ``top_level.txt`` only, which meson and
    hatch wheels such as numpy's lack).
    """
    declared = dist.read_text("top_level.txt")
    names = set(declared.split()) if declared else set()
    for path in dist.files or ():
        parts = path.parts
        if not parts or parts[0] in ("..", "__pycache__"):
            continue
        if len(parts) > 1:
            if parts[0].isidentifier():
                names.add(parts[0])
        elif parts[0].endswith((".py", ".so", ".pyd")):
            names.add(parts[0].split(".", 1)[0])
    return names


def _editable_source(dist: importlib.metadata.Distribution) -> str | None:
    """The source directory of an editable install, or ``None`` for a regular one."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not (data.get("dir_info") or {}).get("editable"):
        return None
    url = data.get("url")
    if not isinstance(url, str) or not url.startswith("file:"):
        return None
    return os.path.realpath(urllib.request.url2pathname(urllib.parse.urlparse(url).path))


def _editable_providing(origin: str) -> list[importlib.metadata.Distribution]:
    """The editable installs whose source directory holds ``origin``.

    Their ``RECORD`` lists only a ``.pth`` file, so :func:`distributions_of` cannot name them.
    """
    found = []
    for dist in importlib.metadata.distributions():
        source = _editable_source(dist)
        if source is not None and (origin == source or origin.startswith(source + os.sep)):
            found.append(dist)
    return found


def _record_entries(dist: importlib.metadata.Distribution, name: str) -> list[str]:
    record = dist.read_text("RECORD")
    if record is None:
        raise DistributionError(
            f"extra_modules: distribution {name!r} has no RECORD (installed by a system package "
            "manager such as Debian's python3-* packages?): its files cannot be known; install "
            f"it with pip or uv into the server's environment (pip install {name})"
        )
    entries = []
    for line in record.splitlines():
        path = line.split(",", 1)[0].strip().strip('"')
        if path:
            entries.append(path)
    return entries


def _grant_tree(
    base: str, entries: list[tuple[str, ...]], reads: list[str], lists: list[str]
) -> None:
    """Grant ``entries`` (path parts relative to ``base``) by the module's top-level rule."""
    children: dict[str, list[tuple[str, ...]]] = {}
    for parts in entries:
        if not parts or parts[0] in ("", ".", ".."):
            continue  # scripts and data outside the installation directory
        children.setdefault(parts[0], []).append(parts[1:])
    for child, rest in sorted(children.items()):
        path = f"{base}/{child}"
        if all(not r for r in rest):  # a file
            reads.append(path)
        elif child == "__pycache__":
            reads.extend("/".join((path, *r)) for r in rest if r)
        elif child.isidentifier() and ("__init__.py",) not in rest:
            lists.append(path)  # a namespace package: its other parts belong to others
            _grant_tree(path, [r for r in rest if r], reads, lists)
        else:
            reads.append(path)


def _grants_of(
    dist: importlib.metadata.Distribution, name: str
) -> tuple[list[str], list[str], list[str]]:
    """``(reads, lists, sys_path)`` for one distribution."""
    entries = _record_entries(dist, name)
    base = os.path.realpath(str(dist.locate_file("")))
    reads: list[str] = []
    lists: list[str] = [base]
    sys_path: list[str] = [base]
    _grant_tree(base, [tuple(pathlib.PurePosixPath(e).parts) for e in entries], reads, lists)
    source = _editable_source(dist)
    if source is not None:
        named = len(sys_path)
        for entry in entries:
            if entry.endswith(".pth") and "/" not in entry:
                text = pathlib.Path(base, entry).read_text(encoding="utf-8", errors="replace")
                for raw in text.splitlines():
                    line = raw.strip()
                    if (
                        line
                        and not line.startswith(("#", "import"))
                        and pathlib.Path(line).is_dir()
                    ):
                        real = os.path.realpath(line)
                        sys_path.append(real)
                        reads.append(real)
        if len(sys_path) == named:  # an import-hook editable (no directory in a .pth)
            reads.append(source)
    return reads, lists, sys_path


def resolve(top_levels: tuple[str, ...]) -> Grants:
    """The grants of the distributions providing ``top_levels`` and their dependency closure.

    Args:
        top_levels: Top-level import names of the extra modules that are not part of the
            standard library.

    Returns:
        The grants (empty when ``top_levels`` is empty).

    Raises:
        DistributionError: A module comes from no installed distribution, a distribution has no
            ``RECORD``, a required dependency (its marker true) is not installed, or a
            requirement cannot be parsed.
    """
    environment = cast("dict[str, str]", dict(default_environment()))
    queue: list[tuple[importlib.metadata.Distribution, frozenset[str]]] = []
    reads: list[str] = []
    lists: list[str] = []
    sys_path: list[str] = []
    for top in top_levels:
        origin = module_origin(top)
        if origin is None:
            continue  # built in or frozen: importable already
        dists = distributions_of(top) or _editable_providing(origin)
        if not dists:
            # Not installed by an installer (a directory on sys.path by hand): its own location
            # only, as no metadata names its files or dependencies.
            reads.append(origin)
            sys_path.append(str(pathlib.Path(origin).parent))
            continue
        queue.extend((d, frozenset()) for d in dists)
    seen: dict[str, set[str]] = {}
    found: dict[str, importlib.metadata.Distribution] = {}
    while queue:
        dist, extras = queue.pop()
        name = str(canonicalize_name(dist.metadata["Name"] or ""))
        done = seen.get(name)
        if done is not None and extras <= done:
            continue
        seen.setdefault(name, set()).update(extras)
        found[name] = dist
        for text in dist.requires or ():
            try:
                requirement = Requirement(text)
            except InvalidRequirement as exc:
                raise DistributionError(
                    f"extra_modules: distribution {name!r} declares an unreadable requirement "
                    f"{text!r}: {exc}"
                ) from exc
            marker = requirement.marker
            if marker is not None and not any(
                marker.evaluate({**environment, "extra": extra}) for extra in ("", *extras)
            ):
                continue
            try:
                dependency = importlib.metadata.distribution(requirement.name)
            except importlib.metadata.PackageNotFoundError:
                raise DistributionError(
                    f"extra_modules: distribution {name!r} requires {text!r}, which is not "
                    f"installed; install it (pip install {requirement.name!r})"
                ) from None
            queue.append((dependency, frozenset(requirement.extras)))
    native = False
    for name in sorted(found):
        native = native or any(
            e.endswith(_NATIVE_SUFFIXES) or ".so." in e for e in _record_entries(found[name], name)
        )
        r, lst, sp = _grants_of(found[name], name)
        reads += r
        lists += lst
        sys_path += sp
    versions = tuple(sorted((name, found[name].version) for name in found))
    return Grants(
        distributions=versions,
        read_roots=tuple(dict.fromkeys(reads)),
        list_roots=tuple(dict.fromkeys(p for p in lists if p not in reads)),
        sys_path=tuple(dict.fromkeys(sys_path)),
        native=native,
    )


def module_origin(top: str) -> str | None:
    """Where the top-level module ``top`` is imported from, or ``None`` if built in or frozen.

    Raises:
        DistributionError: The module is not installed.
    """
    spec = importlib.util.find_spec(top)
    if spec is None:
        raise DistributionError(f"extra_modules: module {top!r} is not installed")
    if spec.submodule_search_locations:
        return os.path.realpath(next(iter(spec.submodule_search_locations)))
    if spec.origin and pathlib.Path(spec.origin).is_absolute():
        return os.path.realpath(spec.origin)
    return None
