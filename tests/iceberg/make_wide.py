"""A wide Iceberg table for the sync benchmark (issue 16).

    python3 tests/iceberg/make_wide.py OUT_DIR [FILES] [ADDED]

writes db.wide (format v2, unpartitioned) with FILES (1,000) small Parquet data files added
in one snapshot through pyiceberg's `add_files`, then ADDED (10) more in a second snapshot,
and OUT_DIR/expected_wide.json with both snapshots' metadata files.
"""

import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog

out = os.path.abspath(sys.argv[1])
files = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
added = int(sys.argv[3]) if len(sys.argv) > 3 else 10
rows = 100
os.makedirs(os.path.join(out, "warehouse"), exist_ok=True)
catalog = SqlCatalog("wide", uri=f"sqlite:///{out}/wide.db", warehouse=f"file://{out}/warehouse")
catalog.create_namespace("db")
schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
t = catalog.create_table("db.wide", schema=schema, properties={"format-version": "2"})
data = f"{t.metadata.location.removeprefix('file://')}/data"
os.makedirs(data, exist_ok=True)


def write(first, n):
    paths = []
    for i in range(first, first + n):
        p = f"{data}/part-{i:05d}.parquet"
        ids = list(range(i * rows, (i + 1) * rows))
        pq.write_table(pa.table({"id": ids, "region": [("eu", "us", "ap")[x % 3] for x in ids]}, schema=schema), p)
        paths.append(f"file://{p}")
    return paths


t.add_files(write(0, files))
first = catalog.load_table("db.wide").metadata_location
t = catalog.load_table("db.wide")
t.add_files(write(files, added))
second = catalog.load_table("db.wide").metadata_location
with open(os.path.join(out, "expected_wide.json"), "w") as f:
    json.dump({"before": first, "after": second, "files": files, "added": added, "rows": rows}, f)
print(f"wrote {out}/expected_wide.json")
