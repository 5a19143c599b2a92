"""A format-version-3 Iceberg table for Skerry's row-lineage and deletion-vector tests.

    python3 tests/iceberg/make_v3.py OUT_DIR

pyiceberg 0.12 reads version 3 tables (metadata, manifests, Puffin deletion vectors) but
refuses to write them ("Writing V3 is not yet supported"), and no other v3 writer is
installable on these machines. So this script writes the table by spec-exact code:
metadata JSON per the spec's "Table Metadata" (v3 fields `next-row-id`, snapshot
`first-row-id` / `added-rows`), manifests and manifest lists with pyiceberg's Avro encoder
and its own v3 schemas (`MANIFEST_ENTRY_SCHEMAS[3]`, `MANIFEST_LIST_FILE_SCHEMAS[3]`: data
file fields 142 `first_row_id`, 143 `referenced_data_file`, 144 `content_offset`, 145
`content_size_in_bytes`; manifest list field 520 `first_row_id`), deletion vectors per the
Puffin spec's `deletion-vector-v1` (big-endian length, magic `D1 D3 39 64`, 64-bit portable
Roaring, big-endian CRC-32; blob properties `referenced-data-file`, `cardinality`), and
data files with pyarrow carrying field ids (and the reserved `_row_id` 2147483540 /
`_last_updated_sequence_number` 2147483539 columns where rows moved).

First row ids follow "First Row ID Assignment" (manifest list) and "First Row ID
Inheritance" (manifests): data files are written with a null `first_row_id` and inherit
the manifest's plus the rows of the null-first-row-id files before them.

Every snapshot is scanned back with pyiceberg (`StaticTable`, deletion vectors applied by
pyiceberg's own reader) and must hold exactly the rows this script's model says; the model
(rows `[id, region, qty, row_id]`) goes to OUT_DIR/expected_v3.json with, per snapshot, 20
random `where` filters and the ids pyiceberg's `scan(row_filter=…, snapshot_id=…)` returns
for each (the differential's oracle).

Snapshots of `db/v3` (unpartitioned):
1. append A (ids 0..400) and B (400..600): row ids 0..600 by inheritance.
2. append C (600..900): row ids 600..900 (a second manifest, first_row_id 600).
3. deletion vectors: one Puffin file with a DV for A (positions 3, 7, 50..60) and one for
   C (positions 0..10).
4. compaction keeping row ids: A's live rows and B rewritten into D, whose `_row_id` column
   keeps their ids (A, B and A's DV leave; a replace snapshot).
5. merge-on-read update: C's rows at positions 20, 21 get a new qty — a new DV for C (the
   old one merged into it, the old entry DELETED) and an appended E holding the updated
   rows with their row ids copied, plus three new rows whose `_row_id` is null (inherited:
   E's first row id + position).
6. a `replace` of E into F that drops one row (id 5000): not a move by its row ids.
7. a `replace` of D into G that keeps every row id but changes id 100's region ("zz"): a
   move by its ids, whose carried entries `verify` finds wrong.
"""

import json
import os
import random
import struct
import sys
import time
import uuid
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, In, LessThan, LessThanOrEqual
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    MANIFEST_LIST_FILE_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    data_file_with_partition,
    manifest_entry_schema_with_data_file,
)
from pyiceberg.table import StaticTable
from pyiceberg.typedef import Record
from pyiceberg.types import StructType

ROW_ID, LAST_UPDATED = 2147483540, 2147483539
REGIONS = ("eu", "us", "ap")

out = os.path.abspath(sys.argv[1])
location = f"file://{out}/warehouse/db/v3"
os.makedirs(f"{out}/warehouse/db/v3/data", exist_ok=True)
os.makedirs(f"{out}/warehouse/db/v3/metadata", exist_ok=True)
io = PyArrowFileIO()
table_uuid = str(uuid.UUID(int=0x5EE5_0003))
SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"},
        {"id": 2, "name": "region", "required": False, "type": "string"},
        {"id": 3, "name": "qty", "required": False, "type": "int"},
    ],
}
SCHEMA_JSON_TEXT = json.dumps(SCHEMA_JSON)


def fld(name, ty, fid):
    return pa.field(name, ty, nullable=True, metadata={b"PARQUET:field_id": str(fid).encode()})


BASE_FIELDS = [fld("id", pa.int64(), 1), fld("region", pa.string(), 2), fld("qty", pa.int32(), 3)]


def row(i, qty=None):
    return (i, REGIONS[i % 3], i % 7 if qty is None else qty)


def write_data(name, rows, row_ids=None, seq=None):
    """A Parquet data file of `rows`; with `row_ids`, the `_row_id` and
    `_last_updated_sequence_number` columns too (None entries stay null)."""
    cols = {
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "region": pa.array([r[1] for r in rows], pa.string()),
        "qty": pa.array([r[2] for r in rows], pa.int32()),
    }
    fields = list(BASE_FIELDS)
    if row_ids is not None:
        cols["_row_id"] = pa.array(row_ids, pa.int64())
        cols["_last_updated_sequence_number"] = pa.array(seq, pa.int64())
        fields += [fld("_row_id", pa.int64(), ROW_ID), fld("_last_updated_sequence_number", pa.int64(), LAST_UPDATED)]
    path = f"{location}/data/{name}.parquet"
    pq.write_table(pa.Table.from_pydict(cols, schema=pa.schema(fields)), path[len("file://") :], row_group_size=128)
    return path


