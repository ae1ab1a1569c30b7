"""datavalidate: JSON Schema validation for every draft and streaming CSV validation.

JSON instances are checked against JSON Schema drafts 4, 6, 7, 2019-09 and 2020-12 with
:func:`validate_json`; CSV files are checked in the Frictionless Table Schema vocabulary with
:func:`validate_csv`. Both return reports (frozen dataclasses with ``to_dict()``) listing every
finding with its location. Untrusted patterns run on RE2, a linear-time regex engine.
:func:`compile` checks a schema once; valid instances of schemas in the fast subset are decided
by ``jsonschema-rs``. Numbers are exact (:func:`parse_json` reads JSON text with ``Decimal``).
The ``datavalidate`` command (``python -m datavalidate``) validates files.
"""

from datavalidate.__about__ import __version__
from datavalidate._csv import (
    ERROR_CODES,
    MAX_ENCODING_CHARS,
    CsvColumn,
    CsvError,
    CsvReport,
    text_encoding,
    validate_csv,
)
from datavalidate._csv_fields import CONSTRAINTS as CSV_CONSTRAINTS
from datavalidate._csv_fields import TYPES as CSV_TYPES
from datavalidate._json import (
    DEFAULT_DRAFT,
    DRAFTS,
    CompiledSchema,
    JsonError,
    JsonReport,
    SchemaInfo,
    SchemaRegistry,
    asserted_formats,
    compile,
    default_registry,
    is_valid,
    validate_json,
)
from datavalidate._numbers import NUMBER_MODES, parse_json
from datavalidate._report_limits import DEFAULT_MAX_ERRORS, MAX_ERRORS_LIMIT
from datavalidate.exceptions import (
    DataValidateError,
    JsonNumberError,
    SchemaError,
    UnknownSchemaError,
    UnresolvableReferenceError,
    UnsupportedPatternError,
)

__all__ = [
    "CSV_CONSTRAINTS",
    "CSV_TYPES",
    "DEFAULT_DRAFT",
    "DEFAULT_MAX_ERRORS",
    "DRAFTS",
    "ERROR_CODES",
    "MAX_ENCODING_CHARS",
    "MAX_ERRORS_LIMIT",
    "NUMBER_MODES",
    "CompiledSchema",
    "CsvColumn",
    "CsvError",
    "CsvReport",
    "DataValidateError",
    "JsonError",
    "JsonNumberError",
    "JsonReport",
    "SchemaError",
    "SchemaInfo",
    "SchemaRegistry",
    "UnknownSchemaError",
    "UnresolvableReferenceError",
    "UnsupportedPatternError",
    "__version__",
    "asserted_formats",
    "compile",
    "default_registry",
    "is_valid",
    "parse_json",
    "text_encoding",
    "validate_csv",
    "validate_json",
]
