"""A pyiceberg table that grows by an ordinary append larger than one catalog commit may
index (issue 38): Skerry must follow it, scanning the new files until its indexes catch up.

    python3 tests/iceberg/make_big_append.py OUT_DIR [BIG_ROWS]

writes OUT_DIR/warehouse, OUT_DIR/catalog.db and OUT_DIR/expected_big.json: per snapshot
(oldest first) its metadata location and, for a few predicates, the ids pyiceberg's own scan
returns. Snapshots: a small append; an append of BIG_ROWS rows (default 1,200,000, in 3
files: with three indexes, 3.6 times the 1,000,000 entries one commit may index); a
copy-on-write delete; a schema change (a column added) and a small append; a rewrite of
most files (a copy-on-write delete of rows in every file); an overwrite of everything.
"""

import json
import os
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, LessThan
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

out = os.path.abspath(sys.argv[1])
big = int(sys.argv[2]) if len(sys.argv) > 2 else 1_200_000
os.makedirs(os.path.join(out, "warehouse"), exist_ok=True)
catalog = SqlCatalog("skerry", uri=f"sqlite:///{out}/catalog.db", warehouse=f"file://{out}/warehouse")
catalog.create_namespace("db")
schema = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "email", StringType(), required=False),
)
arrow_schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("email", pa.string())])
REGIONS = ["eu", "us", "ap", "sa", "af"]


def rows(first, n):
    ids = list(range(first, first + n))
    return pa.Table.from_pydict(
        {
            "id": ids,
            "region": [REGIONS[i % len(REGIONS)] for i in ids],
            "email": [f"user{i:08d}@example.com" for i in ids],
        },
        schema=arrow_schema,
    )


table = catalog.create_table("db.grow", schema=schema, properties={"format-version": "2", "write.target-file-size-bytes": str(8 << 20)})
snapshots = []


def record(label, extra_where=()):
    t = catalog.load_table("db.grow")
    queries = []
    for where in [("id", 5), ("id", 700_005), ("id", big + 5000), ("email", "user00900009@example.com"), ("region", "af")] + list(extra_where):
        col, val = where
        got = t.scan(row_filter=EqualTo(col, val), selected_fields=("id",)).to_arrow()["id"].to_pylist()
        queries.append({"where": {col: val}, "count": len(got), "ids": sorted(got)[:50]})
    snapshots.append(
        {
            "label": label,
            "metadata_location": t.metadata_location,
            "snapshot_id": str(t.current_snapshot().snapshot_id),
            "rows": t.scan().to_arrow().num_rows,
            "files": len(list(t.scan().plan_files())),
            "queries": queries,
        }
    )


table.append(rows(0, 1000))
record("small first snapshot")
# One append: `big` rows in three files of equal size.
third = big // 3
table.append(pa.concat_tables([rows(1000 + k * third, third) for k in range(3)]))
record("big append")
table = catalog.load_table("db.grow")
table.delete(LessThan("id", 500))
record("copy-on-write delete")
table = catalog.load_table("db.grow")
with table.update_schema() as u:
    u.add_column("note", StringType())
table = catalog.load_table("db.grow")
tail_schema = pa.schema(list(arrow_schema) + [("note", pa.string())])
tail = rows(big + 5000, 2000)
tail = tail.append_column("note", pa.array(["n"] * 2000))
table.append(tail.cast(tail_schema))
record("schema change and append")
# A rewrite of most files: a copy-on-write delete whose rows are in every file.
table = catalog.load_table("db.grow")
table.delete(EqualTo("region", "af"))
record("rewrite of most files")
# An overwrite: every file replaced by new ones (ids shifted, so no old answer survives).
table = catalog.load_table("db.grow")
over = rows(5, 3000)
over = over.append_column("note", pa.array(["o"] * 3000))
table.overwrite(over.cast(tail_schema))
record("overwrite")
with open(os.path.join(out, "expected_big.json"), "w") as f:
    json.dump({"big": big, "snapshots": snapshots}, f, indent=1)
