"""Concurrent conflicting writes of every type in three DCs, through redis-py, checked
against the conflict rules of docs/REDIS.md once every DC has converged.

Usage: python3 conflicts.py PORT_DC0 PORT_DC1 PORT_DC2. Run by tests/up_conflicts.rs on a
`causeway up` cluster whose DCs are RTT_MS apart: writes sent to two DCs a few ms apart
cannot see each other, so they are concurrent. Prints "ok: ..." when every rule held.
"""
import sys
import time

import redis

# How long a DC may take to show what the others wrote.
CONVERGE_S = 30.0
# Keys of this run: a cluster that served an earlier run holds its keys.
RUN = f"conflicts{time.time_ns()}:"


def k(name):
    """The key `name` of this run."""
    return RUN + name


def converge(conns, read, what):
    """Polls `read` at every DC until all answer the same; returns that answer."""
    deadline = time.monotonic() + CONVERGE_S
    while True:
        answers = [read(c) for c in conns]
        if all(a == answers[0] for a in answers):
            return answers[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: the DCs never agreed: {answers}")
        time.sleep(0.05)


def settle(conns, read, want, what):
    """Waits until every DC reads `want` (a write made before the concurrent ones)."""
    deadline = time.monotonic() + CONVERGE_S
    while not all(read(c) == want for c in conns):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not at every DC: {[read(c) for c in conns]}")
        time.sleep(0.05)


def registers(dc):
    """SET in two DCs at once: the later one wins everywhere (last writer wins)."""
    dc[0].set(k("reg"), "a")
    dc[1].set(k("reg"), "b")
    got = converge(dc, lambda c: c.get(k("reg")), "SET vs SET")
    assert got in (b"a", b"b"), got
    return f"SET/SET -> {got.decode()}"


def counters(dc):
    """INCRBY in three DCs at once: the increments add up."""
    for i, c in enumerate(dc):
        c.incrby(k("cnt"), 10**i)
    got = converge(dc, lambda c: c.get(k("cnt")), "INCRBY x3")
    assert got == b"111", got
    return "INCRBY x3 -> 111"


def set_with_incr(dc):
    """A SET concurrent with an INCR of a string: the SET plus the increment it missed."""
    dc[0].set(k("str"), "10")
    settle(dc, lambda c: c.get(k("str")), b"10", "SET str 10")
    dc[1].incr(k("str"))
    dc[2].set(k("str"), "100")
    got = converge(dc, lambda c: c.get(k("str")), "INCR vs SET")
    assert got == b"101", f"INCR concurrent with SET 100: {got!r}, expected 101"
    return "INCR/SET -> 101"


def set_del_add(dc):
    """DEL of a set concurrent with an SADD: the concurrent add survives (add-wins)."""
    dc[0].sadd(k("set"), "x")
    settle(dc, lambda c: c.smembers(k("set")), {b"x"}, "SADD set x")
    dc[0].delete(k("set"))
    dc[1].sadd(k("set"), "y")
    got = converge(dc, lambda c: c.smembers(k("set")), "DEL vs SADD")
    assert got == {b"y"}, f"DEL concurrent with SADD y: {got!r}, expected {{y}}"
    return "DEL/SADD -> {y}"


def hash_fields(dc):
    """HDEL concurrent with an HSET of the field: the HSET survives; other fields stay."""
    dc[0].hset(k("h"), "f", "1")
    settle(dc, lambda c: c.hgetall(k("h")), {b"f": b"1"}, "HSET h f 1")
    dc[0].hdel(k("h"), "f")
    dc[1].hset(k("h"), "f", "2")
    dc[2].hset(k("h"), "g", "3")
    got = converge(dc, lambda c: c.hgetall(k("h")), "HDEL vs HSET")
    assert got == {b"f": b"2", b"g": b"3"}, got
    return "HDEL/HSET -> {f: 2, g: 3}"


def hash_counters(dc):
    """HINCRBY of one field in three DCs at once: the increments add up."""
    for i, c in enumerate(dc):
        c.hincrby(k("hc"), "n", 10**i)
    got = converge(dc, lambda c: c.hget(k("hc"), "n"), "HINCRBY x3")
    assert got == b"111", got
    return "HINCRBY x3 -> 111"


def shown(c, key):
    """What `key` shows at DC `c`: its type and its value read as that type (on the way
    to convergence a DC may show the concurrent set first)."""
    kind = c.type(key)
    try:
        value = c.get(key) if kind == b"string" else c.smembers(key)
    except redis.exceptions.ResponseError as e:
        # The other write arrived between TYPE and the read: look again.
        return kind, str(e)
    return kind, value


def retype(dc):
    """DEL k then SET k in DC 1, concurrent with SADD k in DC 2: the SET made after the DEL
    wins over the write of the old type, whatever arrives first."""
    dc[0].sadd(k("k"), "a")
    settle(dc, lambda c: c.type(k("k")), b"set", "SADD k a")
    dc[1].delete(k("k"))
    dc[1].set(k("k"), "v")
    dc[2].sadd(k("k"), "b")
    got = converge(dc, lambda c: shown(c, k("k")), "DEL+SET vs SADD")
    assert got == (b"string", b"v"), got
    # DC 2 holds both writes (its own SADD, and the SET it shows): its DEL observes the
    # hidden member too and frees the key everywhere. (A DEL at DC 0 before the SADD
    # reached it would leave `b`: an add concurrent with a DEL survives it.)
    dc[2].delete(k("k"))
    gone = converge(dc, lambda c: c.exists(k("k")), "DEL of the retyped key")
    assert gone == 0, "a DEL that saw both writes frees the key, its hidden member with it"
    return "DEL,SET/SADD -> string v"


def main():
    dc = [redis.Redis(port=int(p)) for p in sys.argv[1:4]]
    assert all(c.ping() for c in dc)
    rules = [registers, counters, set_with_incr, set_del_add, hash_fields, hash_counters, retype]
    done = [rule(dc) for rule in rules]
    print("ok: " + "; ".join(done))


if __name__ == "__main__":
    main()