def dv_blob(positions):
    """`deletion-vector-v1` (Puffin spec): BE length, magic, 64-bit portable Roaring, BE CRC."""
    by_key = {}
    for p in sorted(positions):
        by_key.setdefault(p >> 32, BitMap()).add(p & 0xFFFFFFFF)
    vector = struct.pack("<Q", len(by_key))
    for key in sorted(by_key):
        vector += struct.pack("<I", key) + by_key[key].serialize()
    body = bytes([0xD1, 0xD3, 0x39, 0x64]) + vector
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def write_puffin(name, dvs):
    """A Puffin file of deletion vectors {data file path: positions}; returns its path, its
    size and each DV's (offset, length)."""
    blob_bytes, blobs, ranges = b"PFA1", [], {}
    for data_path, positions in dvs.items():
        b = dv_blob(positions)
        ranges[data_path] = (len(blob_bytes), len(b))
        blobs.append(
            {
                "type": "deletion-vector-v1",
                "fields": [2147483645],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": len(blob_bytes),
                "length": len(b),
                "properties": {"referenced-data-file": data_path, "cardinality": str(len(positions))},
            }
        )
        blob_bytes += b
    footer = json.dumps({"blobs": blobs, "properties": {"created-by": "skerry make_v3.py"}}).encode()
    data = blob_bytes + b"PFA1" + footer + struct.pack("<i", len(footer)) + bytes(4) + b"PFA1"
    path = f"{location}/data/{name}.puffin"
    with open(path[len("file://") :], "wb") as f:
        f.write(data)
    return path, len(data), ranges


ENTRY_SCHEMA = manifest_entry_schema_with_data_file(3, data_file_with_partition(StructType(), 3))


def data_file(path, records, *, content=DataFileContent.DATA, fmt=FileFormat.PARQUET, first_row_id=None, **extra):
    size = os.path.getsize(path[len("file://") :])
    return DataFile.from_args(
        _table_format_version=3,
        content=content,
        file_path=path,
        file_format=fmt,
        partition=Record(),
        record_count=records,
        file_size_in_bytes=size,
        first_row_id=first_row_id,
        **extra,
    )


def write_manifest(name, snapshot_id, content, entries, schema_text=None):
    """A v3 manifest of `entries` [(status, snapshot_id, seq, file_seq, DataFile)]; returns a
    manifest-list record (sequence numbers filled by the caller)."""
    path = f"{location}/metadata/{name}.avro"
    meta = {
        "schema": schema_text or SCHEMA_JSON_TEXT,
        "partition-spec": "[]",
        "partition-spec-id": "0",
        "format-version": "3",
        "content": "data" if content == ManifestContent.DATA else "deletes",
        "avro.codec": "deflate",
    }
    records = [
        ManifestEntry.from_args(
            _table_format_version=3,
            status=st,
            snapshot_id=sid,
            sequence_number=seq,
            file_sequence_number=fseq,
            data_file=df,
        )
        for st, sid, seq, fseq, df in entries
    ]
    with AvroOutputFile[ManifestEntry](
        io.new_output(path), ENTRY_SCHEMA, "manifest_entry", record_schema=ENTRY_SCHEMA, metadata=meta
    ) as w:
        w.write_block(records)
    count = lambda s: sum(1 for e in entries if e[0] == s)
    rows = lambda s: sum(e[4].record_count for e in entries if e[0] == s)
    A, E, D = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED
    return {
        "manifest_path": path,
        "manifest_length": os.path.getsize(path[len("file://") :]),
        "partition_spec_id": 0,
        "content": content,
        "added_snapshot_id": snapshot_id,
        "added_files_count": count(A),
        "existing_files_count": count(E),
        "deleted_files_count": count(D),
        "added_rows_count": rows(A),
        "existing_rows_count": rows(E),
        "deleted_rows_count": rows(D),
        "partitions": [],
    }


class Table:
    def __init__(self, schema=SCHEMA_JSON, table_id=table_uuid, last_column_id=3):
        self.schema, self.table_id, self.last_column_id = schema, table_id, last_column_id
        self.snapshots, self.log, self.metadata_log = [], [], []
        self.next_row_id = 0
        self.seq = 0
        self.version = 0
        self.current = None

    def commit(self, operation, manifests, new_manifest_paths):
        """Writes the manifest list (assigning first row ids to the new data manifests, spec
        "First Row ID Assignment") and the next metadata file."""
        self.seq += 1
        snapshot_id = 3_000_000_000_000_000_000 + self.seq * 1_000_003
        first = self.next_row_id
        records = []
        for m in manifests:  # updated in place: a manifest keeps what its first list gave it
            m.setdefault("sequence_number", self.seq)
            m.setdefault("min_sequence_number", self.seq)
            if m["manifest_path"] in new_manifest_paths and m["content"] == ManifestContent.DATA:
                m["first_row_id"] = self.next_row_id
                self.next_row_id += m["added_rows_count"] + m["existing_rows_count"]
            m.setdefault("first_row_id", None)
            records.append(m)
        path = f"{location}/metadata/snap-{snapshot_id}-1-{uuid.uuid4()}.avro"
        schema = MANIFEST_LIST_FILE_SCHEMAS[3]
        meta = {
            "snapshot-id": str(snapshot_id),
            "parent-snapshot-id": str(self.current) if self.current else "null",
            "sequence-number": str(self.seq),
            "first-row-id": str(first),
            "format-version": "3",
            "avro.codec": "deflate",
        }
        with AvroOutputFile[ManifestFile](
            io.new_output(path), schema, "manifest_file", record_schema=schema, metadata=meta
        ) as w:
            w.write_block([ManifestFile.from_args(_table_format_version=3, **r) for r in records])
        now = 1_700_000_000_000 + self.seq * 1000
        self.snapshots.append(
            {
                "snapshot-id": snapshot_id,
                **({"parent-snapshot-id": self.current} if self.current else {}),
                "sequence-number": self.seq,
                "timestamp-ms": now,
                "manifest-list": path,
                "summary": {"operation": operation},
                "schema-id": 0,
                "first-row-id": first,
                "added-rows": self.next_row_id - first,
            }
        )
        self.log.append({"snapshot-id": snapshot_id, "timestamp-ms": now})
        self.current = snapshot_id
        self.version += 1
        metadata = {
            "format-version": 3,
            "table-uuid": self.table_id,
            "location": location,
            "last-sequence-number": self.seq,
            "last-updated-ms": now,
            "last-column-id": self.last_column_id,
            "schemas": [self.schema],
            "current-schema-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "default-spec-id": 0,
            "last-partition-id": 999,
            "properties": {},
            "current-snapshot-id": snapshot_id,
            "snapshots": self.snapshots,
            "snapshot-log": self.log,
            "metadata-log": list(self.metadata_log),
            "sort-orders": [{"order-id": 0, "fields": []}],
            "default-sort-order-id": 0,
            "refs": {"main": {"snapshot-id": snapshot_id, "type": "branch"}},
            "next-row-id": self.next_row_id,
        }
        mpath = f"{location}/metadata/{self.version:05d}-{uuid.uuid4()}.metadata.json"
        with open(mpath[len("file://") :], "w") as f:
            json.dump(metadata, f)
        self.metadata_log.append({"metadata-file": mpath, "timestamp-ms": now})
        return snapshot_id, mpath


