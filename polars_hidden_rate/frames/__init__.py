"""Frames to coordinate arrays: the columns and link a request names (:mod:`.schema`), the type
questions (:mod:`.dtypes`), what is wrong with the data as values (:mod:`.problems`), the aligned
read (:mod:`.read`), and the files people pass (:mod:`.files`, :mod:`.datasets`).

The names below are this layer's interface; the modules above it import them from here.
"""

from polars_hidden_rate.frames.datasets import Dataset, Partition, Source, open_dataset
from polars_hidden_rate.frames.dtypes import (
    CATEGORY_TYPES,
    EXACT_INTEGER_LIMIT,
    TEXT_TYPES,
    as_text_if_category,
    common_feature_type,
    common_key_type,
    inexact_values,
    is_category,
    is_text,
)
from polars_hidden_rate.frames.problems import (
    CoordinateProblems,
    Example,
    KeyProblems,
    MissingValues,
    MissingValuesError,
    check_equal_heights,
    inexact_counts,
    link_by_key,
    missing_values,
    nothing_to_measure,
    raise_inexact,
    raise_missing,
)
from polars_hidden_rate.frames.read import Aligned, read_aligned
from polars_hidden_rate.frames.schema import (
    OUTPUT_COLUMNS,
    RESERVED_PREFIX,
    ColumnSpec,
    Link,
    as_lazy,
    check_ncp,
    check_output_free,
    check_unreserved,
    default_features,
    is_selection,
    resolve_columns,
    resolve_coords,
    resolve_link,
    shared_schema,
)

__all__ = [
    "CATEGORY_TYPES",
    "EXACT_INTEGER_LIMIT",
    "OUTPUT_COLUMNS",
    "RESERVED_PREFIX",
    "TEXT_TYPES",
    "Aligned",
    "ColumnSpec",
    "CoordinateProblems",
    "Dataset",
    "Example",
    "KeyProblems",
    "Link",
    "MissingValues",
    "MissingValuesError",
    "Partition",
    "Source",
    "as_lazy",
    "as_text_if_category",
    "check_equal_heights",
    "check_ncp",
    "check_output_free",
    "check_unreserved",
    "common_feature_type",
    "common_key_type",
    "default_features",
    "inexact_counts",
    "inexact_values",
    "is_category",
    "is_selection",
    "is_text",
    "link_by_key",
    "missing_values",
    "nothing_to_measure",
    "open_dataset",
    "raise_inexact",
    "raise_missing",
    "read_aligned",
    "resolve_columns",
    "resolve_coords",
    "resolve_link",
    "shared_schema",
]
