"""Real Iceberg tables for Skerry's tests, written by pyiceberg (SqlCatalog on sqlite).

    python3 tests/iceberg/make_tables.py OUT_DIR

writes OUT_DIR/warehouse (the tables), OUT_DIR/catalog.db, and OUT_DIR/expected.json: per
table its metadata locations, and per snapshot (oldest first) the snapshot id, sequence
number, parent, and the data files a scan of that snapshot plans (path, record count, size,
content), as pyiceberg itself plans them. Skerry's Iceberg reader must list the same files.

Tables:
- `db.events`: format v2, unpartitioned; append, append, a delete (copy-on-write overwrite),
  schema evolution (add a column, rename a column, promote int -> long), append again.
- `db.parted`: format v2, identity-partitioned by `region`; two appends, then a delete of
  one partition's rows.
- `db.v1`: format v1; two appends.
- `db.zstd`: format v2, manifests written with the Avro zstandard codec; two appends.
"""

import json
import os
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, LessThan
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

out = os.path.abspath(sys.argv[1])
os.makedirs(os.path.join(out, "warehouse"), exist_ok=True)
catalog = SqlCatalog(
    "skerry",
    uri=f"sqlite:///{out}/catalog.db",
    warehouse=f"file://{out}/warehouse",
)
catalog.create_namespace("db")


def rows(first, n, regions=("eu", "us", "ap")):
    return {
        "id": list(range(first, first + n)),
        "region": [regions[i % len(regions)] for i in range(first, first + n)],
        "qty": [i % 7 for i in range(first, first + n)],
    }


schema = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "qty", IntegerType(), required=False),
)
arrow_schema = pa.schema(
    [("id", pa.int64()), ("region", pa.string()), ("qty", pa.int32())]
)

# db.events: v2, unpartitioned, with deletes and schema evolution.
events = catalog.create_table("db.events", schema=schema, properties={"format-version": "2"})
events.append(pa.Table.from_pydict(rows(0, 1000), schema=arrow_schema))
events.append(pa.Table.from_pydict(rows(1000, 500), schema=arrow_schema))
events.delete(delete_filter=LessThan("id", 100))
with events.update_schema() as u:
    u.add_column("note", StringType())
with events.update_schema() as u:
    u.rename_column("qty", "quantity")
with events.update_schema() as u:
    u.update_column("quantity", LongType())
events = catalog.load_table("db.events")
evolved = pa.schema(
    [("id", pa.int64()), ("region", pa.string()), ("quantity", pa.int64()), ("note", pa.string())]
)
more = rows(1500, 300)
events.append(
    pa.Table.from_pydict(
        {"id": more["id"], "region": more["region"], "quantity": more["qty"], "note": ["n"] * 300},
        schema=evolved,
    )
)

# db.parted: identity-partitioned by region.
parted = catalog.create_table(
    "db.parted",
    schema=schema,
    partition_spec=PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")
    ),
    properties={"format-version": "2"},
)
parted.append(pa.Table.from_pydict(rows(0, 600), schema=arrow_schema))
parted.append(pa.Table.from_pydict(rows(600, 300), schema=arrow_schema))
parted.delete(delete_filter=EqualTo("region", "us"))

# db.v1: format version 1.
v1 = catalog.create_table("db.v1", schema=schema, properties={"format-version": "1"})
v1.append(pa.Table.from_pydict(rows(0, 200), schema=arrow_schema))
v1.append(pa.Table.from_pydict(rows(200, 100), schema=arrow_schema))

# db.zstd: manifests and manifest lists written with the Avro zstandard codec.
zt = catalog.create_table(
    "db.zstd", schema=schema, properties={"format-version": "2", "write.avro.compression-codec": "zstd"}
)
zt.append(pa.Table.from_pydict(rows(0, 400), schema=arrow_schema))
zt.append(pa.Table.from_pydict(rows(400, 100), schema=arrow_schema))
zt = catalog.load_table("db.zstd")
for path in [zt.current_snapshot().manifest_list] + [m.manifest_path for m in zt.current_snapshot().manifests(zt.io)]:
    with open(path.removeprefix("file://"), "rb") as f:
        assert b"zstandard" in f.read(4096), f"{path} is not zstandard-compressed"

expected = {}
for name in ["db.events", "db.parted", "db.v1", "db.zstd"]:
    t = catalog.load_table(name)
    snaps = []
    for s in t.metadata.snapshots:
        files = []
        for task in t.scan(snapshot_id=s.snapshot_id).plan_files():
            f = task.file
            files.append(
                {
                    "path": f.file_path,
                    "record_count": f.record_count,
                    "size": f.file_size_in_bytes,
                    "deletes": len(task.delete_files),
                }
            )
        files.sort(key=lambda f: f["path"])
        snaps.append(
            {
                "snapshot_id": s.snapshot_id,
                "parent_id": s.parent_snapshot_id,
                "sequence_number": s.sequence_number,
                "operation": s.summary.operation.value if s.summary else None,
                "files": files,
                "rows": t.scan(snapshot_id=s.snapshot_id).to_arrow().num_rows,
            }
        )
    expected[name] = {
        "location": t.metadata.location,
        "metadata_location": t.metadata_location,
        "format_version": t.metadata.format_version,
        "current_snapshot_id": t.metadata.current_snapshot_id,
        "schema_fields": [[f.field_id, f.name, str(f.field_type)] for f in t.schema().fields],
        "snapshots": snaps,
    }

# Table directories a mount locates the metadata file in: one with a gzip-compressed metadata
# file (`.gz.metadata.json`), one with a `version-hint.text` naming `v2.metadata.json` beside
# an older `v1` and a decoy `v10` that is not valid JSON.
import gzip
import shutil

dirs = {}
gz_dir = os.path.join(out, "dirs", "gz")
os.makedirs(os.path.join(gz_dir, "metadata"))
with open(catalog.load_table("db.v1").metadata_location.removeprefix("file://"), "rb") as src:
    with open(os.path.join(gz_dir, "metadata", "00001-copy.gz.metadata.json"), "wb") as dst:
        dst.write(gzip.compress(src.read()))
dirs["gz"] = {"dir": f"file://{gz_dir}", "table": "db.v1"}
hint_dir = os.path.join(out, "dirs", "hint")
os.makedirs(os.path.join(hint_dir, "metadata"))
parted_meta = catalog.load_table("db.parted").metadata_location.removeprefix("file://")
shutil.copy(parted_meta, os.path.join(hint_dir, "metadata", "v2.metadata.json"))
first = sorted(os.listdir(os.path.dirname(parted_meta)))[0]
shutil.copy(os.path.join(os.path.dirname(parted_meta), first), os.path.join(hint_dir, "metadata", "v1.metadata.json"))
with open(os.path.join(hint_dir, "metadata", "v10.metadata.json"), "w") as f:
    f.write("not json")
with open(os.path.join(hint_dir, "metadata", "version-hint.text"), "w") as f:
    f.write("2\n")
dirs["hint"] = {"dir": f"file://{hint_dir}", "table": "db.parted"}
expected["dirs"] = dirs

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1)
print(f"wrote {out}/expected.json")
