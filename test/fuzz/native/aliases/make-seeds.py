#!/usr/bin/env python3
"""Writes the seed corpus of the json-scan.c targets (README.md) into the folder given (stdlib only).

Each JSONTestSuite test_parsing file (first 8 KiB) behind two sets of control bytes (four for the y_
files), and 40 generated documents with metadata/requiredMetadataTypes/tags members at depths 0-4
(pretty and compact, ASCII-escaped or not, some keys written with \\u escapes) behind four.

    python3 make-seeds.py /tmp/json-scan-fuzz/seeds [/work/shared/corpora/JSONTestSuite/test_parsing]
"""
import json
import os
import random
import sys

out = sys.argv[1]
suite = sys.argv[2] if len(sys.argv) > 2 else '/work/shared/corpora/JSONTestSuite/test_parsing'
os.makedirs(out, exist_ok=True)
# Control bytes (driver.c plan_from): limit 2^20 one seeded cut; limit 2^20, interleaved, byte by byte;
# limit 2^20, interleaved, every few bytes; limit 8, interleaved, near block edges.
CONTROLS = [b'\x01\x00\x00\x00', b'\xfd\x12\x34\x56', b'\x55\x9a\x01\x02', b'\x0c\x07\x00\x00']
for name in sorted(os.listdir(suite)):
    with open(os.path.join(suite, name), 'rb') as f:
        data = f.read(8192)
    for k, control in enumerate(CONTROLS if name.startswith('y_') else CONTROLS[:2]):
        with open(os.path.join(out, f'{name}.{k}'), 'wb') as f:
            f.write(control + data)

random.seed(7)
KEYS = ['metadata', 'requiredMetadataTypes', 'tags', 'requiredTags', 'id', 'a', '\u00e9', '\U0001F600', '']


def document(depth):
    if depth == 0:
        return random.choice([1, 'x', None, True, -2.5e3, '\u00e9\U0001F600'])
    return {
        key: document(depth - 1)
        if random.random() < 0.6
        else [document(depth - 1), {'metadata': {'requiredMetadataTypes': []}}]
        for key in random.sample(KEYS, 4)
    }


for k in range(40):
    text = json.dumps(
        document(k % 5),
        ensure_ascii=k % 3 == 0,
        indent=None if k % 2 else 2,
        separators=(',', ':') if k % 4 == 1 else None,
    )
    if k % 7 == 3:
        text = text.replace('"metadata"', '"m\\u0065tadata"').replace('"tags"', '"t\\u0061gs"')
    for j, control in enumerate(CONTROLS):
        with open(os.path.join(out, f'gen{k}.{j}'), 'wb') as f:
            f.write(control + text.encode())