expected = {"db.v3": {"location": location, "snapshots": []}}
rng = random.Random(20261202)


def random_queries(table, snapshot_id, n=20):
    """`n` random `where` filters (Skerry's JSON form) over distinct columns, each with the ids
    pyiceberg's own `scan(row_filter=…, snapshot_id=…)` returns: the differential's oracle."""
    out = []
    for _ in range(n):
        where, exprs = {}, []
        for col in rng.sample(["id", "qty", "region"], rng.randint(1, 2)):
            v, w, q = rng.randrange(0, 1000), 0, rng.randrange(0, 8)
            w = v + rng.randrange(0, 200)
            k = rng.randrange(5)
            if col == "id" and k == 0:
                where[col], e = v, EqualTo("id", v)
            elif col == "id" and k == 1:
                where[col], e = {"lt": v}, LessThan("id", v)
            elif col == "id" and k == 2:
                where[col], e = {"gte": v}, GreaterThanOrEqual("id", v)
            elif col == "id" and k == 3:
                where[col], e = {"between": [v, w]}, And(GreaterThanOrEqual("id", v), LessThanOrEqual("id", w))
            elif col == "id":
                where[col], e = {"in": [v, w, v + 1]}, In("id", {v, w, v + 1})
            elif col == "qty" and k < 3:
                where[col], e = {"lte": q}, LessThanOrEqual("qty", q)
            elif col == "qty":
                where[col], e = q, EqualTo("qty", q)
            else:
                r = rng.choice(REGIONS + ("zz",))
                where[col], e = r, EqualTo("region", r)
            exprs.append(e)
        expr = exprs[0] if len(exprs) == 1 else And(*exprs)
        ids = sorted(table.scan(row_filter=expr, snapshot_id=snapshot_id).to_arrow().column("id").to_pylist())
        out.append({"where": where, "ids": ids})
    return out


def record(label, snapshot_id, metadata_location, live):
    """Checks pyiceberg's scan of the snapshot against the model `live` [(id, region, qty,
    row_id)] and records it."""
    t = StaticTable.from_metadata(metadata_location)
    got = t.scan(snapshot_id=snapshot_id).to_arrow()
    got = sorted(zip(got.column("id").to_pylist(), got.column("region").to_pylist(), got.column("qty").to_pylist()))
    want = sorted((r[0], r[1], r[2]) for r in live)
    assert got == want, f"{label}: pyiceberg scans {len(got)} rows, the model {len(want)}"
    ids = [r[3] for r in live]
    assert len(set(ids)) == len(ids), f"{label}: row ids repeat"
    expected["db.v3"]["snapshots"].append(
        {
            "label": label,
            "snapshot_id": str(snapshot_id),
            "metadata_location": metadata_location,
            "ids": sorted(r[0] for r in live),
            "pyiceberg_checked": True,
            "rows": sorted([list(r) for r in live]),
            "queries": random_queries(t, snapshot_id),
        }
    )


ADDED, EXISTING, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED
t = Table()
files = {}  # name -> (path, rows, row ids by position)

# 1. append A, B
a_rows, b_rows = [row(i) for i in range(0, 400)], [row(i) for i in range(400, 600)]
a, b = write_data("A", a_rows), write_data("B", b_rows)
s1 = 3_000_000_000_000_000_000 + (t.seq + 1) * 1_000_003
m1 = write_manifest("m1", s1, ManifestContent.DATA, [
    (ADDED, s1, None, None, data_file(a, 400)),
    (ADDED, s1, None, None, data_file(b, 200)),
])
snap, meta = t.commit("append", [m1], {m1["manifest_path"]})
assert m1["first_row_id"] == 0
files["A"] = (a, a_rows, list(range(0, 400)))
files["B"] = (b, b_rows, list(range(400, 600)))
live = {"A": set(range(400)), "B": set(range(200))}


def model():
    return [
        (*files[n][1][p], files[n][2][p]) for n, positions in live.items() for p in sorted(positions)
    ]


record("append A, B", snap, meta, model())

# 2. append C
c_rows = [row(i) for i in range(600, 900)]
c = write_data("C", c_rows)
s2 = 3_000_000_000_000_000_000 + (t.seq + 1) * 1_000_003
m2 = write_manifest("m2", s2, ManifestContent.DATA, [(ADDED, s2, None, None, data_file(c, 300))])
snap, meta = t.commit("append", [m2, m1], {m2["manifest_path"]})
assert m2["first_row_id"] == 600
files["C"] = (c, c_rows, list(range(600, 900)))
live["C"] = set(range(300))
record("append C", snap, meta, model())

