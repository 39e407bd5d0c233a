"""Scoring many groups of answer sets on every core, with the results of one process.

`score_groups` takes groups of sets that share an incidence matrix and norm (as a run's
scoring step collects them) and returns one `DutchBookResult` per group. Each group is
cut into chunks of at most `CHUNK_SETS` sets at fixed places, and every chunk is one
`dutch_books` call: in this process, or in a pool of worker processes (one HiGHS each)
when the work is big enough to pay for starting them. The chunks, and so the calls, are
the same either way, and a call's answer depends only on its own inputs (vertex tables
are built from a fixed seed; the parent builds them once and hands them to the workers),
so the pooled results are identical to the single-process ones, bit for bit.

Workers are spawned rather than forked: the caller may hold threads (an event loop,
polars' pool) that a fork would copy in an unknown state.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import numpy.typing as npt

from scoring import vertex_table
from scoring.dutch_book import DutchBookResult, dutch_books, uses_table
from scoring.inputs import FloatArray, as_incidence, as_probs

#: Sets per chunk at most: large enough for the vertex table and the LP's batches to
#: pay off; a chunk of a big matrix is cut smaller, to about CHUNK_WORK entries of M
#: over its sets (horizon 4: 63 sets), so that its sets spread over the cores.
CHUNK_SETS = 4096
CHUNK_WORK = 4_000_000
#: Work (sets x events x atoms, summed) below which a pool costs more than it saves:
#: starting a worker takes about a second (an interpreter, numpy and HiGHS).
POOL_MIN_WORK = 20_000_000

Group = tuple[npt.ArrayLike, npt.ArrayLike, str]
_Chunk = tuple[FloatArray, FloatArray, str]


def _chunks(groups: Sequence[Group]) -> tuple[list[_Chunk], list[int]]:
    """Fixed cut points (by the matrix's size only); also the chunk count of each group."""
    chunks: list[_Chunk] = []
    counts: list[int] = []
    for incidence, probs, norm in groups:
        matrix = as_incidence(incidence)
        sets, _ = as_probs(probs, matrix.shape[0])
        size = int(np.clip(CHUNK_WORK // matrix.size, 16, CHUNK_SETS))
        starts = range(0, max(len(sets), 1), size)
        chunks.extend((matrix, sets[s : s + size], norm) for s in starts)
        counts.append(len(starts))
    return chunks, counts


def _score(chunk: _Chunk) -> DutchBookResult:
    incidence, probs, norm = chunk
    return dutch_books(incidence, probs, norm)


def _work(chunks: Sequence[_Chunk]) -> int:
    return sum(probs.shape[0] * incidence.size for incidence, probs, _ in chunks)


def _tables(chunks: Sequence[_Chunk]) -> dict[tuple[object, ...], vertex_table.VertexTable]:
    """The vertex tables the chunks will use, built here once instead of in every worker."""
    tables = {}
    for incidence, probs, norm in chunks:
        if uses_table(incidence.shape, norm, int((~np.isnan(probs).any(axis=1)).sum())):
            table = vertex_table.table_for(incidence, norm)
            if table is not None:
                tables[vertex_table.key_of(incidence, norm)] = table
    return tables


def default_workers(chunks: Sequence[_Chunk]) -> int:
    """All cores when the work is big and splits into several chunks, else one."""
    if len(chunks) < 2 or _work(chunks) < POOL_MIN_WORK:
        return 1
    return max(1, min(len(chunks), os.cpu_count() or 1))


def score_groups(groups: Sequence[Group], workers: int | None = None) -> list[DutchBookResult]:
    """`dutch_books` of each (incidence, probs, norm) group, optionally on several cores.

    `workers=None` chooses (one process for small work); 1 forces this process.
    """
    chunks, counts = _chunks(groups)
    if workers is None:
        workers = default_workers(chunks)
    if workers <= 1 or len(chunks) < 2:
        results = [_score(chunk) for chunk in chunks]
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=min(workers, len(chunks)),
            mp_context=context,
            initializer=vertex_table.install,
            initargs=(_tables(chunks),),
        ) as pool:
            results = list(pool.map(_score, chunks))
    out: list[DutchBookResult] = []
    position = 0
    for (_, _, norm), count in zip(groups, counts, strict=True):
        parts = results[position : position + count]
        position += count
        out.append(
            DutchBookResult(
                profit=np.concatenate([p.profit for p in parts]),
                stakes=np.vstack([p.stakes for p in parts]),
                coherent=np.vstack([p.coherent for p in parts]),
                norm=norm,
            )
        )
    return out
