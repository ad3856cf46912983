"""A linearizability check of single-object histories, in the style of Knossos and porcupine
(Wing & Gong's search with Lowe's memoization of (linearized set, state)).

An operation: {"invoke": ns, "complete": ns or None, "f": "write"|"read", "value": v, "definite": bool}.
  definite ok ops must take effect exactly once between invoke and complete;
  in-doubt writes (complete None) may take effect at any moment after their invoke, or never.
Reads never change the state; a write sets it to its value. `init` is the state before the first op.

check() answers (True, order) with one legal order, (False, witness) with the longest prefix
the search could linearize and the operations it could not place after it, or (None, why) when
the search gave up (too many states). The sets are Python integers used as bit sets, so a
history may be of any length; histories that are mostly sequential (the workload's) keep one or
two candidates per step."""

INF = float("inf")


def check(ops, init, transitions=None, max_states=200_000):
    """`transitions(state, op) -> new state or None (illegal)`; the default is a register."""
    step = transitions or register
    ops = sorted(ops, key=lambda o: o["invoke"])
    n = len(ops)
    complete = [o["complete"] if o["complete"] is not None else INF for o in ops]
    required = 0
    for i, o in enumerate(ops):
        if o.get("definite", True):
            required |= 1 << i
    seen = set()
    best = ([], 0)
    stack = [(0, init, [])]
    explored = 0
    while stack:
        done, state, order = stack.pop()
        if done & required == required:
            return True, [ops[i] for i in order]
        key = (done, state)
        if key in seen:
            continue
        seen.add(key)
        explored += 1
        if explored > max_states:
            return None, f"gave up after {max_states} states ({n} operations)"
        if len(order) > best[1]:
            best = (order, len(order))
        # An op may go next only if no other pending definite op completed before it was invoked.
        horizon = min((complete[i] for i in range(n) if not done >> i & 1 and required >> i & 1), default=INF)
        for i in range(n):
            if done >> i & 1 or ops[i]["invoke"] > horizon:
                continue
            nxt = step(state, ops[i])
            if nxt is not None:
                stack.append((done | 1 << i, nxt, order + [i]))
    order = best[0]
    placed = set(order)
    return False, {"linearized": [ops[i] for i in order],
                   "stuck": [o for i, o in enumerate(ops) if i not in placed and required >> i & 1][:6]}


def register(state, op):
    if op["f"] == "write":
        return op["value"]
    return state if op["value"] == state else None
