"""Vector tables written by pyarrow for Skerry's end-to-end nearest-neighbour tests
(tests/nearest.test.mjs).

    python3 tests/vector/make_vectors.py OUT_DIR FILES ROWS DIM SEED

writes OUT_DIR/f<i>.parquet (columns id int64, emb fixed_size_list<float32>[DIM], tags
list<float32> of the same vectors, cat int64, body string: words naming the vector's cluster
and common words, for hybrid search; snappy, row groups of 250 rows) and
OUT_DIR/rows.json: every row's id, vector (as float32 values) and cat, so the test's brute
force sees exactly the floats pyarrow stored. About 1 row in 40 has a NULL vector and 1 in 60
a NaN component (never a result).
"""

import json
import math
import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq

out, files, rows, dim, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
os.makedirs(out, exist_ok=True)
rng = random.Random(seed)
centres = [[rng.uniform(-4, 4) for _ in range(dim)] for _ in range(8)]
CLUSTER = ["harbor", "lantern", "meadow", "quarry", "saffron", "tundra", "velvet", "willow"]
WORDS = ["stone", "river", "light", "cold", "green", "deep", "quiet", "bright", "old", "salt", "wind", "iron"]


def f32(x):
    return pa.array([x], pa.float32())[0].as_py()


everything = {}
for f in range(files):
    ids, embs, cats, bodies = [], [], [], []
    for i in range(rows):
        ids.append(f * 100000 + i)
        cats.append(rng.randrange(6))
        r = rng.randrange(120)
        ci = rng.randrange(len(centres))
        words = [WORDS[rng.randrange(len(WORDS))] for _ in range(rng.randrange(2, 7))]
        if rng.randrange(3):
            words.insert(rng.randrange(len(words) + 1), CLUSTER[ci])
        bodies.append(" ".join(words))
        if r < 3:
            embs.append(None)
        else:
            c = centres[ci]
            v = [f32(x + rng.gauss(0, 0.6)) for x in c]
            if r == 3 or r == 4:
                v[rng.randrange(dim)] = math.nan
            embs.append(v)
    emb = pa.array(embs, pa.list_(pa.float32(), dim))
    tags = pa.array(embs, pa.list_(pa.float32()))
    t = pa.table({"id": pa.array(ids, pa.int64()), "emb": emb, "tags": tags, "cat": pa.array(cats, pa.int64()), "body": pa.array(bodies, pa.string())})
    name = f"f{f}.parquet"
    pq.write_table(t, os.path.join(out, name), row_group_size=250, compression="snappy")
    everything[name] = [
        {"id": i, "emb": None if v is None else [None if math.isnan(x) else x for x in v], "nan": v is not None and any(math.isnan(x) for x in v), "cat": c}
        for i, v, c in zip(ids, embs, cats)
    ]
with open(os.path.join(out, "rows.json"), "w") as fh:
    json.dump(everything, fh)
