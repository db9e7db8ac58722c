#!/usr/bin/python3
"""csi_bench.py - times NodePublishVolume and NodeUnpublishVolume with a client that is not
the project's own: Debian's python3-grpcio, on stubs that `make` generated from the project's
proto/csi.proto with grpc_tools.protoc (mk/bench.mk puts them in --stub-dir).  It is the second
client of `make bench` beside tests/bench/csi-bench.c, so that the agent's latency is a figure
of the agent, not of one client.

    csi_bench.py --socket PATH --stub-dir DIR --targets-root DIR --staging-path DIR
                 --volume-context k=v ... [--count N] [--concurrency C] [--label NAME]
    csi_bench.py ... --shared 10,100,1000 [--reps M]
    csi_bench.py ... --paced IDLE_MS [--count N]

Every call goes over one channel, as kubelet's calls to one driver do.  The client's floor is
its own no-op call on that channel, NodeGetCapabilities, timed with the same concurrency right
before the calls it is set against; the agent's share of a call is the call's p50 less that
floor's p50.

Fresh volumes (the default): volume i is staged at <staging-path>/<label>-<i> and published at
<targets-root>/<label>-<i>/mount (the client makes the parent, as kubelet does), N of them,
C in flight; then unpublished and unstaged.  Only publish and unpublish are timed.

--shared K1,K2,...: one volume, staged once, published at more and more targets; when it has
K of them, the client times M no-op calls, then publishes and unpublishes one more target M
times (so the volume stays at K) and times those calls.  Sequential.  After the last K every target is unpublished and the volume
unstaged.

--paced IDLE_MS: calls as kubelet paces them, each finding the agent idle.  One volume, staged
once, published at N fresh targets one after another: before each publish the client sleeps
IDLE_MS and times its no-op call, sleeps IDLE_MS again and times the publish; then each
unpublish the same way.  Then the kernel's floor: after IDLE_MS of idle, the client's own
mkdir + bind mount(2) of volume_context's path at fresh targets of the same layout, and
umount + rmdir.  Figures: noop, publish, unpublish, floor_publish, floor_unpublish, the floor's
own context switches per call (the kernel's sleeps in those system calls), and with --agent-pid
the agent's context switches per noop, publish and unpublish (sampled right around each call).

Each publish is checked: the target must be a mount point afterwards, and no longer one after
its unpublish (a driver that answers OK without mounting is caught).

Output: "figure <label>.<rpc>.<p50|p99|rate> <value> <unit>" lines, as the C client's, with
rpc publish, unpublish and noop; with --shared the label gains ".<K>".  Sequentially, fresh
volumes also give "refused" (a publish without volume_id, refused on gRPC's thread) and
"repeat" (each publish again, answered by the reconciler with no operation): what a publish
is made of, for docs/performance.md.
"""
import argparse
import ctypes
import os
import resource
import struct
import sys
import threading
import time


def percentile(sorted_ms, p):
    """The nearest-rank percentile of a sorted list."""
    if not sorted_ms:
        return float("nan")
    k = max(0, min(len(sorted_ms) - 1, int(p / 100.0 * len(sorted_ms) + 0.999999) - 1))
    return sorted_ms[k]


def figure(name, value, unit):
    print("figure %s %.4f %s" % (name, value, unit), flush=True)


def report(label, rpc, lat_ms, wall_s):
    lat = sorted(lat_ms)
    figure("%s.%s.p50" % (label, rpc), percentile(lat, 50), "ms")
    figure("%s.%s.p99" % (label, rpc), percentile(lat, 99), "ms")
    if wall_s > 0:
        figure("%s.%s.rate" % (label, rpc), len(lat) / wall_s, "calls/s")


_libc = ctypes.CDLL(None, use_errno=True)
_MS_BIND = 4096
_UMOUNT_NOFOLLOW = 8
_STATX_ATTR_MOUNT_ROOT = 0x2000
_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100


def agent_cost(pid):
    """(CPU seconds, context switches) of every thread of process pid, or None."""
    if not pid:
        return None
    with open("/proc/%d/stat" % pid, encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    cs = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid), encoding="ascii") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches:",
                                        "nonvoluntary_ctxt_switches:")):
                        cs += int(line.split()[1])
        except FileNotFoundError:
            pass  # the thread is gone
    return cpu, cs


def own_switches():
    """This thread's context switches so far: what the kernel makes a thread doing the
    floor's system calls sleep for (umount(2) waits for an RCU grace period), which the
    agent's thread doing the same pays too."""
    ru = resource.getrusage(resource.RUSAGE_THREAD)
    return ru.ru_nvcsw + ru.ru_nivcsw


