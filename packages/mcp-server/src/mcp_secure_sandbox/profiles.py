"""Server profiles: a named set of extra modules, preloads and limits (``--profile``).

One profile exists: ``datascience`` allows numpy, pandas and matplotlib (and their dependency
closure, as pysandbox allows a module by distribution), preloads them into the warm zygote (one
import per server instead of per run) and raises the default memory limit. Native extension
modules make the Python-level layers no barrier, so the profile is refused unless both kernel
layers are required (see SECURITY.md). Install the tested versions as :func:`install_hint` says
(from a checkout, the siblings' folders with ``'./packages/mcp-server[datascience]'``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECKOUT_PACKAGES", "PROFILES", "Profile", "install_hint", "profile_offer"]

#: The folders of a repository checkout (``packages/<folder>``) a source install of the server
#: names beside ``packages/mcp-server``: its sibling dependencies, which are not on PyPI yet
#: (``pip install './packages/mcp-server[extra]'`` alone looks for them there and fails).
CHECKOUT_PACKAGES = ("astguard", "pysandbox", "datavalidate", "wsnapshot")


@dataclass(frozen=True)
class Profile:
    """What ``--profile NAME`` adds to the settings.

    Attributes:
        name: The profile's name.
        extra_modules: Modules allowed in addition to ``--extra-modules``.
        preload: Modules the warm zygote imports once, in order.
        memory_bytes: The default of ``--memory-limit`` under this profile, in bytes (a given
            ``--memory-limit`` or ``SANDBOX_MEMORY_LIMIT`` wins).
        required_layers: Kernel layers ``--require-layers`` must name for the profile.
    """

    name: str
    extra_modules: tuple[str, ...]
    preload: tuple[str, ...]
    memory_bytes: int
    required_layers: tuple[str, ...] = ("landlock", "seccomp")


#: The preloaded zygote measured 190 MiB VSZ and 102 MiB data (Python 3.11, numpy 2.4, pandas
#: 3.1, matplotlib 3.11 with Agg): 1 GiB of data (``RLIMIT_DATA``, and 2 GiB of address space)
#: leaves about 900 MiB for the run's own frames and figures.
PROFILES: dict[str, Profile] = {
    "datascience": Profile(
        name="datascience",
        extra_modules=("numpy", "pandas", "matplotlib"),
        preload=("numpy", "pandas", "matplotlib.pyplot"),
        memory_bytes=1024 * 1024 * 1024,
    ),
}


def install_hint(profile: Profile) -> str:
    """The commands that install a profile's extra: from PyPI, and from a repository checkout.

    Args:
        profile: A profile of :data:`PROFILES`.

    Returns:
        For example ``"pip install 'mcp-secure-sandbox[datascience]'; from a checkout of the
        repository, at its root: pip install ./packages/astguard ./packages/pysandbox
        ./packages/datavalidate ./packages/wsnapshot './packages/mcp-server[datascience]'"``.
    """
    siblings = " ".join(f"./packages/{folder}" for folder in CHECKOUT_PACKAGES)
    return (
        f"pip install 'mcp-secure-sandbox[{profile.name}]'; from a checkout of the repository, "
        f"at its root: pip install {siblings} './packages/mcp-server[{profile.name}]'"
    )


def profile_offer(profile: Profile) -> str:
    """How to get the modules a profile allows: the clause a refused import ends with.

    Args:
        profile: A profile of :data:`PROFILES` the server was not started with.

    Returns:
        For example ``"the server's datascience profile allows it: start the server with
        --profile datascience (install: pip install 'mcp-secure-sandbox[datascience]'; from a
        checkout ...)"``, the install commands of :func:`install_hint`.
    """
    return (
        f"the server's {profile.name} profile allows it: start the server with --profile "
        f"{profile.name} (install: {install_hint(profile)})"
    )
