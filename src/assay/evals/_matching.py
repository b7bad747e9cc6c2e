"""Assigning actual tool calls to expected ones so that a match is found whenever one exists.

Greedy first-fit fails as soon as expectations overlap: expected ``search`` (any arguments) and
``search(q="weather")``, actual ``search(q="weather")``, ``search(q="news")`` — first-fit gives
the weather call to the unconstrained expectation and then finds nothing for the constrained
one. Unordered expectations are therefore a maximum bipartite matching (augmenting paths);
ordered expectations a longest-common-subsequence DP, which also names which expectations
could not be placed in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

__all__ = ["max_matching", "ordered_matching"]


def max_matching(n_left: int, n_right: int, fits: Callable[[int, int], bool]) -> list[int | None]:
    """Maximum bipartite matching; ``result[i]`` is the right vertex matched to left ``i``.

    Augmenting paths found by BFS (no recursion, so long histories cannot hit the recursion
    limit); O(V·E), ample for tool-call histories.
    """
    adj = [[j for j in range(n_right) if fits(i, j)] for i in range(n_left)]
    match_left: list[int | None] = [None] * n_left
    match_right: list[int | None] = [None] * n_right
    # cheap greedy start, then augment: the result is maximum either way
    for i in range(n_left):
        for j in adj[i]:
            if match_right[j] is None:
                match_left[i], match_right[j] = j, i
                break
    for start in range(n_left):
        if match_left[start] is not None:
            continue
        parent_of_right: dict[int, int] = {}
        queue = deque([start])
        seen_left = {start}
        free_right: int | None = None
        while queue and free_right is None:
            u = queue.popleft()
            for j in adj[u]:
                if j in parent_of_right:
                    continue
                parent_of_right[j] = u
                owner = match_right[j]
                if owner is None:
                    free_right = j
                    break
                if owner not in seen_left:
                    seen_left.add(owner)
                    queue.append(owner)
        if free_right is None:
            continue
        r: int | None = free_right
        while r is not None:  # flip the alternating path back to ``start``
            u = parent_of_right[r]
            previous = match_left[u]
            match_left[u], match_right[r] = r, u
            r = previous
    return match_left


def ordered_matching(n_left: int, n_right: int, fits: Callable[[int, int], bool]
                     ) -> list[int | None]:
    """Largest order-preserving assignment (LCS): left ``i`` < ``k`` implies right ``a`` < ``b``."""
    dp = [[0] * (n_right + 1) for _ in range(n_left + 1)]
    for i in range(n_left - 1, -1, -1):
        row, below = dp[i], dp[i + 1]
        for j in range(n_right - 1, -1, -1):
            best = max(below[j], row[j + 1])
            if fits(i, j):
                best = max(best, 1 + below[j + 1])
            row[j] = best
    result: list[int | None] = [None] * n_left
    i = j = 0
    while i < n_left and j < n_right:
        if fits(i, j) and dp[i][j] == 1 + dp[i + 1][j + 1]:
            result[i] = j
            i += 1
            j += 1
        elif dp[i][j] == dp[i + 1][j]:
            i += 1
        else:
            j += 1
    return result
