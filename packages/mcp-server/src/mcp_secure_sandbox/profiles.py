"""Server profiles: a named set of extra modules, preloads and limits (``--profile``).

One profile exists: ``datascience`` allows numpy, pandas and matplotlib (and their dependency
closure, as pysandbox allows a module by distribution), preloads them into the warm zygote (one
import per server instead of per run) and raises the default memory limit. Native extension
modules make the Python-level layers no barrier, so the profile is refused unless both kernel
layers are required (see SECURITY.md). Install the tested versions with
``pip install "mcp-secure-sandbox[datascience]"``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILES", "Profile", "profile_offer"]


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


def profile_offer(profile: Profile) -> str:
    """How to get the modules a profile allows: the clause a refused import ends with.

    Args:
        profile: A profile of :data:`PROFILES` the server was not started with.

    Returns:
        For example ``"the server's datascience profile allows it: start the server with
        --profile datascience (pip install 'mcp-secure-sandbox[datascience]')"``.
    """
    return (
        f"the server's {profile.name} profile allows it: start the server with --profile "
        f"{profile.name} (pip install 'mcp-secure-sandbox[{profile.name}]')"
    )
