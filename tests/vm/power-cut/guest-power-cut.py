#!/usr/bin/python3
"""guest-power-cut.py - one boot of the power-cut test (tests/vm/test-power-cut.sh), in the VM.

The node (pcnode.py): a state disk (the agent's state dir, its root dir, the pod spec files
and kubelet's root dir, all on one ext4, as /var/lib on a real node), a disk for a plain CSI
volume, one for an encrypted CSI volume, one for a pod spec file's block volume (xfs) and an
ext4 with project quotas for a pod spec file's sized directory.  The host cuts the power
(kills qemu) at a random moment of the churn; the next boot checks what the last one left
(Node.recover): the journal as the disk holds it, read before the agent starts; the agent
ready; every volume brought back to what kubelet or the operator last wanted (the call in
flight at the cut made again); no volume formatted twice (its filesystem UUID after its first
set-up); every canary fsynced and noted before the cut readable; every device entry of the
journal adopted (mounted again) or released (its device mounted nowhere, no mapping);
`volagent status` ready with a healthy journal.  Then it churns (Node.churn) until the cut.
With --last it checks, tears everything down, finds nothing left, and stops the agent.

    guest-power-cut.py --ledger FILE --boot K --seed N --stub-dir DIR [--last]

Prints PASS:/FAIL: lines and a "counts" line; exits 1 when a check failed.
"""
import argparse
import json
import sys

import pcnode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ledger", required=True)
    ap.add_argument("--boot", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--stub-dir", required=True)
    ap.add_argument("--last", action="store_true")
    args = ap.parse_args()
    node = pcnode.Node(args)
    node.mount_disks()
    vols = node.recover()
    pcnode.say("counts " + json.dumps(pcnode.counts, sort_keys=True))
    if pcnode.failed():
        sys.exit(1)
    if args.last:
        node.tear_down_all(vols)
        sys.exit(1 if pcnode.failed() else 0)
    node.churn(vols)


if __name__ == "__main__":
    main()