# 3. deletion vectors for A and C
dv_a, dv_c = {3, 7, *range(50, 60)}, set(range(0, 10))
p1, p1_size, r1 = write_puffin("P1", {a: dv_a, c: dv_c})
s3 = 3_000_000_000_000_000_000 + (t.seq + 1) * 1_000_003


def dv_file(puffin, size, data_path, rng, positions):
    return DataFile.from_args(
        _table_format_version=3,
        content=DataFileContent.POSITION_DELETES,
        file_path=puffin,
        file_format=FileFormat.PUFFIN,
        partition=Record(),
        record_count=len(positions),
        file_size_in_bytes=size,
        referenced_data_file=data_path,
        content_offset=rng[0],
        content_size_in_bytes=rng[1],
    )


dv_a_file, dv_c_file = dv_file(p1, p1_size, a, r1[a], dv_a), dv_file(p1, p1_size, c, r1[c], dv_c)
d1 = write_manifest("d1", s3, ManifestContent.DELETES, [
    (ADDED, s3, None, None, dv_a_file),
    (ADDED, s3, None, None, dv_c_file),
])
snap, meta = t.commit("delete", [d1, m2, m1], {d1["manifest_path"]})
live["A"] -= dv_a
live["C"] -= dv_c
record("deletion vectors on A and C", snap, meta, model())

# 4. compaction of A (live rows) and B into D, keeping row ids
moved = [(files["A"], p) for p in sorted(live["A"])] + [(files["B"], p) for p in sorted(live["B"])]
d_rows = [f[1][p] for f, p in moved]
d_ids = [f[2][p] for f, p in moved]
d = write_data("D", d_rows, row_ids=d_ids, seq=[1] * len(d_ids))
s4 = 3_000_000_000_000_000_000 + (t.seq + 1) * 1_000_003
m3 = write_manifest("m3", s4, ManifestContent.DATA, [
    (DELETED, s4, 1, 1, data_file(a, 400, first_row_id=0)),
    (DELETED, s4, 1, 1, data_file(b, 200, first_row_id=400)),
    (ADDED, s4, None, None, data_file(d, len(d_rows))),
])
d2 = write_manifest("d2", s4, ManifestContent.DELETES, [
    (DELETED, s4, 3, 3, dv_a_file),
    (EXISTING, s3, 3, 3, dv_c_file),
])
snap, meta = t.commit("replace", [m3, d2, m2], {m3["manifest_path"], d2["manifest_path"]})
files["D"] = (d, d_rows, d_ids)
del live["A"], live["B"]
live["D"] = set(range(len(d_rows)))
record("compaction of A and B into D keeping row ids", snap, meta, model())

# 5. merge-on-read update of C positions 20, 21; three new rows
dv_c2 = dv_c | {20, 21}
p2, p2_size, r2 = write_puffin("P2", {c: dv_c2})
updated = [(c_rows[p][0], c_rows[p][1], 100 + p) for p in (20, 21)]
new_rows = [row(i) for i in range(5000, 5003)]
e_rows = updated + new_rows
e_ids_written = [files["C"][2][20], files["C"][2][21], None, None, None]
e = write_data("E", e_rows, row_ids=e_ids_written, seq=[None] * 5)
s5 = 3_000_000_000_000_000_000 + (t.seq + 1) * 1_000_003
m4 = write_manifest("m4", s5, ManifestContent.DATA, [(ADDED, s5, None, None, data_file(e, 5))])
dv_c2_file = dv_file(p2, p2_size, c, r2[c], dv_c2)
d3 = write_manifest("d3", s5, ManifestContent.DELETES, [
    (DELETED, s5, 3, 3, dv_c_file),
    (ADDED, s5, None, None, dv_c2_file),
])
e_first = t.next_row_id
snap, meta = t.commit("overwrite", [m4, d3, m3, m2], {m4["manifest_path"], d3["manifest_path"]})
e_ids = [i if i is not None else e_first + p for p, i in enumerate(e_ids_written)]
files["E"] = (e, e_rows, e_ids)
live["C"] -= dv_c2
live["E"] = set(range(5))
record("update C 20, 21 into E (row ids kept) and 3 new rows", snap, meta, model())

# 6. a "replace" that is not a move: E rewritten into F without its row at position 2 (id
# 5000) — the ids of F are E's minus one, so Skerry derives F (RFC 0006).
f_keep = [0, 1, 3, 4]
f_rows, f_ids = [e_rows[p] for p in f_keep], [e_ids[p] for p in f_keep]
f = write_data("F", f_rows, row_ids=f_ids, seq=[5] * len(f_ids))
s6 = 3_000_000_000_000_000_000 + (t.seq + 1) * 1_000_003
m5 = write_manifest("m5", s6, ManifestContent.DATA, [
    (DELETED, s6, 5, 5, data_file(e, 5, first_row_id=e_first)),
    (ADDED, s6, None, None, data_file(f, len(f_rows))),
])
snap, meta = t.commit("replace", [m5, d3, m3, m2], {m5["manifest_path"]})
files["F"] = (f, f_rows, f_ids)
del live["E"]
live["F"] = set(range(len(f_rows)))
record("a replace of E into F that drops id 5000 (not a move)", snap, meta, model())

# 7. a "replace" that changes a value under the same row id: D rewritten into G, row id 100's
# region changed (a buggy compaction). The ids match, so Skerry carries D's entries over;
# `verify` finds the changed value.
d_path, d_rows_all, d_ids_all = files["D"]
k = next(p for p, r in enumerate(d_rows_all) if r[0] == 100)
g_rows = list(d_rows_all)
g_rows[k] = (g_rows[k][0], "zz", g_rows[k][2])
g = write_data("G", g_rows, row_ids=d_ids_all, seq=[4] * len(d_ids_all))
s7 = 3_000_000_000_000_000_000 + (t.seq + 1) * 1_000_003
m6 = write_manifest("m6", s7, ManifestContent.DATA, [
    (DELETED, s7, 4, 4, data_file(d_path, len(d_rows_all), first_row_id=m3["first_row_id"])),
    (ADDED, s7, None, None, data_file(g, len(g_rows))),
])
snap, meta = t.commit("replace", [m6, m5, d3, m2], {m6["manifest_path"]})
files["G"] = (g, g_rows, d_ids_all)
del live["D"]
live["G"] = set(range(len(g_rows)))
record("a replace of D into G that changes id 100's region under its row id", snap, meta, model())

