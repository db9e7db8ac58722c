#!/usr/bin/python3
"""csi_client.py - an independent CSI client for the tests: Python grpcio, with stubs
generated at run time from the project's own proto/*.proto, so that the server is checked
against what any protoc-generated client puts on the wire.

Run with Debian's /usr/bin/python3 (python3-grpcio, python3-grpc-tools).

    csi_client.py --socket PATH [--timeout SECONDS] [--stub-dir DIR] [--input FILE] < calls

Each input line is one call, answered by one output line, in order:

    Identity/GetPluginInfo {}                       ->  OK {"name": "...", ...}
    Node/NodeStageVolume {"volume_id": "v1", ...}   ->  ERR INVALID_ARGUMENT volume_id: required
    RAW /csi.v1.Controller/CreateVolume             ->  ERR UNIMPLEMENTED unknown method
    REPEAT 1000 Node/NodePublishVolume {...}        ->  COUNTS {"ERR RESOURCE_EXHAUSTED ...": 1000}

REPEAT sends the same request N times (parsed once, so a large one costs the client little)
and answers with how many times each answer line came back.

Requests are JSON in the proto3 JSON mapping (proto field names accepted); answers are
compact JSON with proto field names.  Stubs are generated once into --stub-dir (default: a
fresh temporary directory).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))
PROTOS = ["csi.proto", "pluginregistration.proto"]


def load_stubs(stub_dir):
    """Generates the Python stubs (unless already there) and imports them."""
    os.makedirs(stub_dir, exist_ok=True)
    marker = os.path.join(stub_dir, "pluginregistration_pb2_grpc.py")
    if not os.path.exists(marker):
        subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", "-I" + PROTO_DIR,
             "--python_out=" + stub_dir, "--grpc_python_out=" + stub_dir] + PROTOS,
            check=True)
    sys.path.insert(0, stub_dir)
    import csi_pb2
    import csi_pb2_grpc
    import pluginregistration_pb2
    import pluginregistration_pb2_grpc
    return {
        "Identity": (csi_pb2, csi_pb2_grpc.IdentityStub, "csi.v1.Identity"),
        "Node": (csi_pb2, csi_pb2_grpc.NodeStub, "csi.v1.Node"),
        "Controller": (csi_pb2, csi_pb2_grpc.ControllerStub, "csi.v1.Controller"),
        "Registration": (pluginregistration_pb2, pluginregistration_pb2_grpc.RegistrationStub,
                         "pluginregistration.Registration"),
    }


def one_line(text):
    return " ".join(str(text).split())


def request(services, stubs, channel, target, body):
    """The stub method for "Service/Method" and the request parsed from its JSON body."""
    from google.protobuf import json_format

    service, _, method = target.partition("/")
    module, stub_cls, full = services[service]
    if service not in stubs:
        stubs[service] = stub_cls(channel)
    desc = module.DESCRIPTOR.services_by_name[full.split(".")[-1]]
    req_cls = getattr(module, desc.methods_by_name[method].input_type.name)
    return getattr(stubs[service], method), json_format.Parse(body or "{}", req_cls())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--stub-dir")
    ap.add_argument("--input", help="read the calls from this file instead of stdin")
    args = ap.parse_args()

    stub_dir = args.stub_dir or tempfile.mkdtemp(prefix="volagent-csi-stubs-")
    services = load_stubs(stub_dir)

    import grpc
    from google.protobuf import json_format

    channel = grpc.insecure_channel("unix:" + args.socket)
    stubs = {}
    source = open(args.input) if args.input else sys.stdin
    for raw in source:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        target, _, body = line.partition(" ")
        repeat = 1
        if target == "REPEAT":
            count, _, rest = body.partition(" ")
            repeat = int(count)
            target, _, body = rest.partition(" ")
        if repeat > 1:
            counts = {}
            req = None
            for _ in range(repeat):
                try:
                    if req is None:
                        call, req = request(services, stubs, channel, target, body)
                    resp = call(req, timeout=args.timeout)
                    answer = "OK"
                except grpc.RpcError as e:
                    answer = "ERR %s %s" % (e.code().name, one_line(e.details() or ""))
                counts[answer] = counts.get(answer, 0) + 1
            print("COUNTS " + json.dumps(counts, sort_keys=True), flush=True)
            continue
        try:
            if target == "RAW":
                # A method the proto does not have: empty request, raw bytes back.
                call = channel.unary_unary(body.strip())
                resp = call(b"", timeout=args.timeout)
                print("OK " + json.dumps({"raw_len": len(resp)}), flush=True)
                continue
            call, req = request(services, stubs, channel, target, body)
            resp = call(req, timeout=args.timeout)
            out = json_format.MessageToJson(resp, preserving_proto_field_name=True,
                                            indent=None, sort_keys=True)
            print("OK " + one_line(out), flush=True)
        except grpc.RpcError as e:
            print("ERR %s %s" % (e.code().name, one_line(e.details() or "")), flush=True)
    channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
