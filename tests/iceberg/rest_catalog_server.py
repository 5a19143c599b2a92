"""An Iceberg REST catalog with vended credentials, for Skerry's catalog tests (issue 45).

    python3 tests/iceberg/rest_catalog_server.py STATE_DIR

No maintained REST catalog server installs from the registries this project reaches (Polaris,
Nessie and the Iceberg REST fixture need Maven; Lakekeeper is not on crates.io; lakana-server
vends no credentials), so the tests run this one: the REST spec's endpoints that pyiceberg's
own `RestCatalog` client calls, over a pyiceberg `SqlCatalog` whose warehouse is an S3 bucket
on moto. pyiceberg creates the table and appends through it, which checks the server against
the reference client.

Credentials are real: moto runs in this process with IAM authentication enforced, the writer
uses an admin key, and every vended credential is a fresh IAM access key of its own read-only
user that this server deletes when it expires (`CRED_TTL` seconds, default 3600) — a client
that does not refresh gets S3's `403`.

Clients (OAuth2 client credentials `id:secret`): `writer:writer-secret` (no vended
credentials) and `skerry:skerry-secret` (vended). Tokens expire after `TOKEN_TTL` seconds.

Printed on stdout once ready, one JSON line: {"uri", "s3", "admin": {key, secret}}. Every
request is appended to STATE_DIR/requests.jsonl as {"client", "method", "path", "status"} (and
"trace", a client's `X-Trace` header, when sent).

Test-only endpoints (not in the spec): `POST /_test/revoke?client=ID` revokes the client's
tokens, secret and vended keys; `GET /_test/vended` lists the keys vended so far.
"""