# db/v3up: a v2 table pyiceberg wrote (two appends), upgraded to v3 (spec "Row Lineage for
# Upgraded Tables": next-row-id 0, existing snapshots untouched, so their rows have no row
# ids), then a v3 append whose manifest list assigns first row ids to the old manifests too.
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import MANIFEST_LIST_FILE_SCHEMAS as LISTS, read_manifest_list

catalog = SqlCatalog("v3", uri=f"sqlite:///{out}/v3.db", warehouse=f"file://{out}/warehouse")
catalog.create_namespace("db")
arrow_schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("qty", pa.int32())])
up = catalog.create_table("db.v3up", schema=arrow_schema, properties={"format-version": "2"})
up_files = []  # (path, rows) per data file, in the order their manifests are listed
for ids in (range(0, 100), range(100, 250)):
    up.append(pa.Table.from_pylist([dict(zip(("id", "region", "qty"), row(i))) for i in ids], schema=arrow_schema))
up = catalog.load_table("db.v3up")
expected["db.v3up"] = {"location": up.metadata.location, "snapshots": []}
for snap in [up.metadata.current_snapshot()]:
    t2 = StaticTable.from_metadata(up.metadata_location)
    got = t2.scan(snapshot_id=snap.snapshot_id).to_arrow().column("id").to_pylist()
    expected["db.v3up"]["snapshots"].append(
        {
            "label": f"v2 append ({len(got)} rows)",
            "snapshot_id": str(snap.snapshot_id),
            "metadata_location": up.metadata_location,
            "ids": sorted(got),
            "pyiceberg_checked": True,
        }
    )
# The upgrade: the same table, format version 3, next-row-id 0.
with open(up.metadata_location[len("file://") :]) as f:
    meta = json.load(f)
meta["format-version"] = 3
meta["next-row-id"] = 0
up_location = meta["location"]
upgraded = f"{up_location}/metadata/00100-{uuid.uuid4()}.metadata.json"
with open(upgraded[len("file://") :], "w") as f:
    json.dump(meta, f)
# A v3 append: a new manifest list holding the old (v2-written) data manifests, each now
# given a first_row_id, and the new manifest.
old_snapshot = up.metadata.current_snapshot()
old_manifests = old_snapshot.manifests(up.io)
g_rows = [row(i) for i in range(1000, 1010)]
location_saved = location
location = up_location
os.makedirs(f"{up_location[len('file://'):]}/data", exist_ok=True)
g = write_data("G", g_rows)
sid = 3_100_000_000_000_000_000
mg = write_manifest("mg", sid, ManifestContent.DATA, [(ADDED, sid, None, None, data_file(g, 10))])
mg.update(sequence_number=meta["last-sequence-number"] + 1, min_sequence_number=meta["last-sequence-number"] + 1)
next_row_id = 0
records, firsts = [], {}
for m in [mg] + [
    {
        "manifest_path": m.manifest_path,
        "manifest_length": m.manifest_length,
        "partition_spec_id": m.partition_spec_id,
        "content": m.content,
        "sequence_number": m.sequence_number,
        "min_sequence_number": m.min_sequence_number,
        "added_snapshot_id": m.added_snapshot_id,
        "added_files_count": m.added_files_count,
        "existing_files_count": m.existing_files_count,
        "deleted_files_count": m.deleted_files_count,
        "added_rows_count": m.added_rows_count,
        "existing_rows_count": m.existing_rows_count,
        "deleted_rows_count": m.deleted_rows_count,
        "partitions": m.partitions,
    }
    for m in old_manifests
]:
    m["first_row_id"] = next_row_id
    firsts[m["manifest_path"]] = next_row_id
    next_row_id += m["added_rows_count"] + m["existing_rows_count"]
    records.append(m)
list_path = f"{up_location}/metadata/snap-{sid}-1-{uuid.uuid4()}.avro"
seq = meta["last-sequence-number"] + 1
with AvroOutputFile[ManifestFile](
    io.new_output(list_path), LISTS[3], "manifest_file", record_schema=LISTS[3],
    metadata={"snapshot-id": str(sid), "parent-snapshot-id": str(old_snapshot.snapshot_id),
              "sequence-number": str(seq), "first-row-id": "0", "format-version": "3", "avro.codec": "deflate"},
) as w:
    w.write_block([ManifestFile.from_args(_table_format_version=3, **r) for r in records])
now = meta["last-updated-ms"] + 1000
meta["snapshots"].append({
    "snapshot-id": sid, "parent-snapshot-id": old_snapshot.snapshot_id, "sequence-number": seq,
    "timestamp-ms": now, "manifest-list": list_path, "summary": {"operation": "append"}, "schema-id": meta["current-schema-id"],
    "first-row-id": 0, "added-rows": next_row_id,
})
meta.update({"last-sequence-number": seq, "last-updated-ms": now, "current-snapshot-id": sid, "next-row-id": next_row_id})
meta["refs"] = {"main": {"snapshot-id": sid, "type": "branch"}}
meta["snapshot-log"] = meta.get("snapshot-log", []) + [{"snapshot-id": sid, "timestamp-ms": now}]
meta["metadata-log"] = meta.get("metadata-log", []) + [{"metadata-file": upgraded, "timestamp-ms": now - 1}]
appended = f"{up_location}/metadata/00101-{uuid.uuid4()}.metadata.json"
with open(appended[len("file://") :], "w") as f:
    json.dump(meta, f)
