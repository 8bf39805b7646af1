"""The most any prefix cache could save on a run: prompt tokens left to compute when every
earlier request is held.

    python benchmarks/prefix_bound.py TRAJECTORIES.jsonl [...]

Reads trajectory files (an evaluation's ``trajectories-t*.jsonl``, an M-GRPO step's
``rollouts/step-*.jsonl``) and replays their turns in the order they were generated
(``timings.gen_start``). A turn's prompt is served up to the longest prefix it shares with any
earlier request (an earlier turn's prompt followed by its completion, of any episode); the rest
is computed. An unbounded cache that never evicts and sees every earlier request does exactly
this, so the figure is a floor for ``rollout.prefix_cache``: with context compression a turn's
prompt departs from the previous turn's where the previous page (now a placeholder) began, and
no cache can reuse what follows. Turns that started in the same instant are replayed in file
order, as if one of a batch of identical prompts ran first.

Prints one JSON object: ``requested`` and ``computed`` prompt tokens, their ratio, and the same
per turn index (``by_turn``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

from webagent_r1.rollout.trajectories import read_trajectories


class TokenTrie:
    """Every sequence inserted, as a trie of token ids (a dict of dicts)."""

    def __init__(self) -> None:
        self.root: dict[int, dict] = {}

    def longest_prefix(self, ids: list[int]) -> int:
        """Length of the longest prefix of ``ids`` that starts some inserted sequence."""
        node, n = self.root, 0
        for t in ids:
            node = node.get(t)
            if node is None:
                break
            n += 1
        return n

    def insert(self, ids: list[int]) -> None:
        node = self.root
        for t in ids:
            node = node.setdefault(t, {})


def turns_in_order(trajectories: Iterable) -> list[tuple[int, list[int], list[int]]]:
    """(turn index, prompt ids, completion ids) of every turn, in generation order."""
    rows = []
    for traj in trajectories:
        for k, turn in enumerate(traj.turns):
            start = (turn.timings or {}).get("gen_start", 0.0)
            rows.append((start, len(rows), k, list(turn.prompt_ids), list(turn.completion_ids)))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(k, p, c) for _, _, k, p, c in rows]


def prefix_bound(turns: list[tuple[int, list[int], list[int]]]) -> dict:
    """Requested and computed prompt tokens when each prompt reuses its longest prefix among
    all earlier requests (see the module docstring), overall and per turn index."""
    held = TokenTrie()
    by_turn: dict[int, list[int]] = {}
    for k, prompt, completion in turns:
        computed = len(prompt) - held.longest_prefix(prompt)
        row = by_turn.setdefault(k, [0, 0])
        row[0] += len(prompt)
        row[1] += computed
        held.insert(prompt + completion)
    requested = sum(r[0] for r in by_turn.values())
    computed = sum(r[1] for r in by_turn.values())
    return {
        "turns": len(turns),
        "requested": requested,
        "computed": computed,
        "computed_frac": computed / requested if requested else None,
        "by_turn": {
            k: {"requested": r[0], "computed_frac": r[1] / r[0] if r[0] else None}
            for k, r in sorted(by_turn.items())
        },
    }


def main(paths: list[Path]) -> dict:
    trajectories = [t for p in paths for t in read_trajectories(p)]
    out = prefix_bound(turns_in_order(trajectories))
    return {"files": [str(p) for p in paths], "episodes": len(trajectories), **out}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", type=Path, help="trajectory JSONL files")
    print(json.dumps(main(ap.parse_args().paths), indent=1))