import faulthandler
import json
import os
import signal
import secrets
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"  # IAM authentication from the first request
# botocore's default streaming checksums (aws-chunked bodies) fail moto's signature check.
os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
os.environ.setdefault("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")
from moto.core import DEFAULT_ACCOUNT_ID  # noqa: E402
from moto.iam import access_control  # noqa: E402
from moto.iam.models import iam_backends  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402
from pyiceberg.catalog.rest import CreateTableRequest  # noqa: E402
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.exceptions import (  # noqa: E402
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC  # noqa: E402
from pyiceberg.table import CommitTableRequest  # noqa: E402
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER  # noqa: E402

faulthandler.register(signal.SIGUSR1)  # `kill -USR1` prints every thread's stack to stderr
state = os.path.abspath(sys.argv[1])
os.makedirs(state, exist_ok=True)
CRED_TTL = float(os.environ.get("CRED_TTL", "3600"))
TOKEN_TTL = float(os.environ.get("TOKEN_TTL", "3600"))
PREFIX = "cat"
BUCKET = "lake"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


moto_port = free_port()
moto = ThreadedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
moto.start()
s3_endpoint = f"http://127.0.0.1:{moto_port}"
iam = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
lock = threading.RLock()


def user_with_policy(name, actions):
    iam.create_user(region_name="us-east-1", user_name=name, path="/")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    iam.put_user_policy(name, "p", json.dumps(policy))
    return iam.create_access_key(name)


admin = user_with_policy("admin", "*")

# moto recomputes some signed query strings differently from s3fs (a ListObjectsV2 whose
# prefix ends in `/`) and refuses the admin writer's own requests. Signatures of every other
# key — the vended ones Skerry uses — are still checked; the admin key is only the writer's.
_check_signature = access_control.IAMRequestBase.check_signature


def check_signature(self):
    try:
        _check_signature(self)
    except Exception:
        if self._access_key._access_key_id != admin.access_key_id:
            raise


access_control.IAMRequestBase.check_signature = check_signature
s3_props = {
    "s3.endpoint": s3_endpoint,
    "s3.access-key-id": admin.access_key_id,
    "s3.secret-access-key": admin.secret_access_key,
    "s3.region": "us-east-1",
    # pyarrow's S3 client fails moto's multipart completion; s3fs writes small objects whole.
    "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
}
import boto3  # noqa: E402

boto3.client(
    "s3",
    endpoint_url=s3_endpoint,
    aws_access_key_id=admin.access_key_id,
    aws_secret_access_key=admin.secret_access_key,
    region_name="us-east-1",
).create_bucket(Bucket=BUCKET)
catalog = SqlCatalog("rest-backing", uri=f"sqlite:///{state}/catalog.db", warehouse=f"s3://{BUCKET}/wh", **s3_props)

clients = {"writer": "writer-secret", "skerry": "skerry-secret"}
tokens = {}  # token -> (client, expires_at)
vended = []  # {client, user, key, expires_at, deleted}
log_path = os.path.join(state, "requests.jsonl")


def reaper():
    while True:
        time.sleep(0.25)
        now = time.time()
        with lock:
            for v in vended:
                if not v["deleted"] and v["expires_at"] <= now:
                    iam.delete_access_key(v["key"], v["user"])
                    v["deleted"] = True


threading.Thread(target=reaper, daemon=True).start()


def vend(client):
    with lock:
        user = f"vended-{len(vended)}"
        key = user_with_policy(user, ["s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation"])
        expires = time.time() + CRED_TTL
        vended.append({"client": client, "user": user, "key": key.access_key_id, "expires_at": expires, "deleted": False})
    return [
        {
            "prefix": f"s3://{BUCKET}/wh",
            "config": {
                "s3.access-key-id": key.access_key_id,
                "s3.secret-access-key": key.secret_access_key,
                "s3.session-token-expires-at-ms": str(int(expires * 1000)),
                "s3.endpoint": s3_endpoint,
                "s3.region": "us-east-1",
                "s3.path-style-access": "true",
            },
        }
    ]


def metadata_json(table):
    return json.loads(table.metadata.model_dump_json(by_alias=True, exclude_none=True))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def client(self):
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return None
        with lock:
            got = tokens.get(auth[7:])
        if got is None or got[1] <= time.time():
            return None
        return got[0]

    def reply(self, status, body=None, client=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        with lock, open(log_path, "a") as f:
            record = {"client": client, "method": self.command, "path": self.path, "status": status}
            if self.headers.get("X-Trace"):
                record["trace"] = self.headers["X-Trace"]
            f.write(json.dumps(record) + "\n")

    def error(self, status, kind, message, client=None):
        self.reply(status, {"error": {"message": message, "type": kind, "code": status}}, client)

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.route("GET")

    def do_HEAD(self):
        self.route("HEAD")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def route(self, method):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
        query = urllib.parse.parse_qs(url.query)
        try:
            if parts[:2] == ["_test", "revoke"] and method == "POST":
                who = query["client"][0]
                with lock:
                    clients.pop(who, None)
                    for t in [t for t, (c, _) in tokens.items() if c == who]:
                        del tokens[t]
                    for v in vended:
                        if v["client"] == who and not v["deleted"]:
                            iam.delete_access_key(v["key"], v["user"])
                            v["deleted"] = True
                return self.reply(200, {"revoked": who})
            if parts[:2] == ["_test", "vended"]:
                with lock:
                    return self.reply(200, [{k: v[k] for k in ("client", "key", "expires_at", "deleted")} for v in vended])
            if parts[:3] == ["v1", "oauth", "tokens"] and method == "POST":
                form = urllib.parse.parse_qs(self.body().decode())
                cid, secret = form.get("client_id", [""])[0], form.get("client_secret", [""])[0]
                if form.get("grant_type", [""])[0] != "client_credentials" or clients.get(cid) != secret:
                    return self.reply(401, {"error": "invalid_client", "error_description": "unknown client or secret"}, cid or None)
                token = secrets.token_urlsafe(24)
                with lock:
                    tokens[token] = (cid, time.time() + TOKEN_TTL)
                return self.reply(200, {"access_token": token, "token_type": "bearer", "expires_in": int(TOKEN_TTL), "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}, cid)
            client = self.client()
            if client is None:
                return self.error(401, "NotAuthorizedException", "missing, unknown or expired token")
            if parts[:2] == ["v1", "config"]:
                return self.reply(200, {"defaults": {}, "overrides": {"prefix": PREFIX}}, client)
            if parts[:2] != ["v1", PREFIX] or len(parts) < 3 or parts[2] != "namespaces":
                return self.error(404, "NoSuchEndpointException", f"no endpoint {method} {url.path}", client)
            rest = parts[3:]
            if not rest:
                if method == "POST":
                    req = json.loads(self.body())
                    try:
                        catalog.create_namespace(tuple(req["namespace"]), req.get("properties", {}))
                    except NamespaceAlreadyExistsError as e:
                        return self.error(409, "AlreadyExistsException", str(e), client)
                    return self.reply(200, {"namespace": req["namespace"], "properties": req.get("properties", {})}, client)
                return self.reply(200, {"namespaces": [list(n) for n in catalog.list_namespaces()]}, client)
            ns = tuple(rest[0].split("\x1f"))
            if len(rest) == 1:
                try:
                    props = catalog.load_namespace_properties(ns)
                except NoSuchNamespaceError as e:
                    return self.error(404, "NoSuchNamespaceException", str(e), client)
                return self.reply(200 if method == "GET" else 204, {"namespace": list(ns), "properties": props} if method == "GET" else None, client)
            if rest[1] != "tables":
                return self.error(404, "NoSuchEndpointException", f"no endpoint {method} {url.path}", client)
            if len(rest) == 2:
                if method == "POST":
                    raw = json.loads(self.body())
                    for k in ("location", "partition-spec", "write-order"):
                        raw.setdefault(k, None)
                    req = CreateTableRequest.model_validate(raw)
                    try:
                        t = catalog.create_table(
                            ns + (req.name,),
                            schema=req.table_schema,
                            location=req.location,
                            partition_spec=req.partition_spec or UNPARTITIONED_PARTITION_SPEC,
                            sort_order=req.write_order or UNSORTED_SORT_ORDER,
                            properties=req.properties,
                        )
                    except TableAlreadyExistsError as e:
                        return self.error(409, "AlreadyExistsException", str(e), client)
                    return self.reply(200, {"metadata-location": t.metadata_location, "metadata": metadata_json(t), "config": {}}, client)
                return self.reply(200, {"identifiers": [{"namespace": list(i[:-1]), "name": i[-1]} for i in catalog.list_tables(ns)]}, client)
            ident = ns + (rest[2],)
            try:
                t = catalog.load_table(ident)
            except (NoSuchTableError, NoSuchNamespaceError) as e:
                return self.error(404, "NoSuchTableException", str(e), client)
            if len(rest) == 4 and rest[3] == "credentials" and method == "GET":
                if client != "skerry":
                    return self.error(403, "ForbiddenException", "no credentials are vended to this client", client)
                return self.reply(200, {"storage-credentials": vend(client)}, client)
            if len(rest) != 3:
                return self.error(404, "NoSuchEndpointException", f"no endpoint {method} {url.path}", client)
            if method == "HEAD":
                return self.reply(204, None, client)
            if method == "GET":
                body = {"metadata-location": t.metadata_location, "metadata": metadata_json(t), "config": {}}
                delegation = self.headers.get("X-Iceberg-Access-Delegation", "")
                if client == "skerry" and "vended-credentials" in delegation:
                    body["storage-credentials"] = vend(client)
                return self.reply(200, body, client)
            if method == "POST":
                req = CommitTableRequest.model_validate_json(self.body())
                try:
                    resp = catalog.commit_table(t, req.requirements, req.updates)
                except CommitFailedException as e:
                    return self.error(409, "CommitFailedException", str(e), client)
                return self.reply(200, {"metadata-location": resp.metadata_location, "metadata": json.loads(resp.metadata.model_dump_json(by_alias=True, exclude_none=True))}, client)
            return self.error(405, "MethodNotAllowed", f"{method} {url.path}", client)
        except Exception as e:  # a bug of this test server: say so, loudly
            return self.error(500, "ServerError", f"{type(e).__name__}: {e}")


server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
print(json.dumps({"uri": f"http://127.0.0.1:{server.server_address[1]}", "s3": s3_endpoint, "admin": {"key": admin.access_key_id, "secret": admin.secret_access_key}}), flush=True)
server.serve_forever()
