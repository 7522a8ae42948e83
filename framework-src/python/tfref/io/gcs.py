"""gs:// over the Cloud Storage JSON API (media download, simple upload, object list).
STORAGE_EMULATOR_HOST (http://host:port) points it at an emulator or a test server."""
import json
import os
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_ENDPOINT = "https://storage.googleapis.com"


def _endpoint() -> str:
    return os.environ.get("STORAGE_EMULATOR_HOST", DEFAULT_ENDPOINT).rstrip("/")


def _split(path: str):
    rest = path[len("gs://"):]
    bucket, _, obj = rest.partition("/")
    if not bucket:
        raise ValueError(f"{path}: no bucket")
    return bucket, obj


def _headers() -> dict:
    token = os.environ.get("GCS_OAUTH_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _open(req):
    try:
        return urllib.request.urlopen(req, timeout=30)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise FileNotFoundError(req.full_url) from None
        raise OSError(f"Cloud Storage answered {exc.code} for {req.get_method()} {req.full_url}") from None


def read(path: str) -> bytes:
    bucket, obj = _split(path)
    url = f"{_endpoint()}/storage/v1/b/{bucket}/o/{urllib.parse.quote(obj, safe='')}?alt=media"
    with _open(urllib.request.Request(url, headers=_headers())) as r:
        return r.read()


def write(path: str, data: bytes) -> None:
    bucket, obj = _split(path)
    url = (f"{_endpoint()}/upload/storage/v1/b/{bucket}/o?uploadType=media&name="
           f"{urllib.parse.quote(obj, safe='')}")
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/octet-stream", **_headers()})
    with _open(req):
        pass


def listdir(path: str) -> list:
    bucket, prefix = _split(path)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    url = f"{_endpoint()}/storage/v1/b/{bucket}/o?prefix={urllib.parse.quote(prefix, safe='')}&delimiter=%2F"
    with _open(urllib.request.Request(url, headers=_headers())) as r:
        body = json.loads(r.read() or b"{}")
    names = [item["name"][len(prefix):] for item in body.get("items", [])]
    names += [p[len(prefix):] for p in body.get("prefixes", [])]
    return sorted(n for n in names if n)


def exists(path: str) -> bool:
    bucket, obj = _split(path)
    url = f"{_endpoint()}/storage/v1/b/{bucket}/o/{urllib.parse.quote(obj, safe='')}"
    try:
        with _open(urllib.request.Request(url, headers=_headers())):
            return True
    except FileNotFoundError:
        return False
