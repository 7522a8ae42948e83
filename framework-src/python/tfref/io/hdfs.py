"""hdfs:// over WebHDFS: hdfs://namenode:port/path talks to http://namenode:port/webhdfs/v1/path,
following the name node's redirects to data nodes. TFREF_WEBHDFS_URL overrides the endpoint."""
import json
import os
import urllib.error
import urllib.parse
import urllib.request


def _url(path: str, op: str, **params) -> str:
    parsed = urllib.parse.urlparse(path)
    base = os.environ.get("TFREF_WEBHDFS_URL") or f"http://{parsed.netloc}"
    query = urllib.parse.urlencode({"op": op, **params})
    user = os.environ.get("HADOOP_USER_NAME")
    if user:
        query += "&" + urllib.parse.urlencode({"user.name": user})
    return f"{base.rstrip('/')}/webhdfs/v1{urllib.parse.quote(parsed.path or '/')}?{query}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _request(method: str, url: str, data: bytes = None):
    try:
        return urllib.request.urlopen(urllib.request.Request(url, data=data, method=method), timeout=30)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise FileNotFoundError(url) from None
        raise OSError(f"WebHDFS answered {exc.code} for {method} {url}") from None


def read(path: str) -> bytes:
    with _request("GET", _url(path, "OPEN")) as r:  # urllib follows the 307 to the data node
        return r.read()


def write(path: str, data: bytes) -> None:
    # Step 1: ask the name node where to write (a 307 without data); step 2: PUT there.
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(urllib.request.Request(_url(path, "CREATE", overwrite="true"), method="PUT"), timeout=30)
        raise OSError("WebHDFS did not redirect the CREATE to a data node")
    except urllib.error.HTTPError as exc:
        if exc.code != 307:
            raise OSError(f"WebHDFS answered {exc.code} for CREATE {path}") from None
        location = exc.headers["Location"]
    with _request("PUT", location, data):
        pass


def listdir(path: str) -> list:
    with _request("GET", _url(path, "LISTSTATUS")) as r:
        statuses = json.loads(r.read())["FileStatuses"]["FileStatus"]
    return sorted(s["pathSuffix"] for s in statuses)


def exists(path: str) -> bool:
    try:
        with _request("GET", _url(path, "GETFILESTATUS")):
            return True
    except FileNotFoundError:
        return False
