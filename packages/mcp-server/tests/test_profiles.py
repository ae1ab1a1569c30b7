"""``--profile datascience``: the settings it yields, its refusals, and its pinned versions."""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import re
from pathlib import Path
from typing import Any

import pytest

import astguard
from mcp_secure_sandbox.profiles import profile_offer
from mcp_secure_sandbox.settings import ConfigError, settings_from_args
from mcp_secure_sandbox.tools import sandbox as sandbox_tools
from mcp_secure_sandbox.tools.sandbox import offer_profiles
from pysandbox import PROFILES

DS = PROFILES["datascience"]
ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_profile_allows_preloads_and_raises_memory() -> None:
    settings = settings_from_args(["--profile", "datascience", "--extra-modules", "json"], {})
    assert settings.profile == "datascience"
    assert settings.extra_modules == ("numpy", "pandas", "matplotlib", "json")
    assert settings.preload == ("numpy", "pandas", "matplotlib.pyplot")
    assert settings.memory_bytes == 1024**3
    from_env = settings_from_args([], {"SANDBOX_PROFILE": "datascience"})
    assert from_env.extra_modules == DS.extra_modules
    assert settings_from_args([], {}).memory_bytes == 512 * 1024**2


def test_an_explicit_memory_limit_wins() -> None:
    flag = settings_from_args(["--profile", "datascience", "--memory-limit", "768M"], {})
    assert flag.memory_bytes == 768 * 1024**2
    env = {"SANDBOX_PROFILE": "datascience", "SANDBOX_MEMORY_LIMIT": "2G"}
    assert settings_from_args([], env).memory_bytes == 2 * 1024**3


@pytest.mark.parametrize("layers", ["none", "landlock", "seccomp"])
def test_profile_needs_both_kernel_layers(layers: str) -> None:
    with pytest.raises(ConfigError, match="needs --require-layers landlock,seccomp"):
        settings_from_args(["--profile", "datascience", "--require-layers", layers], {})


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ConfigError, match="SANDBOX_PROFILE='science'"):
        settings_from_args([], {"SANDBOX_PROFILE": "science"})


def test_the_extra_reuses_pysandbox_s_the_pins_one_home() -> None:
    # The data-science pins live once, in secure-pysandbox's [datascience] extra; the server's
    # extra and test group name it (the noxfile installs the checkout's pysandbox for it).
    root = pathlib.Path(__file__).resolve().parents[3]
    sandbox = root / "packages" / "pysandbox" / "pyproject.toml"
    if not sandbox.is_file():
        pytest.skip("not in the repository checkout (an unpacked sdist has one package)")
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    server = tomllib.loads((root / "packages" / "mcp-server" / "pyproject.toml").read_text())
    pysandbox = tomllib.loads(sandbox.read_text(encoding="utf-8"))
    extra = DS.extra
    assert server["project"]["optional-dependencies"][extra] == [
        f"secure-pysandbox[{extra}]>=0.1,<0.2"
    ]
    assert server["dependency-groups"][extra] == [f"secure-pysandbox[{extra}]"]
    assert pysandbox["dependency-groups"][extra] == [f"secure-pysandbox[{extra}]"]
    pins = pysandbox["project"]["optional-dependencies"][extra]
    assert pins and all("==" in pin and "python_version" in pin for pin in pins)
    pinned = {re.split(r"[=<>; ]", pin)[0] for pin in pins}
    assert pinned >= set(DS.extra_modules)
    # Nowhere else: no other pyproject pins a module of the profile.
    for path in (root / "packages").glob("*/pyproject.toml"):
        if path != sandbox:
            text = path.read_text(encoding="utf-8")
            assert not [m for m in DS.extra_modules if f'"{m}==' in text], path


