from helpers import load_vectors


def test_vectors_are_reachable() -> None:
    cases = load_vectors()
    assert len(cases) == 973
    assert {c["kind"].split(".")[0] for c in cases} >= {"assignor", "coordinator", "murmur2", "partitioner"}
