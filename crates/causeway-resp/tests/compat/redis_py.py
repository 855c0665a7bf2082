"""redis-py against one Causeway DC: plain commands, pipelining, MULTI/EXEC, errors, RESP3.

Usage: python3 redis_py.py PORT (the server runs with --protocol eventual --no-strong).
Run by tests/compat.rs; prints "ok: ..." and exits 0 when every check holds.
"""
import sys

import redis


def expect_error(fn, *words):
    try:
        fn()
    except redis.ResponseError as e:
        for w in words:
            assert w in str(e), f"{e!r} lacks {w!r}"
        return str(e)
    raise AssertionError(f"expected an error containing {words}")


def basics(r):
    assert r.ping()
    assert r.set("k", "v") and r.get("k") == b"v"
    assert r.set("k", "w", nx=True) is None
    assert r.mset({"a": "1", "b": "2"}) and r.mget("a", "b", "zz") == [b"1", b"2", None]
    assert r.incr("n") == 1 and r.incrby("n", 9) == 10 and r.decr("n") == 9
    assert r.decrby("n", 4) == 5 and r.get("n") == b"5"
    assert r.sadd("s", "x", "y", "x") == 2 and r.smembers("s") == {b"x", b"y"}
    assert r.sismember("s", "x") and r.scard("s") == 2 and r.srem("s", "x") == 1
    assert r.exists("k", "n", "s", "missing") == 3 and r.delete("k", "missing") == 1
    assert r.get("k") is None
    expect_error(lambda: r.incr("s"), "WRONGTYPE")
    assert r.set("cnt", 10) and r.incr("cnt") == 11 and r.decrby("cnt", 3) == 8
    assert r.get("cnt") == b"8"
    expect_error(lambda: r.execute_command("NOPE", "x"), "unknown command", "NOPE")
    expect_error(lambda: r.execute_command("TX.BEGIN", "STRONG"), "eventual", "strong")
    info = r.info()
    assert info["protocol"] == "eventual" and info["dc"] == 1, info
    assert r.client_setname("py") and r.client_getname() in ("py", b"py")
    assert isinstance(r.client_id(), int)


def pipelining(r):
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.incr("pn")
        pipe.set(f"pk{i}", i)
    replies = pipe.execute()
    assert replies[0::2] == list(range(1, 1001)), replies[:10]
    assert all(x is True for x in replies[1::2])
    assert r.get("pk999") == b"999"


def multi_exec(r):
    pipe = r.pipeline(transaction=True)
    pipe.set("t1", "a").incr("tn").sadd("ts", "m").get("t1")
    assert pipe.execute() == [True, 1, 1, b"a"]
    with r.pipeline(transaction=True) as pipe:
        pipe.set("t2", "b")
        pipe.execute_command("NOPE")
        try:
            pipe.execute()
            raise AssertionError("EXEC with a bad command must fail")
        except redis.ResponseError as e:
            assert "EXECABORT" in str(e) or "unknown command" in str(e), e
    assert r.get("t2") is None, "a discarded EXEC writes nothing"


def interactive(r):
    assert r.execute_command("TX.BEGIN") in (b"OK", "OK", True)
    r.set("it", "1")
    assert r.get("it") == b"1"
    assert r.execute_command("TX.COMMIT") in (b"OK", "OK", True)
    assert r.get("it") == b"1"


def sorted_sets(r):
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zadd("z", {"a": 1.5}) == 0 and r.zscore("z", "a") == 1.5
    assert r.zincrby("z", 2.5, "a") == 4.0
    assert r.zrange("z", 0, -1, withscores=True) == [(b"b", 2.0), (b"c", 3.0), (b"a", 4.0)]
    assert r.zrangebyscore("z", "(2", "+inf") == [b"c", b"a"]
    assert r.zrevrange("z", 0, 0) == [b"a"] and r.zrank("z", "a") == 2
    assert r.zrevrank("z", "a") == 0 and r.zcount("z", "-inf", 3) == 2
    assert r.zcard("z") == 3 and r.zmscore("z", ["a", "nope"]) == [4.0, None]
    assert r.zadd("z", {"a": 10, "d": 10}, nx=True) == 1
    assert r.zadd("z", {"a": 11}, xx=True, ch=True) == 1
    assert r.zadd("z", {"a": 1}, gt=True) == 0
    assert r.zadd("z", {"b": 1}, incr=True) == 3.0
    assert r.zpopmin("z") == [(b"b", 3.0)]
    assert r.zpopmax("z", 2) == [(b"a", 11.0), (b"d", 10.0)]
    assert r.zrem("z", "c", "x") == 1 and r.zcard("z") == 0 and r.type("z") in (b"none", "none")
    assert r.zadd("z", {"inf": float("inf")}) == 1 and r.zscore("z", "inf") == float("inf")
    expect_error(lambda: r.execute_command("ZADD", "z", "NX", "XX", 1, "x"), "not compatible")
    expect_error(lambda: r.execute_command("ZADD", "z", "nan", "x"), "not a valid float")
    expect_error(lambda: r.zadd("s", {"x": 1}), "WRONGTYPE")


def resp3(port):
    r = redis.Redis(port=port, protocol=3)
    assert r.ping()
    assert r.set("r3", "v") and r.get("r3") == b"v"
    assert r.smembers("s") == {b"y"}
    info = r.info()
    assert info["protocol"] == "eventual", info
    assert r.zadd("r3z", {"m": 2.5, "n": 1}) == 2 and r.zscore("r3z", "m") == 2.5
    assert r.zrange("r3z", 0, -1, withscores=True) == [[b"n", 1.0], [b"m", 2.5]]
    pipe = r.pipeline(transaction=True)
    pipe.incr("r3n").incr("r3n")
    assert pipe.execute() == [1, 2]


def key_space(r):
    r.flushall()
    assert r.dbsize() == 0 and r.keys("*") == []
    r.mset({f"u:{i}": i for i in range(100)})
    r.sadd("tags", "a")
    assert set(r.scan_iter(count=7)) == {f"u:{i}".encode() for i in range(100)} | {b"tags"}
    assert set(r.scan_iter(match="u:9*")) == {b"u:9"} | {f"u:{i}".encode() for i in range(90, 100)}
    assert list(r.scan_iter(_type="set")) == [b"tags"]
    assert sorted(r.keys("u:1?")) == sorted(f"u:{i}".encode() for i in range(10, 20))
    assert r.dbsize() == 101 and r.flushdb(asynchronous=True) and r.dbsize() == 0
    expect_error(lambda: r.scan(cursor="nope"), "invalid cursor")


def main():
    port = int(sys.argv[1])
    r = redis.Redis(port=port)
    basics(r)
    pipelining(r)
    multi_exec(r)
    interactive(r)
    sorted_sets(r)
    resp3(port)
    key_space(r)
    print(f"ok: redis-py {redis.__version__} basics, pipelining, MULTI/EXEC, TX.*, sorted sets, RESP3, SCAN")


if __name__ == "__main__":
    main()
