"""Cross-repository blob mounts, made before a push because the containerd image store does
not make them: Docker 26 on it uploads a derived image's parent layers again when the
parent went to another repository of the same registry (15 of 22 layers, 3 GB, measured;
docs/explanation/architecture.md). The classic store remembered where each blob came from; here the
builder does, in a ledger of what its pushes left on each registry.

After each verified push the ledger gets one line: host, repository, and the manifest's
layers as (diff id, blob digest) pairs (a manifest lists its layers in the order of the
config's diff ids). Before a push, every layer of the image (by diff id) that an earlier
push left in another repository of the same host is mounted into the target repository
(`POST /v2/NAME/blobs/uploads/?mount=DIGEST&from=REPO`, 201 Created); the engine's push
then finds it there and skips it. Mounting is an optimisation: an answer other than 201
(a registry that declines, a blob since deleted) leaves that layer to the push, and an
upload the registry opened instead is cancelled.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse
from pathlib import Path
from typing import Callable

from builder.core import paths
from builder.core.contract import SHA256_DIGEST
from builder.core.errors import PushError, UserError

LEDGER_NAME = "pushed-layers.jsonl"
KEEP_LINES = 2000  # the newest pushes; older lines are dropped when the ledger is rewritten


def ledger_path() -> Path:
    return paths.cache_dir() / LEDGER_NAME


def _lines(path: Path) -> list[dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash: the others stand
        if isinstance(entry, dict) and isinstance(entry.get("layers"), list):
            entries.append(entry)
    return entries


def record(host: str, repo: str, manifest: bytes, diff_ids: list[str], path: Path | None = None) -> bool:
    """Remember which blobs REPO on HOST now holds for which layers; False when the
    manifest's layers do not pair with DIFF_IDS (an index, or another image), or when the
    ledger cannot be written (the push it follows has succeeded all the same)."""
    try:
        return _record(host, repo, manifest, diff_ids, path or ledger_path())
    except OSError:
        return False


def _record(host: str, repo: str, manifest: bytes, diff_ids: list[str], path: Path) -> bool:
    try:
        layers = json.loads(manifest).get("layers")
    except (ValueError, AttributeError):
        return False
    if not isinstance(layers, list) or len(layers) != len(diff_ids) or not diff_ids:
        return False
    blobs = [layer.get("digest") if isinstance(layer, dict) else None for layer in layers]
    if not all(isinstance(b, str) and SHA256_DIGEST.fullmatch(b) for b in blobs):  # the registry's, checked
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"host": host, "repo": repo, "layers": [[d, b] for d, b in zip(diff_ids, blobs)]})
    entries = _lines(path)
    if len(entries) >= KEEP_LINES:  # rewrite: keep the newest
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text("".join(json.dumps(e) + "\n" for e in entries[-(KEEP_LINES // 2) :]) + line + "\n")
        tmp.replace(path)
    else:
        with open(path, "a", encoding="utf-8") as f:  # one short append: concurrent pushes do not interleave
            f.write(line + "\n")
    return True


def sources(host: str, repo: str, diff_ids: list[str], path: Path | None = None) -> dict[str, str]:
    """Blob digest -> the repository on HOST (other than REPO) an earlier push left it in,
    for the layers DIFF_IDS; the newest push wins."""
    wanted, found, there = set(diff_ids), {}, set()
    for entry in _lines(path or ledger_path()):
        if entry.get("host") != host or not isinstance(entry.get("repo"), str):
            continue
        for pair in entry["layers"]:
            if isinstance(pair, list) and len(pair) == 2 and pair[0] in wanted and isinstance(pair[1], str):
                if entry["repo"] == repo:
                    there.add(pair[1])  # an earlier push to REPO left it: nothing to mount
                else:
                    found[pair[1]] = entry["repo"]
    return {blob: source for blob, source in found.items() if blob not in there}


# (method, path, scopes, headers) -> (status, headers, body): registry_auth.Session.request
Request = Callable[[str, str, tuple[str, ...], dict[str, str]], tuple[int, dict[str, str], bytes]]


def mount(request: Request, repo: str, blobs: dict[str, str]) -> int:
    """Mount BLOBS (digest -> source repository) into REPO through REQUEST, authorized for
    pushing to REPO and pulling from the source; how many the registry mounted. A
    connection failure stops the mounting (the push that follows reports it)."""
    mounted = 0
    for digest, source in sorted(blobs.items()):
        query = urllib.parse.urlencode({"mount": digest, "from": source})
        scopes = (f"repository:{repo}:pull,push", f"repository:{source}:pull")
        try:
            status, answer, _ = request("POST", f"/v2/{repo}/blobs/uploads/?{query}", scopes, {})
            if status == 201:
                mounted += 1
            elif status == 202 and answer.get("location"):  # an upload opened instead: cancel it
                location = urllib.parse.urlsplit(answer["location"])
                request("DELETE", location.path + (f"?{location.query}" if location.query else ""), scopes, {})
        except (OSError, ValueError, http.client.HTTPException, PushError, UserError):
            break  # a mount is an optimisation (the push uploads what was not mounted); ValueError: a bad Location
    return mounted
