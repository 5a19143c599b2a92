"""Merge-on-read Iceberg tables for Skerry's delete and sync tests.

    python3 tests/iceberg/make_mor.py OUT_DIR

pyiceberg 0.12 writes deletes copy-on-write only, and no writer of merge-on-read deletes is
installable on these machines; so position and equality delete files are written here by
spec-exact code (spec: "Position Delete Files", "Equality Delete Files": Parquet with the
reserved field ids 2147483546 `file_path` and 2147483545 `pos`, or the table's field ids of
the equality columns) and committed with pyiceberg's own manifest, manifest list and
metadata writers (a delete manifest is a v2 manifest with content `deletes`). Every snapshot
pyiceberg can scan (position deletes; pyiceberg 0.12 refuses equality deletes) is scanned
and must hold exactly the rows this script's model says; the model's rows for every snapshot
go to OUT_DIR/expected_mor.json with the metadata file written by that commit.

Tables (format v2):
- `db.mor`, unpartitioned: append A (ids 0..1000), append B (1000..1500), position deletes
  (one file covering A and B), a pyiceberg copy-on-write delete of ids < 20 (rewrites A; the
  position delete file stays live for B), an equality delete on `id`, an append C that
  re-inserts deleted ids (newer: not deleted), an equality delete on (`region`, `qty`), and
  an append D that duplicates a live id (a unique index on `id` is poisoned by it).
- `db.mor_parted`, identity-partitioned by `region`: one append (a file per region), an
  equality delete on `qty` = 3 in partition `eu` only (rows of other regions with qty 3
  survive), a position delete file in partition `us`.
- `db.evolve`: schema evolution between appends — rename `qty` to `quantity` and add
  `note`; drop `region`; promote `quantity` int -> long.
"""

import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import LessThan
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

out = os.path.abspath(sys.argv[1])
os.makedirs(os.path.join(out, "warehouse"), exist_ok=True)
catalog = SqlCatalog("mor", uri=f"sqlite:///{out}/mor.db", warehouse=f"file://{out}/warehouse")
catalog.create_namespace("db")

schema = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "qty", IntegerType(), required=False),
)
arrow_schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("qty", pa.int32())])
REGIONS = ("eu", "us", "ap")


def rows(ids):
    return [{"id": i, "region": REGIONS[i % 3], "qty": i % 7} for i in ids]


def table_of(rs):
    return pa.Table.from_pylist(rs, schema=arrow_schema)


class DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files (spec: manifest `content` = 1, `deletes`)."""

    def content(self):
        return ManifestContent.DELETES

    @property
    def _meta(self):
        return {**super()._meta, "content": "deletes"}


class AddDeletes(_FastAppendFiles):
    """A snapshot adding delete files (and optionally data files) to the table."""

    def __init__(self, delete_files, **kw):
        super().__init__(**kw)
        self._delete_files = delete_files

    def _manifests(self):
        manifests = super()._manifests()
        by_spec = {}
        for f in self._delete_files:
            by_spec.setdefault(f.spec_id, []).append(f)
        for spec_id, files in by_spec.items():
            w = DeleteManifestWriter(
                self.spec(spec_id), self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression
            )
            with w:
                for f in files:
                    w.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=f,
                        )
                    )
            manifests.append(w.to_manifest_file())
        return manifests


def commit_deletes(table, delete_files):
    tx = table.transaction()
    p = AddDeletes(delete_files, operation=Operation.DELETE, transaction=tx, io=table.io)
    p.commit()
    tx.commit_transaction()


counter = [0]


def delete_file(table, content, arrow_table, partition=(), spec_id=0, equality_ids=None):
    counter[0] += 1
    path = f"{table.metadata.location}/data/deletes-{counter[0]:03d}.parquet"
    local = path.removeprefix("file://")
    os.makedirs(os.path.dirname(local), exist_ok=True)
    pq.write_table(arrow_table, local)
    kw = dict(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=arrow_table.num_rows,
        file_size_in_bytes=os.path.getsize(local),
    )
    if equality_ids is not None:
        kw["equality_ids"] = equality_ids
    f = DataFile.from_args(**kw)
    f.spec_id = spec_id
    return f


def field(name, ty, fid, nullable=True):
    return pa.field(name, ty, nullable=nullable, metadata={"PARQUET:field_id": str(fid)})


def position_deletes(table, pairs, partition=(), spec_id=0):
    s = pa.schema([field("file_path", pa.string(), 2147483546, False), field("pos", pa.int64(), 2147483545, False)])
    pairs = sorted(pairs)
    t = pa.Table.from_pydict({"file_path": [p for p, _ in pairs], "pos": [q for _, q in pairs]}, schema=s)
    return delete_file(table, DataFileContent.POSITION_DELETES, t, partition, spec_id)


def equality_deletes(table, columns, values, partition=(), spec_id=0):
    ids = {"id": 1, "region": 2, "qty": 3}
    types = {"id": pa.int64(), "region": pa.string(), "qty": pa.int32()}
    s = pa.schema([field(c, types[c], ids[c]) for c in columns])
    t = pa.Table.from_pylist([dict(zip(columns, v)) for v in values], schema=s)
    return delete_file(table, DataFileContent.EQUALITY_DELETES, t, partition, spec_id, [ids[c] for c in columns])


def data_files(table):
    """Current data files: path -> list of ids in file order."""
    out = {}
    for task in table.scan().plan_files():
        ids = pq.read_table(task.file.file_path.removeprefix("file://"), columns=["id"]).column("id").to_pylist()
        out[task.file.file_path] = ids
    return out


expected = {}


def record(name, table, live, label, pyiceberg_can_scan=True, rows=None):
    table = catalog.load_table(name)
    if pyiceberg_can_scan:
        got = sorted(table.scan().to_arrow().column("id").to_pylist())
        assert got == sorted(live), f"{name} {label}: pyiceberg scans {len(got)} rows, the model {len(live)}"
    expected.setdefault(name, {"location": table.metadata.location, "snapshots": []})
    expected[name]["snapshots"].append(
        {
            "label": label,
            "snapshot_id": str(table.metadata.current_snapshot_id),  # 64-bit: JSON numbers lose it in JS
            "metadata_location": table.metadata_location,
            "ids": sorted(live),
            "pyiceberg_checked": pyiceberg_can_scan,
            # The model's rows [id, region, qty] (differential queries), where given.
            **({"rows": sorted([list(r) for r in rows])} if rows is not None else {}),
        }
    )
    return table


# db.mor
t = catalog.create_table("db.mor", schema=schema, properties={"format-version": "2"})
live = {}  # id -> count of live rows with that id
model = []  # live rows as (id, region, qty)
t.append(table_of(rows(range(0, 1000))))
model += [(r["id"], r["region"], r["qty"]) for r in rows(range(0, 1000))]
t = record("db.mor", t, [r[0] for r in model], "append A", rows=model)
t.append(table_of(rows(range(1000, 1500))))
model += [(r["id"], r["region"], r["qty"]) for r in rows(range(1000, 1500))]
t = record("db.mor", t, [r[0] for r in model], "append B", rows=model)

files = data_files(t)
(a_path,) = [p for p, ids in files.items() if ids[0] == 0]
(b_path,) = [p for p, ids in files.items() if ids[0] == 1000]
# Positions: every 10th row of A, rows 0..5 and the last of B.
pairs = [(a_path, q) for q in range(0, 1000, 10)] + [(b_path, q) for q in [0, 1, 2, 3, 4, 499]]
gone = {files[p][q] for p, q in pairs}
commit_deletes(t, [position_deletes(t, pairs)])
model = [r for r in model if r[0] not in gone]
t = record("db.mor", t, [r[0] for r in model], "position deletes", rows=model)

t.delete(delete_filter=LessThan("id", 20))
model = [r for r in model if r[0] >= 20]
t = record("db.mor", t, [r[0] for r in model], "copy-on-write delete id < 20", rows=model)

eq_ids = list(range(300, 311)) + [1200, 99999]
commit_deletes(t, [equality_deletes(t, ["id"], [(i,) for i in eq_ids])])
model = [r for r in model if r[0] not in set(eq_ids)]
t = record("db.mor", t, [r[0] for r in model], "equality delete on id", False, rows=model)

c_rows = rows(range(300, 306)) + rows(range(1500, 1600))
t.append(table_of(c_rows))
model += [(r["id"], r["region"], r["qty"]) for r in c_rows]
t = record("db.mor", t, [r[0] for r in model], "append C re-inserting deleted ids", False, rows=model)

commit_deletes(t, [equality_deletes(t, ["region", "qty"], [("ap", 3), ("zz", 1)])])
model = [r for r in model if not (r[1] == "ap" and r[2] == 3)]
t = record("db.mor", t, [r[0] for r in model], "equality delete on (region, qty)", False, rows=model)

dup = next(r for r in model if r[0] > 1000)
t.append(table_of([{"id": dup[0], "region": "eu", "qty": 0}]))
model += [(dup[0], "eu", 0)]
t = record("db.mor", t, [r[0] for r in model], "append D duplicating a live id", False, rows=model)
expected["db.mor"]["duplicate_id"] = dup[0]

# db.mor_parted
pt = catalog.create_table(
    "db.mor_parted",
    schema=schema,
    partition_spec=PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")),
    properties={"format-version": "2"},
)
pt.append(table_of(rows(range(0, 600))))
model = [(r["id"], r["region"], r["qty"]) for r in rows(range(0, 600))]
pt = record("db.mor_parted", pt, [r[0] for r in model], "append", rows=model)
files = data_files(pt)
commit_deletes(pt, [equality_deletes(pt, ["qty"], [(3,)], partition=("eu",))])
model = [r for r in model if not (r[1] == "eu" and r[2] == 3)]
pt = record("db.mor_parted", pt, [r[0] for r in model], "equality delete qty = 3 in eu", False, rows=model)
(us_path,) = [p for p, ids in files.items() if ids[0] % 3 == 1]
pairs = [(us_path, q) for q in range(0, 200, 7)]
gone = {files[us_path][q] for _, q in pairs}
commit_deletes(pt, [position_deletes(pt, pairs, partition=("us",))])
model = [r for r in model if r[0] not in gone]
pt = record("db.mor_parted", pt, [r[0] for r in model], "position deletes in us", False, rows=model)

# db.evolve: schema evolution between syncs.
et = catalog.create_table("db.evolve", schema=schema, properties={"format-version": "2"})
et.append(table_of(rows(range(0, 300))))
et = record("db.evolve", et, list(range(0, 300)), "append")
with et.update_schema() as u:
    u.rename_column("qty", "quantity")
    u.add_column("note", StringType())
et = catalog.load_table("db.evolve")
s2 = pa.schema([("id", pa.int64()), ("region", pa.string()), ("quantity", pa.int32()), ("note", pa.string())])
et.append(pa.Table.from_pylist([{"id": i, "region": REGIONS[i % 3], "quantity": i % 7, "note": "n"} for i in range(300, 400)], schema=s2))
et = record("db.evolve", et, list(range(0, 400)), "rename qty, add note, append")
with et.update_schema() as u:
    u.delete_column("region")
et = catalog.load_table("db.evolve")
s3 = pa.schema([("id", pa.int64()), ("quantity", pa.int32()), ("note", pa.string())])
et.append(pa.Table.from_pylist([{"id": i, "quantity": i % 7, "note": "m"} for i in range(400, 450)], schema=s3))
et = record("db.evolve", et, list(range(0, 450)), "drop region, append")
with et.update_schema() as u:
    u.update_column("quantity", LongType())
et = catalog.load_table("db.evolve")
s4 = pa.schema([("id", pa.int64()), ("quantity", pa.int64()), ("note", pa.string())])
et.append(pa.Table.from_pylist([{"id": i, "quantity": i % 7, "note": "p"} for i in range(450, 460)], schema=s4))
et = record("db.evolve", et, list(range(0, 460)), "promote quantity to long, append")

with open(os.path.join(out, "expected_mor.json"), "w") as f:
    json.dump(expected, f, indent=1)
print(f"wrote {out}/expected_mor.json")