# The model: each data file's rows at first_row_id (its manifest's: one file per manifest).
live = []
for m in records:
    entries = [e for e in ManifestFile.from_args(_table_format_version=3, **m).fetch_manifest_entry(io)]
    assert len(entries) == 1, m["manifest_path"]
    df = entries[0].data_file
    t3 = pq.read_table(df.file_path[len("file://") :])
    for p, (i, r, q) in enumerate(zip(t3.column("id").to_pylist(), t3.column("region").to_pylist(), t3.column("qty").to_pylist())):
        live.append((i, r, q, firsts[m["manifest_path"]] + p))
got = StaticTable.from_metadata(appended).scan().to_arrow()
assert sorted(got.column("id").to_pylist()) == sorted(r[0] for r in live)
expected["db.v3up"]["upgraded_metadata"] = upgraded
expected["db.v3up"]["snapshots"].append(
    {
        "label": "v3 append after the upgrade",
        "snapshot_id": str(sid),
        "metadata_location": appended,
        "ids": sorted(r[0] for r in live),
        "pyiceberg_checked": True,
        "rows": sorted([list(r) for r in live]),
    }
)
location = location_saved

# db/v3c (issue 43, RFC 0006 step 3): a v3 table with a text and a vector column, so a
# compaction carries every kind's entries. Ten files V0..V9 of 60 rows (row ids 0..600 by
# inheritance); a deletion vector on V3; then two `replace` compactions that keep row ids:
# V0..V9's live rows into W0 (V0..V4, rows reordered by tag then id: a sort compaction)
# and W1 (V5..V9 in file order), later W0 and W1 into X; last a lying `replace` of X into Y
# that changes a value under its row id.
C_SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"},
        {"id": 2, "name": "tag", "required": False, "type": "string"},
        {"id": 3, "name": "body", "required": False, "type": "string"},
        {"id": 4, "name": "emb", "required": False,
         "type": {"type": "list", "element-id": 5, "element": "float", "element-required": False}},
    ],
}
C_FIELDS = [
    fld("id", pa.int64(), 1),
    fld("tag", pa.string(), 2),
    fld("body", pa.string(), 3),
    fld("emb", pa.list_(fld("element", pa.float32(), 5)), 4),
]
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "glacier", "harbor", "isle", "jetty",
         "kelp", "lagoon", "mist", "nacre", "orca", "pier", "quay", "reef", "skerry", "tide"]
crng = random.Random(43)


def c_row(i):
    """Row `i` of db/v3c: (id, tag, body, emb). Some bodies are NULL, some empty or without a
    word (documents without a token, only in files the compactions move whole), some vectors
    NULL."""
    tag = ("north", "south", "east", "west")[i % 4]
    if i % 17 == 0:
        body = None
    elif i % 29 == 0 and (i // 60) in (1, 6):
        body = "" if i % 2 else "-- !!"
    else:
        body = " ".join(crng.choice(WORDS) for _ in range(crng.randint(1, 12)))
    emb = None if i % 23 == 0 else [round(crng.gauss((i % 5) * 2.0, 1.0), 4) for _ in range(8)]
    return (i, tag, body, emb)


def write_arrays(name, arrays, row_ids=None, seq=None, row_group_size=32):
    """A data file of db/v3c's columns (`arrays`, in C_FIELDS order); with `row_ids`, the
    `_row_id` and `_last_updated_sequence_number` columns too."""
    fields = list(C_FIELDS)
    arrays = list(arrays)
    if row_ids is not None:
        arrays += [pa.array(row_ids, pa.int64()), pa.array(seq, pa.int64())]
        fields += [fld("_row_id", pa.int64(), ROW_ID), fld("_last_updated_sequence_number", pa.int64(), LAST_UPDATED)]
    path = f"{location}/data/{name}.parquet"
    arrays = [a.cast(f.type) for a, f in zip(arrays, fields)]
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path[len("file://") :], row_group_size=row_group_size)
    return path


def write_c(name, rows, row_ids=None, seq=None):
    arrays = [
        pa.array([r[0] for r in rows], pa.int64()),
        pa.array([r[1] for r in rows], pa.string()),
        pa.array([r[2] for r in rows], pa.string()),
        pa.array([r[3] for r in rows], pa.list_(pa.float32())),
    ]
    return write_arrays(name, arrays, row_ids, seq)


location = f"file://{out}/warehouse/db/v3c"
os.makedirs(f"{out}/warehouse/db/v3c/data", exist_ok=True)
os.makedirs(f"{out}/warehouse/db/v3c/metadata", exist_ok=True)
C_TEXT = json.dumps(C_SCHEMA)
tc = Table(schema=C_SCHEMA, table_id=str(uuid.UUID(int=0x5EE5_0043)), last_column_id=5)
expected["db.v3c"] = {"location": location, "snapshots": []}
cfiles, clive = {}, {}


def c_record(label, snapshot_id, metadata_location, moves=None):
    rows = [(*cfiles[n][1][p], cfiles[n][2][p]) for n, ps in clive.items() for p in sorted(ps)]
    got = StaticTable.from_metadata(metadata_location).scan(snapshot_id=snapshot_id).to_arrow()
    got = sorted(zip(*(got.column(c).to_pylist() for c in ("id", "tag", "body", "emb"))), key=lambda r: r[0])
    want = sorted(((r[0], r[1], r[2], r[3]) for r in rows), key=lambda r: r[0])
    assert len(got) == len(want) and all(
        g[:3] == w[:3] and (g[3] is None) == (w[3] is None)
        and (g[3] is None or all(abs(a - b) < 1e-6 for a, b in zip(g[3], w[3])))
        for g, w in zip(got, want)
    ), f"{label}: pyiceberg's scan differs from the model"
    ids = [r[4] for r in rows]
    assert len(set(ids)) == len(ids), f"{label}: row ids repeat"
    expected["db.v3c"]["snapshots"].append(
        {
            "label": label,
            "snapshot_id": str(snapshot_id),
            "metadata_location": metadata_location,
            "pyiceberg_checked": True,
            "rows": sorted([list(r) for r in rows]),
            **({"moves": moves} if moves else {}),
        }
    )


