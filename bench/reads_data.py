"""Writes the read benchmark's table with pyarrow (issue 14's shape): N rows in 20 files,
4 row groups each, snappy, 64 KiB data pages, page index on. Columns: id (int64, unique,
ascending across files), email (string, unique, permuted), region (50 values), ts
(timestamp[us]), amount (float64 with NULLs), tag (8 values), body (~60-byte text).

    python3 bench/reads_data.py <dir> <rows> [files, 20 by default]
"""
import sys

import pyarrow as pa
import pyarrow.parquet as pq

out, rows = sys.argv[1], int(sys.argv[2])
files = int(sys.argv[3]) if len(sys.argv) > 3 else 20
per = rows // files
for f in range(files):
    ids = list(range(f * per, (f + 1) * per))
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": pa.array([f"user-{(i * 7919) % rows:09d}@example.com" for i in ids]),
            "region": pa.array([f"region-{i % 50:02d}" for i in ids]),
            "ts": pa.array([1_700_000_000_000_000 + i * 1_000_000 for i in ids], pa.timestamp("us")),
            "amount": pa.array([None if i % 101 == 0 else (i % 1000) * 1.25 for i in ids], pa.float64()),
            "tag": pa.array([f"tag-{i % 8}" for i in ids]),
            "body": pa.array([f"row {i:09d} says {(i * 2654435761) % 2**32:08x} and nothing else" for i in ids]),
        }
    )
    pq.write_table(
        table,
        f"{out}/part-{f:02d}.parquet",
        row_group_size=per // 4,
        data_page_size=64 * 1024,
        compression="snappy",
        write_page_index=True,
    )