def report_cost(label, rpc, before, after, n):
    if before and after:
        figure("%s.%s.agent_cpu" % (label, rpc), (after[0] - before[0]) / n * 1e6, "us/call")
        figure("%s.%s.agent_cs" % (label, rpc), (after[1] - before[1]) / n, "per call")


def is_mountpoint(path):
    """Whether path is the root of a mount: statx's STATX_ATTR_MOUNT_ROOT (Linux 5.8), which
    a bind of a directory of the same filesystem sets too (device and inode numbers, what
    os.path.ismount compares, cannot tell such a bind from a plain directory)."""
    buf = ctypes.create_string_buffer(256)
    if _libc.statx(_AT_FDCWD, os.fsencode(path), _AT_SYMLINK_NOFOLLOW, 0, buf) != 0:
        return False
    attributes, = struct.unpack_from("=Q", buf, 8)
    return bool(attributes & _STATX_ATTR_MOUNT_ROOT)


class Client:
    def __init__(self, args):
        sys.path.insert(0, args.stub_dir)
        import grpc
        import csi_pb2
        import csi_pb2_grpc
        self.grpc = grpc
        self.pb = csi_pb2
        self.channel = grpc.insecure_channel("unix://" + args.socket)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.node = csi_pb2_grpc.NodeStub(self.channel)
        self.args = args
        self.ctx = dict(kv.split("=", 1) for kv in args.volume_context)
        pb = csi_pb2
        self.cap = pb.VolumeCapability(
            mount=pb.VolumeCapability.MountVolume(),
            access_mode=pb.VolumeCapability.AccessMode(
                mode=pb.VolumeCapability.AccessMode.MULTI_NODE_MULTI_WRITER
                if args.shared or args.paced else pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))

    # --- requests ---
    def staging(self, name):
        return os.path.join(self.args.staging_path, name)

    def target(self, name):
        return os.path.join(self.args.targets_root, name, "mount")

    def stage_req(self, vol, name):
        return self.pb.NodeStageVolumeRequest(
            volume_id=vol, staging_target_path=self.staging(name), volume_capability=self.cap,
            volume_context=self.ctx)

    def publish_req(self, vol, staging_name, target_name):
        os.makedirs(os.path.dirname(self.target(target_name)), exist_ok=True)
        return self.pb.NodePublishVolumeRequest(
            volume_id=vol, staging_target_path=self.staging(staging_name),
            target_path=self.target(target_name), volume_capability=self.cap,
            volume_context=self.ctx)

    def unpublish_req(self, vol, target_name):
        return self.pb.NodeUnpublishVolumeRequest(volume_id=vol,
                                                  target_path=self.target(target_name))

    def unstage_req(self, vol, name):
        return self.pb.NodeUnstageVolumeRequest(volume_id=vol,
                                                staging_target_path=self.staging(name))

    def noop_req(self):
        return self.pb.NodeGetCapabilitiesRequest()

    # --- phases ---
    def run(self, method, requests, concurrency):
        """Sends the requests, concurrency in flight; returns (latencies in ms, wall s).  Each
        call is timed from its start to the moment the client sees its answer."""
        lat = [0.0] * len(requests)
        timeout = self.args.deadline_ms / 1000.0
        if concurrency <= 1:
            t0 = time.perf_counter()
            for i, req in enumerate(requests):
                s = time.perf_counter_ns()
                method(req, timeout=timeout)
                lat[i] = (time.perf_counter_ns() - s) / 1e6
            return lat, time.perf_counter() - t0
        done = threading.Semaphore(0)
        lock = threading.Lock()
        errors = []
        starts = [0] * len(requests)

        def finished(i):
            def cb(fut):
                lat[i] = (time.perf_counter_ns() - starts[i]) / 1e6
                if fut.exception() is not None:
                    with lock:
                        errors.append(fut.exception())
                done.release()
            return cb

        t0 = time.perf_counter()
        in_flight = 0
        for i, req in enumerate(requests):
            if in_flight >= concurrency:
                done.acquire()
                in_flight -= 1
            starts[i] = time.perf_counter_ns()
            method.future(req, timeout=timeout).add_done_callback(finished(i))
            in_flight += 1
        for _ in range(in_flight):
            done.acquire()
        wall = time.perf_counter() - t0
        if errors:
            raise errors[0]
        return lat, wall

    def check_targets(self, names, want):
        for name in names:
            if is_mountpoint(self.target(name)) != want:
                sys.exit("csi_bench: %s is %s a mount point" %
                         (self.target(name), "not" if want else "still"))

    def fresh(self):
        a, label = self.args, self.args.label
        names = ["%s-%d" % (label, i) for i in range(a.count)]
        vols = ["%s%s" % (a.volume_id_prefix, n) for n in names]
        n = self.node
        self.run(n.NodeStageVolume, [self.stage_req(v, m) for v, m in zip(vols, names)],
                 a.concurrency)
        c0 = agent_cost(a.agent_pid)
        noop, noop_wall = self.run(n.NodeGetCapabilities, [self.noop_req()] * a.count,
                                   a.concurrency)
        report_cost(label, "noop", c0, agent_cost(a.agent_pid), a.count)
        pubs = [self.publish_req(v, m, m) for v, m in zip(vols, names)]
        refused = []
        if a.concurrency == 1:
            # A publish the agent refuses at once (no volume_id): the same size on the wire,
            # answered on gRPC's thread before any hand-off.
            bad = self.pb.NodePublishVolumeRequest()
            bad.CopyFrom(pubs[0])
            bad.volume_id = ""
            for _ in range(a.count):
                s = time.perf_counter_ns()
                try:
                    n.NodePublishVolume(bad, timeout=a.deadline_ms / 1000.0)
                except self.grpc.RpcError as e:
                    if e.code() != self.grpc.StatusCode.INVALID_ARGUMENT:
                        raise
                else:
                    sys.exit("csi_bench: a publish without volume_id was answered OK")
                refused.append((time.perf_counter_ns() - s) / 1e6)
        c0 = agent_cost(a.agent_pid)
        lat, wall = self.run(n.NodePublishVolume, pubs, a.concurrency)
        report_cost(label, "publish", c0, agent_cost(a.agent_pid), a.count)
        self.check_targets(names, True)
        report(label, "noop", noop, noop_wall)
        report(label, "publish", lat, wall)
        if refused:
            report(label, "refused", refused, 0)
            # The same publishes again: answered by the reconciler's thread with no operation.
            rep, _ = self.run(n.NodePublishVolume, pubs, 1)
            report(label, "repeat", rep, 0)
        lat, wall = self.run(n.NodeUnpublishVolume,
                             [self.unpublish_req(v, m) for v, m in zip(vols, names)],
                             a.concurrency)
        self.check_targets(names, False)
        report(label, "unpublish", lat, wall)
        self.run(n.NodeUnstageVolume, [self.unstage_req(v, m) for v, m in zip(vols, names)],
                 a.concurrency)
        for m in names:
            os.rmdir(os.path.dirname(self.target(m)))

    def shared(self):
        a, n = self.args, self.node
        timeout = a.deadline_ms / 1000.0
        stage_name = "%s-shared" % a.label
        vol = "%s%s" % (a.volume_id_prefix, stage_name)
        n.NodeStageVolume(self.stage_req(vol, stage_name), timeout=timeout)
        published = []
        probe = "%s-probe" % a.label
        for k in sorted(int(x) for x in a.shared.split(",")):
            while len(published) < k:
                name = "%s-t%d" % (a.label, len(published))
                n.NodePublishVolume(self.publish_req(vol, stage_name, name), timeout=timeout)
                published.append(name)
            noop, pub, unpub = [], [], []
            for _ in range(a.reps):
                s = time.perf_counter_ns()
                n.NodeGetCapabilities(self.noop_req(), timeout=timeout)
                noop.append((time.perf_counter_ns() - s) / 1e6)
            for _ in range(a.reps):
                req = self.publish_req(vol, stage_name, probe)
                s = time.perf_counter_ns()
                n.NodePublishVolume(req, timeout=timeout)
                pub.append((time.perf_counter_ns() - s) / 1e6)
                s = time.perf_counter_ns()
                n.NodeUnpublishVolume(self.unpublish_req(vol, probe), timeout=timeout)
                unpub.append((time.perf_counter_ns() - s) / 1e6)
            label = "%s.%d" % (a.label, k)
            report(label, "noop", noop, 0)
            report(label, "publish", pub, 0)
            report(label, "unpublish", unpub, 0)
        self.check_targets(published, True)
        for name in published:
            n.NodeUnpublishVolume(self.unpublish_req(vol, name), timeout=timeout)
        self.check_targets(published + [probe], False)
        n.NodeUnstageVolume(self.unstage_req(vol, stage_name), timeout=timeout)
        for name in published + [probe]:
            os.rmdir(os.path.dirname(self.target(name)))


