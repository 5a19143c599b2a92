"""Writes to an Iceberg table through a REST catalog with pyiceberg's own `RestCatalog`
client (the reference client: what it accepts, the server speaks).

    python3 tests/iceberg/rest_writer.py URI S3_ENDPOINT KEY SECRET create
    python3 tests/iceberg/rest_writer.py URI S3_ENDPOINT KEY SECRET append FROM TO
    python3 tests/iceberg/rest_writer.py URI S3_ENDPOINT KEY SECRET delete BELOW

`create` makes namespace `db` and table `db.events` (id long, region string; format v2) and
appends ids 0..300; `append` adds ids FROM..TO; `delete` removes ids < BELOW (copy-on-write).
Prints {"snapshot_id", "metadata_location", "ids"} of the table after the change.
"""

import json
import os
import sys

# botocore's default streaming checksums (aws-chunked bodies) fail moto's signature check.
os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
os.environ.setdefault("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import LessThan

uri, s3, key, secret, cmd = sys.argv[1:6]
catalog = RestCatalog(
    "rest",
    uri=uri,
    credential="writer:writer-secret",
    **{
        "s3.endpoint": s3,
        "s3.access-key-id": key,
        "s3.secret-access-key": secret,
        "s3.region": "us-east-1",
        "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
    },
)
schema = pa.schema([("id", pa.int64()), ("region", pa.string())])


def rows(ids):
    return pa.table({"id": list(ids), "region": [("eu", "us", "ap")[i % 3] for i in ids]}, schema=schema)


if cmd == "create":
    catalog.create_namespace("db")
    t = catalog.create_table("db.events", schema=schema, properties={"format-version": "2"})
    t.append(rows(range(0, 300)))
elif cmd == "append":
    t = catalog.load_table("db.events")
    t.append(rows(range(int(sys.argv[6]), int(sys.argv[7]))))
elif cmd == "delete":
    t = catalog.load_table("db.events")
    t.delete(delete_filter=LessThan("id", int(sys.argv[6])))
else:
    sys.exit(f"unknown command {cmd}")
t = catalog.load_table("db.events")
ids = sorted(t.scan().to_arrow().column("id").to_pylist())
print(json.dumps({"snapshot_id": str(t.metadata.current_snapshot_id), "metadata_location": t.metadata_location, "ids": ids}))
# The change is committed and printed: leave without the interpreter's shutdown, where
# pyarrow's and fsspec's background threads can abort the process ("terminate called
# without an active exception", seen once under load), failing a write that succeeded.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
