#!/bin/bash
# make-csi-seeds.sh - writes the seed corpus of fuzz-csi-request (corpus/csi-request/): real
# CSI Node requests, good and bad, encoded with `protoc --encode` from proto/csi.proto.
# Each seed is one byte for the method, one for the settings (see fuzz-csi-request.c), then
# the serialized request.  Run from the repository root; the seeds are committed.
set -euo pipefail
out=tests/fuzz/corpus/csi-request
mkdir -p "$out"
K=/var/lib/kubelet
CAP='volume_capability { mount { fs_type: "ext4" mount_flags: "noatime" } access_mode { mode: SINGLE_NODE_WRITER } }'
BCAP='volume_capability { block { } access_mode { mode: MULTI_NODE_READER_ONLY } }'
CTX='volume_context { key: "type" value: "local" } volume_context { key: "path" value: "/dev/loop3" }'
seed() { # name method-index settings-byte message-type text
	{
		printf "\\x$(printf %02x "$2")\\x$(printf %02x "$3")"
		printf '%s\n' "$5" | protoc --encode="csi.v1.$4" -Iproto -I/usr/include proto/csi.proto
	} >"$out/$1"
}
seed stage 0 0 NodeStageVolumeRequest "volume_id: \"v1\" staging_target_path: \"$K/plugins/kubernetes.io/csi/d/v1/globalmount\" $CAP $CTX secrets { key: \"userKey\" value: \"s3cr3t-value\" }"
seed stage-block 0 0 NodeStageVolumeRequest "volume_id: \"v1\" staging_target_path: \"$K/staging/v1\" $BCAP"
seed stage-no-cap 0 0 NodeStageVolumeRequest "volume_id: \"v1\" staging_target_path: \"$K/staging/v1\""
seed stage-dotdot 0 0 NodeStageVolumeRequest "volume_id: \"v1\" staging_target_path: \"$K/../../etc\" $CAP"
seed stage-outside 0 0 NodeStageVolumeRequest "volume_id: \"v1\" staging_target_path: \"/etc/kubelet-x\" $CAP"
seed stage-root-slash 0 2 NodeStageVolumeRequest "volume_id: \"v1\" staging_target_path: \"/st/v1\" $CAP"
seed unstage 1 0 NodeUnstageVolumeRequest "volume_id: \"v1\" staging_target_path: \"$K/staging/v1\""
seed publish 2 0 NodePublishVolumeRequest "volume_id: \"v1\" staging_target_path: \"$K/staging/v1\" target_path: \"$K/pods/u1/volumes/kubernetes.io~csi/pv1/mount\" $CAP readonly: true $CTX secrets { key: \"pw\" value: \"hunter22\" } publish_context { key: \"a\" value: \"b\" }"
seed publish-no-staging 2 0 NodePublishVolumeRequest "volume_id: \"v1\" target_path: \"$K/pods/u1/volumes/kubernetes.io~csi/pv1/mount\" $CAP"
seed publish-no-stage-driver 2 1 NodePublishVolumeRequest "volume_id: \"v1\" target_path: \"$K/pods/u1/volumes/kubernetes.io~csi/pv1/mount\" $CAP $CTX"
seed publish-trailing-slash 2 0 NodePublishVolumeRequest "volume_id: \"v1\" staging_target_path: \"$K/staging/v1\" target_path: \"$K/pods/u1/\" $CAP"
seed publish-root 2 0 NodePublishVolumeRequest "volume_id: \"v1\" staging_target_path: \"$K/staging/v1\" target_path: \"$K\" $CAP"
seed publish-bad-mode 2 0 NodePublishVolumeRequest "volume_id: \"v1\" staging_target_path: \"$K/s\" target_path: \"$K/t\" volume_capability { mount { } access_mode { mode: UNKNOWN } }"
seed unpublish 3 0 NodeUnpublishVolumeRequest "volume_id: \"v1\" target_path: \"$K/pods/u1/volumes/kubernetes.io~csi/pv1/mount\""
seed unpublish-no-id 3 0 NodeUnpublishVolumeRequest "target_path: \"$K/pods/u1/volumes/kubernetes.io~csi/pv1/mount\""
seed stats 4 0 NodeGetVolumeStatsRequest "volume_id: \"v1\" volume_path: \"$K/pods/u1/volumes/kubernetes.io~csi/pv1/mount\" staging_target_path: \"$K/staging/v1\""
seed stats-relative 4 0 NodeGetVolumeStatsRequest "volume_id: \"some-vol-id\" volume_path: \"some/path\""
seed publish-nothing 2 0 NodePublishVolumeRequest "volume_id: \"v1\" target_path: \"$K/pods/u1/volumes/kubernetes.io~csi/pv1/mount\""
seed expand-relative 5 0 NodeExpandVolumeRequest "volume_id: \"id\" volume_path: \"some/path\""
seed expand 5 0 NodeExpandVolumeRequest "volume_id: \"v1\" volume_path: \"$K/pods/u1/v\" capacity_range { required_bytes: 1073741824 limit_bytes: 2147483648 } $CAP secrets { key: \"k\" value: \"abcd\" }"
seed expand-negative 5 0 NodeExpandVolumeRequest "volume_id: \"v1\" volume_path: \"$K/pods/u1/v\" capacity_range { required_bytes: -1 }"
seed expand-limit-below 5 0 NodeExpandVolumeRequest "volume_id: \"v1\" volume_path: \"$K/pods/u1/v\" capacity_range { required_bytes: 10 limit_bytes: 5 }"
seed get-plugin-info 6 0 GetPluginInfoRequest ""
seed node-get-info 10 0 NodeGetInfoRequest ""
printf '\x02\x00\xff\xff\xff\xff' >"$out/garbage"
echo "wrote $(ls "$out" | wc -l) seeds to $out"
