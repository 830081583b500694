"""Precision and recall of content fingerprints on the generated news pages, crawldedup against peers.

Run from the repository root: ``PYTHONPATH=src python bench/content_quality.py``. The corpus is
``tests/test_content_corpus.py``'s (3 fetches of each of 60 articles, 16,110 pairs), with and
without ads in the body. Every method reads the same ``page_text``: crawldedup's SimHash,
trafilatura's ``content_fingerprint`` (a 64-bit SimHash of its own tokens) at the same
distances, and datasketch's MinHash (128 permutations) over the same two-word shingles, with
MinHashLSH at Jaccard thresholds 0.5 and 0.8.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, List, Tuple

import numpy as np

from crawldedup.content import page_text, simhash_many, words


def _load_pages_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "content_pages", Path(__file__).parent.parent / "tests" / "content_pages.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pairs(same_pairs: set, found: set, total_same: int) -> Tuple[float, float]:
    true = len(found & same_pairs)
    return true / max(len(found), 1), true / total_same


def _by_distance(fingerprints: np.ndarray, k: int) -> set:
    first, second = np.triu_indices(len(fingerprints), 1)
    x = fingerprints[first] ^ fingerprints[second]
    distance = np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
    near = distance <= k
    return set(zip(first[near].tolist(), second[near].tolist()))


def main() -> None:
    from datasketch import MinHash, MinHashLSH
    from trafilatura.deduplication import content_fingerprint

    pages_module = _load_pages_module()
    for ads_in_body in (False, True):
        pages = pages_module.corpus(7, 60, 3, ads_in_body=ads_in_body)
        texts = [page_text(html) for _, html in pages]
        articles = [article for article, _ in pages]
        same = {(i, j) for i in range(len(pages)) for j in range(i + 1, len(pages)) if articles[i] == articles[j]}
        rows: List[Tuple[str, float, float]] = []
        ours = simhash_many(texts)
        theirs = np.array([int(content_fingerprint(text), 16) for text in texts], dtype=np.uint64)
        for k in (3, 6):
            rows.append((f"crawldedup simhash, k = {k}", *_pairs(same, _by_distance(ours, k), len(same))))
            rows.append(
                (f"trafilatura content_fingerprint, k = {k}", *_pairs(same, _by_distance(theirs, k), len(same)))
            )
        signatures = []
        for text in texts:
            found = words(text)
            signature = MinHash(num_perm=128, seed=1)
            signature.update_batch([" ".join(found[i : i + 2]).encode("utf-8") for i in range(max(len(found) - 1, 1))])
            signatures.append(signature)
        for threshold in (0.5, 0.8):
            lsh = MinHashLSH(threshold=threshold, num_perm=128)
            for i, signature in enumerate(signatures):
                lsh.insert(i, signature)
            found_pairs = {(min(i, j), max(i, j)) for i, s in enumerate(signatures) for j in lsh.query(s) if j != i}
            rows.append((f"datasketch MinHashLSH(128), threshold {threshold}", *_pairs(same, found_pairs, len(same))))
        print(f"ads in the body: {ads_in_body}")
        for name, precision, recall in rows:
            print(f"  {name:48s} precision {precision:.3f} recall {recall:.3f}")


if __name__ == "__main__":
    main()