# 1. append V0..V9
entries, sid = [], 3_000_000_000_000_000_000 + (tc.seq + 1) * 1_000_003
for k in range(10):
    rows_k = [c_row(i) for i in range(60 * k, 60 * k + 60)]
    pth = write_c(f"V{k}", rows_k)
    cfiles[f"V{k}"] = (pth, rows_k, list(range(60 * k, 60 * k + 60)))
    clive[f"V{k}"] = set(range(60))
    entries.append((ADDED, sid, None, None, data_file(pth, 60)))
mc1 = write_manifest("mc1", sid, ManifestContent.DATA, entries, C_TEXT)
snap, meta = tc.commit("append", [mc1], {mc1["manifest_path"]})
c_record("append V0..V9", snap, meta)

# 2. a deletion vector on V3 (positions 5..11)
dv_v3 = set(range(5, 12))
pc, pc_size, rc = write_puffin("PC", {cfiles["V3"][0]: dv_v3})
sid = 3_000_000_000_000_000_000 + (tc.seq + 1) * 1_000_003
dv_v3_file = dv_file(pc, pc_size, cfiles["V3"][0], rc[cfiles["V3"][0]], dv_v3)
dc1 = write_manifest("dc1", sid, ManifestContent.DELETES, [(ADDED, sid, None, None, dv_v3_file)], C_TEXT)
snap, meta = tc.commit("delete", [dc1, mc1], {dc1["manifest_path"]})
clive["V3"] -= dv_v3
c_record("a deletion vector on V3", snap, meta)

# 3. compaction of V0..V9 into W0 (V0..V4 sorted by tag, id) and W1 (V5..V9), row ids kept
def compact(names, key=None):
    moved = [(cfiles[n], p) for n in names for p in sorted(clive[n])]
    if key:
        moved.sort(key=lambda m: key(m[0][1][m[1]]))
    return [f[1][p] for f, p in moved], [f[2][p] for f, p in moved]


w0_rows, w0_ids = compact([f"V{k}" for k in range(5)], key=lambda r: (r[1], r[0]))
w1_rows, w1_ids = compact([f"V{k}" for k in range(5, 10)])
w0 = write_c("W0", w0_rows, row_ids=w0_ids, seq=[1] * len(w0_ids))
w1 = write_c("W1", w1_rows, row_ids=w1_ids, seq=[1] * len(w1_ids))
sid = 3_000_000_000_000_000_000 + (tc.seq + 1) * 1_000_003
mc2 = write_manifest("mc2", sid, ManifestContent.DATA, [
    *[(DELETED, sid, 1, 1, data_file(cfiles[f"V{k}"][0], 60, first_row_id=60 * k)) for k in range(10)],
    (ADDED, sid, None, None, data_file(w0, len(w0_rows))),
    (ADDED, sid, None, None, data_file(w1, len(w1_rows))),
], C_TEXT)
dc2 = write_manifest("dc2", sid, ManifestContent.DELETES, [(DELETED, sid, 2, 2, dv_v3_file)], C_TEXT)
snap, meta = tc.commit("replace", [mc2, dc2], {mc2["manifest_path"], dc2["manifest_path"]})
for k in range(10):
    del clive[f"V{k}"]
cfiles["W0"], cfiles["W1"] = (w0, w0_rows, w0_ids), (w1, w1_rows, w1_ids)
clive["W0"], clive["W1"] = set(range(len(w0_rows))), set(range(len(w1_rows)))
c_record("compaction of V0..V9 into W0 (sorted) and W1", snap, meta, moves={"files": 2, "sources": 10})

# 4. compaction of W0 and W1 into X (W1's rows first), row ids kept
x_rows, x_ids = compact(["W1", "W0"])
x = write_c("X", x_rows, row_ids=x_ids, seq=[3] * len(x_ids))
sid = 3_000_000_000_000_000_000 + (tc.seq + 1) * 1_000_003
mc3 = write_manifest("mc3", sid, ManifestContent.DATA, [
    (DELETED, sid, 3, 3, data_file(w0, len(w0_rows), first_row_id=mc2["first_row_id"])),
    (DELETED, sid, 3, 3, data_file(w1, len(w1_rows), first_row_id=mc2["first_row_id"] + len(w0_rows))),
    (ADDED, sid, None, None, data_file(x, len(x_rows))),
], C_TEXT)
snap, meta = tc.commit("replace", [mc3], {mc3["manifest_path"]})
del clive["W0"], clive["W1"]
cfiles["X"] = (x, x_rows, x_ids)
clive["X"] = set(range(len(x_rows)))
c_record("compaction of W0 and W1 into X", snap, meta, moves={"files": 1, "sources": 2})

# 5. a "replace" of X into Y that keeps every row id but changes id 100's body and vector (a
# buggy compaction): a move by its ids, whose carried entries `verify` finds wrong.
k = next(p for p, r in enumerate(x_rows) if r[0] == 100)
y_rows = list(x_rows)
y_rows[k] = (100, x_rows[k][1], "zzlie harbor", [9.5] * 8)
y = write_c("Y", y_rows, row_ids=x_ids, seq=[4] * len(x_ids))
sid = 3_000_000_000_000_000_000 + (tc.seq + 1) * 1_000_003
mc4 = write_manifest("mc4", sid, ManifestContent.DATA, [
    (DELETED, sid, 4, 4, data_file(x, len(x_rows), first_row_id=mc3["first_row_id"])),
    (ADDED, sid, None, None, data_file(y, len(y_rows))),
], C_TEXT)
snap, meta = tc.commit("replace", [mc4], {mc4["manifest_path"]})
del clive["X"]
cfiles["Y"] = (y, y_rows, x_ids)
clive["Y"] = set(range(len(y_rows)))
c_record("a replace of X into Y that changes id 100's body and vector under its row id", snap, meta)

