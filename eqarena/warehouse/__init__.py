"""The eqarena DuckDB warehouse: schema, migrations and every SQL statement of the project."""

from eqarena.warehouse.connection import (
    DEFAULT_DB_PATH,
    WarehouseInUseError,
    WarehouseUnusableError,
    connect,
    migrate,
    resolve_db_path,
    schema_version,
)

__all__ = [
    "DEFAULT_DB_PATH",
    "WarehouseInUseError",
    "WarehouseUnusableError",
    "connect",
    "migrate",
    "resolve_db_path",
    "schema_version",
]
