"""The soak's upstream writer (tests/soak/soak.mjs): a real Iceberg table written by
pyiceberg (SqlCatalog on sqlite) that receives appends and copy-on-write deletes while the
overlay syncs it.

    python3 tests/soak/iceberg_writer.py ROOT SECONDS

creates ROOT/ice.db and ROOT/warehouse/db/ice (id long, region string), then every ~2 s
commits an append of 200 new ids or (every 4th commit) a delete of a range of 40 ids, until
SECONDS have passed or ROOT/stop exists. After each commit it appends one line to
ROOT/ledger.jsonl: {"snapshot": "<snapshot id>", "seq": <sequence number>, "op": "append" |
"delete", "lo", "hi"} (ids lo..hi-1), so a reader can compute the table's rows at any
snapshot it sees (a delete that matched nothing commits no snapshot: it is logged under the
current one, and deletes nothing there).
A row's region is REGIONS[id % 5].
"""

import json
import os
import random
import sys
import time

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

root, seconds = sys.argv[1], float(sys.argv[2])
REGIONS = ["eu", "us", "ap", "sa", "af"]
catalog = SqlCatalog("soak", uri=f"sqlite:///{root}/ice.db", warehouse=f"file://{root}/warehouse")
catalog.create_namespace("db")
schema = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)
table = catalog.create_table("db.ice", schema=schema, properties={"format-version": "2"})
arrow_schema = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])
rng = random.Random(7)
ledger = open(os.path.join(root, "ledger.jsonl"), "a")


def log(op, lo, hi):
    table.refresh()
    snap = table.current_snapshot()
    ledger.write(json.dumps({"snapshot": str(snap.snapshot_id), "seq": snap.sequence_number, "op": op, "lo": lo, "hi": hi}) + "\n")
    ledger.flush()


next_id, commits, t0 = 0, 0, time.time()
while time.time() - t0 < seconds and not os.path.exists(os.path.join(root, "stop")):
    if commits % 4 == 3 and next_id > 0:
        lo = rng.randrange(0, max(1, next_id - 40))
        table.delete(And(GreaterThanOrEqual("id", lo), LessThan("id", lo + 40)))
        log("delete", lo, lo + 40)
    else:
        ids = list(range(next_id, next_id + 200))
        table.append(pa.table({"id": ids, "region": [REGIONS[i % 5] for i in ids]}, schema=arrow_schema))
        log("append", next_id, next_id + 200)
        next_id += 200
    commits += 1
    time.sleep(2)
