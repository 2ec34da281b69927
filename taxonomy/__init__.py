"""Failure taxonomies as versioned data (JSON files in ``taxonomy/data``)."""

from taxonomy.model import (
    DATA_DIR,
    DEFAULT_TAXONOMY,
    Category,
    Taxonomy,
    TaxonomyError,
    UnknownCategoryError,
    builtin_taxonomies,
    default_taxonomy,
    load_taxonomy,
    rubric_markdown,
)

__all__ = [
    "DATA_DIR",
    "DEFAULT_TAXONOMY",
    "Category",
    "Taxonomy",
    "TaxonomyError",
    "UnknownCategoryError",
    "builtin_taxonomies",
    "default_taxonomy",
    "load_taxonomy",
    "rubric_markdown",
]