def _check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        sys.exit("csi_bench: %s: %s" % (what, os.strerror(e)))


def paced(client):
    """--paced: see the module's text."""
    a, n = client.args, client.node
    idle, timeout = a.paced / 1000.0, a.deadline_ms / 1000.0
    stage_name = "%s-paced" % a.label
    vol = "%s%s" % (a.volume_id_prefix, stage_name)
    src = client.ctx.get("path")
    if not src:
        sys.exit("csi_bench: --paced needs --volume-context path=DIR (the floor binds it)")
    cs = {"noop": 0, "publish": 0, "unpublish": 0}
    lat = {"noop": [], "publish": [], "unpublish": [], "floor_publish": [],
           "floor_unpublish": []}

    def call(rpc, method, req):
        time.sleep(idle)
        c0 = agent_cost(a.agent_pid)
        s = time.perf_counter_ns()
        method(req, timeout=timeout)
        lat[rpc].append((time.perf_counter_ns() - s) / 1e6)
        c1 = agent_cost(a.agent_pid)
        if c0 and c1:
            cs[rpc] += c1[1] - c0[1]

    n.NodeStageVolume(client.stage_req(vol, stage_name), timeout=timeout)
    names = ["%s-p%d" % (a.label, i) for i in range(a.count)]
    for name in names:
        req = client.publish_req(vol, stage_name, name)  # makes the parent, as kubelet does
        call("noop", n.NodeGetCapabilities, client.noop_req())
        call("publish", n.NodePublishVolume, req)
    client.check_targets(names, True)
    for name in names:
        call("unpublish", n.NodeUnpublishVolume, client.unpublish_req(vol, name))
    client.check_targets(names, False)
    n.NodeUnstageVolume(client.unstage_req(vol, stage_name), timeout=timeout)
    for name in names:
        os.rmdir(os.path.dirname(client.target(name)))
    # The kernel's floor: the same layout, the client's own mkdir + bind, umount + rmdir.
    floor = [client.target("%s-f%d" % (a.label, i)) for i in range(a.count)]
    floor_cs = {"floor_publish": 0, "floor_unpublish": 0}
    for t in floor:
        os.makedirs(os.path.dirname(t), exist_ok=True)
        time.sleep(idle)
        c0 = own_switches()
        s = time.perf_counter_ns()
        os.mkdir(t, 0o750)
        _check(_libc.mount(os.fsencode(src), os.fsencode(t), None, _MS_BIND, None),
               "bind %s on %s" % (src, t))
        lat["floor_publish"].append((time.perf_counter_ns() - s) / 1e6)
        floor_cs["floor_publish"] += own_switches() - c0
    for t in floor:
        time.sleep(idle)
        c0 = own_switches()
        s = time.perf_counter_ns()
        _check(_libc.umount2(os.fsencode(t), _UMOUNT_NOFOLLOW), "umount %s" % t)
        os.rmdir(t)
        lat["floor_unpublish"].append((time.perf_counter_ns() - s) / 1e6)
        floor_cs["floor_unpublish"] += own_switches() - c0
        os.rmdir(os.path.dirname(t))
    for rpc, values in lat.items():
        report(a.label, rpc, values, 0)
    if a.agent_pid:
        for rpc, total in cs.items():
            figure("%s.%s.agent_cs" % (a.label, rpc), total / a.count, "per call")
    for rpc, total in floor_cs.items():
        figure("%s.%s.cs" % (a.label, rpc), total / a.count, "per call")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--socket", required=True)
    p.add_argument("--stub-dir", required=True, help="where make put csi_pb2*.py")
    p.add_argument("--targets-root", required=True)
    p.add_argument("--staging-path", required=True)
    p.add_argument("--volume-context", action="append", default=[], metavar="K=V")
    p.add_argument("--volume-id-prefix", default="py-")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--label", default="py.csi")
    p.add_argument("--deadline-ms", type=int, default=30000)
    p.add_argument("--shared", help="K1,K2,...: one volume at K targets")
    p.add_argument("--reps", type=int, default=200, help="--shared: calls timed at each K")
    p.add_argument("--paced", type=int, default=0, metavar="IDLE_MS",
                   help="each call after IDLE_MS of idle, as kubelet paces them")
    p.add_argument("--agent-pid", type=int, default=0,
                   help="the driver's PID: its CPU and context switches per call")
    args = p.parse_args()
    for kv in args.volume_context:
        if "=" not in kv:
            p.error("--volume-context %r: not K=V" % kv)
    client = Client(args)
    if args.shared:
        client.shared()
    elif args.paced > 0:
        paced(client)
    else:
        client.fresh()


if __name__ == "__main__":
    main()
