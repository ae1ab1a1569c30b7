"""What the server says about profiles (``--profile``): how to install one, how to get one.

The profiles themselves are pysandbox's (:data:`pysandbox.PROFILES`: modules, preloads, memory
default, required layers; their pins in ``secure-pysandbox``'s extras, which the server's extra
of the same name reuses). Native extension modules make the Python-level layers no barrier, so
a profile is refused unless both kernel layers are required (see SECURITY.md). Install the
tested versions as :func:`install_hint` says (from a checkout, the siblings' folders with
``'./packages/mcp-server[datascience]'``).
"""

from __future__ import annotations

from pathlib import Path

from pysandbox import Profile

__all__ = ["CHECKOUT_PACKAGES", "install_hint", "profile_offer", "running_from_checkout"]

#: The folders of a repository checkout (``packages/<folder>``) a source install of the server
#: names beside ``packages/mcp-server``: its sibling dependencies, which are not on PyPI yet
#: (``pip install './packages/mcp-server[extra]'`` alone looks for them there and fails).
CHECKOUT_PACKAGES = ("astguard", "pysandbox", "datavalidate", "wsnapshot")


def running_from_checkout() -> bool:
    """Whether this server is imported from a repository checkout (an editable install).

    Returns:
        ``True`` when this module sits at ``packages/mcp-server/src/mcp_secure_sandbox/`` of a
        tree that holds every folder of :data:`CHECKOUT_PACKAGES` with its ``pyproject.toml``.
    """
    here = Path(__file__).resolve().parent
    if here.parent.name != "src" or here.parents[1].name != "mcp-server":
        return False
    packages = here.parents[2]
    return all(
        (packages / folder / "pyproject.toml").is_file()
        for folder in ("mcp-server", *CHECKOUT_PACKAGES)
    )


def install_hint(profile: Profile, *, checkout: bool | None = None) -> str:
    """The commands that install a profile's extra: from a repository checkout, and from PyPI.

    The command that fits this installation comes first: the checkout's when the server runs
    from one (where ``pip install 'mcp-secure-sandbox[extra]'`` would replace the checkout
    with PyPI's release), PyPI's otherwise. Neither names a path of this machine (the offer
    reaches the model).

    Args:
        profile: A profile of :data:`pysandbox.PROFILES`.
        checkout: Whether the server runs from a checkout; ``None`` asks
            :func:`running_from_checkout`.

    Returns:
        For example, from a checkout, ``"from this checkout of the repository, at its root: pip
        install ./packages/astguard ./packages/pysandbox ./packages/datavalidate
        ./packages/wsnapshot './packages/mcp-server[datascience]'; from PyPI: pip install
        'mcp-secure-sandbox[datascience]'"``; otherwise the PyPI command first and then ``from
        a checkout of the repository, at its root: ...``.
    """
    extra = profile.extra or profile.name
    siblings = " ".join(f"./packages/{folder}" for folder in CHECKOUT_PACKAGES)
    local = f"pip install {siblings} './packages/mcp-server[{extra}]'"
    pypi = f"pip install 'mcp-secure-sandbox[{extra}]'"
    if running_from_checkout() if checkout is None else checkout:
        return f"from this checkout of the repository, at its root: {local}; from PyPI: {pypi}"
    return f"{pypi}; from a checkout of the repository, at its root: {local}"


def profile_offer(profile: Profile) -> str:
    """How to get the modules a profile allows: the clause a refused import ends with.

    Args:
        profile: A profile of :data:`pysandbox.PROFILES` the server was not started with.

    Returns:
        For example ``"the server's datascience profile allows it: start the server with
        --profile datascience (install: pip install 'mcp-secure-sandbox[datascience]'; from a
        checkout ...)"``, the install commands of :func:`install_hint` (the checkout's first
        when the server runs from one).
    """
    return (
        f"the server's {profile.name} profile allows it: start the server with --profile "
        f"{profile.name} (install: {install_hint(profile)})"
    )
