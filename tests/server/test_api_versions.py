import shutil
import struct
import subprocess

from kio.schema.api_versions.v0.request import ApiVersionsRequest as V0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as V3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as V4
from kio.schema.errors import ErrorCode
from kwire import WireClient, decode_response

from helpers import missing_program, require


def test_api_versions_v0_and_v3(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        r0 = c.request(V0())
        r3 = c.request(V3(client_software_name="kwire", client_software_version="0"))
        r4 = c.request(V4(client_software_name="kwire", client_software_version="0"))
    assert r0.error_code == r3.error_code == r4.error_code == ErrorCode.none
    ranges = {k.api_key: (k.min_version, k.max_version) for k in r3.api_keys}
    assert ranges[18] == (0, 4)
    assert ranges[3] == (0, 13)
    assert {k.api_key for k in r0.api_keys} == set(ranges)
    assert list(ranges) == sorted(ranges)


def test_unsupported_api_versions_version_gets_v0_error_35(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        # ApiVersions v99 with a v2 header: the broker answers in v0 with UNSUPPORTED_VERSION + the list
        body = struct.pack(">hhih", 18, 99, 77, 1) + b"x" + b"\x00" + b"\x02a\x021\x00"
        c.send_raw(struct.pack(">i", len(body)) + body)
        resp = decode_response(18, 0, c.read_frame(), 77)
    assert resp.error_code == ErrorCode.unsupported_version
    assert any(k.api_key == 3 for k in resp.api_keys)


def test_kcat_lists_metadata(broker) -> None:
    require(missing_program("kcat"))
    kcat = shutil.which("kcat")
    assert kcat is not None
    out = subprocess.run([kcat, "-b", broker.bootstrap, "-L"], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert f"broker 0 at {broker.bootstrap} (controller)" in out.stdout
