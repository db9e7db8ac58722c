/* pod-info.h - who a CSI publish is for: the pod name, namespace, uid and service account
 * kubelet passes in NodePublishVolume's volume_context (csi.storage.k8s.io/pod.*, with
 * podInfoOnMount in the CSIDriver object).  Kept with the target in the desired state and the
 * journal, shown in `volagent status` and the log lines about the target.  Never the
 * service-account token (csi.storage.k8s.io/serviceAccount.tokens): it is not a field here,
 * and nothing reads it from the context. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "error.h"

#define POD_INFO_KEY_NAME "csi.storage.k8s.io/pod.name"
#define POD_INFO_KEY_NAMESPACE "csi.storage.k8s.io/pod.namespace"
#define POD_INFO_KEY_UID "csi.storage.k8s.io/pod.uid"
#define POD_INFO_KEY_SERVICE_ACCOUNT "csi.storage.k8s.io/serviceAccount.name"

struct pod_info {
	char *name;
	char *namespace;
	char *uid;
	char *service_account;
};

/* Takes key=value of a volume_context when key is one of the pod keys.  Returns 1 taken, 0 not
 * a pod key, -EINVAL (err names the key: too long, or a control character) or -ENOMEM. */
int pod_info_set(struct pod_info *p, const char *key, const char *value, struct error_info *err);
bool pod_info_empty(const struct pod_info *p);
void pod_info_clear(struct pod_info *p);
/* dst (clear) gets a copy of src.  Returns 0 or -ENOMEM (dst cleared). */
int pod_info_copy(struct pod_info *dst, const struct pod_info *src);
bool pod_info_equal(const struct pod_info *a, const struct pod_info *b);
/* {"name", "namespace", "uid", "service_account"} with the fields that are set; NULL when
 * none is (or no memory). */
json_t *pod_info_to_json(const struct pod_info *p);
/* The same read back; o NULL (an older journal) leaves p empty.  Returns 0, -EBADMSG (err
 * names field) or -ENOMEM. */
int pod_info_from_json(struct pod_info *p, json_t *o, const char *field, struct error_info *err);
/* "<namespace>/<name>" for a log line, or NULL when the name is not known. */
const char *pod_info_ref(const struct pod_info *p, char *buf, size_t size);
