"""Built-in profiles: named sets of extra modules, preloads and a memory default.

A profile is policy as data: what a sandbox built for it allows (:attr:`Profile.extra_modules`,
by distribution, with their dependency closure), what the warm zygote imports once
(:attr:`Profile.preload`), the memory limit its runs need, and the kernel layers it requires.
This module is the profiles' one home: the MCP server's ``--profile``, pysandbox's harnesses,
its system-call tracer and the tests read them here. The versions a profile was tested with are
pinned once, in the ``secure-pysandbox`` extra named :attr:`Profile.extra` (``pip install
'secure-pysandbox[datascience]'``); the server's extra of the same name reuses it.

Native extension modules make the Python-level layers no barrier, so a profile that allows
them requires both kernel layers (:class:`~pysandbox.Sandbox` refuses native code otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import astguard
from pysandbox._layers import KERNEL_LAYERS, Layer
from pysandbox._limits import Limits

__all__ = ["DATASCIENCE", "DEFAULT", "PROFILES", "Profile"]


@dataclass(frozen=True)
class Profile:
    """A named set of extra modules, preloads, a memory default and required layers.

    Attributes:
        name: The profile's name (the server's ``--profile NAME``).
        extra_modules: Modules allowed in addition to the policy's allow-list (``Sandbox``'s
            ``extra_modules``), top-level names.
        preload: Modules the warm zygote imports once, in order (``Sandbox``'s ``preload``).
        memory_bytes: The memory limit (``Limits.memory_bytes``) runs under this profile need,
            in bytes; a caller's explicit limit wins.
        required_layers: Kernel layers a sandbox for this profile must require.
        extra: The ``secure-pysandbox`` extra that installs the profile's modules at the tested
            versions (``pip install 'secure-pysandbox[EXTRA]'``), or ``""`` when none is needed.
        refuse_private_attributes: Switch on astguard's private-attribute rule (AG309,
            ``astguard.Policy.refuse_private_attributes``): ``x._name`` only on a method's own
            ``self``/``cls``. The data-science profile does (``df._mgr.apply(NAME)`` reaches
            pandas' internal dispatchers); the default does not (``other._x`` in ``__eq__`` is
            ordinary code, and the standard library's objects are reviewed module by module).
    """

    name: str
    extra_modules: tuple[str, ...] = ()
    preload: tuple[str, ...] = ()
    memory_bytes: int = Limits().memory_bytes
    required_layers: tuple[Layer, ...] = ()
    extra: str = ""
    refuse_private_attributes: bool = False

    def policy_for(self, policy: astguard.Policy | None = None) -> astguard.Policy:
        """Return ``policy`` with this profile's checker rules switched on.

        Args:
            policy: An ``astguard.Policy``; ``None`` for astguard's safe default.

        Returns:
            The policy (a copy when a rule changes it). The profile's modules are not added
            here: ``Sandbox``'s ``extra_modules`` allows them.

        Raises:
            TypeError: ``policy`` is not an ``astguard.Policy``.
        """
        if policy is None:
            policy = astguard.Policy()
        if not isinstance(policy, astguard.Policy):
            raise TypeError(f"policy must be an astguard.Policy, not {type(policy).__name__}")
        if self.refuse_private_attributes:
            policy = policy.with_private_attribute_rule()
        return policy

    def __post_init__(self) -> None:
        unknown = [layer for layer in self.required_layers if layer not in KERNEL_LAYERS]
        if unknown:
            raise ValueError(f"Profile {self.name!r}: not kernel layers: {unknown}")
        Limits(memory_bytes=self.memory_bytes)  # the limit's own bounds


#: No extra module, no preload, the library's memory default, no layer beyond what the caller
#: requires: a sandbox built without a profile (the server's ``--profile none``).
DEFAULT = Profile(name="none")

#: numpy, pandas and matplotlib (and their dependency closure), preloaded into the warm zygote.
#: The preloaded zygote measured 190 MiB VSZ and 102 MiB data (Python 3.11, numpy 2.4, pandas
#: 3.1, matplotlib 3.11 with Agg): 1 GiB of data (``RLIMIT_DATA``, and 2 GiB of address space)
#: leaves about 900 MiB for the run's own frames and figures.
DATASCIENCE = Profile(
    name="datascience",
    extra_modules=("numpy", "pandas", "matplotlib"),
    preload=("numpy", "pandas", "matplotlib.pyplot"),
    memory_bytes=1024 * 1024 * 1024,
    required_layers=KERNEL_LAYERS,
    extra="datascience",
    refuse_private_attributes=True,
)

#: The profiles that add to a sandbox, by name (:data:`DEFAULT` is the absence of one and is not
#: listed). Read-only.
PROFILES: Mapping[str, Profile] = MappingProxyType({DATASCIENCE.name: DATASCIENCE})
