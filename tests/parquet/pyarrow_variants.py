"""Parquet written by pyarrow in the ways real pipelines write it, for Skerry's differential
test (core/tests/foreign_parquet.rs).

    python3 tests/parquet/pyarrow_variants.py OUT_DIR

writes one directory per variant (3 files each) under OUT_DIR and OUT_DIR/expected.json: the
variants, and for a fixed list of predicates the `id`s of the matching rows, computed by
pyarrow itself over the same rows.
"""

import json
import math
import os
import random
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

out = os.path.abspath(sys.argv[1])
rng = random.Random(20261202)
N = 3 * 4000
ids = list(range(N))
rng.shuffle(ids)
words = ["alpha", "beta", "gamma", "δέλτα", "εψιλον", "😀 smile", "", "zeta", "Eta", "eta"]


def maybe(i, v, every):
    return None if i % every == 0 else v


rows = {
    "id": ids,
    "word": [maybe(i, words[(i * 7) % len(words)], 13) for i in range(N)],
    "uniq": [f"user-{(i * 7919) % N:07d}@example.com" for i in range(N)],
    "n32": [maybe(i, (i * 31) % 500 - 250, 11) for i in range(N)],
    "f": [
        None if i % 17 == 0
        else float("nan") if i % 19 == 0
        else -0.0 if i % 23 == 0
        else 0.0 if i % 29 == 0
        else ((i * 37) % 1000) / 8 - 60
        for i in range(N)
    ],
    "ts": [maybe(i, 1_700_000_000_000_000 + (i % 997) * 1_000_003, 31) for i in range(N)],
}
schema = pa.schema(
    [
        ("id", pa.int64()),
        ("word", pa.string()),
        ("uniq", pa.string()),
        ("n32", pa.int32()),
        ("f", pa.float64()),
        ("ts", pa.timestamp("us")),
    ]
)
table = pa.Table.from_pydict(rows, schema=schema)

variants = {
    "default": {},
    "v2_pages_zstd": {"data_page_version": "2.0", "compression": "zstd"},
    "no_dictionary_lz4": {"use_dictionary": False, "compression": "lz4"},
    "small_pages_page_index": {"write_page_index": True, "data_page_size": 2048, "row_group_size": 700},
    "dictionary_fallback": {"dictionary_pagesize_limit": 2048, "compression": "snappy"},
    "plain_no_stats": {"compression": "none", "write_statistics": False, "use_dictionary": False},
    "gzip": {"compression": "gzip"},
}
for name, opts in variants.items():
    d = os.path.join(out, name)
    os.makedirs(d)
    per = N // 3
    for k in range(3):
        pq.write_table(table.slice(k * per, per), os.path.join(d, f"part-{k}.parquet"), **opts)

# Predicates (column, op, args) and the ids pyarrow finds for them.
predicates = [
    ["id", "eq", 1234],
    ["id", "in", [5, 77, 11999, 0, 123456]],
    ["id", "between", 100, 160],
    ["word", "eq", "δέλτα"],
    ["word", "eq", ""],
    ["word", "eq", "😀 smile"],
    ["word", "in", ["eta", "Eta", "nope"]],
    ["word", "null"],
    ["uniq", "eq", f"user-{4321:07d}@example.com"],
    ["uniq", "between", "user-0001000@example.com", "user-0001010@example.com"],
    ["n32", "eq", -7],
    ["n32", "lt", -240],
    ["n32", "ge", 245],
    ["n32", "null"],
    ["f", "eq", 0.0],
    ["f", "gt", 60.0],
    ["f", "between", -1.0, 1.0],
    ["f", "null"],
    ["ts", "ge", 1_700_000_000_000_000 + 990 * 1_000_003],
]


def mask(col, op, *args):
    c = table[col]
    if op == "eq":
        return pc.equal(c, args[0])
    if op == "in":
        return pc.is_in(c, value_set=pa.array(args[0], type=c.type))
    if op == "between":
        return pc.and_(pc.greater_equal(c, args[0]), pc.less_equal(c, args[1]))
    if op == "lt":
        return pc.less(c, args[0])
    if op == "ge":
        return pc.greater_equal(c, args[0])
    if op == "gt":
        return pc.greater(c, args[0])
    if op == "null":
        return pc.is_null(c)
    raise ValueError(op)


expected = []
for p in predicates:
    col, op, *args = p
    if col == "ts":
        args = [pa.scalar(args[0], type=pa.timestamp("us"))]
    m = mask(col, op, *args)
    if col == "f" and op in ("gt", "ge"):
        # Skerry orders floats as SQL engines do (docs/key-encoding.md): NaN is greatest.
        m = pc.or_(pc.fill_null(m, False), pc.fill_null(pc.is_nan(table[col]), False))
    got = table.filter(pc.fill_null(m, False))["id"].to_pylist()
    expected.append({"predicate": p, "ids": sorted(got)})

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"variants": list(variants), "queries": expected}, f, ensure_ascii=False, indent=1)
print(f"wrote {out}/expected.json")
