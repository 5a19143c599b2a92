"""A pyiceberg table of many tiny data files (issue 38): a sync of a small change must cost
what the change costs, not the table.

    SKERRY_MANY_FILES=N python3 tests/iceberg/make_many_files.py OUT_DIR

writes N one-row-group Parquet files of 3 rows (pyarrow) and adds them to `db.many` with
pyiceberg's `add_files` (one snapshot), then 10 more files (a second snapshot); writes
OUT_DIR/expected_many.json with both metadata locations and the row counts.
"""

import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

out = os.path.abspath(sys.argv[1])
n = int(os.environ.get("SKERRY_MANY_FILES", "2000"))
os.makedirs(os.path.join(out, "warehouse"), exist_ok=True)
catalog = SqlCatalog("skerry", uri=f"sqlite:///{out}/catalog.db", warehouse=f"file://{out}/warehouse")
catalog.create_namespace("db")
schema = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "tag", StringType(), required=False),
)
arrow_schema = pa.schema([pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"}),
                          pa.field("tag", pa.string(), metadata={"PARQUET:field_id": "2"})])
table = catalog.create_table("db.many", schema=schema, properties={"format-version": "2"})
data_dir = os.path.join(table.location().removeprefix("file://"), "data")
os.makedirs(data_dir, exist_ok=True)


def write(first, count):
    paths = []
    for k in range(first, first + count):
        t = pa.Table.from_pydict({"id": [3 * k, 3 * k + 1, 3 * k + 2], "tag": [f"t{k % 7}"] * 3}, schema=arrow_schema)
        p = os.path.join(data_dir, f"f{k:07d}.parquet")
        pq.write_table(t, p)
        paths.append("file://" + p)
    return paths


metadata = []
for first, count in [(0, n), (n, 10)]:
    table = catalog.load_table("db.many")
    table.add_files(write(first, count))
    table = catalog.load_table("db.many")
    metadata.append(table.metadata_location)
with open(os.path.join(out, "expected_many.json"), "w") as f:
    json.dump({"files": n, "metadata": metadata, "rows": 3 * (n + 10)}, f, indent=1)
