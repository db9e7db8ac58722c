#!/usr/bin/env python3
"""oci-image.py - writes a one-layer OCI image archive from a root file system directory, for
`ctr images import` (the test cluster's images: no registry can be reached, and podman is not
needed for an image that holds a static binary or two).

    oci-image.py --rootfs DIR --name localhost/pause:3.10 --out pause.tar \
        [--entrypoint /pause] [--cmd ARG]... [--alias NAME]...

Every --alias is another name for the same image (the e2e suite asks for upstream names;
kubelet never pulls with imagePullPolicy Never / IfNotPresent when the image is present).
Files are stored with uid/gid 0 and mtime 0, so the same rootfs gives the same digest.
Test infrastructure only."""

import argparse
import gzip
import hashlib
import io
import json
import os
import tarfile


def layer_tar(rootfs):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                path = os.path.join(dirpath, name)
                info = tar.gettarinfo(path, os.path.relpath(path, rootfs))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def blob(tar, data, media_type):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return {"mediaType": media_type, "digest": "sha256:" + digest, "size": len(data)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--entrypoint", action="append", default=[])
    ap.add_argument("--cmd", action="append", default=[])
    ap.add_argument("--alias", action="append", default=[])
    args = ap.parse_args()

    raw = layer_tar(args.rootfs)
    diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()
    layer = gzip.compress(raw, mtime=0)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": args.entrypoint or None, "Cmd": args.cmd or None,
                   "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    with tarfile.open(args.out, "w") as tar:
        layer_desc = blob(tar, layer, "application/vnd.oci.image.layer.v1.tar+gzip")
        config_desc = blob(tar, json.dumps(config, sort_keys=True).encode(),
                           "application/vnd.oci.image.config.v1+json")
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": config_desc, "layers": [layer_desc]}
        manifest_desc = blob(tar, json.dumps(manifest, sort_keys=True).encode(),
                             "application/vnd.oci.image.manifest.v1+json")
        index = {"schemaVersion": 2, "manifests": []}
        for name in [args.name] + args.alias:
            d = dict(manifest_desc)
            d["annotations"] = {"io.containerd.image.name": name,
                                "org.opencontainers.image.ref.name": name}
            index["manifests"].append(d)
        for fname, obj in (("oci-layout", {"imageLayoutVersion": "1.0.0"}), ("index.json", index)):
            data = json.dumps(obj).encode()
            info = tarfile.TarInfo(fname)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    main()
