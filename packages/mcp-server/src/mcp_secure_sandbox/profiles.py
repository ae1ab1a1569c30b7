"""What the server says about profiles (``--profile``): how to install one, how to get one.

The profiles themselves are pysandbox's (:data:`pysandbox.PROFILES`: modules, preloads, memory
default, required layers; their pins in ``secure-pysandbox``'s extras, which the server's extra
of the same name reuses). Native extension modules make the Python-level layers no barrier, so
a profile is refused unless both kernel layers are required (see SECURITY.md). Install the
tested versions as :func:`install_hint` says (from a checkout, the siblings' folders with
``'./packages/mcp-server[datascience]'``).
"""

from __future__ import annotations

from pysandbox import Profile

__all__ = ["CHECKOUT_PACKAGES", "install_hint", "profile_offer"]

#: The folders of a repository checkout (``packages/<folder>``) a source install of the server
#: names beside ``packages/mcp-server``: its sibling dependencies, which are not on PyPI yet
#: (``pip install './packages/mcp-server[extra]'`` alone looks for them there and fails).
CHECKOUT_PACKAGES = ("astguard", "pysandbox", "datavalidate", "wsnapshot")


def install_hint(profile: Profile) -> str:
    """The commands that install a profile's extra: from PyPI, and from a repository checkout.

    Args:
        profile: A profile of :data:`pysandbox.PROFILES`.

    Returns:
        For example ``"pip install 'mcp-secure-sandbox[datascience]'; from a checkout of the
        repository, at its root: pip install ./packages/astguard ./packages/pysandbox
        ./packages/datavalidate ./packages/wsnapshot './packages/mcp-server[datascience]'"``.
    """
    extra = profile.extra or profile.name
    siblings = " ".join(f"./packages/{folder}" for folder in CHECKOUT_PACKAGES)
    return (
        f"pip install 'mcp-secure-sandbox[{extra}]'; from a checkout of the repository, "
        f"at its root: pip install {siblings} './packages/mcp-server[{extra}]'"
    )


def profile_offer(profile: Profile) -> str:
    """How to get the modules a profile allows: the clause a refused import ends with.

    Args:
        profile: A profile of :data:`pysandbox.PROFILES` the server was not started with.

    Returns:
        For example ``"the server's datascience profile allows it: start the server with
        --profile datascience (install: pip install 'mcp-secure-sandbox[datascience]'; from a
        checkout ...)"``, the install commands of :func:`install_hint`.
    """
    return (
        f"the server's {profile.name} profile allows it: start the server with --profile "
        f"{profile.name} (install: {install_hint(profile)})"
    )
