#!/usr/bin/env python3
"""Record exactly what this process received: argv, environment and bound files, as bytes.

Run: ``torchrun ... jobs/literal_probe.py OUT_DIR [WALK_DIR] [ARGS...]``. Each rank writes
``OUT_DIR/rank-N.json`` (N = ``$RANK``, else 0) with every byte string hex-encoded, so that a
test can compare what a profile or a command line said with what reached the job, byte for
byte, without any decoding in between:

- ``argv``: ``sys.argv`` from index 1 on (OUT_DIR and WALK_DIR included);
- ``env``: the whole environment (``os.environb``);
- ``files``: for every regular file below WALK_DIR (if given and present), its path and its
  content; this is how bind mounts are seen from inside the container;
- ``cwd`` and ``pid`` (plain text, for diagnosis).

No torch, no process group: the probe must start in a second, and must not depend on
anything that the values under test could have broken.
"""

from __future__ import annotations

import json
import os
import sys


def hexed(data: bytes) -> str:
    return data.hex()


def walk(root: bytes) -> dict[str, str]:
    """Path -> content of every regular file below `root` (bytes paths: names stay exact)."""
    found: dict[str, str] = {}
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as fh:
                    found[hexed(path)] = hexed(fh.read(4096))
            except OSError as exc:
                found[hexed(path)] = hexed(f"<unreadable: {exc.strerror}>".encode())
    return found


def main(argv: list[bytes]) -> int:
    if not argv:
        print("usage: literal_probe.py OUT_DIR [WALK_DIR] [ARGS...]", file=sys.stderr)
        return 2
    out_dir = argv[0]
    walk_dir = argv[1] if len(argv) > 1 else b""
    record = {
        "argv": [hexed(a) for a in argv],
        "env": {hexed(k): hexed(v) for k, v in os.environb.items()},
        "files": walk(walk_dir) if walk_dir and os.path.isdir(walk_dir) else {},
        "cwd": os.getcwd(),
        "pid": os.getpid(),
    }
    rank = os.environ.get("RANK", "0")
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, f"rank-{rank}.json".encode())
    tmp = target + f".tmp-{os.getpid()}".encode()
    with open(tmp, "w", encoding="ascii") as fh:
        json.dump(record, fh, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, target)
    print(f"fabrikit-literal: rank {rank} wrote {os.fsdecode(target)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main([os.fsencode(a) for a in sys.argv[1:]]))
