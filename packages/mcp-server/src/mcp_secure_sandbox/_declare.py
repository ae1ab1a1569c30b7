"""How a server setting is declared: one :class:`Setting` per :class:`~.settings.Settings` field.

A declaration names the flag, the ``SANDBOX_*`` variable, how text becomes a value, the bounds
every :class:`~.settings.Settings` is checked against (built from flags or in code), the help
line and the longer text of the settings page. The parser, the environment, ``--help`` and
``docs/settings.md`` are derived from the declarations (:mod:`mcp_secure_sandbox.settings`);
cross-field rules are :class:`Check` values declared once beside them. A new setting is one
field with its ``Setting`` (and a rule in ``CHECKS`` if it relates to another); then regenerate
the page (``python -m mcp_secure_sandbox._settings_page > docs/settings.md``).

Import-free apart from the standard library: the validation workers import the settings.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SETTING",
    "Check",
    "Setting",
    "csv_list",
    "positive",
    "size",
    "size_text",
    "size_words",
]

#: The key of a :class:`Setting` in a dataclass field's ``metadata``.
SETTING = "mcp_secure_sandbox.setting"

_SUFFIXES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def size(text: str) -> int:
    """Parse a positive byte count such as ``512M`` or ``1048576`` (K, M, G are powers of 1024).

    Args:
        text: The flag's or variable's text; a trailing ``B`` is ignored.

    Returns:
        The number of bytes.

    Raises:
        argparse.ArgumentTypeError: Not a whole number with an optional suffix, or not positive.
    """
    raw = text.strip().upper().removesuffix("B")
    unit = raw[-1:] if raw[-1:] in ("K", "M", "G") else ""
    try:
        value = int(raw[: len(raw) - len(unit)]) * _SUFFIXES[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a size in bytes: {text!r}; give a whole number with an optional K, M or G "
            "suffix (powers of 1024), such as 512M or 1048576"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a size must be positive: {text!r}")
    return value


def size_text(value: int) -> str:
    """``value`` bytes as :func:`size` reads it: ``512M`` rather than ``536870912``."""
    for unit in ("G", "M", "K"):
        if value % _SUFFIXES[unit] == 0:
            return f"{value // _SUFFIXES[unit]}{unit}"
    return str(value)


def size_words(n: int) -> str:
    """``n`` bytes as a person reads them: ``8 MiB``, ``16 KiB``, ``1 GiB``, ``1,000 bytes``."""
    for unit, step in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= step and n % (step // 16) == 0:
            return f"{n / step:g} {unit}"
    return f"{n:,} bytes"


def positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type: ``kind`` of the text, refused unless positive and finite.

    Args:
        kind: ``int`` or ``float``.

    Returns:
        The parse function; it raises :class:`argparse.ArgumentTypeError` for a bad text.
    """

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < value < math.inf:
            raise argparse.ArgumentTypeError(f"must be positive and finite: {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in "invalid int value"
    return parse


def csv_list(text: str) -> tuple[str, ...]:
    """Parse a comma-separated list: ``"a, b,,c"`` is ``("a", "b", "c")``."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _number(value: float) -> str:
    short = f"{value:g}"  # 10 rather than 10.0, unless that loses digits
    return short if float(short) == value else repr(value)


@dataclass(frozen=True)
class Setting:
    """The declaration of one setting, kept in its dataclass field's ``metadata``.

    Attributes:
        env: The environment variable, ``SANDBOX_...``.
        help: The ``--help`` line (the variable and the default are appended).
        flag: The command-line flag, or ``None`` for a secret (environment or file only).
        parse: Turns the flag's or variable's text into the value; raises
            :class:`argparse.ArgumentTypeError` for text that is no value at all.
        choices: The values allowed (each item's, for a tuple-valued setting).
        bounds: ``(low, high)`` inclusive; ``None`` on a side leaves it open but finite. Checked
            for every :class:`~.settings.Settings`, however it was built.
        positive: The value must be above 0 and finite.
        unit: ``"s"`` or ``"bytes"``: how the page and the messages name the value's unit.
        doc: The settings page's text, when it says more than ``help``; ``{field}`` is
            replaced with that field's default as a person reads it (``10 s``, ``256 MiB``).
        default_text: The default as the flag spells it, for a field without one (the
            directories) or whose default is not a value (``token_file``).
        default_doc: The page's default, for a default that depends on the machine.
        switch: A flag without a value; the variable turns it on with ``1``.
        secret: Never a flag, never printed: from the variable or the file ``file_flag`` names.
        file_flag: The flag (and ``file_env`` the variable) naming a file holding the value.
        file_env: See ``file_flag``.
        file_help: The help of ``file_flag``.
        check: For a secret: called as ``check(value, source)`` on every value that is not
            ``None``, however the settings were built; it raises with a message naming
            ``source``, never the value (the token's is ``settings.check_token``).
    """

    env: str
    help: str
    flag: str | None = None
    parse: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    bounds: tuple[float | None, float | None] | None = None
    positive: bool = False
    unit: str = ""
    doc: str = ""
    default_text: str | None = None
    default_doc: str | None = None
    switch: bool = False
    secret: bool = False
    file_flag: str | None = None
    file_env: str | None = None
    file_help: str = ""
    check: Callable[[Any, str], object] | None = None

    def __post_init__(self) -> None:
        """Refuse a declaration that would put a secret on the command line."""
        if (self.flag is None) != self.secret:
            raise TypeError(f"{self.env}: a setting has a flag exactly when it is no secret")
        if not self.env.startswith("SANDBOX_"):
            raise TypeError(f"{self.env}: setting variables are named SANDBOX_*")

    @property
    def metadata(self) -> Mapping[str, Setting]:
        """The ``metadata`` of the dataclass field this setting declares."""
        return {SETTING: self}

    @property
    def name(self) -> str:
        """How messages name the setting: its flag, else its variable."""
        return self.flag or self.env

    def text(self, value: Any) -> str:
        """``value`` as the flag spells it (``512M``, ``10``, ``landlock,seccomp``)."""
        if isinstance(value, tuple):
            return ",".join(value)
        if isinstance(value, bool):
            return "1" if value else "0"
        if self.parse is size:
            return size_text(int(value))
        if isinstance(value, float):
            return _number(value)
        return str(value)

    def words(self, value: Any) -> str:
        """``value`` as a person reads it: ``256 MiB``, ``10 s``, ``4``."""
        if self.unit == "bytes" and isinstance(value, int):
            return size_words(value)
        if self.unit == "s" and isinstance(value, (int, float)):
            return f"{_number(float(value))} s"
        return self.text(value)

    def bounds_text(self) -> str:
        """The bounds in words (``0 to 8``, ``at least 0.1``, ``positive``), or ``""``."""
        if self.bounds is None:
            return "positive" if self.positive else ""
        low, high = self.bounds
        show = self.text if self.parse is size else lambda v: _number(float(v))
        if low is not None and high is not None:
            return f"{show(low)} to {show(high)}"
        if low is not None:
            return f"at least {show(low)}"
        return f"at most {show(high)}"

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is refused (one sentence naming the setting), or ``None``.

        Args:
            value: The field's value.

        Returns:
            ``None`` when the value is within the bounds and choices.
        """
        name = self.name
        if self.choices is not None:
            items = value if isinstance(value, tuple) else (value,)
            unknown = [item for item in items if item not in self.choices]
            if unknown:
                return (
                    f"{name}: unknown value {', '.join(map(str, unknown))}; choose one of "
                    f"{', '.join(self.choices)}"
                )
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        unit = " bytes" if self.unit == "bytes" else " seconds" if self.unit == "s" else ""
        if self.positive and not 0 < value < math.inf:
            of = f" of{unit}" if unit else ""
            return f"{name} must be a positive, finite number{of}, got {value}"
        if self.bounds is None:
            return None
        low, high = self.bounds
        inside = (low is None or low <= value) and (
            value <= high if high is not None else value < math.inf
        )
        if inside:
            return None
        if low is not None and high is not None:
            return f"{name} must be between {low} and {high}{unit}, got {value}"
        if low is not None:
            kind = f"a finite number of{unit} of " if isinstance(value, float) else ""
            return f"{name} must be {kind}at least {low}, got {value}"
        return f"{name} must be at most {high}{unit}, got {value}"


@dataclass(frozen=True)
class Check:
    """A rule between settings, declared once and checked for every ``Settings``.

    Attributes:
        fields: The fields the rule reads (the page names their flags).
        holds: True when the settings (a ``Settings``) keep the rule.
        message: The refusal, one line naming the flags and values.
        doc: The rule in words, for the settings page.
    """

    fields: tuple[str, ...]
    holds: Callable[[Any], bool]
    message: Callable[[Any], str]
    doc: str