# db/v3big (SKERRY_V3_BIG=1; issue 43, the staged carry): FILES files of ROWS rows in all,
# then one `replace` of them into OUTPUTS files (each holding FILES/OUTPUTS sources' rows,
# the later sources first) keeping row ids — by default two files of 130,000 rows into one,
# a move whose carry (260,000 rows x 4 indexes) does not fit one registration commit. The
# compaction benchmark (bench/compaction.mjs) sets SKERRY_V3_BIG_ROWS, _FILES, _OUTPUTS and
# _DIM (vector width; text from a Zipf-distributed vocabulary of 20,000 words).
if os.environ.get("SKERRY_V3_BIG") == "1":
    import bisect
    import itertools

    import pyarrow.compute as pc

    location = f"file://{out}/warehouse/db/v3big"
    os.makedirs(f"{out}/warehouse/db/v3big/data", exist_ok=True)
    os.makedirs(f"{out}/warehouse/db/v3big/metadata", exist_ok=True)
    tb = Table(schema=C_SCHEMA, table_id=str(uuid.UUID(int=0x5EE5_0044)), last_column_id=5)
    ROWS = int(os.environ.get("SKERRY_V3_BIG_ROWS", 260_000))
    FILES = int(os.environ.get("SKERRY_V3_BIG_FILES", 2))
    OUTPUTS = int(os.environ.get("SKERRY_V3_BIG_OUTPUTS", 1))
    DIM = int(os.environ.get("SKERRY_V3_BIG_DIM", 8))
    assert ROWS % FILES == 0 and FILES % OUTPUTS == 0
    N = ROWS // FILES
    brng = random.Random(44)
    vocab = WORDS + [f"w{k}" for k in range(20_000 - len(WORDS))]
    # Zipf(1.1)-like word frequencies: a word's weight is 1 / rank^1.1.
    cum = list(itertools.accumulate(1.0 / (r + 1) ** 1.1 for r in range(len(vocab))))

    def big_cols(first):
        ids = range(first, first + N)
        draw = lambda: vocab[bisect.bisect_left(cum, brng.random() * cum[-1])]
        bodies = [None if i % 17 == 0 else " ".join(draw() for _ in range(1 + i % 12)) for i in ids]
        # Vectors: bytes of the seeded stream as floats in [0, 4), offset by the row's cluster.
        raw = pa.Array.from_buffers(pa.uint8(), N * DIM, [None, pa.py_buffer(brng.randbytes(N * DIM))])
        values = pc.divide(raw.cast(pa.float32()), pa.scalar(64.0, pa.float32()))
        emb = pa.ListArray.from_arrays(pa.array(range(0, N * DIM + 1, DIM), pa.int32()), values,
                                       mask=pa.array([i % 23 == 0 for i in ids]))
        tags = pa.array([("north", "south", "east", "west")[i % 4] for i in ids])
        return [pa.array(ids, pa.int64()), tags, pa.array(bodies, pa.string()), emb]

    def write_big(name, arrays, row_ids=None):
        seq = None if row_ids is None else [1] * len(row_ids)
        return write_arrays(name, arrays, row_ids, seq, row_group_size=16_384)

    sources = []
    sid = 3_000_000_000_000_000_000 + (tb.seq + 1) * 1_000_003
    for k in range(FILES):
        cols = big_cols(k * N)
        sources.append((write_big(f"S{k:03d}", cols), cols))
    mb1 = write_manifest("mb1", sid, ManifestContent.DATA, [(ADDED, sid, None, None, data_file(p_, N)) for p_, _ in sources], C_TEXT)
    snap, meta = tb.commit("append", [mb1], {mb1["manifest_path"]})
    big = {"location": location, "snapshots": [{"label": f"append {FILES} files", "snapshot_id": str(snap), "metadata_location": meta}]}
    per = FILES // OUTPUTS
    sid = 3_000_000_000_000_000_000 + (tb.seq + 1) * 1_000_003
    entries = [(DELETED, sid, 1, 1, data_file(p_, N, first_row_id=k * N)) for k, (p_, _) in enumerate(sources)]
    for o in range(OUTPUTS):
        group = list(range(o * per, (o + 1) * per))[::-1]
        arrays = [pa.concat_arrays([sources[k][1][c] for k in group]) for c in range(4)]
        ids = [i for k in group for i in range(k * N, (k + 1) * N)]
        entries.append((ADDED, sid, None, None, data_file(write_big(f"C{o:03d}", arrays, row_ids=ids), per * N)))
    mb2 = write_manifest("mb2", sid, ManifestContent.DATA, entries, C_TEXT)
    snap, meta = tb.commit("replace", [mb2], {mb2["manifest_path"]})
    got = StaticTable.from_metadata(meta).scan(snapshot_id=snap, selected_fields=("id",)).to_arrow()
    assert got.num_rows == ROWS and sorted(got.column("id").to_pylist()) == list(range(ROWS))
    big["snapshots"].append({"label": f"compaction of {FILES} files into {OUTPUTS}", "snapshot_id": str(snap),
                             "metadata_location": meta, "pyiceberg_checked": True})
    expected["db.v3big"] = big
location = location_saved

with open(os.path.join(out, "expected_v3.json"), "w") as f:
    json.dump(expected, f, indent=1)
print(f"wrote {out}/expected_v3.json")
