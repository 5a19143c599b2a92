"""A pyiceberg table partitioned by values that need quoting in a path (attack round 3,
item 1): pyiceberg quotes partition values in directory names and keeps the literal `%XX` in
each manifest entry's `file_path`, which is the object's real name.

    python3 tests/iceberg/make_partitioned.py OUT_DIR

writes OUT_DIR/warehouse, OUT_DIR/catalog.db and OUT_DIR/expected_partitioned.json: the
table's metadata location, its data file paths as pyiceberg wrote them, and per partition
value the ids pyiceberg's own scan returns for `cat == value`.
"""

import json
import os
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

VALUES = ["x/y", "100%", "%2e%2e", "ü", "a+b", "q?x", "h#1", "c:d", "e=f", "tab\there", "plain"]

out = os.path.abspath(sys.argv[1])
os.makedirs(os.path.join(out, "warehouse"), exist_ok=True)
catalog = SqlCatalog("skerry", uri=f"sqlite:///{out}/catalog.db", warehouse=f"file://{out}/warehouse")
catalog.create_namespace("db")
schema = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "cat", StringType(), required=False),
    NestedField(3, "note", StringType(), required=False),
)
spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="cat"))
table = catalog.create_table("db.parted", schema=schema, partition_spec=spec, properties={"format-version": "2"})
arrow_schema = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("note", pa.string())])
n = 40 * len(VALUES)
table.append(
    pa.Table.from_pydict(
        {
            "id": list(range(n)),
            "cat": [VALUES[i % len(VALUES)] for i in range(n)],
            "note": [f"row {i} of {VALUES[i % len(VALUES)]}" for i in range(n)],
        },
        schema=arrow_schema,
    )
)
table = catalog.load_table("db.parted")
paths = sorted(t.file.file_path for t in table.scan().plan_files())
by_value = {}
for v in VALUES:
    ids = table.scan(row_filter=EqualTo("cat", v), selected_fields=("id",)).to_arrow()["id"].to_pylist()
    by_value[v] = sorted(ids)
with open(os.path.join(out, "expected_partitioned.json"), "w") as f:
    json.dump(
        {
            "metadata_location": table.metadata_location,
            "location": table.location(),
            "paths": paths,
            "values": by_value,
            "rows": n,
        },
        f,
        indent=1,
    )
