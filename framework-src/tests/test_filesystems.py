"""gs:// and hdfs:// against small local HTTP servers speaking the Cloud Storage JSON API
and WebHDFS; each test runs only in builds that have the file system."""
import json
import os
import threading
import unittest
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import tfref
from tfref import io

INFO = tfref.sysconfig.get_build_info()


class Server:
    """A handler class on a free loopback port, in a daemon thread."""

    def __init__(self, handler):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def make_gcs_handler(store):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code, body=b"", ctype="application/json"):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(url.query)
            parts = url.path.split("/")  # ['', 'storage', 'v1', 'b', bucket, 'o', obj?]
            bucket = parts[4]
            if len(parts) == 6:  # list
                prefix = q.get("prefix", [""])[0]
                names = [k[1] for k in store if k[0] == bucket and k[1].startswith(prefix)]
                items = [{"name": n} for n in names if "/" not in n[len(prefix):]]
                prefixes = sorted({prefix + n[len(prefix):].split("/")[0] + "/" for n in names if "/" in n[len(prefix):]})
                return self._send(200, json.dumps({"items": items, "prefixes": prefixes}).encode())
            key = (bucket, urllib.parse.unquote(parts[6]))
            if key not in store:
                return self._send(404, b'{"error": "not found"}')
            if q.get("alt") == ["media"]:
                return self._send(200, store[key], "application/octet-stream")
            return self._send(200, json.dumps({"name": key[1], "size": len(store[key])}).encode())

        def do_POST(self):
            url = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(url.query)
            assert url.path.startswith("/upload/storage/v1/b/") and q["uploadType"] == ["media"]
            bucket = url.path.split("/")[5]
            store[(bucket, q["name"][0])] = self.rfile.read(int(self.headers["Content-Length"]))
            self._send(200, json.dumps({"name": q["name"][0]}).encode())

    return Handler


def make_webhdfs_handler(store, datanode):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code, body=b"", headers=None):
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _parse(self):
            url = urllib.parse.urlparse(self.path)
            return url.path[len("/webhdfs/v1"):], urllib.parse.parse_qs(url.query)

        def do_GET(self):
            path, q = self._parse()
            op = q["op"][0]
            if op == "OPEN":
                if q.get("datanode"):
                    return self._send(200, store[path])
                if path not in store:
                    return self._send(404, b'{"RemoteException": {}}')
                return self._send(307, headers={"Location": f"{datanode()}/webhdfs/v1{path}?op=OPEN&datanode=1"})
            if op == "GETFILESTATUS":
                known = path in store or any(k.startswith(path.rstrip("/") + "/") for k in store)
                return self._send(200 if known else 404, b"{}")
            if op == "LISTSTATUS":
                prefix = path.rstrip("/") + "/"
                names = sorted({k[len(prefix):].split("/")[0] for k in store if k.startswith(prefix)})
                body = {"FileStatuses": {"FileStatus": [{"pathSuffix": n} for n in names]}}
                return self._send(200, json.dumps(body).encode())
            self._send(400)

        def do_PUT(self):
            path, q = self._parse()
            if q.get("datanode"):
                store[path] = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                return self._send(201)
            return self._send(307, headers={"Location": f"{datanode()}/webhdfs/v1{path}?op=CREATE&datanode=1"})

    return Handler


@unittest.skipUnless(INFO["is_gcp_build"], "built with TF_NEED_GCP=0")
class GcsTest(unittest.TestCase):
    def setUp(self):
        self.store = {}
        self.server = Server(make_gcs_handler(self.store))
        os.environ["STORAGE_EMULATOR_HOST"] = self.server.url

    def tearDown(self):
        self.server.close()
        del os.environ["STORAGE_EMULATOR_HOST"]

    def test_round_trip_and_list(self):
        io.write("gs://bucket/data/a.bin", b"\x00\x01payload")
        io.write("gs://bucket/data/sub/b.bin", b"b")
        self.assertEqual(io.read("gs://bucket/data/a.bin"), b"\x00\x01payload")
        self.assertEqual(io.listdir("gs://bucket/data"), ["a.bin", "sub/"])
        self.assertTrue(io.exists("gs://bucket/data/a.bin"))
        self.assertFalse(io.exists("gs://bucket/nope"))
        with self.assertRaises(FileNotFoundError):
            io.read("gs://bucket/nope")


@unittest.skipUnless(INFO["is_hdfs_build"], "built with TF_NEED_HDFS=0")
class HdfsTest(unittest.TestCase):
    def setUp(self):
        self.store = {}
        self.data = Server(make_webhdfs_handler(self.store, lambda: self.data.url))
        self.name = Server(make_webhdfs_handler(self.store, lambda: self.data.url))

    def tearDown(self):
        self.name.close()
        self.data.close()

    def test_round_trip_through_the_datanode_redirect(self):
        root = f"hdfs://{self.name.url[len('http://'):]}"
        io.write(f"{root}/user/x/f.txt", b"hello hdfs")
        self.assertEqual(self.store, {"/user/x/f.txt": b"hello hdfs"})
        self.assertEqual(io.read(f"{root}/user/x/f.txt"), b"hello hdfs")
        self.assertEqual(io.listdir(f"{root}/user/x"), ["f.txt"])
        self.assertTrue(io.exists(f"{root}/user/x/f.txt"))
        self.assertFalse(io.exists(f"{root}/user/y"))


class SchemesTest(unittest.TestCase):
    def test_schemes_follow_the_build(self):
        expected = ["file"] + (["gs"] if INFO["is_gcp_build"] else []) + (["hdfs"] if INFO["is_hdfs_build"] else [])
        self.assertEqual(io.available_schemes(), expected)
        for scheme, on in (("gs", INFO["is_gcp_build"]), ("hdfs", INFO["is_hdfs_build"])):
            if not on:
                with self.assertRaisesRegex(io.UnimplementedError, f"'{scheme}' not implemented"):
                    io.read(f"{scheme}://x/y")


if __name__ == "__main__":
    unittest.main()
