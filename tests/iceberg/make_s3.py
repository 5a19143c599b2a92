"""An Iceberg table on an S3-compatible server, for the read-only upstream test.

    python3 tests/iceberg/make_s3.py OUT_DIR ENDPOINT

writes db.events (format v2) to s3://lake/wh through pyiceberg's S3 FileIO at ENDPOINT
(bucket `lake` must exist): append ids 0..500, append 500..800, a copy-on-write delete of
ids < 50, a schema change (add `note`), append 800..900 with notes, an overwrite with ids 1000..1100. OUT_DIR/expected_s3.json
holds each snapshot's metadata file and ids.
"""

import json
import os
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import LessThan
from pyiceberg.types import StringType

out, endpoint = os.path.abspath(sys.argv[1]), sys.argv[2]
os.makedirs(out, exist_ok=True)
catalog = SqlCatalog(
    "s3",
    uri=f"sqlite:///{out}/s3.db",
    warehouse="s3://lake/wh",
    **{
        "s3.endpoint": endpoint,
        "s3.access-key-id": "test",
        "s3.secret-access-key": "test",
        "s3.region": "us-east-1",
        # pyarrow's S3 client fails moto's multipart completion; s3fs writes small objects whole.
        "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
    },
)
catalog.create_namespace("db")
schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
t = catalog.create_table("db.events", schema=schema, properties={"format-version": "2"})
snaps = []


def record(ids, label):
    tbl = catalog.load_table("db.events")
    got = sorted(tbl.scan().to_arrow().column("id").to_pylist())
    assert got == sorted(ids), label
    snaps.append({"label": label, "snapshot_id": str(tbl.metadata.current_snapshot_id), "metadata_location": tbl.metadata_location, "ids": sorted(ids)})
    return tbl


def rows(ids):
    return pa.table({"id": list(ids), "region": [("eu", "us", "ap")[i % 3] for i in ids]}, schema=schema)


t.append(rows(range(0, 500)))
t = record(range(0, 500), "append")
t.append(rows(range(500, 800)))
t = record(range(0, 800), "append more")
t.delete(delete_filter=LessThan("id", 50))
t = record(range(50, 800), "copy-on-write delete id < 50")
with t.update_schema() as u:
    u.add_column("note", StringType())
t = catalog.load_table("db.events")
s2 = pa.schema([("id", pa.int64()), ("region", pa.string()), ("note", pa.string())])
t.append(pa.table({"id": list(range(800, 900)), "region": ["eu"] * 100, "note": ["n"] * 100}, schema=s2))
t = record(range(50, 900), "add note, append")
t.overwrite(pa.table({"id": list(range(1000, 1100)), "region": ["us"] * 100, "note": ["o"] * 100}, schema=s2))
t = record(range(1000, 1100), "overwrite")
with open(os.path.join(out, "expected_s3.json"), "w") as f:
    json.dump({"location": t.metadata.location, "snapshots": snaps}, f, indent=1)
print(f"wrote {out}/expected_s3.json")
# Done and written: leave without the interpreter's shutdown, where pyarrow's and fsspec's
# background threads can abort the process (see rest_writer.py).
sys.stdout.flush()
os._exit(0)
