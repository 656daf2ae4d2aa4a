"""Shared state of a population on a (possibly shared) filesystem: a folder lock, JSON files
replaced atomically, and the leaderboard of the best checkpoints.

Every process of a population (one per slot, on any machine that mounts the folder) reads and
changes the population's state only while it holds the folder's lock: `fcntl.flock` on
`POP/.lock`, exclusive for writers, shared for readers. Files are written beside their final
name and renamed over it (`save_atomic`), so a process killed mid-write leaves the old file.

The leaderboard (`POP/leaderboard/`): `board.json` lists the best `size` entries (score, step,
member, hyper-parameters, checkpoint file), best first; each entry's checkpoint is its own
file, `entry-NNNNNN.pt`, written once and never changed. An entry that drops off the board has
its file deleted under the exclusive lock, so a reader that holds the shared lock while it
loads an entry never sees a half-written file or one being replaced.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from xiaoyarl.errors import CheckpointError
from xiaoyarl.train.checkpoint import load_plain, save_atomic


@contextmanager
def locked(folder: Path, shared: bool = False) -> Iterator[None]:
    """Hold `folder`'s lock for the block (exclusive unless `shared`); blocks until free."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def write_json(obj: object, path: Path) -> None:
    """Write `obj` as JSON beside `path`, flush it to disk, rename it over `path`."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: Path, what: str) -> dict:
    """The JSON file `path`, or an error that names it as `what` and says how it is broken."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"no {what} at {path}.") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(
            f"the {what} {path} cannot be read ({type(e).__name__}: {e}). Restore it from a "
            f"backup, or start a new population in another folder."
        ) from None


class Leaderboard:
    """The best `size` checkpoints of a population, in `folder` (see the module's docstring).
    Call its methods while holding the population's lock: `insert` and `prune` under the
    exclusive lock, `entries` and `load` under either."""

    def __init__(self, folder: Path, size: int) -> None:
        self.folder = folder
        self.size = size
        self.path = folder / "board.json"

    def entries(self) -> list[dict]:
        """The entries, best first: each has score, step, member, hparams, file, id."""
        if not self.path.exists():
            return []
        return read_json(self.path, "leaderboard")["entries"]

    def qualifies(self, score: float) -> bool:
        entries = self.entries()
        return math.isfinite(score) and (len(entries) < self.size or score > entries[-1]["score"])

    def insert(self, checkpoint: dict, score: float, info: dict) -> dict | None:
        """Add `checkpoint` with `score` (and `info`: member, step, hparams) if it earns a place;
        drop the entries pushed off the board. The new entry, or None."""
        if not self.qualifies(score):
            return None
        board: dict = read_json(self.path, "leaderboard") if self.path.exists() else {"next_id": 0}
        entry_id = board["next_id"]
        entry = {**info, "score": float(score), "id": entry_id, "file": f"entry-{entry_id:06d}.pt"}
        save_atomic(checkpoint, self.folder / entry["file"])
        entries = sorted(board.get("entries", []) + [entry], key=lambda e: -e["score"])
        kept, dropped = entries[: self.size], entries[self.size :]
        write_json({"next_id": entry_id + 1, "entries": kept}, self.path)
        for old in dropped:
            (self.folder / old["file"]).unlink(missing_ok=True)
        return entry

    def load(self, entry: dict) -> dict:
        """The checkpoint of `entry` (a CheckpointError if it cannot be read)."""
        return load_plain(self.folder / entry["file"], what="leaderboard entry")

    def check(self) -> list[dict]:
        """Read the board and every entry's checkpoint; the entries (CheckpointError if any is
        missing or unreadable)."""
        entries = self.entries()
        for entry in entries:
            self.load(entry)
        scores = [e["score"] for e in entries]
        if scores != sorted(scores, reverse=True) or len(entries) > self.size:
            raise CheckpointError(f"the leaderboard {self.path} is out of order or too long.")
        return entries
