"""ByIdentity: the bounded cache keyed by an object's identity."""

from ndvm.identity import MISSING, ByIdentity


def test_a_hit_is_the_same_object_and_none_can_be_cached():
    c = ByIdentity(2)
    a, b = [1], [1]  # equal, not the same object
    assert c.put(a, None) is None
    assert c.get(a, MISSING) is None and c.get(b, MISSING) is MISSING and c.get(b) is None


def test_the_oldest_entry_goes_when_full():
    c = ByIdentity(2)
    x, y, z = object(), object(), object()
    c.put(x, 1), c.put(y, 2), c.put(z, 3)
    assert c.get(x) is None and c.get(y) == 2 and c.get(z) == 3