def test_a_profile_whose_modules_are_missing_is_a_clear_start_error(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_secure_sandbox import profiles, state
    from mcp_secure_sandbox.settings import Settings

    fake = dataclasses.replace(DS, extra_modules=("no_such_module_xyz",))
    monkeypatch.setattr(state, "PROFILES", {**PROFILES, "datascience": fake})
    settings = Settings(workspace=tmp_path / "ws", snapshots=tmp_path / "s", profile="datascience")
    with pytest.raises(ValueError, match=r"no_such_module_xyz not installed") as refused:
        state.ServerState(settings)
    assert str(refused.value).endswith(f"install them: {profiles.install_hint(DS)}")
    # This suite runs from the checkout (an editable install): its command comes first.
    assert profiles.running_from_checkout() == (ROOT / "noxfile.py").is_file()
    if profiles.running_from_checkout():
        assert "install them: from this checkout of the repository, at its root: pip install " in (
            str(refused.value)
        )


def _tree(root: pathlib.Path, folders: tuple[str, ...]) -> pathlib.Path:
    """A fake repository tree holding ``folders``; the path profiles.py would have in it."""
    for folder in folders:
        (root / "packages" / folder).mkdir(parents=True)
        (root / "packages" / folder / "pyproject.toml").write_text("", encoding="utf-8")
    module = root / "packages" / "mcp-server" / "src" / "mcp_secure_sandbox" / "profiles.py"
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text("", encoding="utf-8")
    return module


def test_a_checkout_is_recognised_by_its_tree(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_secure_sandbox import profiles

    every = ("mcp-server", *profiles.CHECKOUT_PACKAGES)
    cases = {
        "checkout": (_tree(tmp_path / "repo", every), True),
        "a sibling missing": (_tree(tmp_path / "partial", every[:-1]), False),
        "sdist": (_tree(tmp_path / "sdist", ("mcp-server",)), False),
    }
    installed = tmp_path / "venv" / "lib" / "site-packages" / "mcp_secure_sandbox" / "profiles.py"
    installed.parent.mkdir(parents=True)
    installed.write_text("", encoding="utf-8")
    cases["site-packages"] = (installed, False)
    for name, (module, expected) in cases.items():
        monkeypatch.setattr(profiles, "__file__", str(module))
        assert profiles.running_from_checkout() is expected, name
        first = profiles.install_hint(DS).split(":", 1)[0]
        assert first == (
            "from this checkout of the repository, at its root"
            if expected
            else "pip install 'mcp-secure-sandbox[datascience]'; from a checkout of the "
            "repository, at its root"
        ), name


def test_the_checkout_install_command_names_every_sibling() -> None:
    # pip install './packages/mcp-server[datascience]' alone looks for the siblings on PyPI.
    root = pathlib.Path(__file__).resolve().parents[3]
    if not (root / "packages" / "astguard").is_dir():
        pytest.skip("not in the repository checkout (an unpacked sdist has one package)")
    from mcp_secure_sandbox.profiles import CHECKOUT_PACKAGES, install_hint

    def dist(folder: pathlib.Path) -> str:
        found = re.search(
            r'^name = "([^"]+)"', (folder / "pyproject.toml").read_text("utf-8"), re.M
        )
        assert found, folder
        return found.group(1)

    server = (root / "packages" / "mcp-server" / "pyproject.toml").read_text(encoding="utf-8")
    dependencies = set(re.findall(r'^  "([a-z][a-z0-9-]*)[><=]', server, re.M))
    names = {dist(root / "packages" / folder) for folder in CHECKOUT_PACKAGES}
    siblings = {dist(p.parent) for p in (root / "packages").glob("*/pyproject.toml")}
    siblings.discard("mcp-secure-sandbox")
    assert names == siblings == dependencies & siblings
    local = (
        "pip install ./packages/astguard ./packages/pysandbox ./packages/datavalidate "
        "./packages/wsnapshot './packages/mcp-server[datascience]'"
    )
    pypi = "pip install 'mcp-secure-sandbox[datascience]'"
    assert install_hint(DS, checkout=False) == (
        f"{pypi}; from a checkout of the repository, at its root: {local}"
    )
    # From a checkout its own command comes first (PyPI's would replace the checkout).
    assert install_hint(DS, checkout=True) == (
        f"from this checkout of the repository, at its root: {local}; from PyPI: {pypi}"
    )


def _violations(code: str, policy: astguard.Policy) -> list[dict[str, Any]]:
    return [v.to_dict() for v in astguard.check(code, policy).violations]


def test_a_refused_import_the_profile_allows_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_secure_sandbox import profiles

    monkeypatch.setattr(profiles, "running_from_checkout", lambda: True)
    assert profile_offer(DS) == (
        "the server's datascience profile allows it: start the server with --profile "
        "datascience (install: from this checkout of the repository, at its root: pip install "
        "./packages/astguard ./packages/pysandbox ./packages/datavalidate ./packages/wsnapshot "
        "'./packages/mcp-server[datascience]'; from PyPI: pip install "
        "'mcp-secure-sandbox[datascience]')"
    )
    monkeypatch.setattr(profiles, "running_from_checkout", lambda: False)
    offer = (
        "the server's datascience profile allows it: start the server with --profile "
        "datascience (install: pip install 'mcp-secure-sandbox[datascience]'; from a checkout "
        "of the repository, at its root: pip install ./packages/astguard ./packages/pysandbox "
        "./packages/datavalidate ./packages/wsnapshot './packages/mcp-server[datascience]')"
    )
    assert profile_offer(DS) == offer
    policy = astguard.Policy()
    code = "import os, pandas as pd\nimport matplotlib.pyplot as plt\nfrom numpy import array\n"
    before = _violations(code, policy)
    after = offer_profiles(code, policy, "none", before)
    # astguard's message (which says "installed here" when it is) and then the offer.
    assert [v["message"].partition(": ")[0] for v in before] == [
        "import of 'os' is refused",
        "import of 'pandas' is refused",
        "import of 'matplotlib.pyplot' is refused",
        "import of 'numpy' is refused",
    ]
    assert (
        [v["message"] for v in after]
        == [
            before[0]["message"],  # os: no profile allows it
            *(f"{v['message']}; {offer}" for v in before[1:]),
        ]
    )
    assert [{**v, "message": ""} for v in after] == [{**v, "message": ""} for v in before]
    # A module no profile allows, or a server already on the profile: nothing is offered.
    scipy = _violations("import scipy\n", policy)
    assert offer_profiles("import scipy\n", policy, "none", scipy) == scipy
    assert offer_profiles(code, policy, "datascience", before) == before


@pytest.mark.parametrize(
    "padding",
    [
        "x = 1\n" * 3000,  # many small statements
        "s = '" + "a" * 20_000 + "'\n",  # one long constant
        "# " + "z" * 20_000 + "\n",  # a comment
    ],
    ids=["statements", "constant", "comment"],
)
def test_a_large_source_gets_no_offer_and_no_second_check(
    padding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team 2026-12-01 (F2): the second check ran after admission on any source (a 200 KB
    hostile one cost up to 3 s): over OFFER_MAX_SOURCE_BYTES, or with no refused import, the
    violations come back as they were and astguard is not called again."""
    policy = astguard.Policy()
    code = "import pandas\n" + padding
    assert len(code.encode()) > sandbox_tools.OFFER_MAX_SOURCE_BYTES
    small = "import pandas\n" + "x = 1\n" * 100
    before, no_import, small_before = (_violations(c, policy) for c in (code, "eval('1')\n", small))
    calls: list[str] = []
    real = astguard.check

    def spy(c: str, p: astguard.Policy) -> astguard.CheckResult:
        calls.append(c)
        return real(c, p)

    monkeypatch.setattr(astguard, "check", spy)
    assert offer_profiles(code, policy, "none", before) == before
    assert offer_profiles("eval('1')\n", policy, "none", no_import) == no_import
    assert calls == []
    assert offer_profiles(small, policy, "none", small_before) != small_before  # offered
    assert calls == [small]


def test_the_profile_s_checker_rules_reach_the_server_s_policy(dirs: tuple[Path, Path]) -> None:
    """``--profile datascience`` checks code with AG309 on (red team 2026-12-03 D1's gap)."""
    from mcp_secure_sandbox.settings import prepare_directories
    from mcp_secure_sandbox.state import ServerState

    missing = [m for m in DS.extra_modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the data-science stack is not installed ({missing})")
    ds = settings_from_args(["--profile", "datascience"], {})
    assert ds.sandbox_config().policy.refuse_private_attributes is True  # type: ignore[union-attr]
    plain = settings_from_args([], {})
    assert plain.sandbox_config().policy.refuse_private_attributes is False  # type: ignore[union-attr]
    workspace, snapshots = dirs
    settings = prepare_directories(
        dataclasses.replace(ds, workspace=workspace, snapshots=snapshots), environ={}
    )
    state = ServerState(settings)
    try:
        assert state.policy.refuse_private_attributes is True
        source = "import pandas as pd\npd.DataFrame()._mgr.apply('__reduce_ex__', protocol=4)"
        assert astguard.check(source, state.policy).rule_ids == ("AG309",)
    finally:
        state.close()
