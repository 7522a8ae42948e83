"""The push ledger and cross-repository mounts (builder/registry/push_mounts.py): what is recorded,
what is mounted from where, and that a registry declining a mount costs nothing but the
upload the push then makes."""

import json

import pytest

from builder.registry import push_mounts

A, B, C = ("sha256:" + c * 64 for c in "abc")  # diff ids
GA, GB, GC = ("sha256:" + c * 64 for c in "def")  # their blobs (gzip)


def manifest(*blobs: str) -> bytes:
    return json.dumps(
        {
            "schemaVersion": 2,
            "config": {"digest": "sha256:" + "0" * 64},
            "layers": [
                {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": b, "size": 1} for b in blobs
            ],
        }
    ).encode()


def test_a_push_is_remembered_and_its_layers_found_from_another_repository(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    assert push_mounts.record("r:5000", "ml/tensorflow", manifest(GA, GB), [A, B], ledger)
    # the derived image (A, B, C) going to another repository: A and B are there already
    assert push_mounts.sources("r:5000", "team/derived", [A, B, C], ledger) == {
        GA: "ml/tensorflow",
        GB: "ml/tensorflow",
    }
    # nothing to mount into the same repository (the push finds them), or on another host
    assert push_mounts.sources("r:5000", "ml/tensorflow", [A, B, C], ledger) == {}
    assert push_mounts.sources("other:5000", "team/derived", [A, B], ledger) == {}
    # once the derived image went to team/derived, a push there mounts nothing again
    assert push_mounts.record("r:5000", "team/derived", manifest(GA, GB, GC), [A, B, C], ledger)
    assert push_mounts.sources("r:5000", "team/derived", [A, B, C], ledger) == {}
    assert push_mounts.sources("r:5000", "ml/tensorflow", [A, B, C], ledger) == {GC: "team/derived"}


def test_the_newest_push_of_a_layer_is_the_source(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    push_mounts.record("r", "old", manifest(GA), [A], ledger)
    push_mounts.record("r", "new", manifest(GA), [A], ledger)
    assert push_mounts.sources("r", "x", [A], ledger) == {GA: "new"}


@pytest.mark.parametrize(
    "body, diff_ids",
    [
        (manifest(GA, GB), [A]),  # does not pair with the image's layers
        (json.dumps({"manifests": [{"digest": GA}]}).encode(), [A]),  # an index
        (b"not json", [A]),
        (manifest(GA), []),
        (json.dumps({"layers": [{"digest": "md5:x"}]}).encode(), [A]),
    ],
)
def test_what_does_not_pair_is_not_recorded(tmp_path, body, diff_ids):
    ledger = tmp_path / "ledger.jsonl"
    assert not push_mounts.record("r", "x", body, diff_ids, ledger)
    assert not ledger.exists()


def test_a_damaged_ledger_keeps_its_good_lines_and_stays_bounded(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    push_mounts.record("r", "a", manifest(GA), [A], ledger)
    with open(ledger, "a") as f:
        f.write('{"host": "r", "repo": "b", "layers": [[\n')  # cut by a crash
    push_mounts.record("r", "c", manifest(GB), [B], ledger)
    assert push_mounts.sources("r", "x", [A, B], ledger) == {GA: "a", GB: "c"}
    monkeypatch.setattr(push_mounts, "KEEP_LINES", 4)
    for n in range(6):
        push_mounts.record("r", f"n{n}", manifest(GC), [C], ledger)
    assert len(ledger.read_text().splitlines()) <= 4
    assert push_mounts.sources("r", "x", [C], ledger) == {GC: "n5"}


class Registry:
    """Answers mount requests: 201 for blobs it holds in the source repository, 202 with
    an upload location otherwise (Distribution's behaviour), and records every request."""

    def __init__(self, holds: dict[str, str], fail_after: int | None = None):
        self.holds, self.fail_after, self.requests = holds, fail_after, []

    def __call__(self, method: str, path: str, scopes: tuple[str, ...], headers: dict[str, str]):
        self.requests.append((method, path, scopes))
        if self.fail_after is not None and len(self.requests) > self.fail_after:
            raise ConnectionRefusedError("registry went away")
        if method == "DELETE":
            return 204, {}, b""
        query = dict(p.split("=", 1) for p in path.split("?", 1)[1].split("&"))
        digest, source = query["mount"].replace("%3A", ":"), query["from"].replace("%2F", "/")
        if self.holds.get(digest) == source:
            return 201, {"location": f"/v2/team/derived/blobs/{digest}"}, b""
        return 202, {"location": "http://r:5000/v2/team/derived/blobs/uploads/u-1?_state=s"}, b""


def test_mounts_are_made_declined_uploads_cancelled_each_with_the_scopes_it_needs():
    registry = Registry({GA: "ml/tensorflow"})
    mounted = push_mounts.mount(registry, "team/derived", {GA: "ml/tensorflow", GB: "ml/gone"})
    assert mounted == 1
    assert [r[0] for r in registry.requests] == ["POST", "POST", "DELETE"]
    assert (
        registry.requests[0][1] == f"/v2/team/derived/blobs/uploads/?mount={GA.replace(':', '%3A')}"
        "&from=ml%2Ftensorflow"
    )
    assert registry.requests[2][1] == "/v2/team/derived/blobs/uploads/u-1?_state=s"  # the opened upload, cancelled
    # a token registry grants a mount only with push to the target and pull from the source
    assert [r[2] for r in registry.requests] == [
        ("repository:team/derived:pull,push", "repository:ml/tensorflow:pull"),
        ("repository:team/derived:pull,push", "repository:ml/gone:pull"),
        ("repository:team/derived:pull,push", "repository:ml/gone:pull"),
    ]


def test_a_registry_that_goes_away_stops_the_mounting_without_an_error():
    registry = Registry({GA: "a", GB: "a", GC: "a"}, fail_after=1)
    assert push_mounts.mount(registry, "b", {GA: "a", GB: "a", GC: "a"}) == 1
    assert len(registry.requests) == 2  # the failing one, and nothing after it


def test_a_ledger_that_cannot_be_written_costs_the_push_nothing(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert push_mounts.record("r", "a", manifest(GA), [A], blocked / "ledger.jsonl") is False
