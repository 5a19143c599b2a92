"""The soak's pool of Parquet files (tests/soak/soak.mjs), written by pyarrow.

    python3 tests/soak/make_pool.py OUT_DIR FILES ROWS SEED

writes OUT_DIR/f<i:04>.parquet — columns id int64 (i * 10000 + row, unique), cat string (12
values, for a bitmap index), tag string (2,000 values, for a bloom index), body string (3–12
words of a Zipf-ish vocabulary, 1 in 50 NULL, for a fulltext index), emb
fixed_size_list<float32>[8] (clustered, 1 in 40 NULL, for a vector index); snappy, row groups
of 100 rows — and OUT_DIR/pool.json: every file's rows as the oracle sees them (the floats
exactly as pyarrow stored them).
"""

import json
import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq

out, files, rows, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out, exist_ok=True)
rng = random.Random(seed)
DIM = 8
centres = [[rng.uniform(-3, 3) for _ in range(DIM)] for _ in range(10)]
VOCAB = [f"w{i}" for i in range(40)]
WEIGHTS = [1.0 / (i + 1) for i in range(len(VOCAB))]


def f32(xs):
    return pa.array(xs, pa.float32()).to_pylist()


pool = {}
for f in range(files):
    ids, cats, tags, bodies, embs = [], [], [], [], []
    for i in range(rows):
        ids.append(f * 10000 + i)
        cats.append(f"c{rng.randrange(12)}")
        tags.append(f"t{rng.randrange(2000)}")
        if rng.randrange(50) == 0:
            bodies.append(None)
        else:
            n = rng.randrange(3, 13)
            bodies.append(" ".join(rng.choices(VOCAB, WEIGHTS, k=n)))
        if rng.randrange(40) == 0:
            embs.append(None)
        else:
            c = centres[rng.randrange(len(centres))]
            embs.append(f32([x + rng.gauss(0, 0.7) for x in c]))
    t = pa.table({
        "id": pa.array(ids, pa.int64()),
        "cat": pa.array(cats, pa.string()),
        "tag": pa.array(tags, pa.string()),
        "body": pa.array(bodies, pa.string()),
        "emb": pa.array(embs, pa.list_(pa.float32(), DIM)),
    })
    name = f"f{f:04}.parquet"
    pq.write_table(t, os.path.join(out, name), row_group_size=100, compression="snappy")
    pool[name] = {"id": ids, "cat": cats, "tag": tags, "body": bodies, "emb": embs}
with open(os.path.join(out, "pool.json"), "w") as fh:
    json.dump(pool, fh)
