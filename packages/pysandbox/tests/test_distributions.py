"""Extra modules by distribution: read grants from RECORD, dependency closure, clear errors."""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Iterator

import pytest

from pysandbox import _distributions
from pysandbox._distributions import DistributionError


def _dist(
    site: pathlib.Path,
    name: str,
    files: list[str],
    *,
    requires: tuple[str, ...] = (),
    record: bool = True,
    direct_url: dict[str, object] | None = None,
) -> None:
    # Without RECORD: Debian's python3-* layout, an .egg-info with PKG-INFO and top_level.txt.
    info = site / (f"{name}-1.0.dist-info" if record else f"{name}-1.0.egg-info")
    info.mkdir()
    meta = [f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    (info / ("METADATA" if record else "PKG-INFO")).write_text("\n".join(meta) + "\n")
    if not record:
        (info / "top_level.txt").write_text(name + "\n")
    listed = [*files, f"{info.name}/METADATA"]
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
        listed.append(f"{info.name}/direct_url.json")
    if record:
        listed.append(f"{info.name}/RECORD")
        (info / "RECORD").write_text("".join(f"{f},sha256=x,1\n" for f in listed))
    for rel in files:
        path = site / rel
        if ".." in pathlib.PurePosixPath(rel).parts:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


@pytest.fixture
def site(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    root = tmp_path / "site"
    root.mkdir()
    sys.path.insert(0, str(root))
    try:
        yield root
    finally:
        sys.path.remove(str(root))


def test_record_top_levels_namespace_libs_and_dependencies(site: pathlib.Path) -> None:
    _dist(
        site,
        "alpha",
        [
            "alpha/__init__.py",
            "alpha/core.py",
            "alpha.libs/libx.so.1",
            "nsp/alpha_part/__init__.py",
            "single.py",
            "__pycache__/single.cpython-311.pyc",
            "../../bin/alpha-script",
        ],
        requires=(
            "beta>=1",
            'gamma; python_version < "3"',
            'delta; extra == "extra"',
            "epsilon[more]",
        ),
    )
    _dist(site, "beta", ["beta/__init__.py"])
    _dist(site, "epsilon", ["epsilon.py"], requires=('zeta; extra == "more"',))
    _dist(site, "zeta", ["zeta/__init__.py"])
    _dist(site, "other", ["nsp/other_part/__init__.py"])
    grants = _distributions.resolve(("alpha",))
    base = str(site.resolve())
    assert grants.distributions == (
        ("alpha", "1.0"),
        ("beta", "1.0"),
        ("epsilon", "1.0"),
        ("zeta", "1.0"),
    )
    reads = {p.removeprefix(base + "/") for p in grants.read_roots}
    assert reads == {
        "alpha",
        "alpha.libs",
        "alpha-1.0.dist-info",
        "nsp/alpha_part",
        "single.py",
        "__pycache__/single.cpython-311.pyc",
        "beta",
        "beta-1.0.dist-info",
        "epsilon.py",
        "epsilon-1.0.dist-info",
        "zeta",
        "zeta-1.0.dist-info",
    }
    assert set(grants.list_roots) == {base, f"{base}/nsp"}  # the namespace is listed only
    assert grants.sys_path == (base,)
    assert grants.native  # alpha.libs/libx.so.1


def test_pure_python_closure_is_not_native(site: pathlib.Path) -> None:
    _dist(site, "beta", ["beta/__init__.py"])
    assert not _distributions.resolve(("beta",)).native


def test_distribution_without_record_is_a_clear_error(site: pathlib.Path) -> None:
    _dist(site, "debianish", ["debianish/__init__.py"], record=False)
    with pytest.raises(DistributionError, match=r"'debianish' has no RECORD.*pip or uv"):
        _distributions.resolve(("debianish",))


def test_missing_required_dependency_is_a_clear_error(site: pathlib.Path) -> None:
    _dist(site, "needy", ["needy/__init__.py"], requires=("absent-dist>=2",))
    with pytest.raises(DistributionError, match="requires 'absent-dist>=2', which is not"):
        _distributions.resolve(("needy",))


def test_editable_install_grants_its_import_root(
    site: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    project = tmp_path / "project"
    (project / "src" / "edpkg").mkdir(parents=True)
    (project / "src" / "edpkg" / "__init__.py").write_text("")
    (project / "README.md").write_text("not granted")
    _dist(
        site,
        "edpkg",
        ["_edpkg.pth"],
        direct_url={"url": project.as_uri(), "dir_info": {"editable": True}},
    )
    (site / "_edpkg.pth").write_text(str(project / "src") + "\n")
    sys.path.insert(0, str(project / "src"))
    try:
        grants = _distributions.resolve(("edpkg",))
    finally:
        sys.path.remove(str(project / "src"))
    src = str((project / "src").resolve())
    assert src in grants.read_roots and src in grants.sys_path
    assert str(project.resolve()) not in grants.read_roots


def test_module_outside_any_distribution_gets_its_location(site: pathlib.Path) -> None:
    (site / "loose").mkdir()
    (site / "loose" / "__init__.py").write_text("")
    grants = _distributions.resolve(("loose",))
    assert grants.read_roots == (str((site / "loose").resolve()),)
    assert grants.distributions == ()


def test_unknown_module_is_an_error() -> None:
    with pytest.raises(DistributionError, match="not installed"):
        _distributions.resolve(("no_such_module_xyz",))
