"""A cross-DC causal scenario through two connections to two DCs (replication off, so
only the causal token can carry the write across).

Usage: python3 cross_dc.py PORT_DC1 PORT_DC2. Run by tests/compat.rs; prints "ok: ...".
"""
import sys

import redis


def main():
    dc1 = redis.Redis(port=int(sys.argv[1]))
    dc2 = redis.Redis(port=int(sys.argv[2]))
    # Alice posts at DC 1; Bob at DC 2 has not seen it (no replication yet).
    assert dc1.set("post", "hello") and dc1.sadd("feed", "post")
    assert dc2.get("post") is None and dc2.smembers("feed") == set()
    # Alice hands Bob her causal past; everything she saw is then visible to him.
    token = dc1.execute_command("CAUSAL.TOKEN")
    assert isinstance(token, bytes) and len(token) > 0
    assert dc2.execute_command("CAUSAL.ATTACH", token) in (b"OK", "OK", True)
    assert dc2.get("post") == b"hello" and dc2.smembers("feed") == {b"post"}
    # Bob replies at DC 2; his reply depends on the post. Alice, after attaching Bob's
    # token, sees both: the reply never appears without the post it answers.
    assert dc2.set("reply", "hi alice")
    back = dc2.execute_command("CAUSAL.TOKEN")
    dc1.execute_command("CAUSAL.ATTACH", back)
    assert dc1.get("reply") == b"hi alice" and dc1.get("post") == b"hello"
    # A session stays causal on its own: monotonic reads across its transactions.
    assert dc2.incr("likes") == 1 and dc2.incr("likes") == 2
    assert dc2.execute_command("CAUSAL.BARRIER") in (b"OK", "OK", True)
    assert dc1.get("likes") == b"2", "after a barrier every DC has the session's past"
    print("ok: causal token carried a write from DC 1 to DC 2 and back")


if __name__ == "__main__":
    main()
