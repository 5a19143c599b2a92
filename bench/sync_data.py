"""The sync benchmark's table (issue 38), written by pyiceberg: snapshot 1 holds ROWS rows in
FILES files, snapshot 2 appends ROWS more rows in FILES files (one pyiceberg append).

    python3 bench/sync_data.py OUT_DIR ROWS FILES

writes OUT_DIR/warehouse and OUT_DIR/sync.json: both snapshots' metadata locations and the
appended data files' paths (relative to the table location).
"""

import json
import os
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

out = os.path.abspath(sys.argv[1])
rows, files = int(sys.argv[2]), int(sys.argv[3])
os.makedirs(os.path.join(out, "warehouse"), exist_ok=True)
catalog = SqlCatalog("skerry", uri=f"sqlite:///{out}/catalog.db", warehouse=f"file://{out}/warehouse")
catalog.create_namespace("db")
schema = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "email", StringType(), required=False),
    NestedField(3, "region", StringType(), required=False),
    NestedField(4, "customer", StringType(), required=False),
    NestedField(5, "amount", DoubleType(), required=False),
)
arrow_schema = pa.schema(
    [("id", pa.int64()), ("email", pa.string()), ("region", pa.string()), ("customer", pa.string()), ("amount", pa.float64())]
)
table = catalog.create_table("db.events", schema=schema, properties={"format-version": "2"})


def part(first, n):
    ids = pa.array(range(first, first + n), pa.int64())
    return pa.Table.from_pydict(
        {
            "id": ids,
            "email": [f"user-{(i * 7919) % (4 * rows):010d}@example.com" for i in range(first, first + n)],
            "region": [f"region-{i % 50:02d}" for i in range(first, first + n)],
            "customer": [f"customer-{i % 100000:06d}" for i in range(first, first + n)],
            "amount": [(i % 1000) * 1.25 for i in range(first, first + n)],
        },
        schema=arrow_schema,
    )


def snapshot(first):
    # One Parquet file per part: pyiceberg writes one file per arrow table chunk when the
    # target file size is large, so the parts are added as separate files via `append` of a
    # concatenation with a target size of one part.
    per = rows // files
    return pa.concat_tables([part(first + k * per, per) for k in range(files)])


table = catalog.load_table("db.events")
with table.transaction() as tx:
    tx.set_properties({"write.target-file-size-bytes": str(1 << 40)})
metadata, file_sets = [], []
per = rows // files
for first in [0, rows]:
    table = catalog.load_table("db.events")
    data = snapshot(first)
    # One file per part: the parts appended one by one inside one transaction (one commit).
    with table.transaction() as tx:
        for k in range(files):
            tx.append(data.slice(k * per, per))
    table = catalog.load_table("db.events")
    metadata.append(table.metadata_location)
    file_sets.append({t.file.file_path for t in table.scan().plan_files()})
loc = table.location().rstrip("/")
appended = sorted(p[len(loc) + 1 :] for p in file_sets[1] - file_sets[0])
with open(os.path.join(out, "sync.json"), "w") as f:
    json.dump({"location": loc, "metadata": metadata, "appended": appended, "rows": rows, "files": files}, f, indent=1)
